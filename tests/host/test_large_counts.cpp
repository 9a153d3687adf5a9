// Counts above 2^31 elements on the host backend (label `large`: several GiB of memory,
// a few seconds; excluded from the sanitizer runs). int8 buffers whose values repeat with
// period 61 (prime, so a piece moved by 2^31 or any other power of two lands on
// different values): a count truncated to 32 bits, or an offset computed in int, shows
// up as a mismatch. The reference is the same pattern computed here.
#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <shardcast/shardcast.hpp>
#include <string>
#include <vector>

namespace sc = shardcast;

namespace {
constexpr std::size_t two31 = std::size_t{1} << 31;
constexpr std::size_t period = 61;
constexpr std::size_t block = period * 4096;  // a multiple of the period, copied with memcpy

/// Uninitialised storage (std::vector would zero several GiB first).
std::unique_ptr<std::int8_t[]> raw(std::size_t n) { return std::unique_ptr<std::int8_t[]>(new std::int8_t[n]); }

/// dst[i] = (i % 61) * mul + add for i in [0, n).
void fill(std::int8_t* dst, std::size_t n, int mul, int add) {
  std::vector<std::int8_t> b(block);
  for (std::size_t i = 0; i < block; ++i) b[i] = static_cast<std::int8_t>(static_cast<int>(i % period) * mul + add);
  for (std::size_t o = 0; o < n; o += block) std::memcpy(dst + o, b.data(), std::min(block, n - o));
}

/// The first index where src differs from (i % 61) * mul + add, or n if none.
std::size_t first_mismatch(const std::int8_t* src, std::size_t n, int mul, int add) {
  std::vector<std::int8_t> b(block);
  for (std::size_t i = 0; i < block; ++i) b[i] = static_cast<std::int8_t>(static_cast<int>(i % period) * mul + add);
  for (std::size_t o = 0; o < n; o += block) {
    const std::size_t m = std::min(block, n - o);
    if (std::memcmp(src + o, b.data(), m) != 0)
      for (std::size_t i = 0; i < m; ++i)
        if (src[o + i] != b[i]) return o + i;
  }
  return n;
}
}  // namespace

TEST_CASE("host all_reduce in place of 2^31 + 64 int8 elements on 2 ranks") {
  const std::size_t n = two31 + 64;
  std::array<std::size_t, 2> bad{};
  sc::host::run(2, [&](sc::host::communicator& c) {
    auto buf = raw(n);
    fill(buf.get(), n, 1, c.rank());  // rank r holds i % 61 + r
    c.all_reduce(buf.get(), buf.get(), n, sc::reduce_op::sum);
    bad[static_cast<std::size_t>(c.rank())] = first_mismatch(buf.get(), n, 2, 1);  // sum: 2 (i % 61) + 1
  });
  CHECK(bad[0] == n);
  CHECK(bad[1] == n);
}

TEST_CASE("host all_gather into 2^31 + 64 int8 elements, as the executor runs it for redistribute S(0) -> R of 2 x (2^30 + 32)") {
  const std::int64_t cols = (std::int64_t{1} << 30) + 32;
  std::array<std::size_t, 2> bad{}, size{};
  sc::host::run(2, [&](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, std::array<int, 1>{2});
    auto mine = raw(static_cast<std::size_t>(cols));  // row r of the global tensor: col % 61 + 3r
    fill(mine.get(), static_cast<std::size_t>(cols), 1, 3 * c.rank());
    auto x = sc::make_view<sc::layout<sc::shard<0>>>(m, mine.get(), std::array<std::int64_t, 2>{2, cols});
    auto y = sc::redistribute<sc::layout<sc::replicate>>(x);
    const auto u = static_cast<std::size_t>(c.rank());
    size[u] = y.local_size();
    bad[u] = first_mismatch(y.data(), static_cast<std::size_t>(cols), 1, 0);
    if (bad[u] == static_cast<std::size_t>(cols))
      bad[u] = first_mismatch(y.data() + cols, static_cast<std::size_t>(cols), 1, 3) + static_cast<std::size_t>(cols);
  });
  for (std::size_t r = 0; r < 2; ++r) {
    CHECK(size[r] == two31 + 64);
    CHECK(bad[r] == two31 + 64);
  }
}
