#!/usr/bin/env bash
# Installs the Debian packages shardcast's build, tests and benchmarks need.
# Idempotent: packages already present are skipped, and apt is only touched when
# something is missing.
set -euo pipefail
pkgs=(cmake ninja-build g++ doctest-dev libbenchmark-dev openmpi-bin libopenmpi-dev clang libclang-rt-14-dev python3-matplotlib)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "shardcast: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
