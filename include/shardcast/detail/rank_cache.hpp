#pragma once
/// @file detail/rank_cache.hpp
/// Per-rank state that `redistribute` keeps in the mesh between calls:
/// - the geometry of every (static plan, global extents) already run on this rank (the
///   boxes, chunk sizes and communicators of each step), so a repeated static
///   redistribute does no box arithmetic and no communicator lookup;
/// - a host staging arena reused for pack/unpack buffers and for the pieces between the
///   steps of a plan. Results never live in it: the last step of a plan always writes
///   into memory the result owns, so earlier results stay valid while the arena is reused;
/// - a pool that recycles the blocks of large results once their owners are gone.
/// Also the run-time plans shared by all ranks of a process (shared_plan_cache).

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <iterator>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "../comm/rank_barrier.hpp"
#include "../config.hpp"
#include "../plan.hpp"
#include "../split.hpp"
#include "region_copy.hpp"

namespace shardcast::detail {

/// What one step of a plan needs on this rank besides the data (for one mesh and one set
/// of global extents). Counts are in elements.
struct step_geometry {
  box nb{};                   ///< this rank's box after the step
  std::size_t in_elems = 0;   ///< volume of this rank's box before the step
  std::size_t out_elems = 0;  ///< elements the step's output buffer holds (>= nb volume; reduce_scatter writes a padded chunk)
  std::size_t chunk = 0;      ///< all_gather / reduce_scatter: elements per group member, padded to the largest piece
  std::size_t stage_in = 0;   ///< staging written before the collective (pad, pack, all_to_all send)
  std::size_t stage_out = 0;  ///< staging the collective writes (all_gather unpack, all_to_all recv)
  int n = 1;                  ///< group size
  bool in_place = false;      ///< all_gather / reduce_scatter: the pieces already lie as the collective needs them
  bool keeper = true;         ///< identity step: this rank keeps the value (sum, prod)
  /// A collective in which no member of the group holds or gets any element (every piece
  /// before and after the step is empty): every member skips the call, so the group does
  /// not meet for nothing. Each member finds the same from the members' boxes.
  bool idle = false;
  /// A collective over a group of one rank: the piece is the same before and after
  /// (detail::calls_collective), so the step copies it without a call (`idle` is set too).
  bool alone = false;
  /// A reduction with avg that another reduction with avg follows in the plan: on integer
  /// types it sums, and the last one divides for both (see avg_divisor).
  bool sums_avg = false;
  /// The last reduction with avg of a plan whose earlier ones summed: on integer types, the
  /// product of their group sizes, by which its own mean is divided once more. (The means
  /// of integers truncate, and trunc(trunc(S / a) / b) = trunc(S / (a b)), while a mean of
  /// truncated means is not the mean.)
  int avg_divisor = 1;
  std::uint32_t boxes = 0;    ///< first of this step's boxes in plan_geometry::boxes
  std::uint32_t counts = 0;   ///< all_to_all: first of this step's 4n counts (send counts, send displs, recv counts, recv displs)
  std::uint32_t copies = 0;   ///< host memory: first of this step's planned copies in plan_geometry::copies
  void* comm = nullptr;       ///< the step's group communicator (a `Mesh::comm_type*` owned by the mesh)
};

/// The geometry of a whole plan on one rank.
struct plan_geometry {
  std::vector<step_geometry> steps;
  std::vector<box> boxes;            ///< member boxes (gather unpack, scatter pack) and all_to_all send/recv regions
  std::vector<std::size_t> counts;   ///< all_to_all counts and displacements
  /// Host memory: each step's local copies, planned (plan_region_copy) with the offsets of
  /// staging chunks folded in: an all_gather's n unpacks, a reduce_scatter's n packs, an
  /// all_to_all's n packs then n unpacks (planned only for a side that is staged), a
  /// slice's or a pad's one copy.
  std::vector<region_copy> copies;
  std::size_t slot_elems = 0;        ///< largest output of a step that is not the last (kept in the arena between steps)
  std::size_t in_elems = 0;          ///< largest stage_in of any step
  std::size_t out_elems = 0;         ///< largest stage_out of any step
  box src_box{};                     ///< this rank's box before the first step
  int nsteps = 0;
  int choice = 0;                    ///< static redistribute: which of static_plans runs, -1: `own`
  /// Static redistribute: `choice` when no step needs staging and the last step's output is
  /// not empty and smaller than a result pool block for elements of up to direct_elem_bytes
  /// bytes; else -1. A chosen candidate that is one collective then runs as one allocation
  /// and one call with nothing more checked.
  int direct = -1;
  static constexpr std::size_t direct_elem_bytes = 16;
  std::unique_ptr<plan> own;         ///< static redistribute: the run-time plan, when strictly cheaper than every candidate

