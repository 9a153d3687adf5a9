#pragma once
/// @file detail/agreement.hpp
/// The argument check of collective calls whose arguments every rank must pass alike
/// (distribute, generate, full, check_same_extents, and the first dynamic redistribute of
/// a conversion): the ranks combine their extents, their layouts and their own verdicts in
/// one small all_reduce, so every rank throws the same layout_error or none does, instead
/// of one rank throwing alone while its peers wait, or ranks running different plans.

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

#include "../config.hpp"
#include "../error.hpp"
#include "../layout.hpp"
#include "host_ops.hpp"

namespace shardcast::detail {

/// What one rank contributes to the argument check: its extents, its layouts (as codes)
/// and whether its own arguments were rejected (rank + 1, else 0).
inline std::int64_t layout_code(const placement_desc& p) {
  const std::int64_t kind = static_cast<std::int64_t>(p.kind);
  return kind * 1000 + (p.is_shard() ? p.dim : 0) * 10 + (p.is_partial() ? static_cast<std::int64_t>(p.op) : 0);
}
inline std::int64_t saturating_neg(std::int64_t v) {
  return v == std::numeric_limits<std::int64_t>::min() ? std::numeric_limits<std::int64_t>::max() : -v;
}

/// A layout the ranks must agree on, and the words of the message when they do not:
/// "<who>: <differ> (rank <r> <mine> "<layout>"); <fix>".
struct agreed_layout {
  const runtime_layout* l;
  const char* differ = "the ranks passed different layouts";
  const char* mine = "passed";
  const char* fix = "pass the same layout on every rank";
};

/// The words of the message when the ranks' global extents differ:
/// "<who>: <differ>: dim d is a on some ranks and b on others (rank r <mine> AxB); <fix>".
struct agreed_extents {
  const char* differ = "the ranks passed different global extents";
  const char* mine = "passed";
  const char* fix = "pass the same global extents on every rank";
};

/// Collective over m.comm(): one in-place all_reduce(max) of [values, -values] gives every
/// rank the maximum and minimum of every value, so all ranks reach the same verdict.
/// Throws layout_error on every rank when a rank rejected its own arguments
/// (`local_error` non-empty there: that rank throws it, the others name the rank), a
/// layout of `ls` differs between ranks (the first that differs is named), or the extents
/// differ.
template <class Mesh, std::size_t R, std::size_t NL>
void agree_on_arguments(const Mesh& m, const std::array<std::int64_t, R>& ext, const agreed_layout (&ls)[NL],
                        const std::string& local_error, const char* who, typename Mesh::stream_type s, agreed_extents words = {}) {
  using ops = memory_ops<typename Mesh::memory_space>;
  constexpr std::size_t nl = 1 + SHARDCAST_MAX_AXES;  // a layout: its number of axes, then one code per axis
  constexpr std::size_t k = R + nl * NL + 1;
  std::array<std::int64_t, 2 * k> v{};
  for (std::size_t d = 0; d < R; ++d) v[d] = ext[d];
  std::size_t i = R;
  for (const agreed_layout& a : ls) {
    v[i] = a.l->naxes;
    for (int x = 0; x < a.l->naxes && x < SHARDCAST_MAX_AXES; ++x) v[i + 1 + static_cast<std::size_t>(x)] = layout_code((*a.l)[x]);
    i += nl;
  }
  v[k - 1] = local_error.empty() ? 0 : m.rank() + 1;
  for (std::size_t j = 0; j < k; ++j) v[k + j] = saturating_neg(v[j]);
  // In place, so a communicator that moves no data leaves every rank's own values.
  auto buf = ops::template allocate<std::int64_t>(v.size(), s);
  ops::from_host(buf.get(), v.data(), v.size(), s);
  m.comm().all_reduce(buf.get(), buf.get(), v.size(), reduce_op::max, s);
  std::array<std::int64_t, 2 * k> r{};
  ops::to_host(r.data(), buf.get(), r.size(), s);
  auto lo = [&](std::size_t j) { return saturating_neg(r[k + j]); };

  if (!local_error.empty()) throw layout_error(local_error);
  if (r[k - 1] > 0)
    throw layout_error(std::string(who) + ": rank " + std::to_string(r[k - 1] - 1) +
                       " rejected its arguments (its own exception says why), so every rank throws instead of waiting for it; "
                       "fix the arguments on that rank");
  i = R;
  for (const agreed_layout& a : ls) {
    for (std::size_t j = i; j < i + nl; ++j)
      if (r[j] != lo(j))
        throw layout_error(std::string(who) + ": " + a.differ + " (rank " + std::to_string(m.rank()) + " " + a.mine + " \"" + to_string(*a.l) +
                           "\"); " + a.fix);
    i += nl;
  }
  for (std::size_t d = 0; d < R; ++d)
    if (r[d] != lo(d)) {
      std::string mine;
      for (std::size_t e = 0; e < R; ++e) {
        if (e) mine += 'x';
        mine += std::to_string(ext[e]);
      }
      throw layout_error(std::string(who) + ": " + words.differ + ": dim " + std::to_string(d) + " is " + std::to_string(lo(d)) +
                         " on some ranks and " + std::to_string(r[d]) + " on others (rank " + std::to_string(m.rank()) + " " + words.mine +
                         " " + mine + "); " + words.fix);
    }
}

/// The form with one layout and distribute's words.
template <class Mesh, std::size_t R>
void agree_on_arguments(const Mesh& m, const std::array<std::int64_t, R>& ext, const runtime_layout& l, const std::string& local_error,
                        const char* who, typename Mesh::stream_type s) {
  agree_on_arguments(m, ext, {agreed_layout{&l}}, local_error, who, s);
}

/// What `check()` throws as layout_error on this rank, or "" when it passes: the rank-local
/// verdict that agree_on_arguments shares before anyone throws (a rank that threw alone
/// would leave its peers waiting in their next collective).
template <class Check>
std::string local_verdict(Check&& check) {
  try {
    check();
  } catch (const layout_error& e) {
    return e.what();
  }
  return {};
}

}  // namespace shardcast::detail
