// Collective matmul (ops/overlap.hpp) on the host backend: every chunk count gives exactly
// the result of the unsplit version (redistribute + matmul, and chunks = 1) and of a
// single-rank global GEMM, on 1-, 2- and 3-axis meshes of 1 to 8 ranks with uneven and
// empty pieces; a rank failing mid-pipeline releases its peers with comm_error.
// Values are small integers, so every product and sum is exact in int64 and double.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <shardcast/comm/host.hpp>
#include <shardcast/ops/matmul.hpp>
#include <shardcast/ops/overlap.hpp>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/failures.hpp"
#include "common/reference.hpp"

namespace sc = shardcast;

namespace {
using R = sc::replicate;
using S0 = sc::shard<0>;
using S1 = sc::shard<1>;
using P = sc::partial<sc::sum>;

// The output layouts the operators promise (checked here at compile time).
static_assert(std::is_same_v<sc::all_gather_matmul_layout_t<0, sc::layout<S0>, sc::layout<S1>>, sc::layout<S1>>);
static_assert(std::is_same_v<sc::all_gather_matmul_layout_t<1, sc::layout<S0, S0>, sc::layout<R, S1>>, sc::layout<S0, S1>>);
static_assert(std::is_same_v<sc::all_gather_matmul_layout_t<0, sc::layout<S0, S1>, sc::layout<S1, S0>>, sc::layout<S1, P>>);
static_assert(std::is_same_v<sc::matmul_reduce_scatter_layout_t<0, sc::layout<S1>, sc::layout<S0>>, sc::layout<S0>>);
static_assert(std::is_same_v<sc::matmul_reduce_scatter_layout_t<1, sc::layout<S0, S1>, sc::layout<R, S0>>, sc::layout<S0, S0>>);
static_assert(std::is_same_v<sc::matmul_reduce_scatter_layout_t<0, sc::layout<S1, P>, sc::layout<S0, R>>, sc::layout<S0, P>>);


using failures = shardcast::testing::failures;
using shardcast::testing::ref_gemm;
template <class T>
std::vector<T> ints(std::int64_t n, int salt) {
  return shardcast::testing::small_ints<T>(n, salt);
}

// A partial layout has many local decompositions of one tensor (the planner may reduce a
// partial axis early when that sends less), so against redistribute + matmul the reduced
// tensors are compared when the result has a partial axis, the local pieces otherwise.
template <class A, class B>
bool same_as_base(const A& y, const B& base) {
  using L = typename A::layout_type;
  bool partial = false;
  for (int a = 0; a < L::naxes; ++a) partial = partial || L::desc[a].is_partial();
  if (partial) return sc::to_global(y) == sc::to_global(base);
  if (!(y.local_box() == base.local_box())) return false;
  for (std::size_t i = 0; i < y.local_size(); ++i)
    if (y.data()[i] != base.data()[i]) return false;
  return true;
}

template <class A, class B>
bool same_local(const A& a, const B& b) {
  if (!(a.local_box() == b.local_box())) return false;
  for (std::size_t i = 0; i < a.local_size(); ++i)
    if (a.data()[i] != b.data()[i]) return false;
  return true;
}
template <class X>
std::vector<typename X::value_type> local_copy(const X& x) {
  return std::vector<typename X::value_type>(x.data(), x.data() + x.local_size());
}

int count(const auto& shape) {
  int n = 1;
  for (int s : shape) n *= s;
  return n;
}

const std::vector<int> chunk_counts{1, 2, 3, 8};

// Y = all_gather_matmul<Axis>(X, W) against redistribute + matmul, chunks = 1 and the global GEMM.
template <int Axis, class LX, class LW, class T, std::size_t N>
void check_ag(std::array<int, N> shape, std::int64_t t, std::int64_t h, std::int64_t o) {
  using LY = sc::all_gather_matmul_layout_t<Axis, LX, LW>;
  INFO("all_gather_matmul<" << Axis << "> X " << sc::to_string(LX::desc) << " W " << sc::to_string(LW::desc) << " on " << count(shape)
                            << " ranks, " << t << "x" << h << "x" << o);
  const auto xg = ints<T>(t * h, 1), wg = ints<T>(h * o, 4);
  const auto ref = ref_gemm(xg, wg, t, h, o);
  failures f;
  sc::host::run(count(shape), [&](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, shape);
    sc::overlap_context ctx(mesh);
    auto x = sc::distribute<LX>(mesh, xg, std::array<std::int64_t, 2>{t, h});
    auto w = sc::distribute<LW>(mesh, wg, std::array<std::int64_t, 2>{h, o});
    const auto x0 = local_copy(x), w0 = local_copy(w);
    auto base = sc::matmul(sc::redistribute<sc::detail::layout_with_t<LX, Axis, R>>(x), w);
    static_assert(std::is_same_v<typename decltype(base)::layout_type, LY>);
    auto unsplit = sc::all_gather_matmul<Axis>(ctx, x, w, 1);
    const std::string who = "rank " + std::to_string(comm.rank());
    for (int c : chunk_counts) {
      auto y = sc::all_gather_matmul<Axis>(ctx, x, w, c);
      static_assert(std::is_same_v<typename decltype(y)::layout_type, LY>);
      if (!same_as_base(y, base)) f.add(who + ", chunks " + std::to_string(c) + ": differs from redistribute + matmul");
      if (!same_local(y, unsplit)) f.add(who + ", chunks " + std::to_string(c) + ": differs from chunks = 1");
      if (sc::to_global(y) != ref) f.add(who + ", chunks " + std::to_string(c) + ": differs from the global GEMM");
    }
    if (local_copy(x) != x0 || local_copy(w) != w0) f.add(who + ": an input was modified");
  });
  f.report();
}

