// Vocab-parallel embedding: forward (plain and sequence parallel) and the table gradient
// against a global lookup and scatter-add, with ids outside every shard, outside the
// vocabulary and repeated; the per-rank partial lookups are checked shard by shard.
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <mutex>
#include <shardcast/comm/host.hpp>
#include <shardcast/nn/embedding.hpp>
#include <string>
#include <vector>

#include "reference.hpp"

namespace sc = shardcast;
namespace nn = shardcast::nn;
using nn_ref::i64;

namespace {

template <class Axes, std::size_t N>
void check_embedding(std::array<int, N> shape, i64 vocab, i64 hidden, const std::vector<i64>& ids) {
  using T = double;
  INFO("mesh " << shape[0] << "x" << shape[1] << " tp " << Axes::tp << " sp " << Axes::sequence_parallel << " vocab " << vocab << " hidden "
               << hidden << " tokens " << ids.size());
  const i64 t = static_cast<i64>(ids.size());
  const auto table = nn_ref::ints<T>(vocab * hidden, 1), dE = nn_ref::ints<T>(t * hidden, 2);
  std::vector<T> E(static_cast<std::size_t>(t * hidden), T{}), dTable(table.size(), T{});
  for (i64 r = 0; r < t; ++r) {
    const i64 id = ids[static_cast<std::size_t>(r)];
    if (id < 0 || id >= vocab) continue;
    for (i64 c = 0; c < hidden; ++c) {
      E[static_cast<std::size_t>(r * hidden + c)] = table[static_cast<std::size_t>(id * hidden + c)];
      dTable[static_cast<std::size_t>(id * hidden + c)] += dE[static_cast<std::size_t>(r * hidden + c)];
    }
  }
  int nranks = 1;
  for (int s : shape) nranks *= s;
  std::mutex mu;
  std::vector<std::string> bad;
  auto fail = [&](int rank, const std::string& what) {
    std::lock_guard lk(mu);
    bad.push_back("rank " + std::to_string(rank) + ": " + what);
  };
  sc::host::run(nranks, [&](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, shape);
    using Mesh = decltype(mesh);
    using emb_t = nn::vocab_parallel_embedding<T, Mesh, Axes>;
    emb_t emb(sc::distribute<typename emb_t::table_layout>(mesh, table, std::array<i64, 2>{vocab, hidden}));
    auto x = sc::distribute<typename emb_t::ids_layout>(mesh, ids, std::array<i64, 1>{t});
    auto e = emb.forward(x);
    auto ep = emb.forward_partial(x);
    auto dy = sc::distribute<typename emb_t::output_layout>(mesh, dE, std::array<i64, 2>{t, hidden});
    auto g = emb.backward(x, dy);

    // Shard by shard: this rank's lookup holds its own rows and zeros for every other id.
    const i64 v0 = emb.table.local_box().off[0], nv = emb.table.local_box().ext[0];
    const auto& bp = ep.local_box();
    for (i64 r = 0; r < bp.ext[0]; ++r) {
      const i64 id = ids[static_cast<std::size_t>(bp.off[0] + r)];
      for (i64 c = 0; c < hidden; ++c) {
        const T want = id >= v0 && id < v0 + nv ? table[static_cast<std::size_t>(id * hidden + c)] : T{};
        if (ep.data()[r * hidden + c] != want) {
          fail(comm.rank(), "partial lookup of token " + std::to_string(bp.off[0] + r) + " (id " + std::to_string(id) + ")");
          break;
        }
      }
    }
    if (sc::to_global(e) != E) fail(comm.rank(), "forward");
    if (sc::to_global(ep) != E) fail(comm.rank(), "forward_partial reduced");
    if (sc::to_global(g) != dTable) fail(comm.rank(), "table gradient");
    if (sc::to_global(emb.table) != table) fail(comm.rank(), "table changed");
    // The same with ids and a gradient of const elements (only read), each const or not.
    const sc::dtensor<const i64, 1, typename emb_t::ids_layout, Mesh> cx = x;
    const sc::dtensor<const T, 2, typename emb_t::output_layout, Mesh> cdy = dy;
    if (sc::to_global(emb.forward(cx)) != E) fail(comm.rank(), "forward, const ids");
    if (sc::to_global(emb.forward_partial(cx)) != E) fail(comm.rank(), "forward_partial reduced, const ids");
    if (sc::to_global(emb.backward(cx, cdy)) != dTable) fail(comm.rank(), "table gradient, const ids and gradient");
    if (sc::to_global(emb.backward(x, cdy)) != dTable) fail(comm.rank(), "table gradient, const gradient");
    if (sc::to_global(emb.backward(cx, dy)) != dTable) fail(comm.rank(), "table gradient, const ids");
    if (sc::to_global(x) != ids || sc::to_global(dy) != dE) fail(comm.rank(), "an input changed");
  });
  for (auto& s : bad) FAIL_CHECK(s);
  CHECK(bad.empty());
}