  /// Does any step need staging memory?
  bool staged() const { return (slot_elems | in_elems | out_elems) != 0; }

  const box& final_box() const { return steps.back().nb; }
};

/// Geometry of the static plans already run on this rank, keyed by the address of their
/// `static_plans` set (a constexpr object with static storage, so its address names it,
/// and with it the tensor rank) and the global extents. The most recently used entry is
/// checked first, inline (is_recent); at most `capacity` entries are kept (the oldest is
/// dropped first).
class geometry_cache {
 public:
  static constexpr std::size_t capacity = 64;

  /// Is the most recently used entry the one for (key, ext[0..R))? Then recent() is it.
  /// (A key names one rank, so only the extents are compared.)
  template <int R>
  bool is_recent(const void* key, const std::int64_t* ext) const {
    bool same = key == mru_key_;
    for (int d = 0; d < R; ++d) same = same && ext[d] == mru_ext_[d];
    return same;
  }
  const plan_geometry& recent() const { return *mru_; }
  /// The cached geometry for (key, ext[0..rank)), or nullptr; a hit becomes the most recent.
  const plan_geometry* find(const void* key, const std::int64_t* ext, int rank) {
    for (entry& e : entries_)
      if (e.key == key && e.rank == rank && std::equal(ext, ext + rank, e.ext)) {
        use(e);
        return e.g.get();
      }
    return nullptr;
  }
  /// Stores `g` (dropping the oldest entry when full) and makes it the most recent.
  const plan_geometry& insert(const void* key, const std::int64_t* ext, int rank, plan_geometry g) {
    if (entries_.size() == capacity) {
      if (entries_.front().g.get() == mru_) mru_key_ = nullptr, mru_ = nullptr;
      entries_.erase(entries_.begin());
    }
    entry e;
    e.key = key;
    e.rank = rank;
    std::copy(ext, ext + rank, e.ext);
    e.g = std::make_unique<plan_geometry>(std::move(g));
    entries_.push_back(std::move(e));
    use(entries_.back());
    return *entries_.back().g;
  }
  std::size_t size() const { return entries_.size(); }

 private:
  struct entry {
    const void* key = nullptr;
    int rank = 0;
    std::int64_t ext[SHARDCAST_MAX_RANK]{};
    std::unique_ptr<plan_geometry> g;
  };
  void use(const entry& e) {
    mru_key_ = e.key;
    std::copy(e.ext, e.ext + e.rank, mru_ext_);
    mru_ = e.g.get();
  }
  std::vector<entry> entries_;
  const void* mru_key_ = nullptr;
  std::int64_t mru_ext_[SHARDCAST_MAX_RANK]{};
  const plan_geometry* mru_ = nullptr;
};

/// Host staging memory reused across calls. One caller at a time holds it (a `lease`);
/// a caller that asks while it is held gets a private allocation instead, so the arena
/// is never shared by two calls in flight. (Like the rest of the mesh, the arena is used
/// by one thread at a time: the flag guards nesting, not concurrency.) The memory grows
/// to the largest request and is kept until the mesh is destroyed, so repeated calls
/// touch pages that are already mapped (no page faults, no clearing).
class staging_arena {
 public:
  static constexpr std::size_t align = 64;

