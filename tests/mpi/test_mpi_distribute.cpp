// distribute under MPI: ranks that pass different extents or layouts, or a rank with a
// bad argument, make every rank throw layout_error; nobody is left waiting in MPI.
// The expected values in the messages are the ones the test passes.
#include <doctest/doctest.h>
#include <mpi.h>

#include <array>
#include <string>
#include <vector>

#include <shardcast/comm/mpi.hpp>
#include <shardcast/shardcast.hpp>

namespace sc = shardcast;

namespace {
/// What distribute threw on this rank ("" if nothing).
template <class F>
std::string thrown(F f) {
  try {
    f();
  } catch (const sc::layout_error& e) {
    return std::string("layout_error: ") + e.what();
  } catch (const std::exception& e) {
    return std::string("other: ") + e.what();
  }
  return "";
}
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
}  // namespace

TEST_CASE("mpi: ranks passing different extents all throw layout_error naming the dim and both values") {
  sc::mpi::communicator c(MPI_COMM_WORLD);
  const int p = c.size(), me = c.rank();
  auto m = sc::make_mesh(c, std::array<int, 1>{p});
  // The last rank passes one more row than the others (with one rank there is nothing to disagree with).
  const std::int64_t rows = 4 + (p > 1 && me == p - 1 ? 1 : 0);
  const std::array<std::int64_t, 2> ext{rows, 3};
  std::vector<float> g(static_cast<std::size_t>(rows * 3), 1.0f);
  const std::string w = thrown([&] { (void)sc::distribute<sc::layout<sc::shard<0>>>(m, g, ext); });
  if (p == 1) {
    CHECK(w == "");
  } else {
    CHECK(contains(w, "layout_error: shardcast::distribute: the ranks passed different global extents: dim 0 is 4 on some ranks and 5 on others"));
    CHECK(contains(w, "(rank " + std::to_string(me) + " passed " + std::to_string(rows) + "x3)"));
  }
  // Every rank is still in step: a collective after the failure completes with the right value.
  int one = 1, total = 0;
  c.all_reduce(&one, &total, 1, sc::reduce_op::sum);
  CHECK(total == p);
}

TEST_CASE("mpi: ranks passing different runtime layouts all throw layout_error") {
  sc::mpi::communicator c(MPI_COMM_WORLD);
  const int p = c.size(), me = c.rank();
  auto m = sc::make_mesh(c, std::array<int, 1>{p});
  std::vector<int> g(12, 1);
  const char* text = me == 0 ? "S(1)" : "S(0)";
  const std::string w = thrown([&] { (void)sc::distribute(m, sc::runtime_layout::parse(text), g, std::array<std::int64_t, 2>{3, 4}); });
  if (p == 1) CHECK(w == "");
  else CHECK(contains(w, "layout_error: shardcast::distribute: the ranks passed different layouts (rank " + std::to_string(me) + " passed \"" + text + "\")"));
}

TEST_CASE("mpi: a wrong span size on rank 0 makes every rank throw") {
  sc::mpi::communicator c(MPI_COMM_WORLD);
  const int p = c.size(), me = c.rank();
  auto m = sc::make_mesh(c, std::array<int, 1>{p});
  std::vector<double> g(me == 0 ? 5 : 6, 1.0);
  const std::string w = thrown([&] { (void)sc::distribute<sc::layout<sc::replicate>>(m, g, std::array<std::int64_t, 2>{2, 3}); });
  if (me == 0) CHECK(contains(w, "layout_error: shardcast::distribute: the global span has 5 elements but the extents describe 6"));
  else CHECK(contains(w, "layout_error: shardcast::distribute: rank 0 rejected its arguments"));
}

TEST_CASE("mpi: check_same_extents agrees when the extents agree") {
  sc::mpi::communicator c(MPI_COMM_WORLD);
  auto m = sc::make_mesh(c, std::array<int, 1>{c.size()});
  CHECK_NOTHROW(sc::check_same_extents(m, std::array<std::int64_t, 2>{7, 0}));
}