template <template <int, int> class Kind>
void embedding_on_meshes() {
  // ids outside [0, vocab), repeated ids (their gradients add up), ids in every shard, and
  // the int64 limits (far outside: id - first row of a shard would overflow, which the
  // UndefinedBehaviorSanitizer build reports)
  const std::vector<i64> ids{0, 6, -1, 7, 3, 100, 3, 5, 1, std::numeric_limits<i64>::min(), std::numeric_limits<i64>::max()};
  for (auto shape : {std::array<int, 2>{1, 3}, std::array<int, 2>{3, 1}, std::array<int, 2>{2, 2}, std::array<int, 2>{1, 2}}) {
    check_embedding<Kind<1, 0>>(shape, 7, 3, ids);
    check_embedding<Kind<1, 0>>(shape, 2, 2, ids);  // fewer vocab rows than TP ranks on 1x3: an empty shard
    check_embedding<Kind<1, 0>>(shape, 7, 3, std::vector<i64>{4, -5});  // fewer tokens than ranks
  }
  if constexpr (!Kind<1, 0>::sequence_parallel) {  // sequence parallelism needs the DP axis first
    check_embedding<Kind<0, 1>>(std::array<int, 2>{2, 2}, 7, 3, ids);
    check_embedding<Kind<0, 1>>(std::array<int, 2>{3, 1}, 5, 2, ids);
  }
}

}  // namespace

TEST_CASE("nn: embedding backward over integer elements wraps as every integer sum does") {
  // Three tokens of id 1 add INT_MAX + INT_MAX + INT_MAX into one row: modulo 2^32, with no
  // signed overflow (the UndefinedBehaviorSanitizer build reports one).
  using T = std::int32_t;
  const T big = std::numeric_limits<T>::max();
  const i64 vocab = 4, hidden = 2;
  const std::vector<i64> ids{1, 1, 3, 1};
  const std::vector<T> table{0, 1, 2, 3, 4, 5, 6, 7}, dE{big, 1, big, big, -5, 6, big, big};
  std::vector<std::uint32_t> want(static_cast<std::size_t>(vocab * hidden), 0);
  for (std::size_t r = 0; r < ids.size(); ++r)
    for (std::size_t c = 0; c < 2; ++c) want[static_cast<std::size_t>(ids[r]) * 2 + c] += static_cast<std::uint32_t>(dE[r * 2 + c]);
  std::vector<T> dTable(want.size());
  for (std::size_t i = 0; i < want.size(); ++i) dTable[i] = static_cast<T>(want[i]);
  std::vector<std::string> bad;
  std::mutex mu;
  sc::host::run(2, [&](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, std::array<int, 2>{1, 2});
    using emb_t = nn::vocab_parallel_embedding<T, decltype(mesh), nn::tensor_parallel<1, 0>>;
    emb_t emb(sc::distribute<emb_t::table_layout>(mesh, table, std::array<i64, 2>{vocab, hidden}));
    auto x = sc::distribute<emb_t::ids_layout>(mesh, ids, std::array<i64, 1>{4});
    auto dy = sc::distribute<emb_t::output_layout>(mesh, dE, std::array<i64, 2>{4, hidden});
    if (sc::to_global(emb.backward(x, dy)) != dTable) {
      std::lock_guard lk(mu);
      bad.push_back("rank " + std::to_string(comm.rank()) + ": table gradient");
    }
  });
  for (auto& s : bad) FAIL_CHECK(s);
  CHECK(bad.empty());
}

TEST_CASE("nn: vocab-parallel embedding, tensor parallel, matches a global lookup and scatter-add") {
  embedding_on_meshes<nn::tensor_parallel>();
}

TEST_CASE("nn: vocab-parallel embedding, sequence parallel, matches a global lookup and scatter-add") {
  embedding_on_meshes<nn::sequence_parallel>();
}

TEST_CASE("nn: embedding backward refuses a gradient of the wrong size") {
  sc::host::run(2, [](sc::host::communicator& comm) {
    auto mesh = sc::make_mesh(comm, std::array<int, 2>{1, 2});
    using emb_t = nn::vocab_parallel_embedding<double, decltype(mesh), nn::tensor_parallel<1, 0>>;
    emb_t emb(sc::distribute<emb_t::table_layout>(mesh, nn_ref::ints<double>(12, 0), std::array<i64, 2>{4, 3}));
    auto ids = sc::distribute<emb_t::ids_layout>(mesh, std::vector<i64>{1, 2}, std::array<i64, 1>{2});
    // hidden size 2 instead of 3, and 3 tokens instead of 2
    auto dy = sc::distribute<emb_t::output_layout>(mesh, nn_ref::ints<double>(4, 0), std::array<i64, 2>{2, 2});
    CHECK_THROWS_WITH_AS((void)emb.backward(ids, dy), doctest::Contains("the output gradient is 2x2 but the lookup was 2x3"), sc::layout_error);
    auto dy_tokens = sc::distribute<emb_t::output_layout>(mesh, nn_ref::ints<double>(9, 0), std::array<i64, 2>{3, 3});
    CHECK_THROWS_WITH_AS((void)emb.backward(ids, dy_tokens), doctest::Contains("the output gradient is 3x3 but the lookup was 2x3"),
                         sc::layout_error);
  });
}
