// The host backend's end-to-end differential suite (tests/host/test_redistribute.cpp) on the
// device backends: distribute a global tensor under one layout, redistribute it on a stream
// to another, gather every rank's piece with the backend's own all_gather and compare with
// the single-rank reference (tests/common/differential.hpp), and check that the input is
// unchanged. Every layout pair on 1-axis meshes (float, double, int32, int64) and on 2-axis
// meshes (float, int64), every reduce op, extents divisible, uneven and empty; on the p2p
// backend with 2, 3 and 4 ranks sharing GPU 0 (and on a mesh_ref of a 2x2 mesh), and on
// NCCL with every visible GPU. On p2p also: inputs given up (redistribute of an rvalue,
// a plan of one all_reduce in place), and elementwise operators on given-up operands.
#include <doctest/doctest.h>

#include <shardcast/comm/nccl.hpp>
#include <shardcast/comm/p2p.hpp>
#include <shardcast/cuda/elementwise.cuh>  // elementwise_exec<device_memory>
#include <shardcast/cuda/pack.cuh>         // memory_ops<device_memory>, which the executor uses on device meshes
#include <shardcast/ops/broadcast.hpp>
#include <shardcast/ops/elementwise.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "common/differential.hpp"
#include "common/failures.hpp"
#include "cuda_testing.hpp"

namespace sc = shardcast;
namespace st = shardcast::testing;
using shardcast_test::no_device;

namespace {

using outcome = st::sweep_outcome;

// Every pair of layouts of rank-R tensors on an N-axis mesh over `c`
// (st::for_each_layout_pair with stride 1), on one stream; with OnRef, on the mesh's
// mesh_ref (a handle that keeps nothing alive); with `give_up`, each case makes a second
// input and gives it up (st::differential_case with two calls).
template <class T, int N, std::size_t R, class Comm, bool OnRef = false>
void sweep(Comm& c, const std::array<int, N>& shape, const std::vector<std::array<std::int64_t, R>>& extents, outcome& out,
           bool give_up = false) {
  auto owner = sc::make_mesh(c, shape);
  const auto m = st::mesh_handle<OnRef>(owner);
  cudaStream_t s;
  SHARDCAST_CUDA_TRY(cudaStreamCreate(&s));
  std::size_t mine = 0;
  st::for_each_layout_pair(N, static_cast<int>(R), 1, [&](const sc::runtime_layout& src, const sc::runtime_layout& dst) {
    for (const auto& e : extents) {
      const std::string err = st::differential_case<T>(m, src, dst, e, s, give_up ? 2 : 1, give_up);
      ++mine;
      out.add(c.rank(), err);
    }
  });
  SHARDCAST_CUDA_TRY(cudaStreamSynchronize(s));
  SHARDCAST_CUDA_TRY(cudaStreamDestroy(s));
  if (c.rank() == 0) out.count(mine);
}

template <class T, class Comm>
void one_axis(Comm& c, outcome& out) {
  sweep<T, 1, 1>(c, {c.size()}, {{{7}}, {{2}}, {{0}}, {{16}}}, out);
  sweep<T, 1, 2>(c, {c.size()}, {{{5, 3}}, {{2, 7}}, {{0, 4}}}, out);
}

}  // namespace

TEST_CASE_TEMPLATE("p2p (2, 3, 4 ranks on GPU 0): every layout pair on 1-axis meshes matches the reference" * doctest::skip(no_device()),
                   T, float, double, std::int32_t, std::int64_t) {
  outcome out;
  for (int n : {2, 3, 4}) sc::p2p::run(n, {0}, [&](sc::p2p::communicator& c) { one_axis<T>(c, out); });
  out.report();
}

TEST_CASE_TEMPLATE("p2p (4 ranks on GPU 0): every layout pair on 2-axis meshes matches the reference" * doctest::skip(no_device()), T,
                   float, std::int64_t) {
  outcome out;
  sc::p2p::run(4, {0}, [&](sc::p2p::communicator& c) {
    sweep<T, 2, 2>(c, {2, 2}, {{{5, 6}}, {{3, 1}}, {{0, 3}}}, out);
    sweep<T, 2, 3>(c, {2, 2}, {{{3, 4, 5}}}, out);
    sweep<T, 2, 1>(c, {4, 1}, {{{11}}, {{4}}}, out);
  });
  sc::p2p::run(3, {0}, [&](sc::p2p::communicator& c) { sweep<T, 2, 2>(c, {3, 1}, {{{5, 6}}, {{2, 1}}}, out); });
  out.report();
}

TEST_CASE("p2p (4 ranks on GPU 0): every layout pair on a 2x2 mesh_ref matches the reference" * doctest::skip(no_device())) {
  outcome out;
  sc::p2p::run(4, {0}, [&](sc::p2p::communicator& c) { sweep<float, 2, 2, sc::p2p::communicator, true>(c, {2, 2}, {{{5, 6}}, {{0, 3}}}, out); });
  out.report();
}

TEST_CASE("p2p (3 and 4 ranks on GPU 0): every layout pair with the input given up matches the reference" * doctest::skip(no_device())) {
  outcome out;
  sc::p2p::run(4, {0}, [&](sc::p2p::communicator& c) { sweep<float, 2, 2>(c, {2, 2}, {{{5, 6}}, {{0, 3}}}, out, true); });
  sc::p2p::run(3, {0}, [&](sc::p2p::communicator& c) { sweep<std::int64_t, 1, 2>(c, {3}, {{{5, 3}}, {{2, 7}}}, out, true); });
  out.report();
}

