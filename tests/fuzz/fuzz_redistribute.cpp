// Randomized differential fuzzer for redistribute: random meshes (1-4 axes, up to 16
// ranks), random extents (0, 1, primes, larger), random source and target layouts of
// tensors of rank 1-3, random element type and reduce op. Every case must match the
// single-rank reference, on every call (each case redistributes twice unless --calls
// says otherwise), and so must redistribute_into a view over guarded memory.
//
//   fuzz_redistribute                     fixed seed, 2000 cases (the CTest runs 10,000:
//                                         SHARDCAST_FUZZ_CASES in tests/fuzz/CMakeLists.txt)
//   fuzz_redistribute --cases N --seed X  N cases from seed X
//   fuzz_redistribute --seconds S         random seed, run for S seconds
//   --axes A --rank R --ranks P           meshes of 1-A axes (A <= 6) and up to P ranks,
//                                         tensors of rank 1-R (R <= 4); 4, 3 and 16 unless
//                                         given (the CTest fuzz_redistribute_wide: 6, 4, 24)
//   --calls C                             redistributes per case, 2 unless given: the
//                                         second runs on what the first cached, and the
//                                         first result is checked again after it; in odd
//                                         cases the later calls give their inputs up
//                                         (std::move), which runs one all_reduce in place
// With more than 4 axes the axes' sizes are shuffled, so that an axis of size 1 (the last
// ones, when the first have used up the ranks) can be any axis; rank-4 tensors take
// extents of at most 13, so their global tensors stay small.
// A failure prints the seed and case index that replay it.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <random>
#include <shardcast/shardcast.hpp>
#include <string>
#include <vector>

#include "common/differential.hpp"

namespace sc = shardcast;

namespace {
struct mesh_spec {
  std::vector<int> shape;
  int nranks = 1;
};

/// What the cases are drawn from (the defaults are the CTest fuzz_redistribute's).
struct limits {
  int axes = 4;    ///< meshes of 1 to `axes` axes
  int rank = 3;    ///< tensors of rank 1 to `rank`
  int ranks = 16;  ///< at most this many ranks
  int calls = 2;   ///< redistributes per case (see testing::differential_case)
};

mesh_spec random_mesh(std::mt19937_64& g, const limits& lim) {
  mesh_spec m;
  const int naxes = 1 + static_cast<int>(g() % static_cast<unsigned>(lim.axes));
  for (int a = 0; a < naxes; ++a) {
    int s = 1 + static_cast<int>(g() % 4);
    while (m.nranks * s > lim.ranks) --s;
    m.shape.push_back(s);
    m.nranks *= s;
  }
  if (lim.axes > 4) std::shuffle(m.shape.begin(), m.shape.end(), g);
  return m;
}

sc::runtime_layout random_layout(std::mt19937_64& g, int naxes, int rank, sc::reduce_op op) {
  sc::runtime_layout l;
  l.naxes = naxes;
  for (int a = 0; a < naxes; ++a) {
    const int k = static_cast<int>(g() % 3);
    l[a] = k == 0 ? sc::placement_desc::make_replicate()
         : k == 1 ? sc::placement_desc::make_shard(static_cast<int>(g() % static_cast<unsigned>(rank)))
                  : sc::placement_desc::make_partial(op);
  }
  return l;
}

std::int64_t random_extent(std::mt19937_64& g) {
  static const std::int64_t pool[] = {0, 1, 2, 3, 5, 7, 11, 13, 16, 31, 64};
  return pool[g() % std::size(pool)];
}

struct case_spec {
  sc::runtime_layout src, dst;
  std::array<std::int64_t, 4> ext{};
  int rank = 1;
  int type = 0;  // 0 float, 1 double, 2 int32, 3 int64
};

template <int N>
std::string run_cases(const mesh_spec& ms, const std::vector<case_spec>& cases, int calls) {
  std::array<int, N> shape{};
  for (int a = 0; a < N; ++a) shape[static_cast<std::size_t>(a)] = ms.shape[static_cast<std::size_t>(a)];
  std::string first;
  std::mutex mu;
  sc::host::run(ms.nranks, [&](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, shape);
    for (std::size_t i = 0; i < cases.size(); ++i) {
      const auto& k = cases[i];
      std::string err;
      // redistribute, then redistribute_into a guarded view; every rank runs both (the
      // checks are collective), and the first error counts.
      auto both = [&]<class T, std::size_t R>(const std::array<std::int64_t, R>& e) {
        // Odd cases give the inputs of their later calls up (redistribute of an rvalue).
        err = sc::testing::differential_case<T>(m, k.src, k.dst, e, {}, calls, i % 2 == 1);
        const std::string into = sc::testing::differential_into_case<T>(m, k.src, k.dst, e);
        if (err.empty()) err = into;
      };
      auto go = [&]<class T>() {
        switch (k.rank) {
          case 1: both.template operator()<T>(std::array<std::int64_t, 1>{k.ext[0]}); break;
          case 2: both.template operator()<T>(std::array<std::int64_t, 2>{k.ext[0], k.ext[1]}); break;
          case 3: both.template operator()<T>(std::array<std::int64_t, 3>{k.ext[0], k.ext[1], k.ext[2]}); break;
          default: both.template operator()<T>(k.ext); break;
        }
      };
      switch (k.type) {
        case 0: go.template operator()<float>(); break;
        case 1: go.template operator()<double>(); break;
        case 2: go.template operator()<std::int32_t>(); break;
        default: go.template operator()<std::int64_t>(); break;
      }
      if (!err.empty()) {
        std::lock_guard lk(mu);
        if (first.empty()) first = "case " + std::to_string(i) + ": " + err;
      }
    }
  });
  return first;
}
}  // namespace

