#pragma once
/// @file layout.hpp
/// Layouts: one placement per mesh axis. `layout<P...>` is the compile-time form,
/// `runtime_layout` the value form (also parsed from text such as "S(0),R,P(sum)").
///
/// Example: on a 2x2 mesh, `layout<shard<0>, partial<>>` holds rows split over axis 0
/// and, along axis 1, two partial sums of the same row block.

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

#include "error.hpp"
#include "placement.hpp"

namespace shardcast {

/// Value form of a layout: `naxes` placements, at most SHARDCAST_MAX_AXES. A plain array,
/// so that its accessors are usable in device code (split.hpp) without nvcc's relaxed
/// constexpr option.
struct runtime_layout {
  placement_desc p[SHARDCAST_MAX_AXES]{};
  int naxes = 0;

  constexpr runtime_layout() = default;
  constexpr runtime_layout(std::initializer_list<placement_desc> ps) {
    if (ps.size() > SHARDCAST_MAX_AXES)
      throw layout_error("shardcast::runtime_layout: more placements than SHARDCAST_MAX_AXES; define it larger before including shardcast");
    for (auto d : ps) p[static_cast<std::size_t>(naxes++)] = d;
  }
  /// The value form of a compile-time layout type, e.g. `runtime_layout(layout<shard<0>, replicate>{})`.
  template <class L>
    requires requires { L::desc; }
  constexpr explicit runtime_layout(L) : runtime_layout(L::desc) {}

  SHARDCAST_HOST_DEVICE constexpr int size() const { return naxes; }
  SHARDCAST_HOST_DEVICE constexpr const placement_desc& operator[](int a) const { return p[a]; }
  SHARDCAST_HOST_DEVICE constexpr placement_desc& operator[](int a) { return p[a]; }

  /// Parses "S(0),R,P(sum)" (also "shard(0)", "replicate", "partial(max)", "P" = P(sum));
  /// whitespace is ignored. Throws layout_error naming the offending text.
  static runtime_layout parse(std::string_view text);

  /// Throws layout_error unless this layout fits a rank-`rank` tensor on a mesh of `mesh_axes` axes.
  /// `who` (e.g. "shardcast::distribute") begins the message.
  void validate(int mesh_axes, int rank, const char* who = "shardcast") const;

  friend constexpr bool operator==(const runtime_layout& a, const runtime_layout& b) {
    if (a.naxes != b.naxes) return false;
    for (int i = 0; i < a.naxes; ++i)
      if (!(a[i] == b[i])) return false;
    return true;
  }
};

inline std::string to_string(const placement_desc& d) {
  switch (d.kind) {
    case placement_kind::replicate: return "R";
    case placement_kind::shard: return "S(" + std::to_string(d.dim) + ")";
    case placement_kind::partial: return std::string("P(") + to_string(d.op) + ")";
  }
  return "?";
}

inline std::string to_string(const runtime_layout& l) {
  std::string s;
  for (int a = 0; a < l.naxes; ++a) {
    if (a) s += ",";
    s += to_string(l[a]);
  }
  return s;
}

namespace detail {
inline bool parse_op(std::string_view w, reduce_op& op) {
  if (w == "sum") op = reduce_op::sum;
  else if (w == "avg") op = reduce_op::avg;
  else if (w == "max") op = reduce_op::max;
  else if (w == "min") op = reduce_op::min;
  else if (w == "prod") op = reduce_op::prod;
  else return false;
  return true;
}
}  // namespace detail

inline runtime_layout runtime_layout::parse(std::string_view text) {
  std::string t;
  bool gap = false;  // whitespace since the last character kept
  auto word = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  for (char c : text) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      gap = !t.empty();
      continue;
    }
    if (gap && word(c) && word(t.back()))
      throw layout_error(std::string("shardcast::runtime_layout::parse: whitespace inside a name or number in \"").append(text).append(
          "\"; placements are R, S(dim) or P(sum|avg|max|min|prod), separated by commas"));
    gap = false;
    t += c;
  }
  runtime_layout out;
  if (t.empty()) throw layout_error("shardcast::runtime_layout::parse: empty layout text; write one placement per mesh axis, e.g. \"S(0),R\"");
  std::size_t pos = 0;
  // The message is built by appending: GCC 12 reports a false -Wrestrict on
  // `"literal" + std::string` (GCC PR 105329), which users' -Wall builds would show.
  auto fail = [&](const auto&... parts) -> void {
    std::string m("shardcast::runtime_layout::parse: ");
    (m.append(parts), ...);
    m.append(" in \"").append(text).append("\"; placements are R, S(dim) or P(sum|avg|max|min|prod), separated by commas");
    throw layout_error(m);
  };
  while (true) {
    std::size_t end = pos;
    int depth = 0;
    while (end < t.size() && (depth > 0 || t[end] != ',')) {
      if (t[end] == '(') ++depth;
      if (t[end] == ')') --depth;
      ++end;
    }
    std::string_view item(t.data() + pos, end - pos);
    if (item.empty()) fail("empty placement at position ", std::to_string(pos));
    if (out.naxes >= SHARDCAST_MAX_AXES) fail("more than ", std::to_string(SHARDCAST_MAX_AXES), " placements");
    std::string_view head = item, arg;
    bool has_arg = false;
    if (auto lp = item.find('('); lp != std::string_view::npos) {
      if (item.back() != ')') fail("unbalanced parenthesis in '", item, "'");
      head = item.substr(0, lp);
      arg = item.substr(lp + 1, item.size() - lp - 2);
      has_arg = true;
    }
    placement_desc d;
    if (head == "R" || head == "replicate") {
      if (has_arg) fail("'", item, "': replicate takes no argument");
      d = placement_desc::make_replicate();
    } else if (head == "S" || head == "shard") {
      if (!has_arg || arg.empty()) fail("'", item, "': shard needs a dim, e.g. S(0)");
      int v = 0;
      for (char c : arg) {
        if (c < '0' || c > '9') fail("'", item, "': shard dim must be a non-negative integer");
        v = v * 10 + (c - '0');
        if (v >= SHARDCAST_MAX_RANK) fail("'", item, "': shard dim exceeds the largest supported tensor rank ", std::to_string(SHARDCAST_MAX_RANK));
      }
      d = placement_desc::make_shard(v);
    } else if (head == "P" || head == "partial") {
      reduce_op op = reduce_op::sum;
      if (has_arg && !detail::parse_op(arg, op)) fail("'", item, "': unknown reduce op '", arg, "'");
      d = placement_desc::make_partial(op);
    } else {
      fail("unknown placement '", item, "'");
    }
    out[out.naxes++] = d;
    if (end >= t.size()) break;
    pos = end + 1;
    if (pos >= t.size()) fail("trailing comma");
  }
  return out;
}

