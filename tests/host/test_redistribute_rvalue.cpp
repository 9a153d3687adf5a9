// redistribute of a tensor the caller gives up (an rvalue): the result must be the one a
// kept tensor gives (single-rank reference), the given-up tensor is left empty, storage
// that a copy or a view still refers to is never written, and a plan that is one
// all_reduce runs in place in storage the tensor owned alone.
#include <doctest/doctest.h>

#include <atomic>
#include <cstdint>
#include <shardcast/shardcast.hpp>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "common/differential.hpp"
#include "common/failures.hpp"

namespace sc = shardcast;
namespace st = shardcast::testing;

namespace {
using st::failures;

/// The static form: redistribute<To>(std::move(x)) against the reference, x emptied, and
/// the result in x's storage when the plan chosen for the mesh is one all_reduce.
template <class To, class T, int R, class L, class Mesh>
std::string static_rvalue_case(const sc::dtensor<T, R, L, Mesh>& x0, const std::vector<T>& g, int& in_place_runs, const char* what) {
  const sc::plan p = sc::plan_for<To>(x0);
  const bool in_place = p.nsteps == 1 && p.steps[0].kind == sc::step_kind::all_reduce;
  auto x = x0;  // a copy: the storage is shared, so nothing may be written in place
  auto shared = sc::redistribute<To>(std::move(x));
  std::string err = st::check_against_reference(shared, g);  // (collective: every rank runs every call)
  if (err.empty()) err = st::check_emptied(x);
  if (err.empty() && x0.local_size() > 0 && shared.data() == x0.data() && !std::is_same_v<L, To>)
    err = "wrote into storage another handle holds";
  if (!err.empty()) err = " (copy kept): " + err;
  // A fresh tensor with the same values that nothing else refers to.
  auto fresh = sc::empty<L, T>(x0.mesh(), x0.global_extents());
  for (std::size_t i = 0; i < fresh.local_size(); ++i) fresh.data()[i] = x0.data()[i];
  const T* const old = fresh.data();
  auto y = sc::redistribute<To>(std::move(fresh));
  std::string err2 = st::check_against_reference(y, g);
  if (err2.empty()) err2 = st::check_emptied(fresh);
  if (err2.empty() && in_place && y.local_size() > 0 && y.data() != old) err2 = "one all_reduce did not run in place";
  if (err2.empty() && !in_place && p.nsteps > 0 && y.local_size() > 0 && y.data() == old)
    err2 = "a plan other than one all_reduce returned its input's storage";
  if (in_place && y.local_size() > 0) ++in_place_runs;
  if (err.empty() && !err2.empty()) err = ": " + err2;
  return err.empty() ? err : std::string(what) + err;
}
}  // namespace

TEST_CASE("redistribute of a given-up dynamic-layout tensor: every layout pair on 1- and 2-axis meshes") {
  failures f;
  struct mesh_case {
    int nranks;
    std::vector<int> shape;
  };
  for (const mesh_case& mc : {mesh_case{3, {3}}, mesh_case{4, {2, 2}}, mesh_case{6, {2, 3}}}) {
    sc::host::run(mc.nranks, [&](sc::host::communicator& c) {
      auto run = [&](const auto& m) {
        const int naxes = static_cast<int>(mc.shape.size());
        for (const auto& ext : {std::array<std::int64_t, 2>{6, 4}, std::array<std::int64_t, 2>{5, 3}, std::array<std::int64_t, 2>{1, 2}})
          st::for_each_layout_pair(naxes, 2, 1, [&](const sc::runtime_layout& src, const sc::runtime_layout& dst) {
            for (int keep = 0; keep < 3; ++keep) f.add(st::differential_given_up_case<std::int32_t>(m, src, dst, ext, keep));
            // Given up on even ranks, kept on odd ones: in place and out of place in one call.
            f.add(st::differential_mixed_give_up_case<std::int32_t>(m, src, dst, ext));
          });
      };
      if (mc.shape.size() == 1) run(sc::make_mesh(c, std::array<int, 1>{mc.shape[0]}));
      else run(sc::make_mesh(c, std::array<int, 2>{mc.shape[0], mc.shape[1]}));
    });
  }
  f.report();
}

