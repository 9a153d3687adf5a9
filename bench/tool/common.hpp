#pragma once
/// @file bench/tool/common.hpp
/// What shardcast-bench and shardcast-bench-mpi share: command-line options with
/// nccl-tests' meaning, the size sweep, deterministic inputs, the single-rank
/// reference, bandwidth definitions and the table format.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <shardcast/comm/communicator.hpp>
#include <shardcast/placement.hpp>

namespace shardcast::bench {

/// The collectives the tool measures. sendrecv is nccl-tests' sendrecv_perf: every rank
/// sends its buffer to the next rank and receives the previous rank's (a ring of
/// point-to-point transfers).
enum class coll : std::uint8_t { all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, sendrecv };

inline const char* to_string(coll c) {
  switch (c) {
    case coll::all_reduce: return "all_reduce";
    case coll::all_gather: return "all_gather";
    case coll::reduce_scatter: return "reduce_scatter";
    case coll::all_to_all: return "all_to_all";
    case coll::broadcast: return "broadcast";
    case coll::sendrecv: return "sendrecv";
  }
  return "?";
}

inline bool parse_coll(const std::string& s, coll& out) {
  for (coll c : {coll::all_reduce, coll::all_gather, coll::reduce_scatter, coll::all_to_all, coll::broadcast, coll::sendrecv})
    if (s == to_string(c)) {
      out = c;
      return true;
    }
  return false;
}

/// True for collectives whose result depends on the reduction operator.
inline bool has_op(coll c) { return c == coll::all_reduce || c == coll::reduce_scatter; }

/// Says on stderr that `backend` was not compiled into the tool and why; returns exit status 2.
/// @param who the message's prefix, e.g. "shardcast-bench"
inline int not_built(const char* who, const std::string& backend, const char* why) {
  std::fprintf(stderr, "%s: backend %s not built (%s)\n", who, backend.c_str(), why);
  return 2;
}

/// nccl-tests' bus-bandwidth factor: busbw = algbw * factor.
inline double busbw_factor(coll c, int n) {
  switch (c) {
    case coll::all_reduce: return 2.0 * (n - 1) / n;
    case coll::all_gather:
    case coll::reduce_scatter:
    case coll::all_to_all: return double(n - 1) / n;
    case coll::broadcast:
    case coll::sendrecv: return 1.0;
  }
  return 1.0;
}

/// Why `c` cannot run on `n` ranks with broadcast root `root`; empty if it can.
inline std::string rank_problem(coll c, int root, int n) {
  if (c == coll::broadcast && (root < 0 || root >= n))
    return "root " + std::to_string(root) + " is not a rank of " + std::to_string(n);
  if (c == coll::sendrecv && n < 2) return "sendrecv needs at least 2 ranks (it sends to the next rank)";
  return {};
}

/// One sendrecv step on any communicator: `count` elements of `send` to rank + 1 and from
/// rank - 1 into `recv` (modulo the size). Where the communicator has sendrecv (all of
/// shardcast's backends), every rank calls it: the send (on p2p the receive) is posted
/// before the rank waits, as MPI_Sendrecv and nccl-tests' grouped ncclSend/ncclRecv do.
/// Otherwise sends may block until their receive is posted, so even ranks send first and
/// odd ranks receive first: every send then meets a posted receive, whatever the number
/// of ranks.
template <class Comm, class T, class... Stream>
void ring_sendrecv(Comm& comm, const T* send, T* recv, std::size_t count, Stream... s) {
  const int n = comm.size(), me = comm.rank();
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  if constexpr (has_sendrecv<Comm>) {
    comm.sendrecv(send, count, next, recv, count, prev, s...);
  } else if (me % 2 == 0) {
    comm.send(send, count, next, s...);
    comm.recv(recv, count, prev, s...);
  } else {
    comm.recv(recv, count, prev, s...);
    comm.send(send, count, next, s...);
  }
}

/// Options, with nccl-tests' flag names and meanings.
struct options {
  coll op_kind = coll::all_reduce;
  std::string backend = "host";
  int ranks = 4;
  std::size_t min_bytes = 32 * 1024 * 1024, max_bytes = 32 * 1024 * 1024;
  double factor = 2.0;
  std::size_t increment = 0;  // -i: additive step; 0 means use -f
  int iters = 20, warmup = 5, check = 1;
  double warmup_ms = 10;  // --warmup-ms: the untimed calls of each size last at least this long (host-memory backends)
  int batches = 1;  // --batches: time this many batches of `iters` calls; a row shows the median batch
  bool inplace = false;  // --inplace: nccl-tests' in-place form of all_reduce, all_gather, reduce_scatter
  dtype type = dtype::f32;
  reduce_op op = reduce_op::sum;
  int root = 0;
  std::string json;
  std::string vs;       // "mpi" or empty
  std::string mpi_bin;  // path of shardcast-bench-mpi (--vs mpi)
  bool roofline = true;
  bool help = false;  // -h/--help was asked for: the usage went to stdout
};

/// "64K" -> 65536; suffixes K, M, G (powers of 1024), as in nccl-tests.
inline std::size_t parse_size(const std::string& s) {
  if (s.empty()) throw std::invalid_argument("empty size");
  std::size_t pos = 0;
  const double v = std::stod(s, &pos);
  double mul = 1;
  if (pos < s.size()) {
    switch (s[pos]) {
      case 'k': case 'K': mul = 1024.0; break;
      case 'm': case 'M': mul = 1024.0 * 1024; break;
      case 'g': case 'G': mul = 1024.0 * 1024 * 1024; break;
      default: throw std::invalid_argument("size '" + s + "': unknown suffix (use K, M or G)");
    }
    if (pos + 1 != s.size() && !(pos + 2 == s.size() && (s[pos + 1] == 'B' || s[pos + 1] == 'b')))
      throw std::invalid_argument("size '" + s + "': trailing characters");
  }
  if (v < 0) throw std::invalid_argument("size '" + s + "' is negative");
  if (!(v * mul < 0x1p62)) throw std::invalid_argument("size '" + s + "' is too large");
  return static_cast<std::size_t>(v * mul);
}

inline bool parse_dtype(const std::string& s, dtype& t) {
  struct {
    const char* name;
    dtype t;
  } const names[] = {{"float", dtype::f32}, {"float32", dtype::f32}, {"double", dtype::f64}, {"float64", dtype::f64},
                     {"int32", dtype::i32}, {"int", dtype::i32},     {"int64", dtype::i64},  {"uint32", dtype::u32},
                     {"uint64", dtype::u64}};
  for (const auto& n : names)
    if (s == n.name) {
      t = n.t;
      return true;
    }
  return false;
}

inline bool parse_op(const std::string& s, reduce_op& op) {
  for (reduce_op o : {reduce_op::sum, reduce_op::avg, reduce_op::max, reduce_op::min, reduce_op::prod})
    if (s == shardcast::to_string(o)) {
      op = o;
      return true;
    }
  return false;
}

/// The sizes swept from -b to -e: multiplied by -f (at least one byte more each row, so a
/// fractional factor on small sizes, or -b 0, still reaches -e), or stepped by -i when given.
inline std::vector<std::size_t> sweep(const options& o) {
  std::vector<std::size_t> v;
  for (std::size_t s = o.min_bytes; s <= o.max_bytes;) {
    v.push_back(s);
    std::size_t next = 0;
    if (o.increment) {
      next = s + o.increment;
    } else {
      if (o.factor <= 1.0) break;
      const double scaled = static_cast<double>(s) * o.factor;  // (may pass what a size_t holds: then it passes -e too)
      if (scaled > static_cast<double>(o.max_bytes)) break;
      next = std::max(s + 1, static_cast<std::size_t>(scaled));
    }
    if (next <= s) break;
    s = next;
  }
  return v;
}

/// Element counts for one row, as nccl-tests computes them: `size` is the bytes of the
/// larger buffer (the gathered output, the scattered input, the whole all-to-all
/// buffer), rounded down to a multiple of nranks elements where the collective splits it.
struct counts {
  std::size_t bytes;      // size column after rounding
  std::size_t total;      // count column (elements of the large buffer)
  std::size_t send, recv; // elements per rank
  std::size_t arg;        // the count the collective call takes
};

inline counts counts_for(coll c, std::size_t bytes, std::size_t elem, int n) {
  const std::size_t nn = static_cast<std::size_t>(n);
  counts k{};
  switch (c) {
    case coll::all_reduce:
    case coll::broadcast:
    case coll::sendrecv:
      k.total = bytes / elem;
      k.send = k.recv = k.arg = k.total;
      break;
    case coll::all_gather:
      k.arg = bytes / elem / nn;
      k.total = k.arg * nn;
      k.send = k.arg;
      k.recv = k.total;
      break;
    case coll::reduce_scatter:
      k.arg = bytes / elem / nn;
      k.total = k.arg * nn;
      k.send = k.total;
      k.recv = k.arg;
      break;
    case coll::all_to_all:
      k.arg = bytes / elem / nn;
      k.total = k.arg * nn;
      k.send = k.recv = k.total;
      break;
  }
  k.bytes = k.total * elem;
  return k;
}

/// Deterministic input of rank r, element i: small positive integers (1 to 5), so every
/// sum over a few ranks is exact in every supported type, drawn from a hash of (r, i) so
/// that no two ranks, and no two blocks of a rank, hold the same sequence: a result that
/// takes one rank's data or one block for another differs from the reference. For a
/// floating-point product the values are 1, 2 or 4 instead: powers of two multiply exactly
/// in any order until the exponent overflows (5^11 already rounds in float, and a backend
/// that multiplies in another order than the reference would differ in the last bits).
template <class T>
inline T input_value(int r, std::size_t i, reduce_op op = reduce_op::sum) {
  std::uint64_t z = (static_cast<std::uint64_t>(r) << 40) ^ static_cast<std::uint64_t>(i);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;  // splitmix64's finaliser
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  if (std::is_floating_point_v<T> && op == reduce_op::prod) return static_cast<T>(std::uint64_t{1} << (z % 3));
  return static_cast<T>(1 + z % 5);
}

/// Rank r's input for a run of reduce op `op` (the op matters for a floating-point product).
template <class T>
inline void fill_input(T* p, std::size_t n, int r, reduce_op op) {
  for (std::size_t i = 0; i < n; ++i) p[i] = input_value<T>(r, i, op);
}

/// Expected element i of rank `me`'s output, computed from every rank's input alone.
/// Integer sums and products wrap, as the backends' do.
template <class T>
inline T expected(coll c, reduce_op op, int n, int root, int me, const counts& k, std::size_t i) {
  auto in = [op](int r, std::size_t j) { return input_value<T>(r, j, op); };
  auto reduce_at = [&](std::size_t j) {
    T acc = in(0, j);
    for (int q = 1; q < n; ++q) {
      const T x = in(q, j);
      switch (op) {
        case reduce_op::sum:
        case reduce_op::avg: acc = shardcast::detail::wrapping_add(acc, x); break;
        case reduce_op::prod: acc = shardcast::detail::wrapping_mul(acc, x); break;
        case reduce_op::max: acc = std::max(acc, x); break;
        case reduce_op::min: acc = std::min(acc, x); break;
      }
    }
    if (op == reduce_op::avg) acc = static_cast<T>(acc / static_cast<T>(n));
    return acc;
  };
  switch (c) {
    case coll::all_reduce: return reduce_at(i);
    case coll::reduce_scatter: return reduce_at(static_cast<std::size_t>(me) * k.arg + i);
    case coll::all_gather: return in(static_cast<int>(i / k.arg), i % k.arg);
    case coll::all_to_all: {
      const std::size_t q = i / k.arg;  // the sender
      return in(static_cast<int>(q), static_cast<std::size_t>(me) * k.arg + i % k.arg);
    }
    case coll::broadcast: return in(root, i);
    case coll::sendrecv: return in((me + n - 1) % n, i);
  }
  return T{};
}

/// The buffers of one rank for one size: out-of-place, a send and a receive buffer; in
/// place (nccl-tests' in-place form), one buffer that send and recv point into:
/// all_reduce: recv == send; all_gather: send == recv + me * count; reduce_scatter: recv ==
/// send + me * count. `Buffer<T>` is the tool's buffer of n elements (host or device).
struct placement_of_buffers {
  std::size_t send_off = 0, recv_off = 0;  // element offsets into the one buffer (in place)
  std::size_t size = 0;                    // elements of the one buffer (in place)
};
inline placement_of_buffers in_place(coll c, const counts& k, int me) {
  placement_of_buffers p;
  const auto m = static_cast<std::size_t>(me);
  p.size = std::max(k.send, k.recv);
  if (c == coll::all_gather) p.send_off = m * k.arg;
  if (c == coll::reduce_scatter) p.recv_off = m * k.arg;
  return p;
}

/// Number of output elements of rank `me` that differ from the reference.
template <class T>
inline std::int64_t count_wrong(coll c, reduce_op op, int n, int root, int me, const counts& k, const T* out) {
  std::int64_t wrong = 0;
  for (std::size_t i = 0; i < k.recv; ++i)
    if (out[i] != expected<T>(c, op, n, root, me, k, i)) ++wrong;
  return wrong;
}

/// The usage, to `out` (stdout for -h/--help, stderr after bad input).
inline void print_usage(const char* prog, bool mpi_tool, std::FILE* out = stderr) {
  std::fprintf(out,
               "usage: %s all_reduce|all_gather|reduce_scatter|all_to_all|broadcast|sendrecv [options]\n"
               "%s"
               "  -b, --minbytes SIZE   smallest size in bytes (K/M/G suffixes), default 32M\n"
               "  -e, --maxbytes SIZE   largest size in bytes, default 32M\n"
               "  -f, --stepfactor F    multiply the size by F between rows, default 2\n"
               "  -i, --stepbytes SIZE  add SIZE between rows instead of -f\n"
               "  -n, --iters N         timed iterations per size, default 20\n"
               "  -w, --warmup_iters N  untimed iterations before, default 5\n"
               "  --warmup-ms MS        and untimed calls until every rank has spent MS milliseconds in\n"
               "                        them, so the timed calls start with the ranks settled on their\n"
               "                        CPUs; default 10 (host-memory backends; 0: -w calls only)\n"
               "  -c, --check 0|1       check every rank's result against a reference, default 1\n"
               "  -d, --datatype T      float double int32 int64 uint32 uint64, default float\n"
               "  -o, --op OP           sum avg max min prod, default sum\n"
               "  -r, --root R          broadcast root, default 0\n"
               "  --batches B           time B batches of -n calls each and report the median batch,\n"
               "                        which a rank descheduled in one batch does not sway; default 1\n"
               "  --inplace             all_reduce, all_gather, reduce_scatter in place, as nccl-tests'\n"
               "                        in-place columns (broadcast is always in place)\n"
               "  --json FILE           also write the rows as JSON\n",
               prog,
               mpi_tool ? "" :
               "  --backend B           host (built in); mpi, nccl, p2p when built\n"
               "  --ranks N             number of ranks (host: threads; p2p: threads sharing the GPUs; nccl: one per GPU), default 4\n"
               "  --vs mpi              alternate each size with the same collective through MPI\n"
               "  --mpi-bin PATH        the shardcast-bench-mpi program used by --vs mpi\n"
               "  --no-roofline         skip the memcpy measurements\n");
  if (!mpi_tool)
    std::fprintf(out,
                 "   or: %s redistribute --from L --to L2 --mesh AxB --extents MxN [options]\n"
                 "                        time redistribute between two layouts (e.g. --from \"S(0),R\" --to \"R,S(1)\");\n"
                 "                        '%s redistribute --help' lists its options\n",
                 prog, prog);
}

/// The value of option `opt`, converted by `conv(v, &pos)` (std::stoi, std::stod): a value
/// that is not all `what` ("abc", "5x", out of range) is refused.
template <class Num, class Conv>
Num parse_number(const std::string& opt, const std::string& v, Conv conv, const char* what) {
  std::size_t pos = 0;
  Num r{};
  try {
    r = conv(v, &pos);
  } catch (const std::exception&) {
    pos = 0;
  }
  if (pos == 0 || pos != v.size()) throw std::invalid_argument(opt + ": '" + v + "' is not " + what);
  return r;
}
inline int parse_int(const std::string& opt, const std::string& v) {
  return parse_number<int>(opt, v, [](const std::string& x, std::size_t* p) { return std::stoi(x, p); }, "a whole number");
}
inline double parse_real(const std::string& opt, const std::string& v) {
  return parse_number<double>(opt, v, [](const std::string& x, std::size_t* p) { return std::stod(x, p); }, "a number");
}

/// Parses argv into `o`; returns false (after printing why) on bad input.
inline bool parse_args(int argc, char** argv, options& o, bool mpi_tool) {
  if (argc < 2) {
    print_usage(argv[0], mpi_tool);
    return false;
  }
  const std::string first = argv[1];
  for (int i = 1; i < argc; ++i)  // -h anywhere: the usage, on stdout
    if (std::string(argv[i]) == "-h" || std::string(argv[i]) == "--help") {
      print_usage(argv[0], mpi_tool, stdout);
      o.help = true;
      return false;
    }
  if (!parse_coll(first, o.op_kind)) {
    std::fprintf(stderr, "%s: unknown collective '%s' (use all_reduce, all_gather, reduce_scatter, all_to_all, broadcast or sendrecv)\n",
                 argv[0], first.c_str());
    return false;
  }
  try {
    for (int i = 2; i < argc; ++i) {
      const std::string a = argv[i];
      auto val = [&]() -> std::string {
        if (i + 1 >= argc) throw std::invalid_argument("option " + a + " needs a value");
        return argv[++i];
      };
      // The whole value must be a number: "5x" is refused, not read as 5.
      auto integer = [&] { return parse_int(a, val()); };
      auto real = [&] { return parse_real(a, val()); };
      auto size = [&] {
        const std::string v = val();
        try {
          return parse_size(v);
        } catch (const std::logic_error& e) {  // stod's invalid_argument or out_of_range, or parse_size's own
          const std::string w = e.what();
          throw std::invalid_argument(a + ": " + (w == "stod" ? "'" + v + "' is not a size" : w));
        }
      };
      if (a == "-b" || a == "--minbytes") o.min_bytes = size();
      else if (a == "-e" || a == "--maxbytes") o.max_bytes = size();
      else if (a == "-f" || a == "--stepfactor") o.factor = real();
      else if (a == "-i" || a == "--stepbytes") {
        o.increment = size();
        if (o.increment == 0) throw std::invalid_argument("-i must be at least 1 byte (leave it out to step by -f)");
      }
      else if (a == "-n" || a == "--iters") o.iters = integer();
      else if (a == "-w" || a == "--warmup_iters") o.warmup = integer();
      else if (a == "--warmup-ms") o.warmup_ms = real();
      else if (a == "-c" || a == "--check") {
        o.check = integer();
        if (o.check != 0 && o.check != 1) throw std::invalid_argument("-c takes 0 or 1");
      } else if (a == "-r" || a == "--root") o.root = integer();
      else if (a == "--batches") o.batches = integer();
      else if (a == "--inplace") o.inplace = true;
      else if (a == "-d" || a == "--datatype") {
        const std::string s = val();
        if (!parse_dtype(s, o.type)) throw std::invalid_argument("unknown datatype '" + s + "' (float double int32 int64 uint32 uint64)");
      } else if (a == "-o" || a == "--op") {
        const std::string s = val();
        if (!parse_op(s, o.op)) throw std::invalid_argument("unknown op '" + s + "' (sum avg max min prod)");
      } else if (a == "--json") o.json = val();
      else if (!mpi_tool && a == "--backend") o.backend = val();
      else if (!mpi_tool && (a == "--ranks" || a == "-g")) o.ranks = integer();
      else if (!mpi_tool && a == "--vs") o.vs = val();
      else if (!mpi_tool && a == "--mpi-bin") o.mpi_bin = val();
      else if (!mpi_tool && a == "--no-roofline") o.roofline = false;
      else throw std::invalid_argument("unknown option '" + a + "'");
    }
    if (o.min_bytes > o.max_bytes) throw std::invalid_argument("-b is larger than -e");
    if (!std::isfinite(o.factor)) throw std::invalid_argument("-f must be a finite number");
    if (!o.increment && o.factor <= 1.0 && o.min_bytes != o.max_bytes) throw std::invalid_argument("-f must be greater than 1");
    if (o.iters < 1) throw std::invalid_argument("-n must be at least 1");
    if (o.warmup < 0) throw std::invalid_argument("-w must not be negative");
    if (!(o.warmup_ms >= 0 && o.warmup_ms <= 60000)) throw std::invalid_argument("--warmup-ms must be between 0 and 60000");
    if (o.batches < 1) throw std::invalid_argument("--batches must be at least 1");
    if (o.inplace && (o.op_kind == coll::all_to_all || o.op_kind == coll::sendrecv))
      throw std::invalid_argument(std::string("--inplace: ") + to_string(o.op_kind) +
                                  " has no in-place form here (all_reduce, all_gather and reduce_scatter have; broadcast always is)");
    if (o.ranks < 1) throw std::invalid_argument("--ranks must be at least 1");
    if (!o.vs.empty() && o.vs != "mpi") throw std::invalid_argument("--vs takes 'mpi'");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
    return false;
  }
  return true;
}

/// The median of `v` (the mean of the middle two for an even count); 0 when empty.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
}

