// redistribute_into: the result is written into memory the output tensor already has.
// Every result is compared with the single-rank reference; the output's memory around its
// local piece (guard elements) must stay untouched, and the input must be unchanged.
#include <doctest/doctest.h>

#include <cstdint>
#include <span>
#include <shardcast/shardcast.hpp>
#include <string>
#include <vector>

#include "common/differential.hpp"
#include "common/failures.hpp"

namespace sc = shardcast;
namespace st = shardcast::testing;

namespace {

using st::guarded;
using st::snapshot;

template <class T, int N, std::size_t R>
void sweep(const std::array<int, N>& shape, const std::vector<std::array<std::int64_t, R>>& extents, st::sweep_outcome& f) {
  int nranks = 1;
  for (int s : shape) nranks *= s;
  sc::host::run(nranks, [&](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, shape);
    std::size_t mine = 0;
    st::for_each_layout_pair(N, static_cast<int>(R), 1, [&](const sc::runtime_layout& src, const sc::runtime_layout& dst) {
      for (const auto& e : extents) {
        f.add(st::differential_into_case<T>(m, src, dst, e));
        ++mine;
      }
    });
    if (c.rank() == 0) f.count(mine);
  });
}

/// distribute<From>, then redistribute_into<To> twice (the second time with the plan's
/// geometry cached) into one guarded view; also into an owning `empty` output.
template <class From, class To, class T, int N, std::size_t R>
void static_case(const std::array<int, N>& shape, const std::array<std::int64_t, R>& ext, st::sweep_outcome& f) {
  int nranks = 1;
  for (int s : shape) nranks *= s;
  sc::host::run(nranks, [&](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, shape);
    std::int64_t n = 1;
    for (auto v : ext) n *= v;
    const auto g = st::make_global<T>(n);
    auto x = sc::distribute<From>(m, g, ext);
    st::spread_partial_terms(x, g);  // partial terms that only the right reduce op adds up to g
    const auto before = snapshot(x);
    const std::string what = sc::to_string(From::desc) + " -> " + sc::to_string(To::desc) + ": ";
    const sc::box b = sc::local_box(To::desc, m.shape().data(), m.coords().data(), ext.data(), static_cast<int>(R));
    guarded<T> out(static_cast<std::size_t>(b.volume()));
    const auto y = sc::make_view<To>(m, out.piece(), ext);
    for (int round = 0; round < 2; ++round) {
      std::fill(out.piece(), out.piece() + y.local_size(), T{});
      sc::redistribute_into(x, y);
      std::string err = st::check_against_reference(y, g);
      if (err.empty()) err = out.check(y.local_size());
      if (!err.empty()) f.add(what + "round " + std::to_string(round) + ": " + err);
    }
    const auto z = sc::empty<To, T>(m, ext);
    sc::redistribute_into(x, z);
    f.add(st::check_against_reference(z, g));
    if (snapshot(x) != before) f.add(what + "the input was modified");
    if (c.rank() == 0) f.count(3);
  });
}
}  // namespace

TEST_CASE_TEMPLATE("redistribute_into matches the reference for every layout pair on 1- and 2-axis meshes", T, float, std::int64_t) {
  st::sweep_outcome f;
  for (int n : {1, 3, 4}) {
    sweep<T, 1, 1>({n}, {{{7}}, {{2}}, {{0}}}, f);
    sweep<T, 1, 2>({n}, {{{5, 3}}, {{2, 7}}}, f);
  }
  for (auto shape : {std::array<int, 2>{2, 2}, std::array<int, 2>{2, 3}}) sweep<T, 2, 2>(shape, {{{5, 6}}, {{3, 1}}, {{0, 3}}}, f);
  f.report();
}

TEST_CASE("static redistribute_into runs each kind of plan into the output's memory") {
  using namespace sc;
  st::sweep_outcome f;
  using S0_R = layout<shard<0>, replicate>;
  using R_R = layout<replicate, replicate>;
  using P_R = layout<partial<>, replicate>;
  // One collective on pieces in place (the fast path), even and uneven.
  static_case<S0_R, R_R, float, 2, 2>({2, 2}, {8, 8}, f);
  static_case<S0_R, R_R, float, 2, 2>({2, 2}, {7, 5}, f);
  static_case<P_R, S0_R, float, 2, 2>({2, 2}, {8, 8}, f);
  // Uneven reduce_scatter as last step: its padded chunk is larger than the piece.
  static_case<P_R, S0_R, std::int32_t, 2, 2>({3, 2}, {7, 5}, f);
  static_case<layout<partial<max>>, layout<shard<1>>, double, 1, 2>({4}, {3, 5}, f);
  static_case<layout<partial<>, partial<>>, R_R, std::int64_t, 2, 2>({2, 2}, {5, 3}, f);
  // Staged: unpack after a gather along dim 1, two steps, all_to_all, pad, slice.
  static_case<layout<replicate, shard<1>>, R_R, float, 2, 2>({2, 2}, {8, 8}, f);
  static_case<S0_R, layout<replicate, shard<1>>, float, 2, 2>({2, 3}, {7, 5}, f);
  static_case<layout<shard<0>, shard<1>>, layout<shard<1>, shard<0>>, double, 2, 2>({2, 2}, {6, 9}, f);
  static_case<S0_R, layout<partial<>, replicate>, float, 2, 2>({2, 2}, {5, 4}, f);
  static_case<R_R, layout<shard<1>, shard<0>>, std::int32_t, 2, 2>({2, 2}, {3, 5}, f);
  // Empty pieces, and the same layout (a copy).
  static_case<S0_R, R_R, float, 2, 2>({4, 1}, {2, 3}, f);
  static_case<S0_R, S0_R, float, 2, 2>({2, 2}, {5, 4}, f);
  f.report();
}