inline void runtime_layout::validate(int mesh_axes, int rank, const char* who) const {
  if (naxes != mesh_axes)
    throw layout_error(std::string(who) + ": layout \"" + to_string(*this) + "\" has " + std::to_string(naxes) +
                       " placements but the mesh has " + std::to_string(mesh_axes) + " axes; give one placement per mesh axis");
  for (int a = 0; a < naxes; ++a)
    if ((*this)[a].is_shard() && ((*this)[a].dim < 0 || (*this)[a].dim >= rank))
      throw layout_error(std::string(who) + ": layout \"" + to_string(*this) + "\" places S(" + std::to_string((*this)[a].dim) +
                         ") on mesh axis " + std::to_string(a) + ", but the tensor has rank " + std::to_string(rank) +
                         (rank > 0 ? "; use a shard dim from 0 to " + std::to_string(rank - 1) : std::string("; a rank-0 tensor has no dim to shard")));
}

/// A compile-time layout: one placement type per mesh axis.
template <class... P>
struct layout {
  static_assert((placement<P> && ...),
                "shardcast::layout<P...>: every P must be a placement: replicate, shard<D> or partial<Op>.");
  static_assert(sizeof...(P) >= 1, "shardcast::layout<>: give one placement per mesh axis (at least one).");
  static_assert(sizeof...(P) <= SHARDCAST_MAX_AXES, "shardcast::layout<P...>: too many mesh axes; raise SHARDCAST_MAX_AXES.");
  static constexpr int naxes = static_cast<int>(sizeof...(P));
  static constexpr runtime_layout desc{P::desc...};
  /// The largest tensor dim any placement shards, or -1.
  static constexpr int max_shard_dim = [] {
    int m = -1;
    ((m = P::desc.is_shard() && P::desc.dim > m ? P::desc.dim : m), ...);
    return m;
  }();
};

namespace detail {
template <class L>
struct is_layout : std::false_type {};
template <class... P>
struct is_layout<layout<P...>> : std::true_type {};
}  // namespace detail

template <class L>
concept layout_type = detail::is_layout<L>::value;

/// Compile-time check that layout `L` fits a rank-`R` tensor on a mesh of `N` axes.
template <class L, int N, int R>
constexpr bool check_layout() {
  static_assert(layout_type<L>, "shardcast: expected shardcast::layout<P...> as the layout type.");
  static_assert(L::naxes == N,
                "shardcast: the layout's number of placements differs from the mesh's number of axes; give exactly one placement per mesh axis.");
  static_assert(L::max_shard_dim < R,
                "shardcast: a shard<D> in the layout names a tensor dim D >= the tensor's rank; use shard<D> with 0 <= D < rank.");
  static_assert([] {
    int op = -1;
    for (int a = 0; a < L::naxes; ++a)
      if (L::desc[a].is_partial()) {
        if (op >= 0 && op != static_cast<int>(L::desc[a].op)) return false;
        op = static_cast<int>(L::desc[a].op);
      }
    return true;
  }(), "shardcast: the layout has partial placements with different reduce ops; the order of mixed reductions is undefined, so use one op for every partial axis.");
  return true;
}

}  // namespace shardcast