// Z = matmul_reduce_scatter<Axis>(X, W) against matmul + redistribute, chunks = 1 and the global GEMM.
template <int Axis, class LX, class LW, class T, std::size_t N>
void check_rs(std::array<int, N> shape, std::int64_t t, std::int64_t f_, std::int64_t o) {
  using LZ = sc::matmul_reduce_scatter_layout_t<Axis, LX, LW>;
  INFO("matmul_reduce_scatter<" << Axis << "> X " << sc::to_string(LX::desc) << " W " << sc::to_string(LW::desc) << " on "
                                << count(shape) << " ranks, " << t << "x" << f_ << "x" << o);
  const auto xg = ints<T>(t * f_, 2), wg = ints<T>(f_ * o, 3);
  const auto ref = ref_gemm(xg, wg, t, f_, o);
  failures f;
  sc::host::run(count(shape), [&](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, shape);
    sc::overlap_context ctx(mesh);
    auto x = sc::distribute<LX>(mesh, xg, std::array<std::int64_t, 2>{t, f_});
    auto w = sc::distribute<LW>(mesh, wg, std::array<std::int64_t, 2>{f_, o});
    const auto x0 = local_copy(x), w0 = local_copy(w);
    auto base = sc::redistribute<LZ>(sc::matmul(x, w));
    auto unsplit = sc::matmul_reduce_scatter<Axis>(ctx, x, w, 1);
    const std::string who = "rank " + std::to_string(comm.rank());
    for (int c : chunk_counts) {
      auto z = sc::matmul_reduce_scatter<Axis>(ctx, x, w, c);
      static_assert(std::is_same_v<typename decltype(z)::layout_type, LZ>);
      if (!same_as_base(z, base)) f.add(who + ", chunks " + std::to_string(c) + ": differs from matmul + redistribute");
      if (!same_local(z, unsplit)) f.add(who + ", chunks " + std::to_string(c) + ": differs from chunks = 1");
      if (sc::to_global(z) != ref) f.add(who + ", chunks " + std::to_string(c) + ": differs from the global GEMM");
    }
    if (local_copy(x) != x0 || local_copy(w) != w0) f.add(who + ": an input was modified");
  });
  f.report();
}

// A two-axis layout with `PA` on mesh axis `Axis` and `PO` on the other axis.
template <int Axis, class PA, class PO>
using lay2 = std::conditional_t<Axis == 0, sc::layout<PA, PO>, sc::layout<PO, PA>>;

// Both operators with (PX, PW) on the other axis of a 2-axis mesh.
template <int Axis, class PX, class PW>
void check_2axis() {
  for (auto shape : {std::array<int, 2>{2, 2}, std::array<int, 2>{2, 3}, std::array<int, 2>{3, 1}, std::array<int, 2>{1, 3}}) {
    check_ag<Axis, lay2<Axis, S0, PX>, lay2<Axis, S1, PW>, std::int64_t>(shape, 7, 5, 6);
    check_ag<Axis, lay2<Axis, S0, PX>, lay2<Axis, S1, PW>, std::int64_t>(shape, 2, 3, 2);  // empty pieces
    check_rs<Axis, lay2<Axis, S1, PX>, lay2<Axis, S0, PW>, std::int64_t>(shape, 7, 5, 6);
    check_rs<Axis, lay2<Axis, S1, PX>, lay2<Axis, S0, PW>, std::int64_t>(shape, 2, 3, 2);
  }
}

