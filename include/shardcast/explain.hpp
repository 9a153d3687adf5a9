#pragma once
/// @file explain.hpp
/// `explain(plan, shape, extents[, element_size])`: a readable description of a plan, one
/// line per step with the axes, the layouts around it and the bytes the busiest rank of the
/// step sends, on the mesh shape and global extents given, then their sum (the plan's cost;
/// the busiest ranks of two steps may differ, so no single rank need send all of it). `explain<T>(plan, shape, extents)` describes
/// the plan as it runs on elements of type T (its size, and how integer means reduce).
/// A collective step over a group of one rank (its axes have size 1) is marked "(one rank: a
/// local copy)": it calls no collective and is not counted among the collectives.

#include <cstdio>
#include <string>
#include <type_traits>

#include "plan.hpp"

namespace shardcast {

namespace detail {
/// A byte count as text: whole bytes while they fit a long long, else in scientific form
/// (global extents whose volume passes 2^63 bytes).
inline std::string bytes_text(double b) {
  if (b < 9.0e18) return std::to_string(static_cast<long long>(b + 0.5));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6e", b);
  return buf;
}
}  // namespace detail

/// Describes `p`; byte counts assume elements of `element_size` bytes and the mesh
/// shape and extents the plan was made for (`shape`, `ext`, `rank`). With
/// `integral_elements`, a plan that reduces with avg in several steps is described as it
/// runs on integers: every such step but the last sums ("avg: sums"), and the last divides
/// by the whole group's size ("avg: divides by N"), so that the mean truncates once.
inline std::string explain(const plan& p, const int* shape, const std::int64_t* ext, int rank, std::size_t element_size = 4,
                           bool integral_elements = false) {
  const detail::integer_mean_split means =
      integral_elements ? detail::split_integer_mean(p.steps, p.nsteps, shape) : detail::integer_mean_split{};
  int collectives = 0;  // on this shape (a static plan's own figure is its canonical mesh's)
  for (int i = 0; i < p.nsteps; ++i) collectives += detail::calls_collective(p.steps[i], shape) ? 1 : 0;
  std::string s = "plan " + to_string(p.src) + " -> " + to_string(p.dst) + ": " + std::to_string(p.nsteps) + " step(s), " +
                  std::to_string(collectives) + " collective(s)\n";
  // The total is the sum of the steps on this shape and extents: p.elements is what the plan
  // cost where it was made (a static plan's: its canonical mesh).
  double total = 0;
  for (int i = 0; i < p.nsteps; ++i) {
    const step& st = p.steps[i];
    std::string axes;
    for (int a = 0; a < st.from.naxes; ++a)
      if (st.axes >> a & 1u) {
        if (!axes.empty()) axes += ',';  // (not `"," + std::string`: GCC 12's false -Wrestrict, PR 105329)
        axes += std::to_string(a);
      }
    std::string name = to_string(st.kind);
    if (means.sums(i, st))
      name += "(avg: sums)";
    else if (i == means.last)
      name += "(avg: divides by " + std::to_string(means.divisor * detail::group_size(st.axes, shape, st.from.naxes)) + ")";
    else if (st.kind == step_kind::reduce_scatter || st.kind == step_kind::all_reduce || st.kind == step_kind::pad || st.kind == step_kind::identity)
      name += std::string("(") + to_string(st.op) + ")";
    if (is_collective(st.kind) && !detail::calls_collective(st, shape)) name += " (one rank: a local copy)";
    const double e = detail::step_cost(st, shape, ext, rank);
    total += e;
    s += "  " + std::to_string(i + 1) + ". " + name + " over axes {" + axes + "}: " + to_string(st.from) + " -> " + to_string(st.to) +
         ", " + detail::bytes_text(e * static_cast<double>(element_size)) + " bytes/rank\n";
  }
  s += "  total: " + detail::bytes_text(total * static_cast<double>(element_size)) + " bytes, the sum over the steps of each step's busiest rank\n";
  return s;
}

/// Same, for array arguments.
template <std::size_t N, std::size_t R>
std::string explain(const plan& p, const std::array<int, N>& shape, const std::array<std::int64_t, R>& ext, std::size_t element_size = 4) {
  return explain(p, shape.data(), ext.data(), static_cast<int>(R), element_size);
}

/// Same, for elements of type T: byte counts of sizeof(T), and integer means described as
/// they run when T is integral.
template <class T, std::size_t N, std::size_t R>
std::string explain(const plan& p, const std::array<int, N>& shape, const std::array<std::int64_t, R>& ext) {
  return explain(p, shape.data(), ext.data(), static_cast<int>(R), sizeof(T), std::is_integral_v<T>);
}

}  // namespace shardcast
