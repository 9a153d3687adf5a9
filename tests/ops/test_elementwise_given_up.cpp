// Elementwise operators on operands the caller gives up (map(std::move(x), f), add(x,
// std::move(y)), temporaries): every op, with the first or the second operand given up, on every layout of 1- to 3-axis meshes, with the operand owned
// alone, held by a copy as well, and a view, against a single-rank reference; the operand
// is left empty, storage it owned alone carries the result when the element type allows,
// and nothing a copy or a view can still read is written. Also: other operands that read
// the given-up piece at another offset, a functor that throws part-way, chains of
// temporaries through the compile-time API.
#include <doctest/doctest.h>

#include <memory>
#include <mutex>
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/elementwise.hpp>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "op_testing.hpp"

namespace sc = shardcast;
using optest::pd;

namespace {
using R = sc::replicate;
using S0 = sc::shard<0>;
using S1 = sc::shard<1>;
using Ps = sc::partial<sc::sum>;

/// x's piece in storage of its own (one more element than the piece, so an empty piece
/// has storage too), on x's mesh and layout.
template <class D>
D own_copy(const D& x) {
  using T = typename D::value_type;
  std::shared_ptr<T> owner(new T[x.local_size() + 1], std::default_delete<T[]>());
  std::copy_n(x.data(), x.local_size(), owner.get());
  if constexpr (std::is_same_v<typename D::layout_type, sc::dynamic_layout>)
    return D(x.mesh(), x.global_extents(), owner, owner.get(), x.layout());
  else
    return D(x.mesh(), x.global_extents(), owner, owner.get());
}

/// Checks made on rank threads, reported on the test thread (see common/failures.hpp).
struct checks : optest::failures {
  void expect(bool ok, const char* what) {
    if (!ok) add(std::string("failed: ") + what);
  }
};

struct boom : std::runtime_error {
  using std::runtime_error::runtime_error;
};
template <class F>
bool throws_boom(F f) {
  try {
    f();
  } catch (const boom&) {
    return true;
  }
  return false;
}

enum class form { alone, shared, view };
const char* form_name(form f) { return f == form::alone ? "owned alone" : f == form::shared ? "held by a copy too" : "a view"; }

// Every layout of a rank-2 tensor (R, S0, S1, P(sum), P(avg), P(max)) on a mesh of shape
// `shape`: each op on a given-up first operand, in the three forms. (When `sample` > 0:
// that many random layouts drawn from `seed` instead of every one.)
template <class T, int N>
void given_up_layouts(std::array<int, N> shape, std::array<std::int64_t, 2> e, int sample = 0, std::uint64_t seed = 0) {
  INFO("mesh " << optest::shape_name<N>(shape) << " extents " << e[0] << "x" << e[1]);
  int nranks = 1;
  for (int s : shape) nranks *= s;
  const std::int64_t n = e[0] * e[1];
  const auto a = optest::ints<T>(n, 1), b = optest::ints<T>(n, 4), bias = optest::ints<T>(e[1], 2);
  using U = std::conditional_t<std::is_same_v<T, double>, float, double>;  // another element type
  const auto r_relu = optest::each(a, [](T v) { return v > T(0) ? v : T(0); });
  const auto r_negate = optest::each(a, [](T v) { return static_cast<T>(-v); });
  const auto r_half = optest::each(a, [](T v) { return static_cast<U>(v) * U(0.5); });
  const auto r_scale = optest::each(a, [](T v) { return static_cast<T>(v * T(3)); });
  const auto r_add = optest::each2(a, b, [](T u, T v) { return u + v; });
  const auto r_sub = optest::each2(a, b, [](T u, T v) { return u - v; });
  const auto r_rsub = optest::each2(b, a, [](T u, T v) { return u - v; });
  const auto r_mul = optest::each2(a, b, [](T u, T v) { return u * v; });
  const auto r_max = optest::each2(a, b, optest::max_fn{});
  const auto r_twice = optest::each2(a, a, [](T u, T v) { return u + v; });
  const auto r_bias = optest::rows_plus(a, bias);
  const auto ps = optest::placements(2, {sc::reduce_op::sum, sc::reduce_op::avg, sc::reduce_op::max});
  const auto ls = sample > 0 ? optest::random_layouts(ps, N, sample, seed) : optest::layouts(ps, N);
  optest::failures f;
  sc::host::run(nranks, [&](sc::host::communicator& comm) {
    auto m = sc::make_mesh(comm, shape);
    using D = sc::dtensor<T, 2, sc::dynamic_layout, decltype(m)>;
    sc::runtime_layout all_r;
    all_r.naxes = N;
    const auto s0 = sc::distribute(m, all_r, std::vector<T>{T(3)}, std::array<std::int64_t, 0>{});
    for (const auto& l : ls) {
      const auto x = optest::make_terms(m, l, a, e), y = optest::make_terms(m, l, b, e);
      const auto bt = sc::distribute(m, sc::detail::bias_layout_for(l, 2), bias, std::array<std::int64_t, 1>{e[1]});
      const auto yr = sc::distribute(m, all_r, b, e);  // b replicated: legal with a partial z when the functor commutes
      const auto piece = optest::local_copy(x);
      const bool partial = optest::has_partial(l);
      constexpr bool ints = std::is_integral_v<T>;  // over integers a partial<avg> takes only the identity
      const bool int_avg = ints && optest::has_partial_op(l, sc::reduce_op::avg);
      const bool additive = optest::only_additive_partials(l) && !int_avg;
      // over integers a partial<max|min> goes through no addition (integer sums wrap around)
      const bool int_order = ints && (optest::has_partial_op(l, sc::reduce_op::max) || optest::has_partial_op(l, sc::reduce_op::min));
      // `op` takes the given-up operand (D&&); `same_type`: its result has element type T.
      auto check = [&](const char* what, bool legal, bool same_type, auto&& op, const auto& ref) {
        for (form fm : {form::alone, form::shared, form::view}) {
          const std::string where = std::string(what) + " on " + sc::to_string(l) + ", operand " + form_name(fm) + ": ";
          std::vector<T> buf = piece;
          D z = fm == form::view ? D(m, e, nullptr, buf.data(), l) : own_copy(x);
          D keep = fm == form::shared ? z : D();
          const T* const before = z.data();
          if (!legal) {
            try {
              (void)op(std::move(z));
              f.add(where + "expected layout_error");
            } catch (const sc::layout_error&) {
            }
            if (z.data() != before || optest::local_copy(z) != piece) f.add(where + "a refused call changed its operand");
            continue;
          }
          auto r = op(std::move(z));
          const std::string err = optest::compare_global(r, ref);  // collective: every rank calls it alike
          if (!err.empty()) f.add(where + err);
          const std::string emptied = sc::testing::check_emptied(z);
          if (!emptied.empty()) f.add(where + emptied);
          const bool reused = static_cast<const void*>(r.data()) == static_cast<const void*>(before);
          if (fm == form::alone && same_type && !reused) f.add(where + "the result did not take the operand's storage");
          if (fm != form::alone && reused) f.add(where + "the result wrote into memory a copy or the caller can still read");
          if (fm == form::shared && optest::local_copy(keep) != piece) f.add(where + "the copy's piece changed");
          if (fm == form::view && buf != piece) f.add(where + "the viewed memory changed");
        }
      };
      check("map relu", optest::only_max_min_partials(l), true, [&](D&& z) { return sc::map(std::move(z), sc::fn::relu); }, r_relu);
      check("map negate (partial<max> becomes partial<min>)", optest::only_max_min_partials(l), true,
            [&](D&& z) { return sc::map(std::move(z), sc::fn::nonincreasing_in<0>([](T v) { return static_cast<T>(-v); })); }, r_negate);
      check("map to another type", !partial, false, [&](D&& z) { return sc::map(std::move(z), [](T v) { return static_cast<U>(v) * U(0.5); }); },
            r_half);
      check("scale 3", additive, true, [&](D&& z) { return sc::scale(std::move(z), 3); }, r_scale);
      check("add", additive, true, [&](D&& z) { return sc::add(std::move(z), y); }, r_add);
      check("sub", additive, true, [&](D&& z) { return sc::sub(std::move(z), y); }, r_sub);
      check("mul", !partial, true, [&](D&& z) { return sc::mul(std::move(z), y); }, r_mul);
      check("zip max", !partial, true, [&](D&& z) { return sc::zip(std::move(z), y, optest::max_fn{}); }, r_max);
      check("add to itself", additive, true, [&](D&& z) { return sc::add(std::move(z), z); }, r_twice);
      check("mul by rank-0", additive, true, [&](D&& z) { return sc::mul(std::move(z), s0); }, r_scale);
      check("bias_add", !optest::has_partial_op(l, sc::reduce_op::sum) && !int_avg && !int_order, true, [&](D&& z) { return sc::bias_add(std::move(z), bt); }, r_bias);
      // The given-up operand second: the result goes over its piece when the first is kept.
      check("add, second operand", additive, true, [&](D&& z) { return sc::add(y, std::move(z)); }, r_add);
      check("sub, second operand", additive, true, [&](D&& z) { return sc::sub(y, std::move(z)); }, r_rsub);
      check("mul, second operand", !partial, true, [&](D&& z) { return sc::mul(y, std::move(z)); }, r_mul);
      check("zip max, second operand", !partial, true, [&](D&& z) { return sc::zip(y, std::move(z), optest::max_fn{}); }, r_max);
      // The other operand replicated: z's partial axes stay partial where the functor commutes.
      check("mul by a replicated b", optest::zip_legal(l, all_r, optest::k_mul, nullptr, ints), true, [&](D&& z) { return sc::mul(std::move(z), yr); }, r_mul);
      check("replicated b times", optest::zip_legal(all_r, l, optest::k_mul, nullptr, ints), true, [&](D&& z) { return sc::mul(yr, std::move(z)); }, r_mul);
      check("add a replicated b", optest::zip_legal(l, all_r, optest::k_add, nullptr, ints), true, [&](D&& z) { return sc::add(std::move(z), yr); }, r_add);
      // Both given up: the first takes the result when it can, else the second (owned alone
      // here, so the check only asks that the first's memory is not written when shared).
      check("add, both given up", additive, true, [&](D&& z) { return sc::add(std::move(z), own_copy(y)); }, r_add);
    }
  });
  for (auto& s : f.list) FAIL_CHECK(s);
  CHECK(f.list.empty());
}
}  // namespace