struct injected : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// host_gemm that throws on rank `bad` at its `at`-th call, and records where it ran.
struct faulty_gemm {
  int rank, bad, at;
  int* calls;
  template <class T>
  void operator()(std::int64_t m, std::int64_t n, std::int64_t k, const T* a, std::int64_t lda, const T* b, std::int64_t ldb, T* c,
                  std::int64_t ldc) const {
    if (rank == bad && ++*calls == at) throw injected("gemm failed on purpose");
    sc::host_gemm{}(m, n, k, a, lda, b, ldb, c, ldc);
  }
};

const sc::host::options generous{std::chrono::milliseconds(30000)};

// Runs `body` on 4 ranks where rank 1 fails; checks that the 3 others got comm_error from
// the abort (not the timeout), that run() rethrew rank 1's error, and that it was quick.
template <class Body>
void expect_peers_released(Body body) {
  std::atomic<int> comm_errors{0};
  failures f;
  const auto t0 = std::chrono::steady_clock::now();
  std::string what;
  try {
    sc::host::run(
        4,
        [&](sc::host::communicator& comm) {
          try {
            body(comm);
          } catch (const sc::comm_error& e) {
            ++comm_errors;
            const std::string msg = e.what();
            if (msg.find("rank 1 failed") == std::string::npos)
              f.add("rank " + std::to_string(comm.rank()) + " got an unrelated comm_error: " + msg);
            throw;
          }
        },
        generous);
  } catch (const std::exception& e) {
    what = e.what();
  }
  const auto dt = std::chrono::steady_clock::now() - t0;
  CHECK(dt < std::chrono::seconds(15));  // far below the 30 s timeout: released by the abort
  CHECK(what.find("on purpose") != std::string::npos);
  CHECK(comm_errors.load() == 3);
  f.report();
}
}  // namespace

TEST_CASE_TEMPLATE("overlap on 1-axis meshes of 1 to 8 ranks, uneven and empty pieces", T, std::int64_t, double) {
  for (int p = 1; p <= 8; ++p) {
    const std::array<int, 1> shape{p};
    check_ag<0, sc::layout<S0>, sc::layout<S1>, T>(shape, 7, 5, 6);
    check_ag<0, sc::layout<S0>, sc::layout<S1>, T>(shape, 3, 4, 5);  // t < p: empty row pieces
    check_ag<0, sc::layout<S0>, sc::layout<S1>, T>(shape, 16, 8, 3);  // o < p: empty column pieces
    check_rs<0, sc::layout<S1>, sc::layout<S0>, T>(shape, 7, 5, 6);
    check_rs<0, sc::layout<S1>, sc::layout<S0>, T>(shape, 3, 4, 5);  // t < p: empty output pieces
    check_rs<0, sc::layout<S1>, sc::layout<S0>, T>(shape, 16, 3, 8);  // f < p: ranks with no inner extent
  }
}

TEST_CASE("overlap on 2-axis meshes: overlap axis 1, every legal pair on axis 0 (data parallel included)") {
  check_2axis<1, S0, R>();  // data parallel: X's rows split on axis 0 first
  check_2axis<1, R, S1>();
  check_2axis<1, S1, S0>();
  check_2axis<1, R, R>();
  check_2axis<1, P, R>();
  check_2axis<1, R, P>();
}

TEST_CASE("overlap on 2-axis meshes: overlap axis 0, every legal pair on axis 1 that keeps rows nested") {
  check_2axis<0, R, S1>();
  check_2axis<0, S1, S0>();
  check_2axis<0, R, R>();
  check_2axis<0, P, R>();
  check_2axis<0, R, P>();
}

TEST_CASE("overlap on a 3-axis mesh, data parallel on axis 0, overlap on axis 2") {
  check_ag<2, sc::layout<S0, R, S0>, sc::layout<R, S1, S1>, std::int64_t>(std::array<int, 3>{2, 2, 2}, 11, 5, 9);
  check_rs<2, sc::layout<S0, R, S1>, sc::layout<R, S1, S0>, std::int64_t>(std::array<int, 3>{2, 1, 3}, 11, 7, 5);
}

