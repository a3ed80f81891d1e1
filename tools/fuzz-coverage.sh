#!/usr/bin/env bash
# Source coverage of the kept fuzz corpora (docs/reliability.md): builds the
# fuzz targets with clang's source-based coverage (no sanitizers) in
# build-fuzzcov/, runs each target once over every input of its corpus, and
# prints llvm-cov's summary for the files each target is meant to reach.
# Usage: tools/fuzz-coverage.sh [NAME...]   (default: compiler arrays checkpoint)
set -euo pipefail
cd "$(dirname "$0")/.."
build=build-fuzzcov
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 -DRNNC_FUZZ=ON -DRNNC_COVERAGE=ON >/dev/null
names=("$@")
[ ${#names[@]} -eq 0 ] && names=(compiler arrays checkpoint)
for name in "${names[@]}"; do
  cmake --build "$build" --target "${name}_fuzz" >/dev/null
  rm -f "$build/$name".*.profraw
  LLVM_PROFILE_FILE="$build/$name.%p.profraw" "$build/tests/fuzz/${name}_fuzz" -runs=0 \
    "tests/fuzz/corpus/$name" >"$build/$name.run.log" 2>&1
  llvm-profdata-14 merge -sparse "$build/$name".*.profraw -o "$build/$name.profdata"
  case $name in
    compiler) files=(compiler/frontend compiler/ir compiler/analysis compiler/passes compiler/codegen compiler/interp) ;;
    arrays) files=(runtime/io) ;;
    checkpoint) files=(runtime/train/Checkpoint.cpp runtime/io/Safetensors.cpp runtime/io/Array.cpp) ;;
  esac
  echo "== $name: $(ls "tests/fuzz/corpus/$name" | wc -l) inputs"
  llvm-cov-14 report "$build/tests/fuzz/${name}_fuzz" -instr-profile="$build/$name.profdata" "${files[@]}" |
    tail -n 1 | awk '{printf "regions %s, functions %s, lines %s (%s lines, %s not run)\n", $4, $7, $10, $8, $9}'
done