// relu(bias - x) - y as one expression on a given-up operand, on device pieces: each step
// writes over the piece of the one before, in the storage the first step made; an operand
// a copy still holds is not written.
TEST_CASE("p2p (2 ranks on GPU 0): elementwise operators on given-up operands" * doctest::skip(no_device())) {
  outcome out;
  sc::p2p::run(2, {0}, [&](sc::p2p::communicator& c) {
    auto m = sc::make_mesh(c, std::array<int, 1>{2});
    using L = sc::layout<sc::shard<0>>;
    cudaStream_t s;
    SHARDCAST_CUDA_TRY(cudaStreamCreate(&s));
    const std::array<std::int64_t, 2> ext{7, 5};
    const std::vector<float> a = st::make_global<float>(35), b = st::make_global<float>(35, 1), bias = st::make_global<float>(5, 2);
    const auto x = sc::distribute<L>(m, a, ext, s), y = sc::distribute<L>(m, b, ext, s);
    const auto bt = sc::distribute<sc::bias_layout_t<L, 2>>(m, bias, std::array<std::int64_t, 1>{5}, s);
    std::vector<float> ref(35);
    for (std::size_t i = 0; i < 35; ++i) ref[i] = std::max(0.0f, bias[i % 5] - a[i]) - b[i];
    auto t = sc::scale(x, -1, s);  // owned alone
    const float* const first = t.data();
    auto r = sc::sub(sc::map(sc::bias_add(std::move(t), bt, s), sc::fn::relu, s), y, s);
    if (r.data() != first) out.add(c.rank(), "the chain did not stay in the first step's storage");
    if (t.owns() || t.data() != nullptr) out.add(c.rank(), "the given-up operand was not left empty");
    const std::vector<float> got = sc::to_global(r, s);
    if (got != ref) out.add(c.rank(), "relu(bias - x) - y differs from the reference");
    auto u = sc::scale(x, 2, s);
    const auto keep = u;  // a copy holds u's storage: the result must go elsewhere
    auto v = sc::add(std::move(u), y, s);
    if (v.data() == keep.data()) out.add(c.rank(), "add wrote into storage a copy still holds");
    std::vector<float> ref2(35), ref_keep(35);
    for (std::size_t i = 0; i < 35; ++i) ref2[i] = 2 * a[i] + b[i], ref_keep[i] = 2 * a[i];
    if (sc::to_global(v, s) != ref2) out.add(c.rank(), "2 x + y differs from the reference");
    if (sc::to_global(keep, s) != ref_keep) out.add(c.rank(), "the copy's piece changed");
    SHARDCAST_CUDA_TRY(cudaStreamSynchronize(s));
    SHARDCAST_CUDA_TRY(cudaStreamDestroy(s));
    if (c.rank() == 0) out.count(1);
  });
  out.report();
}

// x - b with b [7, 1] broadcast along dim 1, x sharded along that dim over both ranks
// (b replicated), then the same over x given up: written over x's piece.
TEST_CASE("p2p (2 ranks on GPU 0): broadcast_zip along a sharded dim" * doctest::skip(no_device())) {
  outcome out;
  sc::p2p::run(2, {0}, [&](sc::p2p::communicator& c) {
    auto m = sc::make_mesh(c, std::array<int, 1>{2});
    using L = sc::layout<sc::shard<1>>;
    cudaStream_t s;
    SHARDCAST_CUDA_TRY(cudaStreamCreate(&s));
    const std::array<std::int64_t, 2> ext{7, 5}, extb{7, 1};
    const std::vector<float> a = st::make_global<float>(35), b = st::make_global<float>(7, 1);
    std::vector<float> ref(35);
    for (std::size_t i = 0; i < 35; ++i) ref[i] = a[i] - b[i / 5];
    const auto x = sc::distribute<L>(m, a, ext, s);
    const auto bt = sc::distribute<sc::broadcast_layout_t<L, 1>>(m, b, extb, s);
    if (sc::to_global(sc::broadcast_zip<1>(x, bt, sc::fn::sub, s), s) != ref) out.add(c.rank(), "x - b differs from the reference");
    auto t = sc::scale(x, 1, s);  // owned alone
    const float* const first = t.data();
    auto r = sc::broadcast_zip<1>(std::move(t), bt, sc::fn::sub, s);
    if (r.local_size() > 0 && r.data() != first) out.add(c.rank(), "a given-up operand owned alone did not carry the result");
    if (sc::to_global(r, s) != ref) out.add(c.rank(), "x - b (given up) differs from the reference");
    SHARDCAST_CUDA_TRY(cudaStreamSynchronize(s));
    SHARDCAST_CUDA_TRY(cudaStreamDestroy(s));
    if (c.rank() == 0) out.count(1);
  });
  out.report();
}

TEST_CASE_TEMPLATE("nccl (every visible GPU): every layout pair on 1- and 2-axis meshes matches the reference" * doctest::skip(no_device()),
                   T, float, std::int64_t) {
  outcome out;
  const int p = shardcast_test::device_count();
  sc::nccl::run_local(p, [&](sc::nccl::communicator& c) {
    one_axis<T>(c, out);
    if (p % 2 == 0) sweep<T, 2, 2>(c, {2, p / 2}, {{{5, 6}}, {{3, 1}}, {{0, 3}}}, out);
    else sweep<T, 2, 2>(c, {p, 1}, {{{5, 6}}, {{3, 1}}, {{0, 3}}}, out);
  });
  out.report();
}
