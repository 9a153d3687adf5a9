#pragma once
/// @file cuda/allocator.hpp
/// Pluggable device memory for device dtensors and the executor's temporaries.
///
/// An allocator is any copyable object with
/// @code
///   void* allocate(std::size_t bytes, cudaStream_t s);                 // usable on `s` from now on
///   void  deallocate(void* p, std::size_t bytes, cudaStream_t s);      // after the work queued on `s`
/// @endcode
/// (`device::allocator` checks it). The default, `device::async_allocator`, is stream-ordered
/// `cudaMallocAsync` / `cudaFreeAsync` on the device's default memory pool.
///
/// Which allocator is used is a property of the rank, i.e. of the host thread that runs it:
/// `memory_ops<device_memory>::allocate` (every device dtensor and every temporary of
/// `redistribute`) takes this thread's current allocator — the innermost live
/// `device::scoped_allocator`, else the process default (`set_default_allocator`, initially
/// `async_allocator`). `p2p::run` and `nccl::run_local` install `options::allocator` in every
/// rank thread, so a mesh built in `f(comm)` allocates with it. Memory is freed with the
/// allocator and on the stream it was allocated with, when the last tensor handle sharing it
/// goes; that stream must still exist then.
/// @code
///   // Route shardcast's device memory through a caching allocator the application already has.
///   struct cache_alloc {
///     my_cache* c;
///     void* allocate(std::size_t n, cudaStream_t s) { return c->get(n, s); }
///     void deallocate(void* p, std::size_t n, cudaStream_t s) { c->put(p, n, s); }
///   };
///   sc::device::scoped_allocator use(cache_alloc{&cache});   // this thread, until `use` ends
/// @endcode

#include <cuda_runtime_api.h>

#include <concepts>
#include <cstddef>
#include <memory>
#include <mutex>
#include <type_traits>
#include <utility>

#include "check.hpp"

namespace shardcast::device {

/// What an allocator must provide (see the file comment).
template <class A>
concept allocator = std::copy_constructible<A> && requires(A& a, void* p, std::size_t n, cudaStream_t s) {
  { a.allocate(n, s) } -> std::convertible_to<void*>;
  a.deallocate(p, n, s);
};

/// Stream-ordered allocation from the current device's default memory pool.
struct async_allocator {
  /// @throws cuda_error if cudaMallocAsync fails (e.g. out of memory).
  void* allocate(std::size_t bytes, cudaStream_t s) const {
    void* p = nullptr;
    SHARDCAST_CUDA_TRY(cudaMallocAsync(&p, bytes, s));
    return p;
  }
  /// Never throws: a failed free here means the context is already gone.
  void deallocate(void* p, std::size_t, cudaStream_t s) const noexcept { (void)cudaFreeAsync(p, s); }
};

/// A shared, type-erased allocator (cheap to copy; copies share the wrapped object, which
/// must therefore be safe to call from every thread that holds a copy).
class any_allocator {
 public:
  /// async_allocator.
  any_allocator() : any_allocator(async_allocator{}) {}
  /// Wraps `a` (moved into shared storage).
  // The same_as test comes first so that copying an any_allocator does not check the
  // allocator concept on any_allocator itself (a recursive constraint clang rejects).
  template <class A>
    requires(!std::same_as<std::remove_cvref_t<A>, any_allocator> && allocator<A>)
  any_allocator(A a) : p_(std::make_shared<model<A>>(std::move(a))) {}  // NOLINT: implicit on purpose

  void* allocate(std::size_t bytes, cudaStream_t s) const { return p_->allocate(bytes, s); }
  void deallocate(void* p, std::size_t bytes, cudaStream_t s) const noexcept { p_->deallocate(p, bytes, s); }

  /// True when both wrap the same object.
  friend bool operator==(const any_allocator& a, const any_allocator& b) { return a.p_ == b.p_; }

 private:
  struct concept_t {
    virtual ~concept_t() = default;
    virtual void* allocate(std::size_t, cudaStream_t) = 0;
    virtual void deallocate(void*, std::size_t, cudaStream_t) noexcept = 0;
  };
  template <class A>
  struct model final : concept_t {
    explicit model(A x) : a(std::move(x)) {}
    void* allocate(std::size_t n, cudaStream_t s) override { return static_cast<void*>(a.allocate(n, s)); }
    void deallocate(void* p, std::size_t n, cudaStream_t s) noexcept override {
      try {
        a.deallocate(p, n, s);
      } catch (...) {
        // Deallocation runs in shared_ptr deleters, which must not throw; the memory is lost.
      }
    }
    A a;
  };
  std::shared_ptr<concept_t> p_;
};

namespace detail {
inline std::mutex& default_allocator_mutex() {
  static std::mutex m;
  return m;
}
inline any_allocator& default_allocator_slot() {
  static any_allocator a;
  return a;
}
inline const any_allocator*& thread_allocator_slot() {
  thread_local const any_allocator* p = nullptr;
  return p;
}
}  // namespace detail

/// Replaces the process-wide default (used by threads with no scoped_allocator). Memory
/// already allocated is still freed by the allocator that made it.
inline void set_default_allocator(any_allocator a) {
  std::lock_guard lk(detail::default_allocator_mutex());
  detail::default_allocator_slot() = std::move(a);
}

/// This thread's current allocator: the innermost live scoped_allocator, else the default.
inline any_allocator current_allocator() {
  if (const any_allocator* p = detail::thread_allocator_slot()) return *p;
  std::lock_guard lk(detail::default_allocator_mutex());
  return detail::default_allocator_slot();
}

/// Makes `a` this thread's current allocator until the guard is destroyed (guards nest;
/// destroy them in reverse order of creation, as scopes do).
class scoped_allocator {
 public:
  explicit scoped_allocator(any_allocator a) : a_(std::move(a)), prev_(detail::thread_allocator_slot()) {
    detail::thread_allocator_slot() = &a_;
  }
  ~scoped_allocator() { detail::thread_allocator_slot() = prev_; }
  scoped_allocator(const scoped_allocator&) = delete;
  scoped_allocator& operator=(const scoped_allocator&) = delete;

 private:
  any_allocator a_;
  const any_allocator* prev_;
};

/// `n` elements of T from `a` on stream `s`, freed with `a` on `s` when the last owner
/// goes. n == 0 gives an empty pointer and allocates nothing.
/// @throws whatever `a.allocate` throws (cuda_error for async_allocator).
template <class T>
std::shared_ptr<T> allocate_shared(const any_allocator& a, std::size_t n, cudaStream_t s) {
  if (n == 0) return std::shared_ptr<T>();
  const std::size_t bytes = n * sizeof(T);
  void* p = a.allocate(bytes, s);
  // (If the control block cannot be made, this constructor calls the deleter itself.)
  return std::shared_ptr<T>(static_cast<T*>(p), [a, bytes, s](T* q) { a.deallocate(q, bytes, s); });
}

}  // namespace shardcast::device
