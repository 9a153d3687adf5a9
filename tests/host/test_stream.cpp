// The host collectives with streaming (non-temporal) stores forced on for every size, so
// the paths that large collectives take are checked at odd sizes (1,000 and 4,099
// elements; 1 and 17 go through the eager path, which never streams, except 17 on 4 ranks
// for all_reduce, reduce_scatter and all_to_all) and misaligned buffers against
// references computed here. (This executable's only translation unit
// that includes shardcast sets the threshold; the others use the default.)
#define SHARDCAST_HOST_STREAM_BYTES 0
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <shardcast/comm/host.hpp>
#include <mutex>
#include <string>
#include <vector>

namespace sc = shardcast;

TEST_CASE("stream_copy equals memcpy for every length and alignment up to 300 bytes") {
  std::vector<unsigned char> src(400), dst(400), want(400);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 7 + 1);
  for (std::size_t off = 0; off < 16; ++off)
    for (std::size_t n = 0; n <= 300; ++n) {
      std::fill(dst.begin(), dst.end(), 0xAB);
      want = dst;
      std::memcpy(want.data() + off, src.data() + 3, n);
      sc::host::detail::stream_copy(dst.data() + off, src.data() + 3, n);
      REQUIRE_MESSAGE(dst == want, "offset " << off << ", " << n << " bytes");
    }
}

TEST_CASE_TEMPLATE("collectives with streaming stores match the reference at odd sizes", T, float, std::int64_t) {
  for (int n : {1, 3, 4}) {
    for (std::size_t count : {std::size_t{1}, std::size_t{17}, std::size_t{1000}, std::size_t{4099}}) {
      std::vector<std::string> errors;
      std::mutex mu;
      sc::host::run(n, [&](sc::host::communicator& c) {
        const int r = c.rank();
        auto val = [](int rank, std::size_t i) { return static_cast<T>(1 + (static_cast<std::size_t>(rank) * 5 + i * 3) % 7); };
        auto fail = [&](const std::string& what) {
          std::lock_guard lk(mu);
          errors.push_back("n=" + std::to_string(n) + " count=" + std::to_string(count) + " rank " + std::to_string(r) + ": " + what);
        };
        const auto un = static_cast<std::size_t>(n);
        // Buffers start one element past an aligned address, so stores need a head.
        std::vector<T> in(un * count + 1), out(un * count + 1);
        for (std::size_t i = 0; i < un * count; ++i) in[i + 1] = val(r, i);
        T* send = in.data() + 1;
        T* recv = out.data() + 1;

        c.all_gather(send, recv, count);
        for (std::size_t i = 0; i < un * count; ++i)
          if (recv[i] != val(static_cast<int>(i / count), i % count)) return fail("all_gather");

        c.all_reduce(send, recv, un * count, sc::reduce_op::sum);
        for (std::size_t i = 0; i < un * count; ++i) {
          T want{};
          for (int q = 0; q < n; ++q) want = static_cast<T>(want + val(q, i));
          if (recv[i] != want) return fail("all_reduce");
        }

        c.reduce_scatter(send, recv, count, sc::reduce_op::max);
        for (std::size_t i = 0; i < count; ++i) {
          T want = val(0, static_cast<std::size_t>(r) * count + i);
          for (int q = 1; q < n; ++q) want = std::max(want, val(q, static_cast<std::size_t>(r) * count + i));
          if (recv[i] != want) return fail("reduce_scatter");
        }

        c.all_to_all(send, recv, count);
        for (std::size_t i = 0; i < un * count; ++i)
          if (recv[i] != val(static_cast<int>(i / count), static_cast<std::size_t>(r) * count + i % count)) return fail("all_to_all");

        for (std::size_t i = 0; i < count; ++i) recv[i] = r == n - 1 ? val(r, i) : T{};
        c.broadcast(recv, count, n - 1);
        for (std::size_t i = 0; i < count; ++i)
          if (recv[i] != val(n - 1, i)) return fail("broadcast");
      });
      for (auto& e : errors) FAIL_CHECK(e);
    }
  }
}
