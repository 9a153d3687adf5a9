#pragma once
// Helpers shared by the operator tests: layout enumeration, dtensors whose partial terms
// differ from rank to rank (so an operator that treats a partial term like the whole
// tensor gives a wrong answer), and comparison of a gathered result with a single-rank
// reference computed in the test.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include <shardcast/comm/host.hpp>
#include <shardcast/distribute.hpp>
#include <shardcast/ops/elementwise.hpp>

#include "common/differential.hpp"
#include "common/failures.hpp"
#include "common/reference.hpp"

namespace optest {
namespace sc = shardcast;
using pd = sc::placement_desc;

/// The message of the layout_error `op()` throws, or "no exception".
template <class F>
std::string layout_error_of(F&& op) {
  try {
    (void)op();
  } catch (const sc::layout_error& e) {
    return e.what();
  }
  return "no exception";
}

/// x as `count` row-major [rows, cols] matrices, each transposed.
template <class V>
std::vector<V> transposed(const std::vector<V>& x, std::int64_t rows, std::int64_t cols, std::int64_t count = 1) {
  std::vector<V> y(x.size());
  for (std::int64_t b = 0; b < count; ++b)
    for (std::int64_t i = 0; i < rows; ++i)
      for (std::int64_t j = 0; j < cols; ++j)
        y[static_cast<std::size_t>(b * rows * cols + j * rows + i)] = x[static_cast<std::size_t>(b * rows * cols + i * cols + j)];
  return y;
}

/// R, S(0..rank-1), and P(op) for each op in `ops`.
inline std::vector<pd> placements(int rank, std::initializer_list<sc::reduce_op> ops) {
  std::vector<pd> v{pd::make_replicate()};
  for (int d = 0; d < rank; ++d) v.push_back(pd::make_shard(d));
  for (auto op : ops)
    if (std::find(v.begin(), v.end(), pd::make_partial(op)) == v.end()) v.push_back(pd::make_partial(op));
  return v;
}
inline std::vector<sc::reduce_op> all_ops() {
  return {sc::reduce_op::sum, sc::reduce_op::avg, sc::reduce_op::max, sc::reduce_op::min, sc::reduce_op::prod};
}

/// Every layout over `naxes` axes built from `ps` that does not mix partial ops.
inline std::vector<sc::runtime_layout> layouts(const std::vector<pd>& ps, int naxes) {
  std::vector<sc::runtime_layout> out = sc::testing::every_layout(ps, naxes);
  std::erase_if(out, [](const sc::runtime_layout& l) { return !sc::detail::same_op_partials(l); });
  return out;
}

/// Rounds of the random-mesh tests: fewer in the sanitizer builds (scripts/sanitize.sh),
/// where each costs about ten times as much and the exhaustive 1- to 3-axis sweeps already
/// run every operator path.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr int random_rounds = 1;
#else
inline constexpr int random_rounds = 2;
#endif

/// `count` random layouts over `naxes` axes built from `ps` that do not mix partial ops
/// (the same ones for the same seed, so every rank of a run draws the same list).
inline std::vector<sc::runtime_layout> random_layouts(const std::vector<pd>& ps, int naxes, int count, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::vector<sc::runtime_layout> out;
  while (static_cast<int>(out.size()) < count) {
    sc::runtime_layout l;
    l.naxes = naxes;
    for (int a = 0; a < naxes; ++a) l[a] = ps[static_cast<std::size_t>(g() % ps.size())];
    if (sc::detail::same_op_partials(l)) out.push_back(l);
  }
  return out;
}

/// A random mesh shape of N axes: sizes 1, 2 (twice as likely) or 3, at most `max_ranks`
/// ranks, shuffled so that the size-1 axes (once the ranks are used up) can be any axes.
template <int N>
std::array<int, N> random_shape(std::uint64_t seed, int max_ranks) {
  static constexpr int sizes[] = {1, 2, 2, 3};
  std::mt19937_64 g(seed);
  std::array<int, N> shape{};
  int nranks = 1;
  for (auto& s : shape) {
    s = sizes[g() % 4];
    while (nranks * s > max_ranks) --s;
    nranks *= s;
  }
  std::shuffle(shape.begin(), shape.end(), g);
  return shape;
}

/// Random global extents: 0, 1, primes and small composites.
template <std::size_t R>
std::array<std::int64_t, R> random_extents(std::uint64_t seed) {
  static constexpr std::int64_t pool[] = {0, 1, 2, 3, 4, 5, 6, 7, 9, 11};
  std::mt19937_64 g(seed);
  std::array<std::int64_t, R> e{};
  for (auto& x : e) x = pool[g() % std::size(pool)];
  return e;
}

/// Small integers in [-3, 3] (testing::small_ints); every sum, product and comparison of
/// the tests is exact.
template <class T>
std::vector<T> ints(std::int64_t n, int salt) {
  return sc::testing::small_ints<T>(n, salt);
}
using sc::testing::ref_gemm;
/// Values in {-2, -1, 1, 2}: products of a few stay small and never collapse to 0.
template <class T>
std::vector<T> units(std::int64_t n, int salt) {
  std::vector<T> g(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const int k = static_cast<int>((i * 3 + salt) % 4);
    g[static_cast<std::size_t>(i)] = static_cast<T>(k == 0 ? -2 : k == 1 ? -1 : k == 2 ? 1 : 2);
  }
  return g;
}

template <std::size_t R>
std::int64_t volume(const std::array<std::int64_t, R>& e) {
  std::int64_t v = 1;
  for (auto x : e) v *= x;
  return v;
}

/// A dynamic-layout dtensor holding `g` under layout `l` whose partial terms differ from
/// rank to rank and from element to element (testing::spread_partial_terms) rather than
/// the "value on coordinate 0, identity elsewhere" that distribute makes, so an operator
/// that treated a term as the whole tensor, or moved a term on one rank, would fail.
template <class T, std::size_t R, class Mesh>
sc::dtensor<T, static_cast<int>(R), sc::dynamic_layout, Mesh> make_terms(const Mesh& m, const sc::runtime_layout& l, const std::vector<T>& g,
                                                                         const std::array<std::int64_t, R>& e) {
  auto x = sc::distribute(m, l, g, e);
  sc::testing::spread_partial_terms(x, g);
  return x;
}

/// Re-types a dynamic-layout dtensor as layout L (same storage).
template <class L, class T, int R, class Mesh>
sc::dtensor<T, R, L, Mesh> as_static(const sc::dtensor<T, R, sc::dynamic_layout, Mesh>& x) {
  SHARDCAST_EXPECTS(x.layout() == sc::runtime_layout(L::desc), "as_static: layout differs");
  return sc::dtensor<T, R, L, Mesh>(x.mesh(), x.global_extents(), x.owner(), x.data());
}

/// The local piece as a host vector.
template <class T, int R, class L, class Mesh>
std::vector<T> local_copy(const sc::dtensor<T, R, L, Mesh>& x) {
  // Sized first, then copied: the iterator-pair constructor trips GCC 12's
  // -Wfree-nonheap-object false positive at -O3 after inlining.
  std::vector<T> v(x.local_size());
  std::copy_n(x.data(), v.size(), v.data());
  return v;
}

/// "" when to_global(y) equals `ref` (within |tol| * max(1, |ref|) for floating types), else a description.
/// Collective over y's mesh.
template <class T, int R, class L, class Mesh, class U>
std::string compare_global(const sc::dtensor<T, R, L, Mesh>& y, const std::vector<U>& ref, double tol = 0) {
  const std::vector<T> got = sc::to_global(y);
  if (got.size() != ref.size())
    return "size " + std::to_string(got.size()) + " vs reference " + std::to_string(ref.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double a = static_cast<double>(got[i]), b = static_cast<double>(ref[i]);
    const bool ok = got[i] == static_cast<T>(ref[i]) || (std::isnan(b) && std::isnan(a)) ||
                    (tol > 0 && std::isfinite(b) && std::abs(a - b) <= tol * std::max(1.0, std::abs(b)));
    if (!ok) return "element " + std::to_string(i) + " is " + std::to_string(a) + ", reference " + std::to_string(b);
  }
  return "";
}

using failures = shardcast::testing::failures;

template <int N>
std::string shape_name(const std::array<int, N>& s) {
  std::string t;
  for (int a = 0; a < N; ++a) {
    if (a) t += "x";
    t += std::to_string(s[static_cast<std::size_t>(a)]);
  }
  return t;
}

/// "" when `call()` throws layout_error whose message names the illegal pair
/// "on mesh axis <bad_axis> A is <la[bad_axis]> and B is <lb[bad_axis]>", else what went wrong
/// (prefixed by `what`). For the binary operators' refusals on dynamic layouts.
template <class F>
std::string refused_naming_axis(F&& call, const std::string& what, int bad_axis, const sc::runtime_layout& la, const sc::runtime_layout& lb) {
  try {
    (void)call();
  } catch (const sc::layout_error& e) {
    const std::string msg = e.what();
    const std::string axis = "on mesh axis " + std::to_string(bad_axis) + " A is " + sc::to_string(la[bad_axis]) + " and B is " +
                             sc::to_string(lb[bad_axis]);
    return msg.find(axis) == std::string::npos ? what + "the message does not say \"" + axis + "\": " + msg : "";
  }
  return what + "an illegal pair did not throw";
}

// Single-rank references and layout predicates of the elementwise tests.

/// f applied to each element of a (the result's element type is what f returns).
template <class T, class F>
auto each(const std::vector<T>& a, F f) {
  std::vector<decltype(f(a[0]))> r(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) r[i] = f(a[i]);
  return r;
}
/// f(a[i], b[i]) converted to T.
template <class T, class F>
std::vector<T> each2(const std::vector<T>& a, const std::vector<T>& b, F f) {
  std::vector<T> r(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) r[i] = static_cast<T>(f(a[i], b[i]));
  return r;
}
/// a (row-major, rows of bias.size()) plus bias on every row.
template <class T>
std::vector<T> rows_plus(const std::vector<T>& a, const std::vector<T>& bias) {
  std::vector<T> r(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) r[i] = static_cast<T>(a[i] + bias[i % bias.size()]);
  return r;
}
struct max_fn {
  template <class T>
  T operator()(T a, T b) const { return a > b ? a : b; }
};
inline bool has_partial(const sc::runtime_layout& l) {
  for (int a = 0; a < l.naxes; ++a)
    if (l[a].is_partial()) return true;
  return false;
}
/// No partial axis other than partial<sum|avg> (the ones linear operators may combine).
inline bool only_additive_partials(const sc::runtime_layout& l) {
  for (int a = 0; a < l.naxes; ++a)
    if (l[a].is_partial() && l[a].op != sc::reduce_op::sum && l[a].op != sc::reduce_op::avg) return false;
  return true;
}

/// Some axis is partial<op>.
inline bool has_partial_op(const sc::runtime_layout& l, sc::reduce_op op) {
  for (int a = 0; a < l.naxes; ++a)
    if (l[a].is_partial() && l[a].op == op) return true;
  return false;
}
/// Partial axes with max or min only (the ones a nondecreasing map keeps).
inline bool only_max_min_partials(const sc::runtime_layout& l) {
  for (int a = 0; a < l.naxes; ++a)
    if (l[a].is_partial() && l[a].op != sc::reduce_op::max && l[a].op != sc::reduce_op::min) return false;
  return true;
}

/// What a functor is, as the tests' rule predicates read it: written down for each functor
/// by hand (the tests check the library's traits against these).
struct known {
  bool joint = false;                 // linear in (a, b) jointly
  bool lin[2] = {false, false};       // linear in argument i, the other fixed
  bool aff[2] = {false, false};       // affine in argument i
  bool inc[2] = {false, false};       // nondecreasing in argument i
  bool dec[2] = {false, false};       // nonincreasing in argument i
  bool wraps = false;                 // adds or subtracts: over integers, sums wrap around
};
inline constexpr known k_add{true, {false, false}, {true, true}, {true, true}, {false, false}, true};
inline constexpr known k_sub{true, {false, false}, {true, true}, {true, false}, {false, true}, true};
inline constexpr known k_mul{false, {true, true}, {true, true}, {false, false}};
inline constexpr known k_div_float{false, {true, false}, {true, false}, {false, false}};
inline constexpr known k_none{};

/// The rule's view of a functor whose properties the test writes down by hand, over
/// integer operands when `integers` (and not the identity).
constexpr sc::detail::functor_props props(const known& k, bool integers = false) {
  sc::detail::functor_props p;
  p.truncating_mean_in[0] = p.truncating_mean_in[1] = integers;
  p.wrapping_in[0] = p.wrapping_in[1] = integers && k.wraps;
  p.linear = k.joint;
  for (int i = 0; i < 2; ++i) {
    p.linear_in[i] = k.lin[i];
    p.affine_in[i] = k.aff[i];
    p.nondecreasing_in[i] = k.inc[i];
    p.nonincreasing_in[i] = k.dec[i];
  }
  return p;
}

/// Is zip(a, b, f) legal, and with which output layout? Written from the rule in
/// docs/02_operators.md, not from the library's code: per mesh axis, equal placements (two
/// partials only partial<sum|avg> with f jointly linear), or one partial and the other
/// replicate with f linear (sum), affine (avg) or nondecreasing (max, min) in the partial
/// operand, the output taking the partial (nonincreasing in it: max and min swap); and the
/// output holds one partial op. On `integers` no partial<avg> operand is legal (its
/// truncated mean commutes with nothing but the identity), and no partial<max|min> operand
/// of an addition or subtraction (integer sums wrap around, and a term may be the op's
/// identity, lowest() or max()).
constexpr bool zip_legal(const sc::runtime_layout& a, const sc::runtime_layout& b, const known& f, sc::runtime_layout* out = nullptr,
                         bool integers = false) {
  sc::runtime_layout y;
  y.naxes = a.naxes;
  int op = -1;
  for (int i = 0; i < a.naxes; ++i) {
    const pd pa = a[i], pb = b[i];
    pd py = pa;
    const auto avg_of = [](const pd& p) { return p.kind == sc::placement_kind::partial && p.op == sc::reduce_op::avg; };
    if (integers && (avg_of(pa) || avg_of(pb))) return false;
    if (pa == pb) {
      if (pa.kind == sc::placement_kind::partial && !(f.joint && (pa.op == sc::reduce_op::sum || pa.op == sc::reduce_op::avg))) return false;
    } else {
      int k = -1;
      if (pa.kind == sc::placement_kind::partial && pb.kind == sc::placement_kind::replicate) k = 0;
      if (pa.kind == sc::placement_kind::replicate && pb.kind == sc::placement_kind::partial) k = 1;
      if (k < 0) return false;
      py = k == 0 ? pa : pb;
      const bool max_min = py.op == sc::reduce_op::max || py.op == sc::reduce_op::min;
      const bool fits = py.op == sc::reduce_op::sum   ? f.lin[k]
                        : py.op == sc::reduce_op::avg ? f.aff[k]
                        : max_min                      ? f.inc[k] || f.dec[k]
                                                       : false;
      if (!fits) return false;
      if (integers && max_min && f.wraps) return false;
      if (max_min && !f.inc[k]) py = pd::make_partial(py.op == sc::reduce_op::max ? sc::reduce_op::min : sc::reduce_op::max);
    }
    if (py.kind == sc::placement_kind::partial) {
      if (op >= 0 && op != static_cast<int>(py.op)) return false;
      op = static_cast<int>(py.op);
    }
    y[i] = py;
  }
  if (out) *out = y;
  return true;
}

}  // namespace optest
