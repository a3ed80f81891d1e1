#!/usr/bin/env bash
# The sanitized tier of the tests (docs/reliability.md): builds rnnc and every
# test with clang 14, AddressSanitizer and UndefinedBehaviorSanitizer (any
# report aborts) plus libFuzzer's coverage, in build-san/; then runs the whole
# ctest suite there, which includes the fuzz-<name> tests: each fuzz target
# for RNNC_FUZZ_SECONDS (default 60). tools/test.sh runs it after the plain
# tier; arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${RNNC_SAN_BUILD_DIR:-build-san}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
  -DRNNC_SANITIZE=address,undefined -DRNNC_FUZZ=ON -DRNNC_WERROR=ON \
  -DRNNC_FUZZ_SECONDS="${RNNC_FUZZ_SECONDS:-60}" >/dev/null
cmake --build "$build"
# RNNC_SAN_BUILD_ONLY=1: configure and build, run nothing (tools/test.sh builds this tier while
# the plain tier's tests run).
if [ "${RNNC_SAN_BUILD_ONLY:-0}" = 1 ]; then exit 0; fi
# RNNC_SANITIZER tells the tests that time or bound memory to allow for it.
export RNNC_SANITIZER=1
# The numeric tests' random cells: the plain tier runs them all (20 compiled,
# 60 directional); here the sanitized compiler gets a part of each, which
# keeps CI under an hour on 2 cores.
export RNNC_NUMERIC_COMPILED_GEN=${RNNC_NUMERIC_COMPILED_GEN:-3}
export RNNC_NUMERIC_GEN=${RNNC_NUMERIC_GEN:-10}
# and one finite-difference coordinate per param, input and state (3, 3, 2 there);
export RNNC_NUMERIC_FD_COORDS=${RNNC_NUMERIC_FD_COORDS:-1}
# and 16-bit storage on four samples (every sample there).
export RNNC_NUMERIC_PRECISION_SAMPLES=${RNNC_NUMERIC_PRECISION_SAMPLES:-lstm,gru,mingru,charlm}
# intercept_tls_get_addr=0: clang 14's leak checker records the dynamic TLS of
# dlopen'd libraries (the compiled engine's bundles) through __tls_get_addr and,
# with Debian 12's glibc, can record a garbage block (`DTLS 7 at 0x1e15-...`)
# whose scan kills its tracer at exit ("Tracer caught signal 11"); seen on
# compiled/charlm/f64-params with a cold cache whose path is long. Without the
# interception the blocks are still found, through the DTV, as heap.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1:intercept_tls_get_addr=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# cuda-text (NVRTC, nvcc and ptxas on every sample's kernels, 1.5 minutes here) is the plain
# tier's: the sanitized rnnc compiles every sample for CUDA in cuda-emulated already.
ctest --test-dir "$build" --output-on-failure -j "$(nproc)" -LE fuzz -E '^cuda-text$' "$@"
# The fuzz targets run for a fixed time each, on one core: two at a time.
ctest --test-dir "$build" --output-on-failure -L fuzz -j2 "$@"
