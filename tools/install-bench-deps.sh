#!/usr/bin/env bash
# Installs what bench/onednn needs (oneDNN from Debian's libdnnl-dev, plus the
# compiler and cmake). Not a dependency of rnnc: only the CPU anchor benchmark
# (docs/benchmarks/cpu.md) uses it. Safe to run twice: what is present is skipped.
set -euo pipefail

packages=(g++ cmake pkg-config libdnnl-dev)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-bench-deps: all ${#packages[@]} Debian packages present"
else
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "install-bench-deps: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
