// The tool's result check (-c 1) against results that are wrong in the ways a collective
// goes wrong: one rank's data or one block in place of another, a reduction that drops a
// rank or writes a constant. Every one must be counted wrong, and the right result must
// count 0. The expected outputs here are built from the inputs alone.
#include <cstdio>
#include <string>
#include <vector>

#include "common.hpp"

namespace bn = shardcast::bench;
using shardcast::reduce_op;

namespace {
int failures = 0;
void expect(bool ok, const std::string& what) {
  if (!ok) {
    ++failures;
    std::printf("FAILED: %s\n", what.c_str());
  }
}

/// Counts for `coll` at `bytes` of float on n ranks, as the tool sizes a row.
bn::counts row(bn::coll c, int n, std::size_t bytes) { return bn::counts_for(c, bytes, sizeof(float), n); }

/// The right output of rank `me`, from the inputs alone.
std::vector<float> right(bn::coll c, reduce_op op, int n, int me, const bn::counts& k) {
  std::vector<float> out(k.recv);
  for (std::size_t i = 0; i < k.recv; ++i) {
    switch (c) {
      case bn::coll::all_gather: out[i] = bn::input_value<float>(static_cast<int>(i / k.arg), i % k.arg); break;
      case bn::coll::all_to_all:
        out[i] = bn::input_value<float>(static_cast<int>(i / k.arg), static_cast<std::size_t>(me) * k.arg + i % k.arg);
        break;
      default: {  // all_reduce
        float acc = bn::input_value<float>(0, i);
        for (int q = 1; q < n; ++q) {
          const float x = bn::input_value<float>(q, i);
          acc = op == reduce_op::max ? std::max(acc, x) : op == reduce_op::min ? std::min(acc, x) : acc + x;
        }
        out[i] = acc;
      }
    }
  }
  return out;
}
}  // namespace

int main() {
  for (const int n : {4, 6, 8}) {
    for (const std::size_t bytes : {std::size_t{80} * static_cast<std::size_t>(n), std::size_t{160} * static_cast<std::size_t>(n), std::size_t{4096}}) {
      const std::string at = " (" + std::to_string(n) + " ranks, " + std::to_string(bytes) + " B)";
      // all_gather: the slot of rank n-1 holds rank 0's chunk.
      {
        const auto k = row(bn::coll::all_gather, n, bytes);
        auto out = right(bn::coll::all_gather, reduce_op::sum, n, 0, k);
        expect(bn::count_wrong(bn::coll::all_gather, reduce_op::sum, n, 0, 0, k, out.data()) == 0, "all_gather right" + at);
        for (std::size_t i = 0; i < k.arg; ++i) out[static_cast<std::size_t>(n - 1) * k.arg + i] = out[i];
        expect(bn::count_wrong(bn::coll::all_gather, reduce_op::sum, n, 0, 0, k, out.data()) > 0, "all_gather with rank 0's chunk twice" + at);
      }
      // all_to_all: rank 1 gets every sender's block 0 instead of block 1.
      {
        const auto k = row(bn::coll::all_to_all, n, bytes);
        auto out = right(bn::coll::all_to_all, reduce_op::sum, n, 1, k);
        expect(bn::count_wrong(bn::coll::all_to_all, reduce_op::sum, n, 0, 1, k, out.data()) == 0, "all_to_all right" + at);
        const auto wrong_block = right(bn::coll::all_to_all, reduce_op::sum, n, 0, k);
        expect(bn::count_wrong(bn::coll::all_to_all, reduce_op::sum, n, 0, 1, k, wrong_block.data()) > 0,
               "all_to_all with block 0 in place of block 1" + at);
      }
      // all_reduce max and min: a constant (the inputs' largest or smallest value), and a
      // reduction that leaves out the last rank.
      for (const reduce_op op : {reduce_op::max, reduce_op::min}) {
        const auto k = row(bn::coll::all_reduce, n, bytes);
        const auto out = right(bn::coll::all_reduce, op, n, 0, k);
        expect(bn::count_wrong(bn::coll::all_reduce, op, n, 0, 0, k, out.data()) == 0, "all_reduce right" + at);
        const std::vector<float> constant(k.recv, op == reduce_op::max ? 5.f : 1.f);
        expect(bn::count_wrong(bn::coll::all_reduce, op, n, 0, 0, k, constant.data()) > 0, "all_reduce max/min as a constant" + at);
        const auto fewer = right(bn::coll::all_reduce, op, n - 1, 0, k);
        expect(bn::count_wrong(bn::coll::all_reduce, op, n, 0, 0, k, fewer.data()) > 0, "all_reduce max/min without the last rank" + at);
      }
    }
  }
  // A floating-point product computed in another order than the reference's (as MPI's
  // reductions may) is still right: the inputs of a product multiply exactly in any order.
  for (const int n : {12, 24}) {
    const auto k = row(bn::coll::all_reduce, n, 4096);
    std::vector<float> reversed(k.recv);
    std::vector<double> reversed_d(k.recv);
    for (std::size_t i = 0; i < k.recv; ++i) {
      float acc = 1.0f;
      double accd = 1.0;
      for (int q = n; q-- > 0;) {
        acc *= bn::input_value<float>(q, i, reduce_op::prod);
        accd *= bn::input_value<double>(q, i, reduce_op::prod);
      }
      reversed[i] = acc;
      reversed_d[i] = accd;
    }
    const std::string at = " (" + std::to_string(n) + " ranks)";
    expect(bn::count_wrong(bn::coll::all_reduce, reduce_op::prod, n, 0, 0, k, reversed.data()) == 0, "float prod in reverse order" + at);
    const auto kd = bn::counts_for(bn::coll::all_reduce, 4096, sizeof(double), n);
    expect(bn::count_wrong(bn::coll::all_reduce, reduce_op::prod, n, 0, 0, kd, reversed_d.data()) == 0, "double prod in reverse order" + at);
  }
  std::printf("%s\n", failures ? "check_test: FAILED" : "check_test: every wrong result was counted, every right one was not");
  return failures ? 1 : 0;
}