/// The untimed calls before a size's timed batches: `o.warmup` calls of `once`, then more
/// until every rank has spent `o.warmup_ms` in them. `slowest(ms)` returns the largest of
/// all ranks' `ms` (a collective), so every rank makes the same number of calls. Right
/// after a wait (the sweep's start, or rank 0 measuring memcpy or running the MPI baseline
/// while the others slept), the scheduler may keep two rank threads on one CPU for a few
/// milliseconds, and a short first batch would time them taking turns.
template <class Once, class Slowest>
void warm_up(const options& o, Once&& once, Slowest&& slowest) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < o.warmup; ++i) once();
  if (o.warmup_ms <= 0) return;
  for (int chunk = 1;; chunk = chunk < 64 ? 2 * chunk : chunk) {
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (slowest(ms) >= o.warmup_ms) return;
    for (int i = 0; i < chunk; ++i) once();
  }
}

/// The warm-up floor in force, in ms: `--warmup-ms` on the host-memory backends (host, and
/// mpi, which shardcast-bench-mpi's options also name), 0 on the device backends, which warm
/// up by count only.
inline double warmup_floor_ms(const options& o) { return o.backend == "host" || o.backend == "mpi" ? o.warmup_ms : 0.0; }

/// How the header describes the warm-up floor: "at least MS ms", or "no time floor".
inline std::string warmup_floor_text(const options& o) {
  if (warmup_floor_ms(o) <= 0) return "no time floor";
  char buf[48];
  std::snprintf(buf, sizeof buf, "at least %g ms", o.warmup_ms);
  return buf;
}

/// Calls f.template operator()<T>() with T the C++ type of `t`.
template <class F>
inline void with_dtype(dtype t, F&& f) {
  switch (t) {
    case dtype::f32: f.template operator()<float>(); return;
    case dtype::f64: f.template operator()<double>(); return;
    case dtype::i32: f.template operator()<std::int32_t>(); return;
    case dtype::i64: f.template operator()<std::int64_t>(); return;
    case dtype::u32: f.template operator()<std::uint32_t>(); return;
    case dtype::u64: f.template operator()<std::uint64_t>(); return;
    default: throw std::invalid_argument(std::string("datatype ") + to_string(t) + " is not supported by the benchmark");
  }
}

inline void json_escape_into(std::string& out, const std::string& s) {
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
}

}  // namespace shardcast::bench
