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
san_build=
if [ "${RNNC_SKIP_SANITIZED:-0}" != 1 ]; then
  # The sanitized tier's build starts now, at the lowest priority: it takes only the cores
  # the plain tier's tests leave idle. setsid gives it a process group (killed on exit) and,
  # where the kernel groups sessions for scheduling (autogroup), a group of its own, whose
  # priority is lowered too: a nice value alone ranks a process only within its group.
  san_dir=${RNNC_SAN_BUILD_DIR:-build-san}
  mkdir -p "$san_dir"
  RNNC_SAN_BUILD_ONLY=1 setsid bash -c 'echo 19 >/proc/self/autogroup 2>/dev/null; exec nice -n 19 bash tools/sanitize.sh' \
    >"$san_dir/background-build.log" 2>&1 &
  san_build=$!
  trap 'kill -- "-$san_build" 2>/dev/null || true' EXIT
fi
# -j: the suites that run their cases in parallel hold every core (PROCESSORS in
# tests/CMakeLists.txt); the serial ones run beside each other.
ctest --test-dir "$build" --output-on-failure -j "$(nproc)" "$@"
if [ -n "$san_build" ]; then
  # A failed background build is built again below, at normal priority, where it reports.
  wait "$san_build" || echo "== the sanitized tier's background build failed ($san_dir/background-build.log)"
  trap - EXIT
  echo "== the sanitized tier (AddressSanitizer, UBSan, fuzzing): tools/sanitize.sh"
  bash tools/sanitize.sh "$@"
fi