TEST_CASE("redistribute of a given-up static-layout tensor matches the reference, in place for one all_reduce") {
  failures f;
  using RR = sc::layout<sc::replicate, sc::replicate>;
  using PP = sc::layout<sc::partial<>, sc::partial<>>;
  using PR = sc::layout<sc::partial<>, sc::replicate>;
  using RPmax = sc::layout<sc::replicate, sc::partial<sc::max>>;
  using PavgS1 = sc::layout<sc::partial<sc::avg>, sc::shard<1>>;
  using S0R = sc::layout<sc::shard<0>, sc::replicate>;
  using S0S1 = sc::layout<sc::shard<0>, sc::shard<1>>;
  using S1S0 = sc::layout<sc::shard<1>, sc::shard<0>>;
  using RS1 = sc::layout<sc::replicate, sc::shard<1>>;
  std::atomic<int> in_place_total{0};
  for (const auto& e : {std::array<std::int64_t, 2>{8, 6}, std::array<std::int64_t, 2>{7, 5}, std::array<std::int64_t, 2>{1, 2},
                        std::array<std::int64_t, 2>{0, 3}}) {
    sc::host::run(6, [&](sc::host::communicator& c) {
      auto m = sc::make_mesh(c, std::array<int, 2>{2, 3});
      const auto g = st::make_global<double>(e[0] * e[1]);
      auto make = [&]<class L>(L) {
        auto x = sc::distribute<L>(m, g, e);
        st::spread_partial_terms(x, g);
        return x;
      };
      int runs = 0;
      // Plans of one all_reduce (which the mesh may choose): in place.
      f.add(static_rvalue_case<RR>(make(PP{}), g, runs, "P,P -> R,R"));
      f.add(static_rvalue_case<RR>(make(PR{}), g, runs, "P,R -> R,R"));
      f.add(static_rvalue_case<RR>(make(RPmax{}), g, runs, "R,P(max) -> R,R"));
      f.add(static_rvalue_case<sc::layout<sc::replicate, sc::shard<1>>>(make(PavgS1{}), g, runs, "P(avg),S(1) -> R,S(1)"));
      // Other plans: new storage, the given-up tensor's released.
      f.add(static_rvalue_case<RR>(make(S0R{}), g, runs, "S(0),R -> R,R"));
      f.add(static_rvalue_case<S0R>(make(PR{}), g, runs, "P,R -> S(0),R"));
      f.add(static_rvalue_case<S1S0>(make(S0S1{}), g, runs, "S(0),S(1) -> S(1),S(0)"));
      f.add(static_rvalue_case<RS1>(make(RR{}), g, runs, "R,R -> R,S(1)"));
      f.add(static_rvalue_case<S0R>(make(S0R{}), g, runs, "S(0),R -> S(0),R (no steps)"));
      // A chain of temporaries: each result is given up to the next call.
      auto y = sc::redistribute<RR>(sc::redistribute<PR>(make(PP{})));
      f.add(st::check_against_reference(y, g));
      in_place_total += runs;
    });
  }
  // Every rank runs P,P -> R,R and P,R -> R,R as one all_reduce on each non-empty extent.
  CHECK(in_place_total >= 3 * 6 * 2);
  f.report();
}

TEST_CASE("a result made from a given-up tensor keeps the mesh alive") {
  failures f;
  sc::host::run(4, [&](sc::host::communicator& c) {
    using PP = sc::layout<sc::partial<>, sc::partial<>>;
    using RR = sc::layout<sc::replicate, sc::replicate>;
    const std::array<std::int64_t, 2> e{5, 4};
    const auto g = st::make_global<float>(20);
    auto y = [&] {
      auto m = sc::make_mesh(c, std::array<int, 2>{2, 2});
      auto x = sc::distribute<PP>(m, g, e);
      st::spread_partial_terms(x, g);
      return sc::redistribute<RR>(std::move(x));  // m and x end here
    }();
    f.add(st::check_against_reference(y, g));                                     // uses the mesh
    auto z = sc::redistribute<sc::layout<sc::shard<0>, sc::shard<1>>>(std::move(y));  // and its caches
    f.add(st::check_against_reference(z, g));
  });
  f.report();
}

