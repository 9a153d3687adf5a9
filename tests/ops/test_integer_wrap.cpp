// Signed integer sums and products wrap modulo 2^bits, as the documentation says (integer
// partial sums are taken in the element type as NCCL's are; elementwise integer arithmetic
// wraps as torch's does), without signed overflow: the host backend's reductions (two
// ranks and more than two), to_global of a partial sum, add / sub / mul / scale / zip and
// reduce over a dim. The reference is the same arithmetic done by the test in the unsigned
// type of the same width. Built with -fsanitize=undefined (the sanitize stage), a signed
// overflow anywhere on these paths is a test failure even where the values come out right.
#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <limits>
#include <mutex>
#include <shardcast/comm/host.hpp>
#include <shardcast/shardcast.hpp>
#include <string>
#include <type_traits>
#include <vector>

#include "op_testing.hpp"

namespace sc = shardcast;

namespace {
template <class T>
using U = std::make_unsigned_t<T>;
template <class T>
T wrap_add(T a, T b) {
  return static_cast<T>(static_cast<U<T>>(static_cast<U<T>>(a) + static_cast<U<T>>(b)));
}
template <class T>
T wrap_sub(T a, T b) {
  return static_cast<T>(static_cast<U<T>>(static_cast<U<T>>(a) - static_cast<U<T>>(b)));
}
template <class T>
T wrap_mul(T a, T b) {
  return static_cast<T>(static_cast<U<T>>(static_cast<U<T>>(a) * static_cast<U<T>>(b)));
}

/// Values near the ends of T's range, so that any sum or product of two overflows.
template <class T>
std::vector<T> edge_values(int n, int salt) {
  std::vector<T> v(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    const T hi = static_cast<T>(std::numeric_limits<T>::max() - static_cast<T>((i * 7 + salt) % 5));
    const T lo = static_cast<T>(std::numeric_limits<T>::lowest() + static_cast<T>((i * 3 + salt) % 4));
    v[static_cast<std::size_t>(i)] = (i + salt) % 2 == 0 ? hi : lo;
  }
  return v;
}

/// Runs f on `n` host ranks and collects every rank's error messages.
template <class F>
void on_ranks(int n, F f) {
  std::mutex mu;
  std::vector<std::string> errors;
  sc::host::run(n, [&](sc::host::communicator& c) {
    std::vector<std::string> mine;
    f(c, mine);
    std::lock_guard lk(mu);
    for (auto& e : mine) errors.push_back("rank " + std::to_string(c.rank()) + ": " + e);
  });
  for (const auto& e : errors) CHECK_MESSAGE(false, e);
}
}  // namespace

TEST_CASE_TEMPLATE("host collectives: integer sums and products wrap", T, std::int32_t, std::int64_t) {
  constexpr int count = 9;  // at least one element per rank in reduce_scatter, and some left over
  for (const int nranks : {2, 3, 4}) {
    CAPTURE(nranks);
    on_ranks(nranks, [&](sc::host::communicator& c, std::vector<std::string>& err) {
      for (const auto op : {sc::reduce_op::sum, sc::reduce_op::prod}) {
        // The reference: every rank's contribution combined in the unsigned type.
        std::vector<T> want = edge_values<T>(count * nranks, 0);
        for (int q = 1; q < nranks; ++q) {
          const auto v = edge_values<T>(count * nranks, q);
          for (std::size_t i = 0; i < want.size(); ++i) want[i] = op == sc::reduce_op::sum ? wrap_add(want[i], v[i]) : wrap_mul(want[i], v[i]);
        }
        const auto mine = edge_values<T>(count * nranks, c.rank());
        std::vector<T> all(mine.size());
        c.all_reduce(mine.data(), all.data(), all.size(), op);
        if (all != want) err.push_back(std::string("all_reduce ") + (op == sc::reduce_op::sum ? "sum" : "prod") + " differs from the wrapped reference");
        std::vector<T> part(count);
        c.reduce_scatter(mine.data(), part.data(), part.size(), op);
        for (int i = 0; i < count; ++i)
          if (part[static_cast<std::size_t>(i)] != want[static_cast<std::size_t>(c.rank() * count + i)]) {
            err.push_back("reduce_scatter differs from the wrapped reference at " + std::to_string(i));
            break;
          }
      }
    });
  }
}

TEST_CASE_TEMPLATE("to_global of an integer partial sum wraps", T, std::int32_t, std::int64_t) {
  constexpr std::int64_t n = 6;
  on_ranks(3, [&](sc::host::communicator& c, std::vector<std::string>& err) {
    auto m = sc::make_mesh(c, std::array<int, 1>{3});
    auto terms = edge_values<T>(static_cast<int>(n), c.rank());  // each rank's term of the whole tensor
    const auto x = sc::make_view<sc::layout<sc::partial<sc::sum>>>(m, terms.data(), {n});
    std::vector<T> want = edge_values<T>(static_cast<int>(n), 0);
    for (int q = 1; q < 3; ++q) {
      const auto v = edge_values<T>(static_cast<int>(n), q);
      for (std::size_t i = 0; i < want.size(); ++i) want[i] = wrap_add(want[i], v[i]);
    }
    if (sc::to_global(x) != want) err.push_back("to_global differs from the wrapped sum of the terms");
    if (terms != edge_values<T>(static_cast<int>(n), c.rank())) err.push_back("to_global modified its input");
  });
}