TEST_CASE_TEMPLATE("given-up elementwise operands on every layout of 1-axis meshes", T, int, double) {
  for (int r : {1, 2, 3, 5}) given_up_layouts<T, 1>({r}, {3, 5});
  given_up_layouts<T, 1>({4}, {2, 3});  // empty pieces
}

TEST_CASE_TEMPLATE("given-up elementwise operands on every layout of 2-axis meshes", T, float, std::int64_t) {
  given_up_layouts<T, 2>({2, 2}, {3, 5});
  given_up_layouts<T, 2>({3, 2}, {2, 5});
}

TEST_CASE("given-up elementwise operands on every layout of a 3-axis mesh") { given_up_layouts<int, 3>({2, 1, 2}, {3, 5}); }

TEST_CASE("given-up elementwise operands on random layouts of random 4- to 6-axis meshes") {
  for (std::uint64_t s = 1; s <= static_cast<std::uint64_t>(optest::random_rounds); ++s) {
    given_up_layouts<std::int64_t, 4>(optest::random_shape<4>(s + 30, 16), optest::random_extents<2>(s + 30), 8, s + 30);
    given_up_layouts<float, 5>(optest::random_shape<5>(s + 40, 16), optest::random_extents<2>(s + 40), 8, s + 40);
    given_up_layouts<int, 6>(optest::random_shape<6>(s + 50, 16), optest::random_extents<2>(s + 50), 8, s + 50);
  }
}