int main(int argc, char** argv) {
  std::uint64_t seed = 20261202;
  long max_cases = 2000;
  double seconds = 0;
  limits lim;
  bool bad = argc % 2 == 0;
  for (int i = 1; i + 1 < argc && !bad; i += 2) {
    const std::string a = argv[i];
    if (a == "--seed") seed = std::strtoull(argv[i + 1], nullptr, 10);
    else if (a == "--cases") max_cases = std::strtol(argv[i + 1], nullptr, 10);
    else if (a == "--seconds") {
      seconds = std::strtod(argv[i + 1], nullptr);
      seed = std::random_device{}();
      max_cases = -1;
    } else if (a == "--axes") lim.axes = std::atoi(argv[i + 1]);
    else if (a == "--rank") lim.rank = std::atoi(argv[i + 1]);
    else if (a == "--ranks") lim.ranks = std::atoi(argv[i + 1]);
    else if (a == "--calls") lim.calls = std::atoi(argv[i + 1]);
    else bad = true;
  }
  if (bad || lim.axes < 1 || lim.axes > 6 || lim.rank < 1 || lim.rank > 4 || lim.ranks < 1 || lim.calls < 1) {
    std::fprintf(stderr, "usage: %s [--cases N] [--seed X] [--seconds S] [--axes 1-6] [--rank 1-4] [--ranks P>=1] [--calls C>=1]\n", argv[0]);
    return 2;
  }
  std::printf("fuzz_redistribute: seed %llu, meshes of 1-%d axes and up to %d ranks, tensors of rank 1-%d, %d calls a case\n",
              static_cast<unsigned long long>(seed), lim.axes, lim.ranks, lim.rank, lim.calls);
  const auto t0 = std::chrono::steady_clock::now();
  long done = 0, failed = 0;
  std::uint64_t batch_seed = seed;
  // Batches of cases share one mesh so threads are not recreated for every case.
  while ((max_cases < 0 || done < max_cases) &&
         (seconds <= 0 || std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < seconds)) {
    std::mt19937_64 g(batch_seed);
    const mesh_spec ms = random_mesh(g, lim);
    const long n = std::min<long>(25, max_cases < 0 ? 25 : max_cases - done);
    std::vector<case_spec> cases;
    for (long i = 0; i < n; ++i) {
      case_spec k;
      k.rank = 1 + static_cast<int>(g() % static_cast<unsigned>(lim.rank));
      const auto op = static_cast<sc::reduce_op>(g() % 5);
      k.src = random_layout(g, static_cast<int>(ms.shape.size()), k.rank, op);
      k.dst = random_layout(g, static_cast<int>(ms.shape.size()), k.rank, g() % 2 ? op : static_cast<sc::reduce_op>(g() % 5));
      for (int d = 0; d < lim.rank; ++d) k.ext[static_cast<std::size_t>(d)] = d < k.rank ? random_extent(g) : 1;
      if (k.rank == 4)
        for (auto& e : k.ext) e = e > 13 ? e % 13 : e;
      k.type = static_cast<int>(g() % 4);
      cases.push_back(k);
    }
    std::string err;
    switch (ms.shape.size()) {
      case 1: err = run_cases<1>(ms, cases, lim.calls); break;
      case 2: err = run_cases<2>(ms, cases, lim.calls); break;
      case 3: err = run_cases<3>(ms, cases, lim.calls); break;
      case 4: err = run_cases<4>(ms, cases, lim.calls); break;
      case 5: err = run_cases<5>(ms, cases, lim.calls); break;
      default: err = run_cases<6>(ms, cases, lim.calls); break;
    }
    done += n;
    if (!err.empty()) {
      ++failed;
      std::string shape;
      for (int s : ms.shape) shape += (shape.empty() ? "" : "x") + std::to_string(s);
      std::printf("FAILED batch seed %llu (mesh %s): %s\n", static_cast<unsigned long long>(batch_seed), shape.c_str(), err.c_str());
    }
    batch_seed = std::mt19937_64(batch_seed)();  // next batch
  }
  std::printf("fuzz_redistribute: %ld cases in %.1f s\n", done,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  std::printf("%ld passed, %ld failed\n", done - failed, failed);
  return failed ? 1 : 0;
}
