#!/usr/bin/env bash
# How far a result that does not own its mesh would go toward the 1.10x target: builds
# bench_dispatch twice with the same compiler and flags, against the headers as they are
# and against a copy in which dtensor keeps a pointer to the mesh handle it was made from
# (no reference count, so a tensor would dangle once that handle is gone: an experiment,
# not a configuration), and counts instructions per call of both with instructions.sh.
#   bash bench/dispatch/borrowed_mesh.sh [N]      (needs g++, Google Benchmark, valgrind)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
n="${1:-20000}"
cccl=""
for d in "${CCCL_ROOT:-}" "${CUDA_PATH:-}" /usr/local/cuda /usr/local/cuda/targets/*-linux; do
  for s in include/cccl include; do
    if [[ -n "$d" && -f "$d/$s/cuda/std/mdspan" ]]; then cccl="$d/$s"; break 2; fi
  done
done
[[ -n "$cccl" ]] || { echo "borrowed_mesh.sh: no <cuda/std/mdspan> (CCCL) found; set CCCL_ROOT"; exit 2; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cp -r "$root/include" "$tmp/borrowed"
f="$tmp/borrowed/shardcast/dtensor.hpp"
sed -i -e 's/^  Mesh mesh_;$/  const Mesh* mesh_ = nullptr;/' \
  -e 's/const Mesh& mesh() const { return mesh_; }/const Mesh\& mesh() const { return *mesh_; }/' \
  -e 's/mesh_(std::move(m))/mesh_(\&m)/; s/mesh_(m)/mesh_(\&m)/' \
  -e 's/mesh_\.shape()/mesh_->shape()/g; s/mesh_\.coords()/mesh_->coords()/g' \
  -e 's/dtensor(Mesh m,/dtensor(const Mesh\& m,/' "$f"
if ! grep -q 'const Mesh\* mesh_' "$f" || grep -q 'mesh_(std::move' "$f"; then
  echo "borrowed_mesh.sh: dtensor.hpp no longer has the lines this edit expects; update the script"
  exit 1
fi
for v in owning borrowed; do
  inc="$root/include"
  [[ $v == borrowed ]] && inc="$tmp/borrowed"
  "${CXX:-g++}" -std=gnu++20 -O3 -DNDEBUG -fconstexpr-ops-limit=268435456 -I"$inc" -isystem "$cccl" "$root/bench/dispatch/dispatch.cpp" -o "$tmp/bench_$v" \
    -lbenchmark -lpthread
  echo "== result holds its mesh: $v"
  bash "$root/bench/dispatch/instructions.sh" "$tmp/bench_$v" "$n"
done