// A static-layout operand given up with a dynamic-layout one: the result has a dynamic
// layout (the rules ran at run time) and still takes the operand's storage.
TEST_CASE("a given-up static operand with a dynamic one") {
  checks f;
  sc::host::run(4, [&](sc::host::communicator& comm) {
    auto m = sc::make_mesh(comm, std::array<int, 2>{2, 2});
    const std::array<std::int64_t, 2> ext{5, 3};
    const auto a = optest::ints<int>(15, 1), b = optest::ints<int>(15, 2);
    const auto l = sc::runtime_layout::parse("S(1),P(sum)");
    const auto x = optest::make_terms(m, l, a, ext), y = optest::make_terms(m, l, b, ext);
    auto xs = optest::as_static<sc::layout<S1, Ps>>(own_copy(x));
    const int* const before = xs.data();
    auto r = sc::sub(std::move(xs), y);
    static_assert(std::is_same_v<decltype(r)::layout_type, sc::dynamic_layout>);
    f.expect(r.layout() == l, "the result has the operands' layout");
    f.expect(r.data() == before, "the result took the static operand's storage");
    f.expect(sc::testing::check_emptied(xs).empty(), "the static operand was left empty");
    std::vector<int> ref(15);
    for (std::size_t i = 0; i < 15; ++i) ref[i] = a[i] - b[i];
    f.expect(optest::compare_global(r, ref).empty(), "a - b matches the reference");
  });
  f.report();
}

