#!/bin/bash
# The cost of sequences of their own lengths on the CPU (docs/benchmarks/cpu.md#sequence-lengths):
# an LSTM (I = H = 256, T = 100, B = 32) compiled without --lengths, with --lengths and every
# sequence T steps long, and with lengths uniform in [T/4, T] (`rnnc bench --min-length`), sorted
# longest first (a packed batch) and in the order drawn (`--unsorted-lengths`).
# Alternating rounds, one line each: forward ms, fwd+bwd ms, tokens/s, workspace MB.
# usage: tools/bench-lengths.sh [RNNC] [ROUNDS] [DEVICE]   (DEVICE: cpu, the default, or cuda)
set -euo pipefail
rnnc=${1:-build/rnnc}
rounds=${2:-5}
device=${3:-cpu}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export RNNC_CACHE=$work/cache
args=(samples/lstm.rnn -D I=256 -D H=256 --batch 32 --seq 100 --no-baseline --device "$device")
if [ "$device" = cuda ]; then nvidia-smi --query-gpu=name --format=csv,noheader | head -1
else grep -m1 "model name" /proc/cpuinfo; fi
"$rnnc" bench "${args[@]}" --min-length 25 --runs 1 --warmup 0 | head -1
echo "round variant  forward_ms fwd+bwd_ms tokens/s workspace_MB"
for r in $(seq "$rounds"); do
  echo "$r plain $("$rnnc" bench "${args[@]}" --runs 10 | grep optimized | sed 's/ *optimized *//')"
  echo "$r full $("$rnnc" bench "${args[@]}" --runs 10 --min-length 100 | grep optimized | sed 's/ *optimized *//')"
  echo "$r uniform $("$rnnc" bench "${args[@]}" --runs 10 --min-length 25 | grep optimized | sed 's/ *optimized *//')"
  echo "$r unsorted $("$rnnc" bench "${args[@]}" --runs 10 --min-length 25 --unsorted-lengths | grep optimized | sed 's/ *optimized *//')"
done