TEST_CASE("sequence-parallel block: all_gather_matmul then matmul_reduce_scatter, one context reused") {
  // X [t,h] layout<S0,S0> (data axis 0, tensor axis 1) -> Y = X W1 [t,f] layout<S0,S1>
  // -> Z = Y W2 [t,h] layout<S0,S0>, X's layout again.
  for (auto shape : {std::array<int, 2>{2, 2}, std::array<int, 2>{1, 4}, std::array<int, 2>{2, 3}}) {
    const std::int64_t t = 13, h = 6, f_ = 10;
    const auto xg = ints<std::int64_t>(t * h, 1), w1 = ints<std::int64_t>(h * f_, 2), w2 = ints<std::int64_t>(f_ * h, 5);
    const auto ref = ref_gemm(ref_gemm(xg, w1, t, h, f_), w2, t, f_, h);
    failures f;
    sc::host::run(count(shape), [&](sc::host::communicator& comm) {
      auto mesh = sc::make_mesh(comm, shape);
      sc::overlap_context ctx(mesh);
      auto x = sc::distribute<sc::layout<S0, S0>>(mesh, xg, std::array<std::int64_t, 2>{t, h});
      auto a = sc::distribute<sc::layout<R, S1>>(mesh, w1, std::array<std::int64_t, 2>{h, f_});
      auto b = sc::distribute<sc::layout<R, S0>>(mesh, w2, std::array<std::int64_t, 2>{f_, h});
      for (int c : {1, 2, 4}) {
        auto y = sc::all_gather_matmul<1>(ctx, x, a, c);
        auto z = sc::matmul_reduce_scatter<1>(ctx, y, b, c);
        static_assert(std::is_same_v<typename decltype(z)::layout_type, sc::layout<S0, S0>>);
        if (sc::to_global(z) != ref) f.add("rank " + std::to_string(comm.rank()) + ", chunks " + std::to_string(c) + ": wrong block output");
      }
    });
    f.report();
  }
}

TEST_CASE("const elements: X and W viewed read-only give the global GEMM, mixed with mutable operands, and stay unchanged") {
  const std::int64_t t = 7, h = 6, f_ = 5;
  const auto xg = ints<double>(t * h, 1), w1 = ints<double>(h * f_, 2), w2 = ints<double>(f_ * h, 5);
  const auto ref_y = ref_gemm(xg, w1, t, h, f_), ref_z = ref_gemm(ref_y, w2, t, f_, h);
  failures f;
  sc::host::run(4, [&](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, std::array<int, 2>{2, 2});
    sc::overlap_context ctx(mesh);
    using M = decltype(mesh);
    auto x = sc::distribute<sc::layout<S0, S0>>(mesh, xg, std::array<std::int64_t, 2>{t, h});
    auto a = sc::distribute<sc::layout<R, S1>>(mesh, w1, std::array<std::int64_t, 2>{h, f_});
    auto b = sc::distribute<sc::layout<R, S0>>(mesh, w2, std::array<std::int64_t, 2>{f_, h});
    const auto x0 = local_copy(x), a0 = local_copy(a), b0 = local_copy(b);
    const auto cx = sc::make_view<sc::layout<S0, S0>>(mesh, static_cast<const double*>(x.data()), std::array<std::int64_t, 2>{t, h});
    const sc::dtensor<const double, 2, sc::layout<R, S1>, M> ca = a;
    const sc::dtensor<const double, 2, sc::layout<R, S0>, M> cb = b;
    const std::string who = "rank " + std::to_string(comm.rank());
    for (int c : {1, 3}) {
      auto y = sc::all_gather_matmul<1>(ctx, cx, ca, c);
      static_assert(std::is_same_v<typename decltype(y)::value_type, double>);
      if (sc::to_global(y) != ref_y) f.add(who + ", chunks " + std::to_string(c) + ": const X, const W differ from the global GEMM");
      if (sc::to_global(sc::all_gather_matmul<1>(ctx, x, ca, c)) != ref_y) f.add(who + ": X, const W differ from the global GEMM");
      const sc::dtensor<const double, 2, sc::layout<S0, S1>, M> cy = y;
      auto z = sc::matmul_reduce_scatter<1>(ctx, cy, cb, c);
      static_assert(std::is_same_v<typename decltype(z)::value_type, double>);
      if (sc::to_global(z) != ref_z) f.add(who + ", chunks " + std::to_string(c) + ": const Y, const W differ from the global GEMM");
      if (sc::to_global(sc::matmul_reduce_scatter<1>(ctx, y, cb, c)) != ref_z) f.add(who + ": Y, const W differ from the global GEMM");
    }
    if (local_copy(x) != x0 || local_copy(a) != a0 || local_copy(b) != b0) f.add(who + ": an input was modified");
  });
  f.report();
}

