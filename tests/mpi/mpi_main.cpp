// Runs doctest on every MPI rank; the test fails when any rank reports a failure. MPI is
// initialised with MPI_THREAD_SERIALIZED requested (the overlap operators' worker thread
// makes MPI calls); the level MPI provides is in shardcast_test_mpi_thread_level.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <mpi.h>

#include <cstdio>

int shardcast_test_mpi_thread_level = MPI_THREAD_SINGLE;

int main(int argc, char** argv) {
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &shardcast_test_mpi_thread_level);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  doctest::Context ctx(argc, argv);
  if (rank != 0) ctx.setOption("minimal", true);
  int failed = 0;
  try {
    failed = ctx.run() != 0 ? 1 : 0;
  } catch (...) {
    failed = 1;
  }
  if (failed) std::fprintf(stderr, "rank %d: tests failed\n", rank);
  int any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any;
}
