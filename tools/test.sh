#!/usr/bin/env bash
# Builds rnnc and runs every test (Catch2 unit tests and lit/FileCheck tests)
# through ctest. This is the README's test command, and what .ci/run runs.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${RNNC_BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DRNNC_WERROR=ON >/dev/null
cmake --build "$build"
ctest --test-dir "$build" --output-on-failure "$@"