TEST_CASE("the GEMM runs on the calling thread, once per non-empty member piece") {
  const std::int64_t t = 10, h = 3, o = 4;
  const int p = 3;
  for (int chunks : {1, 2, 4}) {
    // Independent count: member q holds split_size(t, p, q) rows, cut into `chunks` pieces.
    int expected = 0;
    for (int q = 0; q < p; ++q)
      for (int c = 0; c < chunks; ++c) expected += sc::split_size(sc::split_size(t, p, q), chunks, c) > 0;
    failures f;
    sc::host::run(p, [&](sc::host::communicator& comm) {
      auto mesh = sc::make_mesh(comm, std::array<int, 1>{p});
      sc::overlap_context ctx(mesh);
      auto x = sc::distribute<sc::layout<S0>>(mesh, ints<float>(t * h, 0), std::array<std::int64_t, 2>{t, h});
      auto w = sc::distribute<sc::layout<S1>>(mesh, ints<float>(h * o, 1), std::array<std::int64_t, 2>{h, o});
      int calls = 0;
      bool elsewhere = false;
      const auto self = std::this_thread::get_id();
      auto counting = [&](std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                          float* c, std::int64_t ldc) {
        ++calls;
        elsewhere = elsewhere || std::this_thread::get_id() != self;
        sc::host_gemm{}(m, n, k, a, lda, b, ldb, c, ldc);
      };
      (void)sc::all_gather_matmul<0>(ctx, x, w, chunks, counting);
      if (calls != expected) f.add("rank " + std::to_string(comm.rank()) + ": " + std::to_string(calls) + " GEMM calls, expected " + std::to_string(expected));
      if (elsewhere) f.add("rank " + std::to_string(comm.rank()) + ": a GEMM ran off the calling thread");
    });
    f.report();
  }
}

TEST_CASE("the overlapped matmuls take their GEMM functor by reference: a move-only, stateful one is called, not copied") {
  struct counting {
    int calls = 0;
    counting() = default;
    counting(counting&&) = default;
    counting(const counting&) = delete;
    void operator()(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                    float* c, std::int64_t ldc) {
      ++calls;
      sc::host_gemm{}(m, n, k, a, lda, b, ldb, c, ldc);
    }
  };
  failures f;
  sc::host::run(2, [&](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, {2});
    sc::overlap_context ctx(mesh);
    const auto gx = ints<float>(8 * 3, 0), gw = ints<float>(3 * 4, 1);
    auto x = sc::distribute<sc::layout<S0>>(mesh, gx, {8, 3});
    auto w = sc::distribute<sc::layout<S1>>(mesh, gw, {3, 4});
    counting g;
    auto y = sc::all_gather_matmul<0>(ctx, x, w, 2, g);  // 2 members x 2 pieces
    const int after_gather = g.calls;
    auto x1 = sc::distribute<sc::layout<S1>>(mesh, ints<float>(8 * 4, 2), {8, 4});
    auto w0 = sc::distribute<sc::layout<S0>>(mesh, ints<float>(4 * 3, 3), {4, 3});
    (void)sc::matmul_reduce_scatter<0>(ctx, x1, w0, 2, g);
    if (after_gather != 4 || g.calls <= after_gather)
      f.add("rank " + std::to_string(comm.rank()) + ": " + std::to_string(after_gather) + " then " + std::to_string(g.calls) + " calls");
    if (sc::to_global(y) != sc::testing::ref_gemm(gx, gw, 8, 3, 4)) f.add("rank " + std::to_string(comm.rank()) + ": wrong product");
  });
  f.report();
}

namespace {
// A host communicator that records which thread calls all_gather and reduce_scatter
// (copies and splits share one log per rank).
struct recording_comm {
  using memory_space = sc::host_memory;
  using stream_type = sc::host_stream;
  struct log_t {
    std::mutex m;
    std::vector<std::thread::id> ids;
  };
  sc::host::communicator c;
  std::shared_ptr<log_t> log = std::make_shared<log_t>();