TEST_CASE("redistribute_into between a static and a dynamic layout runs the dynamic form") {
  st::failures f;
  sc::host::run(4, [&](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, std::array<int, 2>{2, 2});
    using D = sc::dtensor<float, 2, sc::dynamic_layout, decltype(m)>;
    const std::array<std::int64_t, 2> e{7, 5};
    const auto g = st::make_global<float>(35);
    auto piece = [&](const sc::runtime_layout& l) { return static_cast<std::size_t>(sc::local_box(l, m.shape().data(), m.coords().data(), e.data(), 2).volume()); };
    // static input, dynamic output
    const auto xs = sc::distribute<sc::layout<sc::shard<0>, sc::replicate>>(m, g, e);
    const auto to = sc::runtime_layout::parse("R,S(1)");
    guarded<float> a(piece(to));
    const D yd(m, e, nullptr, a.piece(), to);
    sc::redistribute_into(xs, yd);
    f.add(st::check_against_reference(yd, g));
    f.add(a.check(yd.local_size()));
    // dynamic input, static output
    auto xd = sc::distribute(m, sc::runtime_layout::parse("P(sum),S(0)"), g, e);
    st::spread_partial_terms(xd, g);
    using To = sc::layout<sc::shard<1>, sc::replicate>;
    guarded<float> b(piece(To::desc));
    const auto ys = sc::make_view<To>(m, b.piece(), e);
    sc::redistribute_into(xd, ys);
    f.add(st::check_against_reference(ys, g));
    f.add(b.check(ys.local_size()));
  });
  f.report();
}

TEST_CASE("redistribute_into to the same layout in place leaves the piece as it is") {
  st::failures f;
  using L = sc::layout<sc::shard<0>, sc::replicate>;
  sc::host::run(4, [&](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, std::array<int, 2>{2, 2});
    const std::array<std::int64_t, 2> e{5, 3};
    const auto g = st::make_global<float>(15);
    const auto x = sc::distribute<L>(m, g, e);
    sc::redistribute_into(x, x);
    f.add(st::check_against_reference(x, g));
    using D = sc::dtensor<float, 2, sc::dynamic_layout, decltype(m)>;
    const D d(m, e, x.owner(), x.data(), x.layout());
    sc::redistribute_into(d, d);
    f.add(st::check_against_reference(d, g));
  });
  f.report();
}

