/// @file bench/tool/mpi_main.cpp
/// shardcast-bench-mpi: the baseline for `shardcast-bench --vs mpi`. The same sweep,
/// inputs and check as shardcast-bench, through raw MPI collectives (no shardcast
/// communicator in between). Launch with mpirun -np N; prints nccl-tests' columns.

#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "common.hpp"

namespace sc = shardcast;
namespace bn = shardcast::bench;

namespace {

MPI_Datatype mpi_type(sc::dtype t) {
  switch (t) {
    case sc::dtype::f32: return MPI_FLOAT;
    case sc::dtype::f64: return MPI_DOUBLE;
    case sc::dtype::i32: return MPI_INT32_T;
    case sc::dtype::i64: return MPI_INT64_T;
    case sc::dtype::u32: return MPI_UINT32_T;
    case sc::dtype::u64: return MPI_UINT64_T;
    default: return MPI_DATATYPE_NULL;
  }
}

MPI_Op mpi_op(sc::reduce_op op) {
  switch (op) {
    case sc::reduce_op::sum:
    case sc::reduce_op::avg: return MPI_SUM;  // avg: divided locally afterwards
    case sc::reduce_op::prod: return MPI_PROD;
    case sc::reduce_op::max: return MPI_MAX;
    case sc::reduce_op::min: return MPI_MIN;
  }
  return MPI_SUM;
}

template <class T>
int run(const bn::options& o, int n, int me) {
  const MPI_Datatype dt = mpi_type(o.type);
  const MPI_Op op = mpi_op(o.op);
  if (me == 0) {
    std::printf("# shardcast-bench-mpi %s: %d processes, %d iters, %d warmup (%s), check %d\n", bn::to_string(o.op_kind), n, o.iters,
                o.warmup, bn::warmup_floor_text(o).c_str(), o.check);
    if (o.batches > 1) std::printf("# time: the median of %d batches of %d calls (the slowest process's, per batch)\n", o.batches, o.iters);
    if (o.inplace) std::printf("# in place (MPI_IN_PLACE)\n");
    std::printf("#%12s %12s %8s %6s %6s %10s %8s %8s %6s\n", "size", "count", "type", "redop", "root", "time(us)", "algbw",
                "busbw", "#wrong");
  }
  std::int64_t total_wrong = 0;
  double sum_bus = 0;
  int rows = 0;
  for (std::size_t bytes : bn::sweep(o)) {
    const bn::counts k = bn::counts_for(o.op_kind, bytes, sizeof(T), n);
    // In place (--inplace): one buffer; MPI_IN_PLACE takes the input from it and leaves the
    // result there (reduce_scatter: at its start, where MPI puts it).
    const bool ip = o.inplace && o.op_kind != bn::coll::broadcast;
    const bn::placement_of_buffers pl = bn::in_place(o.op_kind, k, me);
    std::vector<T> send(ip ? pl.size : (k.send ? k.send : 1)), recv(ip ? 1 : (k.recv ? k.recv : 1));
    T* const in = send.data() + (ip ? pl.send_off : 0);      // this rank's input
    T* const out = ip ? send.data() : recv.data();            // its result
    bn::fill_input(in, k.send, me, o.op);
    const int c = static_cast<int>(k.arg);
    auto once = [&] {
      switch (o.op_kind) {
        case bn::coll::all_reduce:
          MPI_Allreduce(ip ? MPI_IN_PLACE : send.data(), out, c, dt, op, MPI_COMM_WORLD);
          if (o.op == sc::reduce_op::avg) sc::detail::finish_avg(out, k.recv, n);
          break;
        case bn::coll::all_gather:
          if (ip) MPI_Allgather(MPI_IN_PLACE, 0, dt, out, c, dt, MPI_COMM_WORLD);
          else MPI_Allgather(send.data(), c, dt, recv.data(), c, dt, MPI_COMM_WORLD);
          break;
        case bn::coll::reduce_scatter:
          MPI_Reduce_scatter_block(ip ? MPI_IN_PLACE : send.data(), out, c, dt, op, MPI_COMM_WORLD);
          if (o.op == sc::reduce_op::avg) sc::detail::finish_avg(out, k.recv, n);
          break;
        case bn::coll::all_to_all: MPI_Alltoall(send.data(), c, dt, recv.data(), c, dt, MPI_COMM_WORLD); break;
        case bn::coll::broadcast: MPI_Bcast(recv.data(), c, dt, o.root, MPI_COMM_WORLD); break;
        case bn::coll::sendrecv:
          MPI_Sendrecv(send.data(), c, dt, (me + 1) % n, 0, recv.data(), c, dt, (me + n - 1) % n, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          break;
      }
    };
    if (o.op_kind == bn::coll::broadcast) bn::fill_input(recv.data(), k.recv, me, o.op);
    bn::warm_up(o, once, [](double ms) {
      double most = 0;
      MPI_Allreduce(&ms, &most, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      return most;
    });
    std::vector<double> batch;  // per batch, the slowest process's time
    for (int b = 0; b < o.batches; ++b) {
      MPI_Barrier(MPI_COMM_WORLD);
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < o.iters; ++i) once();
      MPI_Barrier(MPI_COMM_WORLD);
      double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), s = 0;
      MPI_Allreduce(&el, &s, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      batch.push_back(s);
    }
    const double slowest = bn::median(batch);
    std::int64_t wrong = 0, w = 0;
    if (o.check) {
      if (ip) std::fill(send.begin(), send.end(), T{});
      bn::fill_input(in, k.send, me, o.op);
      if (o.op_kind == bn::coll::broadcast) bn::fill_input(recv.data(), k.recv, me, o.op);
      else if (!ip) std::fill(recv.begin(), recv.end(), T{});
      once();
      w = bn::count_wrong<T>(o.op_kind, o.op, n, o.root, me, k, out);
      MPI_Allreduce(&w, &wrong, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    }
    const double us = slowest / o.iters * 1e6;
    const double algbw = us > 0 ? static_cast<double>(k.bytes) / (us * 1e-6) / 1e9 : 0;
    const double busbw = algbw * bn::busbw_factor(o.op_kind, n);
    total_wrong += wrong;
    sum_bus += busbw;
    ++rows;
    if (me == 0) {
      std::printf(" %12zu %12zu %8s %6s %6d %10.4f %8.3f %8.3f %6lld\n", k.bytes, k.total, sc::to_string(o.type),
                  bn::has_op(o.op_kind) ? sc::to_string(o.op) : "none", o.op_kind == bn::coll::broadcast ? o.root : -1, us, algbw,
                  busbw, static_cast<long long>(wrong));
      std::fflush(stdout);
    }
  }
  if (me == 0) std::printf("# Avg bus bandwidth    : %g\n", rows ? sum_bus / rows : 0.0);
  return total_wrong ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int n = 1, me = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  bn::options o;
  int status = 0;
  if (!bn::parse_args(argc, argv, o, true)) status = o.help ? 0 : 2;
  else if (const std::string why = bn::rank_problem(o.op_kind, o.root, n); !why.empty()) {
    if (me == 0) std::fprintf(stderr, "shardcast-bench-mpi: %s\n", why.c_str());
    status = 2;
  }
  else bn::with_dtype(o.type, [&]<class T>() { status = run<T>(o, n, me); });
  MPI_Finalize();
  return status;
}