  void record() {
    std::lock_guard lk(log->m);
    log->ids.push_back(std::this_thread::get_id());
  }
  std::vector<std::thread::id> take() {
    std::lock_guard lk(log->m);
    return std::exchange(log->ids, {});
  }
  int rank() const { return c.rank(); }
  int size() const { return c.size(); }
  template <class T>
  void all_reduce(const T* s, T* r, std::size_t n, sc::reduce_op op, stream_type = {}) { c.all_reduce(s, r, n, op); }
  template <class T>
  void all_gather(const T* s, T* r, std::size_t n, stream_type = {}) {
    record();
    c.all_gather(s, r, n);
  }
  template <class T>
  void reduce_scatter(const T* s, T* r, std::size_t n, sc::reduce_op op, stream_type = {}) {
    record();
    c.reduce_scatter(s, r, n, op);
  }
  template <class T>
  void all_to_all(const T* s, T* r, std::size_t n, stream_type = {}) { c.all_to_all(s, r, n); }
  template <class T>
  void all_to_allv(const T* s, const std::size_t* sc_, const std::size_t* sd, T* r, const std::size_t* rc, const std::size_t* rd,
                   stream_type = {}) {
    c.all_to_allv(s, sc_, sd, r, rc, rd);
  }
  template <class T>
  void broadcast(T* b, std::size_t n, int root, stream_type = {}) { c.broadcast(b, n, root); }
  template <class T>
  void send(const T* b, std::size_t n, int peer, stream_type = {}) { c.send(b, n, peer); }
  template <class T>
  void recv(T* b, std::size_t n, int peer, stream_type = {}) { c.recv(b, n, peer); }
  void barrier() { c.barrier(); }
  recording_comm split(int color, int key) const { return recording_comm{c.split(color, key), log}; }
};
static_assert(sc::communicator<recording_comm>);
}  // namespace

TEST_CASE("pipelined collectives run on one worker thread per context, reused across calls; chunks = 1 runs inline") {
  failures f;
  sc::host::run(3, [&](sc::host::communicator& hc) {
    recording_comm comm{hc};
    auto mesh = sc::make_mesh(comm, std::array<int, 1>{3});
    sc::overlap_context ctx(mesh);
    auto x = sc::distribute<sc::layout<S0>>(mesh, ints<int>(9 * 4, 0), std::array<std::int64_t, 2>{9, 4});
    auto w = sc::distribute<sc::layout<S1>>(mesh, ints<int>(4 * 6, 1), std::array<std::int64_t, 2>{4, 6});
    auto xr = sc::distribute<sc::layout<S1>>(mesh, ints<int>(9 * 6, 0), std::array<std::int64_t, 2>{9, 6});
    auto wr = sc::distribute<sc::layout<S0>>(mesh, ints<int>(6 * 4, 1), std::array<std::int64_t, 2>{6, 4});
    const auto self = std::this_thread::get_id();
    const std::string who = "rank " + std::to_string(hc.rank()) + ": ";
    (void)comm.take();
    (void)sc::all_gather_matmul<0>(ctx, x, w, 1);
    auto ids = comm.take();
    if (ids.size() != 1 || ids[0] != self) f.add(who + "chunks = 1 did not run one all_gather on the calling thread");
    std::thread::id worker{};
    for (int call = 0; call < 3; ++call) {
      if (call < 2) (void)sc::all_gather_matmul<0>(ctx, x, w, 3);  // 3 rows per rank: 3 non-empty pieces
      else (void)sc::matmul_reduce_scatter<0>(ctx, xr, wr, 3);
      ids = comm.take();
      if (ids.size() != 3) f.add(who + "expected 3 collectives, saw " + std::to_string(ids.size()));
      if (call == 0 && !ids.empty()) worker = ids[0];
      for (auto id : ids)
        if (id == self || id != worker) f.add(who + "call " + std::to_string(call) + ": a collective ran off the context's worker thread");
    }
  });
  f.report();
}

TEST_CASE("all_gather_matmul: a rank whose GEMM throws mid-pipeline releases its peers with comm_error") {
  expect_peers_released([](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, std::array<int, 1>{4});
    sc::overlap_context ctx(mesh);
    // 24 rows: 6 per rank, 2 per piece with 3 chunks; rank 1 fails at its 5th GEMM (piece 1).
    auto x = sc::distribute<sc::layout<S0>>(mesh, ints<double>(24 * 8, 0), std::array<std::int64_t, 2>{24, 8});
    auto w = sc::distribute<sc::layout<S1>>(mesh, ints<double>(8 * 8, 1), std::array<std::int64_t, 2>{8, 8});
    int calls = 0;
    // The peers may finish this call before rank 1 gives up (all gathers are queued at
    // once); the collective after it cannot complete without rank 1.
    for (int i = 0; i < 2; ++i) {
      auto y = sc::all_gather_matmul<0>(ctx, x, w, 3, faulty_gemm{comm.rank(), 1, 5, &calls});
      (void)sc::to_global(y);
    }
  });
}

