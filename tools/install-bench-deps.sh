#!/usr/bin/env bash
# Installs what bench/onednn needs (oneDNN from Debian's libdnnl-dev, plus the
# compiler and cmake). Not a dependency of rnnc: only the CPU anchor benchmark
# (docs/benchmarks/cpu.md) uses it. Safe to run twice: what is present is skipped.
set -euo pipefail
bash "$(dirname "$0")/apt-install.sh" install-bench-deps g++ cmake pkg-config libdnnl-dev