// The output goes to the given-up operand's storage only when no other operand reads that
// storage at another offset: an in-place loop would read values it had already written.
TEST_CASE("another operand that reads the given-up piece at another offset keeps the output out of it") {
  checks f;
  sc::host::run(1, [&](sc::host::communicator& comm) {
    auto m = sc::make_mesh(comm, std::array<int, 1>{1});
    using L = sc::layout<R>;
    using D = sc::dtensor<int, 2, L, decltype(m)>;
    const std::array<std::int64_t, 2> ext{2, 3};
    auto storage = [] {
      std::shared_ptr<int> p(new int[7], std::default_delete<int[]>());
      for (int i = 0; i < 7; ++i) p.get()[i] = i + 1;
      return p;
    };
    {  // z over elements [1, 7) of its storage, b a view over [0, 6)
      auto st = storage();
      int* base = st.get();
      D z(m, ext, std::move(st), base + 1);
      auto bv = sc::make_view<L>(m, base, ext);
      const std::vector<int> ref{1 + 2, 2 + 3, 3 + 4, 4 + 5, 5 + 6, 6 + 7};
      auto r = sc::add(std::move(z), bv);
      f.expect(optest::local_copy(r) == ref, "optest::local_copy(r) == ref");
      f.expect(r.data() != base + 1, "r.data() != base + 1");
      f.expect(sc::testing::check_emptied(z) == "", "sc::testing::check_emptied(z) == \"\"");
    }
    {  // the same with the given-up operand second: z over [1, 7), the first operand a view over [0, 6)
      auto st = storage();
      int* base = st.get();
      D z(m, ext, std::move(st), base + 1);
      auto av = sc::make_view<L>(m, base, ext);
      const std::vector<int> ref{1 - 2, 2 - 3, 3 - 4, 4 - 5, 5 - 6, 6 - 7};
      auto r = sc::sub(av, std::move(z));
      f.expect(optest::local_copy(r) == ref, "a - z, z given up over memory a reads at another offset");
      f.expect(r.data() != base + 1, "a - z did not go over z's piece");
    }
    {  // the bias is a view over z's first row
      auto st = storage();
      int* base = st.get();
      D z(m, ext, std::move(st), base);
      auto bias = sc::make_view<L>(m, base, std::array<std::int64_t, 1>{3});
      const std::vector<int> ref{1 + 1, 2 + 2, 3 + 3, 4 + 1, 5 + 2, 6 + 3};
      auto r = sc::bias_add(std::move(z), bias);
      f.expect(optest::local_copy(r) == ref, "optest::local_copy(r) == ref");
      f.expect(r.data() != base, "r.data() != base");
    }
    {  // the rank-0 factor is a view over z's first element
      auto st = storage();
      int* base = st.get();
      D z(m, ext, std::move(st), base);
      auto factor = sc::make_view<L>(m, base, std::array<std::int64_t, 0>{});
      const std::vector<int> ref{1, 2, 3, 4, 5, 6};  // times 1
      auto r = sc::mul(std::move(z), factor);
      f.expect(optest::local_copy(r) == ref, "optest::local_copy(r) == ref");
      f.expect(r.data() != base, "r.data() != base");
    }
    {  // the same piece, element for element, may be written over: 2 * z in z's storage
      auto st = storage();
      int* base = st.get();
      D z(m, ext, std::move(st), base);
      auto same = sc::make_view<L>(m, base, ext);
      auto r = sc::add(std::move(z), same);
      f.expect(optest::local_copy(r) == std::vector<int>{2, 4, 6, 8, 10, 12}, "optest::local_copy(r) == std::vector<int>{2, 4, 6, 8, 10, 12}");
      f.expect(r.data() == base, "r.data() == base");
    }
  });
  f.report();
}