  class lease {
   public:
    lease() = default;
    lease(const lease&) = delete;
    lease& operator=(const lease&) = delete;
    lease(lease&& o) noexcept : p_(o.p_), arena_(o.arena_), own_(std::move(o.own_)) {
      o.p_ = nullptr;
      o.arena_ = nullptr;
    }
    lease& operator=(lease&& o) noexcept {
      if (this != &o) {
        release();
        p_ = o.p_;
        arena_ = o.arena_;
        own_ = std::move(o.own_);
        o.p_ = nullptr;
        o.arena_ = nullptr;
      }
      return *this;
    }
    ~lease() { release(); }
    std::byte* get() const { return p_; }

   private:
    friend class staging_arena;
    void release() {
      if (arena_) arena_->busy_ = false;
      arena_ = nullptr;
    }
    std::byte* p_ = nullptr;
    staging_arena* arena_ = nullptr;
    std::unique_ptr<std::byte[]> own_;
  };

  /// At least `bytes` bytes, 64-byte aligned, valid while the lease lives.
  lease acquire(std::size_t bytes) {
    lease l;
    if (bytes == 0) return l;
    if (busy_) {  // held by a call in flight: private memory
      l.own_.reset(new std::byte[bytes + align]);
      l.p_ = aligned(l.own_.get());
      return l;
    }
    busy_ = true;
    l.arena_ = this;
    if (cap_ < bytes) {
      const std::size_t grown = std::max(bytes, cap_ + cap_ / 2);
      buf_.reset();  // release first, so old and new never coexist
      cap_ = 0;
      buf_.reset(new std::byte[grown + align]);
      cap_ = grown;
    }
    l.p_ = aligned(buf_.get());
    return l;
  }
  /// Bytes currently held.
  std::size_t capacity() const { return cap_; }
  /// Frees the buffer unless a lease holds it; the next acquire allocates again.
  void release() {
    if (busy_) return;
    buf_.reset();
    cap_ = 0;
  }

 private:
  static std::byte* aligned(std::byte* p) {
    const auto u = reinterpret_cast<std::uintptr_t>(p);
    return p + ((align - u % align) % align);
  }
  std::unique_ptr<std::byte[]> buf_;
  std::size_t cap_ = 0;
  bool busy_ = false;
};

/// Recycles the memory of large results. When the last owner of a result lets go, its
/// block comes back here, and the next result of the same byte size reuses it: already
/// mapped pages, so no page faults and no kernel clearing (which dominate a fresh
/// multi-MiB allocation). Blocks smaller than `min_bytes` use the ordinary allocation;
/// at most `max_free` blocks and `limit()` bytes (SHARDCAST_RESULT_POOL_BYTES unless
/// set_limit changed it) wait for reuse, the oldest released first. Results may be
/// released on any thread: the free list has a mutex.
class result_pool {
 public:
  static constexpr std::size_t min_bytes = std::size_t{256} << 10;
  static constexpr std::size_t max_free = 4;
  static constexpr std::align_val_t block_align{64};

  /// The shared free list; every result allocated here keeps it alive.
  struct core {
    std::mutex m;
    std::vector<std::pair<std::size_t, void*>> free;  // (bytes, block), oldest first
    std::size_t free_bytes = 0;
    std::size_t limit = SHARDCAST_RESULT_POOL_BYTES;
    ~core() {
      for (auto& b : free) ::operator delete(b.second, block_align);
    }
    void* take(std::size_t bytes) {
      {
        std::lock_guard lk(m);
        for (std::size_t i = free.size(); i-- > 0;)
          if (free[i].first == bytes) {
            void* p = free[i].second;
            free.erase(free.begin() + static_cast<std::ptrdiff_t>(i));
            free_bytes -= bytes;
            return p;
          }
      }
      return ::operator new(bytes, block_align);
    }
    void give(void* p, std::size_t bytes) {
      change_then_trim(max_free, [&](std::vector<void*>& drop) {
        if (bytes > limit) {
          drop.push_back(p);
        } else {
          free.emplace_back(bytes, p);
          free_bytes += bytes;
        }
      });
    }
    void set_limit(std::size_t bytes) {
      change_then_trim(max_free, [&](std::vector<void*>&) { limit = bytes; });
    }
    void release() {
      change_then_trim(0, [](std::vector<void*>&) {});
    }
    /// Under the lock, runs `change(drop)`, then drops the oldest waiting blocks until at
    /// most `keep_blocks` blocks and `limit` bytes wait; frees `drop` outside the lock.
    template <class F>
    void change_then_trim(std::size_t keep_blocks, F&& change) {
      std::vector<void*> drop;
      {
        std::lock_guard lk(m);
        change(drop);
        while (!free.empty() && (free.size() > keep_blocks || free_bytes > limit)) {
          drop.push_back(free.front().second);
          free_bytes -= free.front().first;
          free.erase(free.begin());
        }
      }
      for (void* q : drop) ::operator delete(q, block_align);
    }
  };

