#!/usr/bin/env bash
# Writes every sample's generated bundles (cpu, cpu -O0, cuda, cuda --jit) and
# its `show --all` and `show --stats --json` into OUTDIR, so a refactor can
# prove the generated code unchanged: run it with the old and the new rnnc and
# `diff -r` the two folders.  Usage: tools/dump-generated.sh RNNC OUTDIR
set -uo pipefail
rnnc=$1; out=$2; mkdir -p "$out"
samples="$(cd "$(dirname "$0")/../samples" && pwd)"
for f in "$samples"/*.rnn; do
  n=$(basename "$f" .rnn)
  if ! "$rnnc" compile "$f" --target cpu -o "$out/$n-cpu" >/dev/null 2>"$out/$n.err"; then
    echo "$n: does not compile without -D" >>"$out/skipped"; continue
  fi
  "$rnnc" compile "$f" --target cpu -O0 -o "$out/$n-cpu-O0" 2>/dev/null
  "$rnnc" compile "$f" --target cuda -o "$out/$n-cuda" 2>/dev/null
  "$rnnc" compile "$f" --target cuda --jit --no-format -o "$out/$n-jit" 2>/dev/null
  "$rnnc" show "$f" --stats --json >"$out/$n-stats.json" 2>/dev/null
  "$rnnc" show "$f" --all >"$out/$n-all.txt" 2>/dev/null
done