TEST_CASE_TEMPLATE("elementwise integer arithmetic and reduce wrap", T, std::int32_t, std::int64_t) {
  constexpr std::int64_t rows = 5, cols = 4;
  on_ranks(2, [&](sc::host::communicator& c, std::vector<std::string>& err) {
    auto m = sc::make_mesh(c, std::array<int, 1>{2});
    const auto ga = edge_values<T>(static_cast<int>(rows * cols), 0), gb = edge_values<T>(static_cast<int>(rows * cols), 1);
    using L = sc::layout<sc::shard<0>>;
    const auto a = sc::distribute<L>(m, ga, {rows, cols}), b = sc::distribute<L>(m, gb, {rows, cols});
    const auto check = [&](const char* what, const std::vector<T>& got, auto&& ref) {
      for (std::size_t i = 0; i < got.size(); ++i)
        if (got[i] != ref(i)) {
          err.push_back(std::string(what) + " differs from the wrapped reference at " + std::to_string(i));
          return;
        }
    };
    check("add(a, b)", sc::to_global(sc::add(a, b)), [&](std::size_t i) { return wrap_add(ga[i], gb[i]); });
    check("sub(a, b)", sc::to_global(sc::sub(a, b)), [&](std::size_t i) { return wrap_sub(ga[i], gb[i]); });
    check("mul(a, b)", sc::to_global(sc::mul(a, b)), [&](std::size_t i) { return wrap_mul(ga[i], gb[i]); });
    check("zip(a, b, fn::add)", sc::to_global(sc::zip(a, b, sc::fn::add)), [&](std::size_t i) { return wrap_add(ga[i], gb[i]); });
    check("zip(a, b, fn::mul)", sc::to_global(sc::zip(a, b, sc::fn::mul)), [&](std::size_t i) { return wrap_mul(ga[i], gb[i]); });
    check("scale(a, 3)", sc::to_global(sc::scale(a, 3)), [&](std::size_t i) { return wrap_mul(ga[i], T{3}); });
    check("add(a, c)", sc::to_global(sc::add(a, std::numeric_limits<T>::max())),
          [&](std::size_t i) { return wrap_add(ga[i], std::numeric_limits<T>::max()); });
    check("sub(a, c)", sc::to_global(sc::sub(a, std::numeric_limits<T>::max())),
          [&](std::size_t i) { return wrap_sub(ga[i], std::numeric_limits<T>::max()); });
    // reduce over dim 0 (sharded: local sums, then a partial sum) and over dim 1 (local).
    check("reduce<0, sum>", sc::to_global(sc::reduce<0, sc::sum>(a)), [&](std::size_t j) {
      T s{};
      for (std::int64_t i = 0; i < rows; ++i) s = wrap_add(s, ga[static_cast<std::size_t>(i * cols) + j]);
      return s;
    });
    check("reduce<1, prod>", sc::to_global(sc::reduce<1, sc::prod>(a)), [&](std::size_t i) {
      T p{1};
      for (std::int64_t j = 0; j < cols; ++j) p = wrap_mul(p, ga[i * static_cast<std::size_t>(cols) + static_cast<std::size_t>(j)]);
      return p;
    });
  });
}

TEST_CASE_TEMPLATE("a shard made partial<avg> over integers: each term n * x wraps", T, std::int32_t, std::int64_t) {
  // shard -> partial<avg> pads locally: a rank's term holds its piece times n (the others
  // hold 0 there), so that the mean is the value. n * x is taken modulo 2^bits (a mean of
  // such terms is exact only where n * x fits, as documented); here the test checks that
  // the terms add up to the wrapped n * x at every index, with no signed overflow.
  constexpr std::int64_t len = 7;
  for (const int nranks : {2, 3}) {
    CAPTURE(nranks);
    const auto g = edge_values<T>(static_cast<int>(len), 0);
    std::vector<std::vector<T>> terms(static_cast<std::size_t>(nranks));
    std::mutex mu;
    sc::host::run(nranks, [&](sc::host::communicator& c) {
      auto m = sc::make_mesh(c, std::array<int, 1>{nranks});
      const auto x = sc::distribute<sc::layout<sc::shard<0>>>(m, g, {len});
      const auto y = sc::redistribute<sc::layout<sc::partial<sc::avg>>>(x);
      std::lock_guard lk(mu);
      terms[static_cast<std::size_t>(c.rank())] = optest::local_copy(y);
    });
    for (std::size_t i = 0; i < static_cast<std::size_t>(len); ++i) {
      T sum{};
      for (const auto& t : terms) sum = wrap_add(sum, t[i]);
      CAPTURE(i);
      CHECK(sum == wrap_mul(g[i], static_cast<T>(nranks)));
    }
  }
}

TEST_CASE_TEMPLATE("integer matmul with the host GEMM wraps", T, std::int32_t, std::int64_t) {
  constexpr std::int64_t m = 3, k = 4, n = 5;
  const auto ga = edge_values<T>(static_cast<int>(m * k), 0), gb = edge_values<T>(static_cast<int>(k * n), 1);
  std::vector<T> want(static_cast<std::size_t>(m * n));
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      T s{};
      for (std::int64_t p = 0; p < k; ++p)
        s = wrap_add(s, wrap_mul(ga[static_cast<std::size_t>(i * k + p)], gb[static_cast<std::size_t>(p * n + j)]));
      want[static_cast<std::size_t>(i * n + j)] = s;
    }
  on_ranks(2, [&](sc::host::communicator& c, std::vector<std::string>& err) {
    auto mesh = sc::make_mesh(c, std::array<int, 1>{2});
    // Rows of A sharded, B replicated: each rank multiplies its rows with the host GEMM.
    const auto a = sc::distribute<sc::layout<sc::shard<0>>>(mesh, ga, {m, k});
    const auto b = sc::distribute<sc::layout<sc::replicate>>(mesh, gb, {k, n});
    if (sc::to_global(sc::matmul(a, b)) != want) err.push_back("matmul differs from the wrapped reference");
  });
}
