// Counts above 2^31 elements through the MPI backend (label `large`; run with 2 ranks):
// MPI takes int counts, so these only work because shardcast splits them into calls of
// at most INT_MAX elements. int8 values with period 61 (prime), so a count truncated to
// 32 bits or a chunk placed at the wrong offset shows up; the reference is the pattern.
#include <doctest/doctest.h>
#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include <shardcast/comm/mpi.hpp>

namespace sc = shardcast;

namespace {
constexpr std::size_t two31 = std::size_t{1} << 31;
constexpr std::size_t period = 61;
constexpr std::size_t block = period * 4096;

std::unique_ptr<std::int8_t[]> raw(std::size_t n) { return std::unique_ptr<std::int8_t[]>(new std::int8_t[n]); }

std::vector<std::int8_t> pattern(int mul, int add) {
  std::vector<std::int8_t> b(block);
  for (std::size_t i = 0; i < block; ++i) b[i] = static_cast<std::int8_t>(static_cast<int>(i % period) * mul + add);
  return b;
}
void fill(std::int8_t* dst, std::size_t n, int mul, int add) {
  const auto b = pattern(mul, add);
  for (std::size_t o = 0; o < n; o += block) std::memcpy(dst + o, b.data(), std::min(block, n - o));
}
std::size_t first_mismatch(const std::int8_t* src, std::size_t n, int mul, int add) {
  const auto b = pattern(mul, add);
  for (std::size_t o = 0; o < n; o += block) {
    const std::size_t m = std::min(block, n - o);
    if (std::memcmp(src + o, b.data(), m) != 0)
      for (std::size_t i = 0; i < m; ++i)
        if (src[o + i] != b[i]) return o + i;
  }
  return n;
}
}  // namespace

TEST_CASE("mpi all_reduce in place of 2^31 + 64 int8 elements") {
  sc::mpi::communicator c(MPI_COMM_WORLD);
  const int p = c.size();
  REQUIRE(p * 60 + p * (p - 1) / 2 < 128);  // the sums stay within int8
  const std::size_t n = two31 + 64;
  auto buf = raw(n);
  fill(buf.get(), n, 1, c.rank());  // rank r holds i % 61 + r
  c.all_reduce(buf.get(), buf.get(), n, sc::reduce_op::sum);
  CHECK(first_mismatch(buf.get(), n, p, p * (p - 1) / 2) == n);  // p (i % 61) + 0 + 1 + ... + (p - 1)
}

TEST_CASE("mpi all_gather whose receive buffer holds more than 2^31 int8 elements") {
  sc::mpi::communicator c(MPI_COMM_WORLD);
  const auto p = static_cast<std::size_t>(c.size());
  const std::size_t count = two31 / p + 32;  // the total, p * count, exceeds 2^31
  auto recv = raw(count * p);
  {
    auto send = raw(count);
    fill(send.get(), count, 1, 3 * c.rank());  // rank r sends i % 61 + 3r
    c.all_gather(send.get(), recv.get(), count);
  }
  for (std::size_t q = 0; q < p; ++q) CHECK(first_mismatch(recv.get() + q * count, count, 1, 3 * static_cast<int>(q)) == count);
}
