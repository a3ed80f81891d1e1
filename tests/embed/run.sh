#!/usr/bin/env bash
# Builds samples/embed (its own CMake project: the LSTM sample compiled to a
# bundle at build time, linked with rnnc's runtime) and runs it: the program
# exits 1 unless its training loss falls.
# Usage: run.sh RNNC BUILD_DIR
set -euo pipefail
rnnc=$1
build=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi
cmake -S "$root/samples/embed" -B "$build" "${generator[@]}" -DRNNC="$rnnc" -DRNNC_SOURCE_DIR="$root" > "$build.configure.log" 2>&1 ||
  { cat "$build.configure.log"; exit 1; }
cmake --build "$build"
"$build/train_adding" 300
