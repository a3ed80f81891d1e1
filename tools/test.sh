#!/usr/bin/env bash
# Builds rnnc and runs every test through ctest, in two tiers: the plain build
# (Catch2 unit tests, lit/FileCheck, numeric, training, CUDA text, ...), then
# the same suite built with AddressSanitizer and UBSan plus the fuzz targets
# for a bounded time (tools/sanitize.sh). This is the README's test command,
# and what .ci/run runs. Arguments go to both ctest runs (e.g. -R lit);
# RNNC_SKIP_SANITIZED=1 runs the plain tier only (a quicker local loop).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${RNNC_BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DRNNC_WERROR=ON >/dev/null
cmake --build "$build"
ctest --test-dir "$build" --output-on-failure "$@"
if [ "${RNNC_SKIP_SANITIZED:-0}" != 1 ]; then
  echo "== the sanitized tier (AddressSanitizer, UBSan, fuzzing): tools/sanitize.sh"
  bash tools/sanitize.sh "$@"
fi