TEST_CASE("both operands given up, and a given-up rank-0 factor") {
  checks f;
  sc::host::run(2, [&](sc::host::communicator& comm) {
    auto m = sc::make_mesh(comm, std::array<int, 1>{2});
    using L = sc::layout<S0>;
    using LR = sc::layout<R>;
    const std::array<std::int64_t, 1> ext{7};
    const std::vector<int> g{1, 2, 3, 4, 5, 6, 7}, h{7, 6, 5, 4, 3, 2, 1};
    {  // the first is shared, the second owned alone: the sum goes over the second's piece
      auto a = sc::distribute<L>(m, g, ext);
      const auto keep = a;
      auto b = sc::distribute<L>(m, h, ext);
      const int* const bd = b.data();
      auto r = sc::add(std::move(a), std::move(b));
      f.expect(r.data() == bd, "a shared, b alone: the sum took b's storage");
      f.expect(sc::testing::check_emptied(a).empty() && sc::testing::check_emptied(b).empty(), "both operands were left empty");
      f.expect(optest::local_copy(keep) == optest::local_copy(sc::distribute<L>(m, g, ext)), "the copy of a is unchanged");
      f.expect(optest::compare_global(r, std::vector<int>(7, 8)).empty(), "a + b matches the reference");
    }
    {  // a rank-0 factor given up is left empty; it cannot hold the product
      auto x = sc::distribute<L>(m, g, ext);
      auto k = sc::distribute<LR>(m, std::vector<int>{3}, std::array<std::int64_t, 0>{});
      const int* const xd = x.data();
      auto r = sc::mul(std::move(x), std::move(k));
      f.expect(r.data() == xd, "x * k took x's storage");
      f.expect(sc::testing::check_emptied(k).empty(), "the rank-0 factor was left empty");
      f.expect(optest::compare_global(r, std::vector<int>{3, 6, 9, 12, 15, 18, 21}).empty(), "x * k matches the reference");
    }
  });
  f.report();
}

TEST_CASE("a functor that throws part-way through a given-up operand") {
  auto thrower = [](int v) {
    if (v == 4) throw boom("element 4");
    return v * 10;
  };
  checks f;
  sc::host::run(2, [&](sc::host::communicator& comm) {
    auto m = sc::make_mesh(comm, std::array<int, 1>{2});
    using L = sc::layout<R>;
    const std::vector<int> g{1, 2, 3, 4, 5, 6};
    const std::array<std::int64_t, 1> ext{6};
    {  // owned alone: the output was being written over its storage, which goes with it
      auto z = sc::distribute<L>(m, g, ext);
      f.expect(throws_boom([&] { (void)sc::map(std::move(z), thrower); }), "sc::map(std::move(z), thrower) throws");
      f.expect(sc::testing::check_emptied(z) == "", "sc::testing::check_emptied(z) == \"\"");
    }
    {  // held by a copy too: new storage was being written, and z is as it was
      auto z = sc::distribute<L>(m, g, ext);
      const auto keep = z;
      const int* const before = z.data();
      f.expect(throws_boom([&] { (void)sc::map(std::move(z), thrower); }), "sc::map(std::move(z), thrower) throws");
      f.expect(z.data() == before, "z.data() == before");
      f.expect(optest::local_copy(z) == g, "optest::local_copy(z) == g");
      f.expect(optest::local_copy(keep) == g, "optest::local_copy(keep) == g");
    }
  });
  f.report();
}

