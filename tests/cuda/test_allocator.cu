// The pluggable device allocator (cuda/allocator.hpp): which allocator is current (checked
// without a device), and, on a device, that device dtensors and every temporary of
// redistribute go through the allocator a p2p::run was given, each allocation freed once
// with the size it was made with.
#include <doctest/doctest.h>

#include <shardcast/comm/p2p.hpp>
#include <shardcast/cuda/allocator.hpp>
#include <shardcast/cuda/pack.cuh>  // memory_ops<device_memory>
#include <shardcast/distribute.hpp>
#include <shardcast/mesh.hpp>
#include <shardcast/redistribute.hpp>

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "cuda_testing.hpp"

namespace sc = shardcast;
using shardcast_test::no_device;

namespace {

// Counts calls and checks every free against the size its allocation was made with.
struct ledger {
  std::mutex m;
  std::map<void*, std::size_t> live;
  std::size_t allocs = 0, frees = 0, bad_frees = 0;
};

struct counting_allocator {
  ledger* l;
  void* allocate(std::size_t n, cudaStream_t s) {
    void* p = sc::device::async_allocator{}.allocate(n, s);
    std::lock_guard lk(l->m);
    l->live[p] = n;
    ++l->allocs;
    return p;
  }
  void deallocate(void* p, std::size_t n, cudaStream_t s) {
    {
      std::lock_guard lk(l->m);
      auto it = l->live.find(p);
      if (it == l->live.end() || it->second != n) ++l->bad_frees;
      else l->live.erase(it);
      ++l->frees;
    }
    sc::device::async_allocator{}.deallocate(p, n, s);
  }
};
static_assert(sc::device::allocator<counting_allocator>);
static_assert(sc::device::allocator<sc::device::async_allocator>);

// Never called: only its identity matters.
struct tag_allocator {
  int id;
  void* allocate(std::size_t, cudaStream_t) { return nullptr; }
  void deallocate(void*, std::size_t, cudaStream_t) {}
};

}  // namespace

// No device needed: nothing is allocated.
TEST_CASE("current_allocator: scoped allocators nest per thread over the process default" * doctest::test_suite("host_only")) {
  const sc::device::any_allocator a{tag_allocator{1}}, b{tag_allocator{2}}, d{tag_allocator{3}};
  const sc::device::any_allocator before = sc::device::current_allocator();
  {
    sc::device::scoped_allocator outer(a);
    CHECK(sc::device::current_allocator() == a);
    {
      sc::device::scoped_allocator inner(b);
      CHECK(sc::device::current_allocator() == b);
      // Another thread does not see this thread's scopes.
      sc::device::any_allocator seen;
      std::thread([&] { seen = sc::device::current_allocator(); }).join();
      CHECK(seen == before);
    }
    CHECK(sc::device::current_allocator() == a);
  }
  CHECK(sc::device::current_allocator() == before);
  sc::device::set_default_allocator(d);
  CHECK(sc::device::current_allocator() == d);
  sc::device::set_default_allocator(before);
  CHECK(sc::device::current_allocator() == before);
}

TEST_CASE("memory_ops<device_memory>::allocate uses the current allocator and frees with it" * doctest::skip(no_device())) {
  ledger l;
  cudaStream_t s;
  SHARDCAST_CUDA_TRY(cudaStreamCreate(&s));
  {
    sc::device::scoped_allocator use(counting_allocator{&l});
    auto p = sc::detail::memory_ops<sc::device_memory>::allocate<double>(100, s);
    auto q = sc::detail::memory_ops<sc::device_memory>::allocate<float>(0, s);  // nothing allocated
    CHECK(p != nullptr);
    CHECK(q == nullptr);
    CHECK(l.allocs == 1);
    CHECK(l.live.begin()->second == 100 * sizeof(double));
  }
  SHARDCAST_CUDA_TRY(cudaStreamSynchronize(s));
  CHECK(l.frees == 1);
  CHECK(l.bad_frees == 0);
  SHARDCAST_CUDA_TRY(cudaStreamDestroy(s));
}

TEST_CASE("p2p::run's allocator serves every device dtensor and temporary of its ranks" * doctest::skip(no_device())) {
  ledger l;
  sc::p2p::options o;
  o.allocator = sc::device::any_allocator(counting_allocator{&l});
  sc::p2p::run(
      4, {0},
      [](sc::p2p::communicator& c) {
        cudaStream_t s;
        SHARDCAST_CUDA_TRY(cudaStreamCreate(&s));
        {
          auto m = sc::make_mesh(c, std::array<int, 2>{2, 2});
          const std::array<std::int64_t, 2> ext{7, 5};
          std::vector<float> g(35);
          for (std::size_t i = 0; i < g.size(); ++i) g[i] = float(i % 13);
          auto x = sc::distribute<sc::layout<sc::shard<0>, sc::shard<1>>>(m, g, ext, s);
          auto y = sc::redistribute<sc::layout<sc::replicate, sc::shard<0>>>(x, s);  // pads, packs, gathers
          CHECK(sc::to_global(y, s) == g);
        }
        SHARDCAST_CUDA_TRY(cudaStreamSynchronize(s));
        c.barrier();  // every rank's tensors are gone before the stream goes
        SHARDCAST_CUDA_TRY(cudaStreamDestroy(s));
      },
      o);
  CHECK(l.allocs > 4);  // at least each rank's distributed piece, plus temporaries
  CHECK(l.frees == l.allocs);
  CHECK(l.bad_frees == 0);
  CHECK(l.live.empty());
}

// The snippet of docs/03_gpu.md ("Device memory"), compiled here so it cannot rot: an
// application's stream-ordered memory resource (the shape of RMM's device_memory_resource:
// allocate(bytes, stream) / deallocate(p, bytes, stream)) serving every rank of a p2p run.
namespace app {
struct pool_resource {  // stands in for the application's resource
  void* allocate(std::size_t bytes, cudaStream_t s) { return sc::device::async_allocator{}.allocate(bytes, s); }
  void deallocate(void* p, std::size_t bytes, cudaStream_t s) { sc::device::async_allocator{}.deallocate(p, bytes, s); }
};
}  // namespace app

struct resource_allocator {                 // adapts it to shardcast's allocator concept
  app::pool_resource* r;
  void* allocate(std::size_t n, cudaStream_t s) { return r->allocate(n, s); }
  void deallocate(void* p, std::size_t n, cudaStream_t s) { r->deallocate(p, n, s); }
};

[[maybe_unused]] static void run_with_pool(app::pool_resource& pool) {  // docs/03_gpu.md omits "[[maybe_unused]] static"
  sc::p2p::options o;
  o.allocator = resource_allocator{&pool};  // every rank's tensors and temporaries
  sc::p2p::run(4, {0}, [](sc::p2p::communicator& c) { /* make_mesh(c, ...), distribute, redistribute ... */ }, o);
  // Or for the current thread only (e.g. around code that uses an nccl::communicator you wrapped):
  sc::device::scoped_allocator use(resource_allocator{&pool});
}