  /// The allocator of allocate_shared: control block and elements in one pooled block.
  template <class U>
  struct allocator {
    using value_type = U;
    std::shared_ptr<core> c;
    explicit allocator(std::shared_ptr<core> p) : c(std::move(p)) {}
    template <class V>
    allocator(const allocator<V>& o) : c(o.c) {}
    U* allocate(std::size_t n) { return static_cast<U*>(c->take(n * sizeof(U))); }
    void deallocate(U* p, std::size_t n) { c->give(p, n * sizeof(U)); }
    template <class V>
    friend bool operator==(const allocator& a, const allocator<V>& b) {
      return a.c == b.c;
    }
  };

  /// Storage for `n` elements (uninitialised), owned by the returned pointer.
  template <class T>
  std::shared_ptr<T> allocate(std::size_t n) {
    std::shared_ptr<T[]> a = std::allocate_shared_for_overwrite<T[]>(allocator<T>(core_), n > 0 ? n : 1);
    T* p = a.get();
    return std::shared_ptr<T>(std::move(a), p);
  }
  /// Blocks waiting for reuse.
  std::size_t free_blocks() const {
    std::lock_guard lk(core_->m);
    return core_->free.size();
  }
  /// Bytes of the blocks waiting for reuse.
  std::size_t free_bytes() const {
    std::lock_guard lk(core_->m);
    return core_->free_bytes;
  }
  /// At most this many bytes of released results wait for reuse; 0 turns recycling off.
  std::size_t limit() const {
    std::lock_guard lk(core_->m);
    return core_->limit;
  }
  /// Changes limit() and frees the oldest waiting blocks beyond it.
  void set_limit(std::size_t bytes) { core_->set_limit(bytes); }
  /// Frees every waiting block; the limit stays.
  void release() { core_->release(); }

 private:
  std::shared_ptr<core> core_ = std::make_shared<core>();
};

/// What a mesh keeps per rank for redistribute.
/// Run-time plans (and their geometry) of the dynamic-layout redistributes already run on
/// this rank, keyed by source, target and global extents (the mesh shape is the mesh's).
/// Planning over the whole layout space costs tens of microseconds to milliseconds for
/// 3-4 axis meshes, so a repeated dynamic redistribute looks its plan up instead. At most
/// `capacity` entries are kept (the oldest is dropped first).
class runtime_plan_cache {
 public:
  static constexpr std::size_t capacity = 64;
  struct entry {
    runtime_layout src, dst;
    int rank = 0;
    std::int64_t ext[SHARDCAST_MAX_RANK]{};
    plan p;
    plan_geometry g;
  };

  /// The cached entry for (src, dst, ext[0..rank)), or nullptr.
  const entry* find(const runtime_layout& src, const runtime_layout& dst, const std::int64_t* ext, int rank) const {
    for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
      const entry& e = **it;
      if (e.rank == rank && e.src == src && e.dst == dst && std::equal(ext, ext + rank, e.ext)) return &e;
    }
    return nullptr;
  }
  const entry& insert(const std::int64_t* ext, int rank, const plan& p, plan_geometry g) {
    if (entries_.size() == capacity) entries_.erase(entries_.begin());
    auto e = std::make_unique<entry>();
    e->src = p.src;
    e->dst = p.dst;
    e->rank = rank;
    std::copy(ext, ext + rank, e->ext);
    e->p = p;
    e->g = std::move(g);
    entries_.push_back(std::move(e));
    return *entries_.back();
  }
  std::size_t size() const { return entries_.size(); }