TEST_CASE("matmul_reduce_scatter: a rank whose GEMM throws mid-pipeline releases peers blocked in the worker") {
  std::atomic<int> inside{0};
  expect_peers_released([&](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, std::array<int, 1>{4});
    sc::overlap_context ctx(mesh);
    auto x = sc::distribute<sc::layout<S1>>(mesh, ints<double>(24 * 8, 0), std::array<std::int64_t, 2>{24, 8});
    auto w = sc::distribute<sc::layout<S0>>(mesh, ints<double>(8 * 8, 1), std::array<std::int64_t, 2>{8, 8});
    int calls = 0;
    // Rank 1 fails at piece 1's first GEMM, so it never submits reduce-scatter 1, which its
    // peers' workers are (or will be) waiting in: they must get comm_error from this call.
    try {
      (void)sc::matmul_reduce_scatter<0>(ctx, x, w, 3, faulty_gemm{comm.rank(), 1, 5, &calls});
    } catch (const sc::comm_error&) {
      ++inside;
      throw;
    }
  });
  CHECK(inside.load() == 3);
}

TEST_CASE("a rank that fails before the call releases peers waiting in the worker's first collective") {
  for (int op = 0; op < 2; ++op) {
    std::atomic<int> inside{0};
    expect_peers_released([&](sc::host::communicator& comm) {
      auto mesh = sc::make_mesh(comm, std::array<int, 1>{4});
      sc::overlap_context ctx(mesh);
      auto x = sc::distribute<sc::layout<S0>>(mesh, ints<double>(12 * 4, 0), std::array<std::int64_t, 2>{12, 4});
      auto w = sc::distribute<sc::layout<S1>>(mesh, ints<double>(4 * 4, 1), std::array<std::int64_t, 2>{4, 4});
      auto xr = sc::distribute<sc::layout<S1>>(mesh, ints<double>(12 * 4, 0), std::array<std::int64_t, 2>{12, 4});
      auto wr = sc::distribute<sc::layout<S0>>(mesh, ints<double>(4 * 4, 1), std::array<std::int64_t, 2>{4, 4});
      if (comm.rank() == 1) throw injected("rank 1 gave up on purpose");
      try {
        if (op == 0) (void)sc::all_gather_matmul<0>(ctx, x, w, 2);
        else (void)sc::matmul_reduce_scatter<0>(ctx, xr, wr, 2);
      } catch (const sc::comm_error&) {
        ++inside;
        throw;
      }
    });
    CHECK(inside.load() == 3);
  }
}

TEST_CASE("after a failed call that every rank saw, the context is reused") {
  // Ranks pass different chunk counts: the first collective's sizes differ, every rank
  // gets comm_error, nobody aborts; the next, consistent call works.
  const std::int64_t t = 8, h = 3, o = 4;
  const auto xg = ints<std::int64_t>(t * h, 0), wg = ints<std::int64_t>(h * o, 1);
  const auto ref = ref_gemm(xg, wg, t, h, o);
  failures f;
  std::atomic<int> mismatches{0};
  sc::host::run(2, [&](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, std::array<int, 1>{2});
    sc::overlap_context ctx(mesh);
    auto x = sc::distribute<sc::layout<S0>>(mesh, xg, std::array<std::int64_t, 2>{t, h});
    auto w = sc::distribute<sc::layout<S1>>(mesh, wg, std::array<std::int64_t, 2>{h, o});
    try {
      (void)sc::all_gather_matmul<0>(ctx, x, w, comm.rank() == 0 ? 1 : 2);
      f.add("rank " + std::to_string(comm.rank()) + ": mismatched chunk counts went unnoticed");
    } catch (const sc::comm_error& e) {
      if (std::string(e.what()).find("mismatched") != std::string::npos) ++mismatches;
    }
    auto y = sc::all_gather_matmul<0>(ctx, x, w, 3);
    if (sc::to_global(y) != ref) f.add("rank " + std::to_string(comm.rank()) + ": wrong result after the failed call");
  });
  f.report();
  CHECK(mismatches.load() == 2);
}