TEST_CASE("redistribute_into rejects an output that does not fit the input") {
  st::failures f;
  using From = sc::layout<sc::shard<0>, sc::replicate>;
  using To = sc::layout<sc::replicate, sc::shard<1>>;
  sc::host::run(4, [&](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, std::array<int, 2>{2, 2});
    auto other = sc::make_mesh(c, std::array<int, 2>{2, 2});
    const std::array<std::int64_t, 2> e{6, 4};
    const auto g = st::make_global<float>(24);
    const auto x = sc::distribute<From>(m, g, e);
    const auto before = snapshot(x);
    auto expect = [&](auto&& call, const char* needle, const char* what) {
      try {
        call();
        f.add(std::string(what) + ": no exception");
      } catch (const sc::layout_error& err) {
        if (std::string(err.what()).find(needle) == std::string::npos) f.add(std::string(what) + ": unexpected message: " + err.what());
      }
    };
    expect([&] { sc::redistribute_into(x, sc::empty<To, float>(other, e)); }, "another mesh", "other mesh");
    expect([&] { sc::redistribute_into(x, sc::empty<To, float>(m, std::array<std::int64_t, 2>{6, 5})); }, "global extents", "extents");
    // x's piece is 3x4 = 12 floats, the output's 6x2: a view over x's own memory overlaps it.
    expect([&] { sc::redistribute_into(x, sc::make_view<To>(m, x.data(), e)); }, "overlaps", "aliasing output");
    // (make_view refuses a null pointer for a piece that is not empty: the constructor does not)
    using Y = sc::dtensor<float, 2, To, decltype(m)>;
    expect([&] { sc::redistribute_into(x, Y(m, e, nullptr, nullptr)); }, "no memory", "null output");
    expect([&] { (void)sc::make_view<To>(m, static_cast<float*>(nullptr), e); }, "a null pointer for this rank's piece of 12 elements",
           "make_view over null");
    expect([&] { (void)sc::make_view(m, sc::runtime_layout::parse("R,S(1)"), static_cast<float*>(nullptr), e); },
           "a null pointer for this rank's piece of 12 elements", "dynamic make_view over null");
    // A null pointer where the piece is empty is fine: 1 row over 2 ranks leaves one empty.
    const std::array<std::int64_t, 2> one_row{1, 4};
    if (sc::local_box<sc::layout<sc::shard<0>, sc::replicate>>(m, one_row).volume() == 0)
      CHECK(sc::make_view<sc::layout<sc::shard<0>, sc::replicate>>(m, static_cast<float*>(nullptr), one_row).local_size() == 0);
    // Empty tensors (default-constructed, or given up to an earlier call) on either side:
    // the message says which side has no mesh, also where the two layouts are the same.
    sc::dtensor<float, 2, From, decltype(m)> no_x;
    Y no_y;
    auto y_ok = sc::empty<To, float>(m, e);
    expect([&] { sc::redistribute_into(no_x, y_ok); }, "redistribute_into: the input: the tensor or mesh has no mesh state", "empty input");
    expect([&] { sc::redistribute_into(x, no_y); }, "redistribute_into: the output: the tensor or mesh has no mesh state", "empty output");
    expect([&] { sc::redistribute_into(no_x, sc::dtensor<float, 2, From, decltype(m)>{}); }, "the input: the tensor or mesh has no mesh state",
           "both empty, same layout");
    expect([&] { sc::redistribute_into(no_y, Y{}); }, "the input: the tensor or mesh has no mesh state", "both empty, same layout (To)");
    using D = sc::dtensor<float, 2, sc::dynamic_layout, decltype(m)>;
    const D dx(m, e, x.owner(), x.data(), x.layout());
    const D dy(m, e, nullptr, x.data() + 2, sc::runtime_layout::parse("R,S(1)"));
    expect([&] { sc::redistribute_into(dx, dy); }, "overlaps", "aliasing dynamic output");
    if (snapshot(x) != before) f.add("a rejected call modified the input");
  });
  f.report();
}

TEST_CASE("local_box sizes this rank's piece; make_view over a span checks that the span holds it") {
  sc::host::run(6, [](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, std::array<int, 2>{2, 3});
    const std::array<std::int64_t, 2> ext{5, 2};  // uneven on axis 0, empty pieces on axis 1
    const auto g = st::make_global<float>(10);
    for (const auto& l : st::all_layouts(2, 2, sc::reduce_op::sum)) {
      const auto x = sc::distribute(m, l, g, ext);
      const sc::box b = sc::local_box(m, l, ext);
      CHECK(b == x.local_box());
      // A view over exactly that many elements, made from the span, is x's piece again.
      std::vector<float> buf(x.data(), x.data() + x.local_size());
      const auto v = sc::make_view(m, l, std::span<float>(buf), ext);
      CHECK(v.data() == buf.data());
      CHECK(sc::to_global(v) == sc::to_global(x));
      const auto cv = sc::make_view(m, l, std::span<const float>(buf), ext);  // const elements
      static_assert(std::is_same_v<typename decltype(cv)::value_type, const float>);
      if (b.volume() > 0) {
        std::string msg;
        try {
          (void)sc::make_view(m, l, std::span<float>(buf.data(), buf.size() - 1), ext);
        } catch (const sc::layout_error& e) {
          msg = e.what();
        }
        CHECK(msg.find("the span has " + std::to_string(buf.size() - 1) + " elements but this rank's piece has " +
                       std::to_string(buf.size())) != std::string::npos);
      }
    }
    using L = sc::layout<sc::shard<0>, sc::shard<1>>;
    const auto xs = sc::distribute<L>(m, g, ext);
    const sc::box bs = sc::local_box<L>(m, ext);
    CHECK(bs == xs.local_box());
    std::vector<float> piece(static_cast<std::size_t>(bs.volume()) + 2);  // a larger span is fine
    auto vs = sc::make_view<L>(m, std::span<float>(piece), ext);
    sc::redistribute_into(xs, vs);
    CHECK(sc::to_global(vs) == g);
    std::vector<float> none;
    if (bs.volume() > 0) CHECK_THROWS_AS((void)sc::make_view<L>(m, std::span<float>(none), ext), sc::layout_error);
    CHECK_THROWS_AS((void)sc::local_box(m, sc::runtime_layout::parse("S(0),S(2)"), ext), sc::layout_error);
  });
}