  /// Conversions of a tensor to its own layout that the ranks have compared (layout and
  /// extents): they have no plan, and are kept apart from the plans so that they neither
  /// push plans out nor lengthen their lookups. At most `capacity`; the one found moves to
  /// the end, where the search starts, and the least recently used is dropped first.
  bool agreed_identity(const runtime_layout& l, const std::int64_t* ext, int rank) {
    for (auto it = identities_.rbegin(); it != identities_.rend(); ++it)
      if (it->rank == rank && it->l == l && std::equal(ext, ext + rank, it->ext)) {
        if (it != identities_.rbegin()) std::rotate(std::prev(it.base()), it.base(), identities_.end());
        return true;
      }
    return false;
  }
  void add_identity(const runtime_layout& l, const std::int64_t* ext, int rank) {
    if (identities_.size() == capacity) identities_.erase(identities_.begin());
    identity i;
    i.l = l;
    i.rank = rank;
    std::copy(ext, ext + rank, i.ext);
    identities_.push_back(i);
  }

 private:
  struct identity {
    runtime_layout l;
    int rank = 0;
    std::int64_t ext[SHARDCAST_MAX_RANK]{};
  };
  std::vector<std::unique_ptr<entry>> entries_;
  std::vector<identity> identities_;
};

/// make_plan's run-time plans, shared by every rank of the process. The ranks of a host or
/// p2p mesh are threads of one process, and each rank meets a new conversion (new
/// layouts, a new mesh shape or new global extents) at about the same time as the others.
/// While the process has a CPU that no search occupies, a rank that finds no plan searches
/// itself (as if alone); once every CPU searches, a rank waits for the plan that another
/// rank is searching for instead of taking a CPU from it. So with more ranks than CPUs the
/// ranks search once per CPU rather than once per rank (a search takes up to milliseconds,
/// see docs/01_layouts.md), and with fewer nobody waits for another thread. Ranks in
/// separate processes (MPI, NCCL) each search once, as before. Plans are keyed by source,
/// target, mesh shape and global extents, which are all make_plan reads; at most
/// `capacity` are kept (the oldest is dropped first). A search that throws layout_error
/// throws one with the same message on every rank that waited for it (any other exception,
/// such as bad_alloc, stays the searcher's, and the ranks that waited search alone); it is
/// not kept, so a later call searches again.
class shared_plan_cache {
 public:
  static constexpr std::size_t capacity = 256;

  /// `parallel`: at most this many searches run at once before a rank waits for a plan
  /// another rank is searching for; 0: the CPUs the process may run on.
  explicit shared_plan_cache(int parallel = 0) : parallel_(parallel) {}
  void set_parallel(int parallel) {
    std::lock_guard<std::mutex> lock(mutex_);
    parallel_ = parallel;
  }

  /// make_plan(src, dst, shape, ext, rank) for a mesh of src.naxes axes, from the cache
  /// or planned now. Layouts are validated by the caller.
  plan get(const runtime_layout& src, const runtime_layout& dst, const int* shape, const std::int64_t* ext, int rank) {
    return get_with([&] { return make_plan(src, dst, shape, ext, rank); }, src, dst, shape, ext, rank);
  }