TEST_CASE("a GEMM that throws on every rank at the same call leaves the context in step for the next call") {
  // all_gather_matmul queues every piece's gather at once; matmul_reduce_scatter hands each
  // piece to the worker after its GEMM. The collectives a call queued before its GEMM threw
  // still run on every rank, so the next call's collectives pair with its peers' (a worker
  // that dropped them, each rank as far as its worker had got, paired one rank's leftover
  // gather with a peer's next call: wrong values, or mismatched sizes).
  const std::int64_t t = 32, h = 4, o = 4;
  const auto xg = ints<double>(t * h, 0), wg = ints<double>(h * o, 1);
  const auto ref = ref_gemm(xg, wg, t, h, o);
  for (int ranks : {2, 4})
    for (int op = 0; op < 2; ++op) {
      CAPTURE(ranks);
      CAPTURE(op);
      failures f;
      sc::host::run(
          ranks,
          [&](sc::host::communicator& comm) {
            auto mesh = sc::make_mesh(comm, std::array<int, 1>{ranks});
            sc::overlap_context ctx(mesh);
            auto x = sc::distribute<sc::layout<S0>>(mesh, xg, std::array<std::int64_t, 2>{t, h});
            auto w = sc::distribute<sc::layout<S1>>(mesh, wg, std::array<std::int64_t, 2>{h, o});
            auto xr = sc::distribute<sc::layout<S1>>(mesh, xg, std::array<std::int64_t, 2>{t, h});
            auto wr = sc::distribute<sc::layout<S0>>(mesh, wg, std::array<std::int64_t, 2>{h, o});
            for (int i = 0; i < 10; ++i) {
              int calls = 0;
              const faulty_gemm everywhere{comm.rank(), comm.rank(), 3, &calls};  // every rank is the failing one
              try {
                if (op == 0) (void)sc::all_gather_matmul<0>(ctx, x, w, 8, everywhere);
                else (void)sc::matmul_reduce_scatter<0>(ctx, xr, wr, 8, everywhere);
                f.add("rank " + std::to_string(comm.rank()) + ": the GEMM's exception did not reach the caller");
              } catch (const injected&) {
              }
              const std::vector<double> y = op == 0 ? sc::to_global(sc::all_gather_matmul<0>(ctx, x, w, 8))
                                                    : sc::to_global(sc::matmul_reduce_scatter<0>(ctx, xr, wr, 8));
              if (y != ref) f.add("rank " + std::to_string(comm.rank()) + ": wrong result after the failed call, round " + std::to_string(i));
            }
          },
          generous);
      f.report();
    }
}

TEST_CASE("bad arguments throw layout_error on every rank before any communication") {
  failures f;
  std::atomic<int> thrown{0};
  sc::host::run(2, [&](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, std::array<int, 1>{2});
    auto other = sc::make_mesh(comm, std::array<int, 1>{2});
    sc::overlap_context ctx(mesh);
    auto x = sc::distribute<sc::layout<S0>>(mesh, ints<int>(12, 0), std::array<std::int64_t, 2>{4, 3});
    auto w = sc::distribute<sc::layout<S1>>(mesh, ints<int>(6, 0), std::array<std::int64_t, 2>{3, 2});
    auto w_bad = sc::distribute<sc::layout<S1>>(mesh, ints<int>(8, 0), std::array<std::int64_t, 2>{4, 2});
    auto w_other = sc::distribute<sc::layout<S1>>(other, ints<int>(6, 0), std::array<std::int64_t, 2>{3, 2});
    auto xr = sc::distribute<sc::layout<S1>>(mesh, ints<int>(12, 0), std::array<std::int64_t, 2>{4, 3});
    auto wr = sc::distribute<sc::layout<S0>>(mesh, ints<int>(6, 0), std::array<std::int64_t, 2>{3, 2});
    auto expect = [&](auto fn, const char* what) {
      try {
        fn();
        f.add(std::string(what) + ": no exception");
      } catch (const sc::layout_error&) {
        ++thrown;
      }
    };
    expect([&] { (void)sc::all_gather_matmul<0>(ctx, x, w, 0); }, "chunks = 0");
    expect([&] { (void)sc::matmul_reduce_scatter<0>(ctx, xr, wr, -1); }, "chunks = -1");
    expect([&] { (void)sc::all_gather_matmul<0>(ctx, x, w_bad, 2); }, "inner extents 3 vs 4");
    expect([&] { (void)sc::all_gather_matmul<0>(ctx, x, w_other, 2); }, "W on another mesh");
    sc::overlap_context ctx_other(other);
    expect([&] { (void)sc::matmul_reduce_scatter<0>(ctx_other, xr, wr, 2); }, "context of another mesh");
    // Still usable afterwards.
    auto y = sc::all_gather_matmul<0>(ctx, x, w, 2);
    if (sc::to_global(y) != ref_gemm(ints<int>(12, 0), ints<int>(6, 0), 4, 3, 2)) f.add("wrong result after the rejected calls");
  });
  f.report();
  CHECK(thrown.load() == 10);
}