TEST_CASE("a failed in-place all_reduce writes nothing anyone can read (redistribute and to_global)") {
  // Alone: the given-up tensor is left empty (its storage, partly written, released).
  // With a copy kept: the all_reduce ran on new storage, so x and the copy keep their values.
  for (const bool via_to_global : {false, true})
    for (const bool copy_kept : {false, true}) {
      CAPTURE(via_to_global);
      CAPTURE(copy_kept);
      failures f;
      using PP = sc::layout<sc::partial<>, sc::partial<>>;
      using RR = sc::layout<sc::replicate, sc::replicate>;
      CHECK_THROWS_AS(sc::host::run(4,
                                    [&](sc::host::communicator& c) {
                                      auto m = sc::make_mesh(c, std::array<int, 2>{2, 2});
                                      const std::array<std::int64_t, 2> e{64, 64};
                                      const auto g = st::make_global<float>(64 * 64);
                                      auto x = sc::distribute<PP>(m, g, e);
                                      // Plan and geometry cached, as a later call finds them.
                                      if (via_to_global) (void)sc::to_global(x);
                                      else (void)sc::redistribute<RR>(x);
                                      auto copy = copy_kept ? x : decltype(x)();
                                      const auto before = st::snapshot(x);
                                      const float* const old = x.data();
                                      if (c.rank() == 1) throw std::runtime_error("rank 1 fails");
                                      const std::string who = "rank " + std::to_string(c.rank()) + ": ";
                                      try {
                                        if (via_to_global) (void)sc::to_global(std::move(x));
                                        else (void)sc::redistribute<RR>(std::move(x));
                                        f.add(who + "the all_reduce with a failed peer returned");
                                      } catch (const sc::comm_error&) {
                                        if (!copy_kept && !st::check_emptied(x).empty())
                                          f.add(who + "the given-up tensor kept storage a failed all_reduce wrote");
                                        if (copy_kept && (x.data() != old || st::snapshot(x) != before || st::snapshot(copy) != before))
                                          f.add(who + "a failed all_reduce on new storage changed the given-up tensor or its copy");
                                        throw;
                                      }
                                    }),
                      std::runtime_error);
      f.report();
    }
}