TEST_CASE("chains of temporaries through the compile-time API hold one piece") {
  checks f;
  sc::host::run(4, [&](sc::host::communicator& comm) {
    auto m = sc::make_mesh(comm, std::array<int, 2>{2, 2});
    using L = sc::layout<S0, S1>;
    const std::array<std::int64_t, 2> ext{5, 7};  // uneven pieces
    const auto a = optest::ints<float>(35, 3), b = optest::ints<float>(35, 6), bias = optest::ints<float>(7, 1);
    const auto x = sc::distribute<L>(m, a, ext), y = sc::distribute<L>(m, b, ext);
    const auto bt = sc::distribute<sc::bias_layout_t<L, 2>>(m, bias, std::array<std::int64_t, 1>{7});
    auto t = own_copy(x);
    const float* const first = t.data();
    // relu(2 * x + bias - y), each step writing over the previous one's piece
    auto r = sc::map(sc::sub(sc::bias_add(sc::scale(std::move(t), 2), bt), y), sc::fn::relu);
    static_assert(std::is_same_v<decltype(r), sc::dtensor<float, 2, L, decltype(m)>>);
    f.expect(r.data() == first, "r.data() == first");
    f.expect(sc::testing::check_emptied(t) == "", "sc::testing::check_emptied(t) == \"\"");
    std::vector<float> ref(35);
    for (std::size_t i = 0; i < 35; ++i) ref[i] = std::max(0.0f, 2 * a[i] + bias[i % 7] - b[i]);
    f.expect(optest::compare_global(r, ref) == "", "optest::compare_global(r, ref) == \"\"");
    f.expect(optest::local_copy(x) == optest::local_copy(sc::distribute<L>(m, a, ext)), "optest::local_copy(x) == optest::local_copy(sc::distribute<L>(m, a, ext))");  // x kept: unchanged

    // partial<sum> through scale and add, then reduced: the sum of the terms
    using P = sc::layout<Ps, R>;
    auto p = sc::distribute<P>(m, a, ext);
    auto q = sc::distribute<P>(m, b, ext);
    const float* const pd0 = p.data();
    auto s = sc::add(sc::scale(std::move(p), 3), q);
    f.expect(s.data() == pd0, "s.data() == pd0");
    std::vector<float> ref2(35);
    for (std::size_t i = 0; i < 35; ++i) ref2[i] = 3 * a[i] + b[i];
    f.expect(optest::compare_global(s, ref2) == "", "optest::compare_global(s, ref2) == \"\"");
  });
  f.report();
}

// A tensor without a mesh (default-constructed, or left empty by giving it up) and a
// default-constructed mesh are refused with a layout_error that says so, by every call
// that would reach the mesh: they once dereferenced a null mesh state (SIGSEGV).
#include <shardcast/ops/broadcast.hpp>
#include <shardcast/ops/matmul.hpp>
#include <shardcast/ops/overlap.hpp>
#include <shardcast/ops/reduce.hpp>
#include <shardcast/ops/transpose.hpp>