  /// get() with `search()` in place of make_plan's search (for tests: a search that fails,
  /// or that waits for another thread to wait for it).
  template <class Search>
  plan get_with(Search&& search, const runtime_layout& src, const runtime_layout& dst, const int* shape, const std::int64_t* ext,
                int rank) {
    key k;
    k.src = src;
    k.dst = dst;
    k.rank = rank;
    std::copy(shape, shape + src.naxes, k.shape);
    std::copy(ext, ext + rank, k.ext);
    const std::uint64_t h = hash(k);
    const int cpus = available_cpus();
    std::unique_lock<std::mutex> lock(mutex_);
    const int limit = parallel_ > 0 ? parallel_ : cpus;
    std::shared_ptr<slot> s;
    for (std::size_t i = slots_.size(); i-- > 0;)  // (the hashes first: one contiguous scan)
      if (hashes_[i] == h && slots_[i]->k == k) {
        s = slots_[i];
        break;
      }
    if (s && (s->ready || searching_ >= limit)) {
      ++waiting_;
      ready_.wait(lock, [&] { return s->ready; });
      --waiting_;
      if (s->failed == slot::refused) throw layout_error(s->message);
      if (s->failed == slot::none) return s->p;
      ++searches_;  // the search failed otherwise (out of memory): search alone
      lock.unlock();
      return search();
    }
    if (!s) {
      s = std::make_shared<slot>();
      s->k = k;
      if (slots_.size() == capacity) slots_.pop_front(), hashes_.pop_front();
      slots_.push_back(s);
      hashes_.push_back(h);
    }
    ++searches_;
    ++searching_;
    lock.unlock();
    // Each rank throws an exception object of its own: the waiters get a copy of a
    // layout_error's message, not the searcher's object.
    plan p;
    std::exception_ptr error;
    int failed = slot::none;
    std::string message;
    try {
      p = search();
    } catch (const layout_error& e) {
      error = std::current_exception();
      failed = slot::refused;
      message = e.what();
    } catch (...) {
      error = std::current_exception();
      failed = slot::other;
    }
    lock.lock();
    --searching_;
    if (!s->ready) {  // the first search of this key to end publishes its outcome
      s->p = p;
      s->failed = failed;
      s->message = std::move(message);
      s->ready = true;
      if (failed != slot::none) {
        const auto it = std::find(slots_.begin(), slots_.end(), s);
        if (it != slots_.end()) hashes_.erase(hashes_.begin() + (it - slots_.begin())), slots_.erase(it);
      }
    }
    lock.unlock();
    ready_.notify_all();
    if (error) std::rethrow_exception(error);
    return p;
  }

  /// How many searches get() has started, alone or shared (a count for tests and benchmarks).
  std::size_t searches() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return searches_;
  }
  /// How many calls wait now for a search another call runs.
  int waiting() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return waiting_;
  }

 private:
  struct key {
    runtime_layout src, dst;
    int rank = 0;
    int shape[SHARDCAST_MAX_AXES]{};
    std::int64_t ext[SHARDCAST_MAX_RANK]{};
    friend bool operator==(const key& a, const key& b) {
      return a.rank == b.rank && a.src == b.src && a.dst == b.dst && std::equal(a.shape, a.shape + a.src.naxes, b.shape) &&
             std::equal(a.ext, a.ext + a.rank, b.ext);
    }
  };
  /// FNV-1a over what operator== compares.
  static std::uint64_t hash(const key& k) {
    std::uint64_t h = 14695981039346656037ull;
    auto mix = [&](std::int64_t v) { h = (h ^ static_cast<std::uint64_t>(v)) * 1099511628211ull; };
    mix(k.src.naxes);
    mix(k.rank);
    for (const runtime_layout* l : {&k.src, &k.dst})
      for (int a = 0; a < l->naxes; ++a) {
        const placement_desc& d = (*l)[a];
        mix(static_cast<int>(d.kind));
        mix(d.is_shard() ? d.dim : d.is_partial() ? static_cast<int>(d.op) : 0);
      }
    for (int a = 0; a < k.src.naxes; ++a) mix(k.shape[a]);
    for (int d = 0; d < k.rank; ++d) mix(k.ext[d]);
    return h;
  }
  struct slot {
    enum { none, refused, other };  // how the search failed: not; layout_error; otherwise
    key k;
    plan p;
    int failed = none;
    std::string message;  ///< refused: the layout_error's message
    bool ready = false;
  };
  int parallel_;
  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::shared_ptr<slot>> slots_;
  std::deque<std::uint64_t> hashes_;  ///< hash(slots_[i]->k), for the scan
  std::size_t searches_ = 0;
  int searching_ = 0;  ///< searches running now
  int waiting_ = 0;    ///< calls waiting for one
};

/// The process's shared_plan_cache.
inline shared_plan_cache& shared_plans() {
  static shared_plan_cache cache;
  return cache;
}

struct rank_cache {
  geometry_cache geometry;
  runtime_plan_cache plans;
  staging_arena arena;
  result_pool results;
};

}  // namespace shardcast::detail
