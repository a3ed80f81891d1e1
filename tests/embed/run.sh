#!/usr/bin/env bash
# rnnc as a user gets it: installed, then found by CMake (docs/install.md).
#  1. `cmake --install BUILD` into a fresh prefix, then the prefix moved
#     elsewhere: rnnc must find its headers there (--print-cflags); rnnc-opt
#     is installed, and rnnc-inspect (when built) reads a bundle with them.
#  2. samples/embed, copied out of the repository (with ../lstm.rnn, which it
#     imports), configured with only -DCMAKE_PREFIX_PATH=<prefix>, built and
#     run: the program exits 1 unless its training loss falls.
#  3. Editing the imported lstm.rnn compiles the model again (Ninja only).
#  4. tests/embed/checks: a failing rnnc compile fails the build with rnnc's
#     diagnostic; a wrong MODEL says the right name; a file whose name cannot
#     be read fails the configure with the diagnostic.
#  5. With a CUDA toolkit, tests/embed/cuda: the LSTM sample as .cu and --jit
#     shared libraries, built (not run) with --no-undefined.
# Usage: run.sh BUILD WORK [NVCC]   (WORK is emptied first)
set -euo pipefail
build=$(cd "$1" && pwd)
work=$2
nvcc=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
samples=$(cd "$here/../../samples" && pwd)
rm -rf "$work"
mkdir -p "$work"
work=$(cd "$work" && pwd)
generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi
fail() { echo "FAILED: $*"; exit 1; }
# Runs a command with its output in $work/<name>.log, shown when it fails.
logged() {
  local name=$1
  shift
  "$@" >"$work/$name.log" 2>&1 || { cat "$work/$name.log"; fail "$name: $*"; }
}

echo "== install, then move the prefix"
logged install cmake --install "$build" --prefix "$work/staged"
mv "$work/staged" "$work/prefix"
prefix=$work/prefix
cflags=$("$prefix/bin/rnnc" --print-cflags)
[ "$cflags" = "-I$prefix/include" ] || fail "the installed rnnc's --print-cflags is '$cflags', not -I$prefix/include"
for f in include/rnnc/model.h include/rnnc/session.h lib/cmake/rnnc/rnncConfig.cmake lib/cmake/rnnc/rnncConfigVersion.cmake; do
  [ -f "$prefix/$f" ] || fail "the install has no $f"
done
[ -x "$prefix/bin/rnnc-opt" ] || fail "the install has no bin/rnnc-opt"
if [ -x "$build/rnnc-inspect" ]; then
  # Built with Clang: installed too, reading the prefix's runtime headers.
  [ -x "$prefix/bin/rnnc-inspect" ] || fail "the install has no bin/rnnc-inspect"
  logged inspect-compile "$prefix/bin/rnnc" compile "$samples/lstm.rnn" --target cuda -o "$work/lstm-cuda"
  logged inspect "$prefix/bin/rnnc-inspect" "$work/lstm-cuda"
fi

echo "== samples/embed against the prefix"
mkdir -p "$work/src/samples"
cp -r "$samples/embed" "$work/src/samples/embed"
cp "$samples/lstm.rnn" "$work/src/samples/lstm.rnn"
logged embed-configure cmake -S "$work/src/samples/embed" -B "$work/embed" "${generator[@]}" -DCMAKE_PREFIX_PATH="$prefix"
logged embed-build cmake --build "$work/embed"
"$work/embed/train_adding" 300

if [ ${#generator[@]} -gt 0 ]; then
  echo "== an edited import compiles the model again"
  touch "$work/src/samples/lstm.rnn"
  plan=$(ninja -C "$work/embed" -n)
  grep -q "rnnc compile adding_lstm.rnn" <<<"$plan" ||
    { echo "$plan"; fail "touching lstm.rnn (imported by adding_lstm.rnn) does not run rnnc compile again"; }
fi

echo "== failures show rnnc's diagnostics"
cp -r "$here/checks" "$work/src/checks"
logged checks-configure cmake -S "$work/src/checks" -B "$work/checks" "${generator[@]}" -DCMAKE_PREFIX_PATH="$prefix"
# Builds `target` in the checks project, which must fail with `expected` in its output.
fails_with() {
  local target=$1 expected=$2 out
  if out=$(cmake --build "$work/checks" --target "$target" 2>&1); then
    echo "$out"
    fail "building $target succeeded"
  fi
  grep -qF -- "$expected" <<<"$out" || { echo "$out"; fail "building $target does not say: $expected"; }
  echo "$target: fails with: $expected"
}
fails_with bad "bad.rnn:5:16: error: unknown name 'hh'"
fails_with misnamed "named its bundle 'LSTM', not 'NotLSTM'"
if out=$(cmake "$work/checks" -DREAD_NAME=ON 2>&1); then
  echo "$out"
  fail "configuring with a model whose name cannot be read succeeded"
fi
grep -qF "bad.rnn:5:16: error: unknown name 'hh'" <<<"$out" || { echo "$out"; fail "the configure does not show the diagnostic"; }
echo "read_name: the configure fails with rnnc's diagnostic"

if [ -z "$nvcc" ]; then nvcc=$(command -v nvcc || true); fi
if [ -z "$nvcc" ] || [ ! -x "$nvcc" ]; then
  echo "== SKIPPED the CUDA link lines: no CUDA toolkit (nvcc not found)"
  exit 0
fi
echo "== the CUDA link lines ($nvcc)"
cp -r "$here/cuda" "$work/src/cuda"
logged cuda-configure cmake -S "$work/src/cuda" -B "$work/cuda" "${generator[@]}" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES=90
logged cuda-build cmake --build "$work/cuda"
for lib in lstm_cuda lstm_jit; do
  so=$work/cuda/lib$lib.so
  nm -D --defined-only "$so" | grep -q ' T rnnc_model_LSTM$' || fail "$so does not define rnnc_model_LSTM"
  ! readelf -d "$so" | grep -q 'NEEDED.*libcuda\.so' || fail "$so needs the driver library (libcuda)"
  echo "lib$lib.so: links; needs $(readelf -d "$so" | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p' | tr '\n' ' ')"
done