TEST_CASE("a tensor or mesh without mesh state is refused by every call that needs the mesh") {
  std::vector<std::string> missed;
  std::mutex mu;
  sc::host::run(2, [&](sc::host::communicator& comm) {
    using Mesh = sc::mesh<1>;
    auto m = sc::make_mesh(comm, std::array<int, 1>{2});
    const std::vector<double> g = {1, 2, 3, 4, 5, 6};
    const std::array<std::int64_t, 2> e{2, 3};
    auto expect = [&](const char* what, auto&& call) {
      try {
        call();
      } catch (const sc::layout_error& err) {
        if (std::string(err.what()).find("has no mesh state") != std::string::npos) return;
        std::lock_guard lk(mu);
        missed.push_back(std::string(what) + ": " + err.what());
        return;
      }
      std::lock_guard lk(mu);
      missed.push_back(std::string(what) + ": no exception");
    };
    auto x = sc::distribute<sc::layout<S0>>(m, g, e);
    auto gone = sc::map(std::move(x), sc::fn::identity);  // x is given up: empty now
    sc::dtensor<double, 2, sc::layout<S0>, Mesh> none;   // default-constructed
    auto xd = sc::distribute(m, sc::runtime_layout::parse("S(0)"), g, e);
    auto gone_d = sc::map(std::move(xd), sc::fn::identity);
    auto rep = sc::distribute<sc::layout<R>>(m, g, std::array<std::int64_t, 2>{3, 2});
    auto col = sc::distribute<sc::layout<S0>>(m, std::vector<double>{1, 2}, std::array<std::int64_t, 2>{2, 1});
    for (auto* t : {&x, &none}) {
      expect("redistribute", [&] { (void)sc::redistribute<sc::layout<R>>(*t); });
      expect("redistribute of an rvalue", [&] { (void)sc::redistribute<sc::layout<R>>(std::remove_reference_t<decltype(*t)>(*t)); });
      expect("redistribute_into", [&] { sc::redistribute_into(*t, sc::dtensor<double, 2, sc::layout<R>, Mesh>{}); });
      expect("plan_for", [&] { (void)sc::plan_for<sc::layout<R>>(*t); });
      expect("explain", [&] { (void)sc::explain<sc::layout<R>>(*t); });
      expect("explain to its own layout", [&] { (void)sc::explain<sc::layout<S0>>(*t); });
      expect("to_global", [&] { (void)sc::to_global(*t); });
      expect("to_global of an rvalue", [&] { (void)sc::to_global(std::remove_reference_t<decltype(*t)>(*t)); });
      expect("map", [&] { (void)sc::map(*t, sc::fn::relu); });
      expect("zip with a", [&] { (void)sc::zip(*t, gone, sc::fn::add); });
      expect("zip with b", [&] { (void)sc::zip(gone, *t, sc::fn::add); });
      expect("reduce", [&] { (void)sc::reduce<1, sc::sum>(*t); });
      expect("transpose", [&] { (void)sc::transpose(*t); });
      expect("matmul", [&] { (void)sc::matmul(*t, rep); });
      expect("broadcast_zip", [&] { (void)sc::broadcast_zip<1>(*t, col, sc::fn::sub); });
    }
    expect("dynamic redistribute", [&] { (void)sc::redistribute(xd, sc::runtime_layout::parse("R")); });
    expect("dynamic plan_for", [&] { (void)sc::plan_for(xd, sc::runtime_layout::parse("R")); });
    expect("dynamic explain", [&] { (void)sc::explain(xd, sc::runtime_layout::parse("R")); });
    expect("execute", [&] {
      (void)sc::execute(sc::make_plan(sc::runtime_layout::parse("S(0)"), sc::runtime_layout::parse("R"), std::array<int, 1>{2}, e), xd);
    });
    expect("dynamic to_global", [&] { (void)sc::to_global(xd); });
    // A default-constructed mesh.
    const Mesh no_mesh;
    expect("distribute", [&] { (void)sc::distribute<sc::layout<S0>>(no_mesh, g, e); });
    expect("dynamic distribute", [&] { (void)sc::distribute(no_mesh, sc::runtime_layout::parse("S(0)"), g, e); });
    expect("full", [&] { (void)sc::full<sc::layout<S0>>(no_mesh, e, 1.0); });
    expect("empty", [&] { (void)sc::empty<sc::layout<S0>, double>(no_mesh, e); });
    expect("dynamic empty", [&] { (void)sc::empty<double>(no_mesh, sc::runtime_layout::parse("S(0)"), e); });
    std::vector<double> local(3);
    expect("make_view", [&] { (void)sc::make_view<sc::layout<S0>>(no_mesh, local.data(), e); });
    expect("check_same_extents", [&] { sc::check_same_extents(no_mesh, e); });
    expect("overlap_context", [&] { sc::overlap_context ctx(no_mesh); });
    // The tensors that still have their mesh work as before.
    CHECK(sc::to_global(gone) == g);
    CHECK(sc::to_global(gone_d) == g);
  });
  for (auto& s : missed) FAIL_CHECK(s);
  CHECK(missed.empty());
}
