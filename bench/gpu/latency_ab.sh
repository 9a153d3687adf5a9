#!/usr/bin/env bash
# Small-message latency of two shardcast-bench builds, run alternately in one session so
# that both see the same machine: all_reduce, reduce_scatter and all_gather of 8 B to
# 256 KiB on 2 and 4 ranks of the p2p backend (GPU 0), ROUNDS rounds of (A, B).
#
#   bench/gpu/latency_ab.sh A_BENCH B_BENCH OUTDIR [ROUNDS]
#
# SHARDCAST_AB_BACKEND (default p2p) and SHARDCAST_AB_COLLS (default "all_reduce
# reduce_scatter all_gather") choose other backends and collectives, e.g. host and sendrecv.
#
# OUTDIR/latency_ab.log holds every run's table; OUTDIR/latency_ab.txt one line per
# (collective, ranks, size, build) with the times of each round and their median (us).
set -uo pipefail
a=${1:?usage: latency_ab.sh A_BENCH B_BENCH OUTDIR [ROUNDS]}
b=${2:?usage: latency_ab.sh A_BENCH B_BENCH OUTDIR [ROUNDS]}
out=${3:?usage: latency_ab.sh A_BENCH B_BENCH OUTDIR [ROUNDS]}
rounds=${4:-5}
mkdir -p "$out"
log="$out/latency_ab.log"
: > "$log"
backend=${SHARDCAST_AB_BACKEND:-p2p}
read -r -a colls <<< "${SHARDCAST_AB_COLLS:-all_reduce reduce_scatter all_gather}"
sizes=(-b 8 -e 256K -f 32 -n 200 -w 20 -c 1)
[[ $backend == host ]] && sizes+=(--no-roofline)
for round in $(seq 1 "$rounds"); do
  for coll in "${colls[@]}"; do
    for ranks in 2 4; do
      for build in A B; do
        bin=$a
        [[ $build == B ]] && bin=$b
        echo "## round $round $coll ranks $ranks build $build" >> "$log"
        timeout 60 "$bin" "$coll" --backend "$backend" --ranks "$ranks" "${sizes[@]}" >> "$log" 2>&1 || echo "## FAILED" >> "$log"
      done
    done
  done
done
# Columns of a shardcast-bench row: size count type redop root time ...
python3 - "$log" "$rounds" > "$out/latency_ab.txt" <<'EOF'
import sys, statistics, collections
log, rounds = sys.argv[1], int(sys.argv[2])
t = collections.defaultdict(list)
key = None
for line in open(log):
    if line.startswith("## round"):
        w = line.split()
        key = (w[3], int(w[5]), w[7])
    elif key and line.strip() and not line.startswith("#"):
        w = line.split()
        if len(w) > 5 and w[0].isdigit():
            t[(key[0], key[1], int(w[0]), key[2])].append(float(w[5]))
print("# collective ranks bytes build | times (us) of each round | median")
for k in sorted(t):
    v = t[k]
    print(f"{k[0]:15s} {k[1]} {k[2]:7d} {k[3]} | " + " ".join(f"{x:7.2f}" for x in v) + f" | {statistics.median(v):7.2f}")
EOF
cat "$out/latency_ab.txt"
