#!/usr/bin/env bash
# Instructions per call of each bench/dispatch case, counted by callgrind: deterministic,
# unlike times on a shared machine. The count is the difference between a run of 2N and
# a run of N calls per case, divided by N, so one-time work (the first call computes and
# caches the plan geometry) drops out.
#   bash bench/dispatch/instructions.sh build/default/bench/dispatch/bench_dispatch [N]
set -euo pipefail
bin="$1"
n="${2:-20000}"
command -v valgrind >/dev/null || { echo "instructions.sh: needs valgrind (callgrind)"; exit 2; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
for k in 1 2; do
  valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.$k" "$bin" --calls $((k * n)) >/dev/null 2>&1
  # Inclusive instruction count of every case function: "<Ir> ... <case>_once(fixture&)".
  callgrind_annotate --inclusive=yes --threshold=100 "$tmp/cg.$k" |
    sed -n 's/^ *\([0-9,]*\) .*[^a-z0-9_]\([a-z0-9_]*\)_once(.*/\2 \1/p' | tr -d ',' | LC_ALL=C sort -u -k1,1 >"$tmp/ir.$k"
done
LC_ALL=C join "$tmp/ir.1" "$tmp/ir.2" | awk -v n="$n" '{ per[$1] = ($3 - $2) / n }
  END {
    printf "%-16s %12s %12s %7s\n", "case", "static", "raw", "ratio"
    split("all_gather reduce_scatter all_reduce gather_dim1 two_step into_all_gather", k, " ")
    for (i = 1; i <= 6; ++i) {
      s = per["static_" k[i]]; r = per["raw_" k[i]]
      if (r > 0) printf "%-16s %12.1f %12.1f %7.2f\n", k[i], s, r, s / r
    }
    printf "\nthe single-call cases against hand-written calls whose counts are read at run time:\n"
    printf "%-16s %12s %12s %7s\n", "case", "static", "raw (rt)", "ratio"
    for (i = 1; i <= 3; ++i) {
      s = per["static_" k[i]]; r = per["raw_rt_" k[i]]
      if (r > 0) printf "%-16s %12.1f %12.1f %7.2f\n", k[i], s, r, s / r
    }
  }'