TEST_CASE("to_global of a given-up tensor: every layout on 1- and 2-axis meshes, owned alone, with a copy kept, or a view") {
  failures f;
  struct mesh_case {
    int nranks;
    std::vector<int> shape;
  };
  for (const mesh_case& mc : {mesh_case{3, {3}}, mesh_case{4, {2, 2}}}) {
    sc::host::run(mc.nranks, [&](sc::host::communicator& c) {
      auto run = [&](const auto& m) {
        const int naxes = static_cast<int>(mc.shape.size());
        for (const auto& ext : {std::array<std::int64_t, 2>{6, 4}, std::array<std::int64_t, 2>{1, 2}})
          for (sc::reduce_op op : st::all_reduce_ops)
            for (const sc::runtime_layout& l : st::all_layouts(naxes, 2, op)) {
              const auto g = st::make_global<std::int32_t>(ext[0] * ext[1]);
              auto owned = sc::distribute(m, l, g, ext);
              st::spread_partial_terms(owned, g);
              for (int keep = 0; keep < 3; ++keep) {  // owned alone, a copy kept, a view
                using D = decltype(owned);
                std::vector<std::int32_t> viewed = st::snapshot(owned);
                D copy = owned;
                D x = keep == 2 ? D(m, ext, nullptr, viewed.data(), l) : copy;
                if (keep == 0) copy = D();  // x alone owns its storage
                const auto before = st::snapshot(x);
                const std::vector<std::int32_t> got = sc::to_global(std::move(x));
                const std::string what = sc::to_string(l) + (keep == 0 ? "" : keep == 1 ? " (copy kept)" : " (view)") + ": ";
                if (got != g) f.add(what + "to_global of the given-up tensor differs from the global tensor");
                if (!st::check_emptied(x).empty()) f.add(what + "the given-up tensor was not left empty");
                if (keep == 1 && st::snapshot(copy) != before) f.add(what + "wrote into storage a copy holds");
                if (keep == 2 && viewed != before) f.add(what + "wrote into the memory under a view");
              }
            }
      };
      if (mc.shape.size() == 1) run(sc::make_mesh(c, std::array<int, 1>{mc.shape[0]}));
      else run(sc::make_mesh(c, std::array<int, 2>{mc.shape[0], mc.shape[1]}));
    });
  }
  // A static layout, and a temporary.
  sc::host::run(4, [&](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, std::array<int, 2>{2, 2});
    const std::array<std::int64_t, 2> e{5, 3};
    const auto g = st::make_global<double>(15);
    auto x = sc::distribute<sc::layout<sc::partial<>, sc::shard<1>>>(m, g, e);
    st::spread_partial_terms(x, g);
    if (sc::to_global(std::move(x)) != g) f.add("static P(sum),S(1): to_global of the given-up tensor differs");
    if (!st::check_emptied(x).empty()) f.add("static P(sum),S(1): the given-up tensor was not left empty");
    if (sc::to_global(sc::distribute<sc::layout<sc::shard<0>, sc::replicate>>(m, g, e)) != g) f.add("a temporary: to_global differs");
  });
  f.report();
}

TEST_CASE("a moved-from tensor is empty, and every redistribute of an empty tensor throws, the same-layout ones too") {
  // Moving leaves the source as a default-constructed tensor: no data pointer or extents
  // that would read as a view of storage it no longer keeps alive.
  std::vector<std::string> bad;
  sc::host::run(2, [&](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, std::array<int, 1>{2});
    using L = sc::layout<sc::shard<0>>;
    auto x = sc::distribute<L>(m, std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8}, std::array<std::int64_t, 1>{8});
    auto y = std::move(x);
    const bool emptied = x.data() == nullptr && x.local_size() == 0 && !x.owns() && x.mesh().state() == nullptr &&  // NOLINT(bugprone-use-after-move)
                         x.global_extents()[0] == 0 && x.local().extent(0) == 0;
    sc::dtensor<float, 1, L, decltype(m)> z;
    z = std::move(y);
    const bool assigned_emptied = y.data() == nullptr && y.local_size() == 0 && y.mesh().state() == nullptr && z.local_size() == 4 &&  // NOLINT(bugprone-use-after-move)
                                  z.data() != nullptr && z.local()[0] == (c.rank() == 0 ? 1.0f : 5.0f);
    // Every form throws layout_error on an empty tensor, the ones whose plan has no step too.
    int threw = 0;
    auto count = [&](auto&& call) {
      try {
        call();
      } catch (const sc::layout_error&) {
        ++threw;
      }
    };
    count([&] { (void)sc::redistribute<L>(x); });
    count([&] { (void)sc::redistribute<sc::layout<sc::replicate>>(x); });
    count([&] { (void)sc::redistribute<L>(std::move(x)); });
    sc::dtensor<float, 1, sc::dynamic_layout, decltype(m)> d;
    count([&] { (void)sc::redistribute(d, sc::runtime_layout::parse("S(0)")); });
    if (c.rank() == 0) {
      if (!emptied) bad.push_back("a move-constructed-from tensor kept its data pointer or extents");
      if (!assigned_emptied) bad.push_back("a move-assigned-from tensor kept its data pointer or extents, or the target is wrong");
      if (threw != 4) bad.push_back("only " + std::to_string(threw) + " of 4 redistributes of an empty tensor threw layout_error");
    }
  });
  for (const auto& b : bad) FAIL_CHECK(b);
}
