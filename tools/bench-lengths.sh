#!/bin/bash
# The cost of sequences of their own lengths on the CPU (docs/benchmarks/cpu.md#sequence-lengths):
# an LSTM (I = H = 256, T = 100, B = 32) compiled without --lengths, with --lengths and every
# sequence T steps long, and with lengths uniform in [T/4, T] (`rnnc bench --min-length`), sorted
# longest first (a packed batch) and in the order drawn (`--unsorted-lengths`).
# Alternating rounds, one line each: forward ms, fwd+bwd ms, tokens/s, workspace MB.
# BASELINE (another rnnc, say main before a change) adds its full and uniform runs to each
# round (`base-full`, `base-uniform`), for a before/after comparison on one noisy machine.
# Ends with the medians of fwd+bwd and uniform / full of each build.
# usage: tools/bench-lengths.sh [RNNC] [ROUNDS] [DEVICE] [BASELINE]   (DEVICE: cpu, the default, or cuda)
set -euo pipefail
rnnc=${1:-build/rnnc}
rounds=${2:-5}
device=${3:-cpu}
baseline=${4:-}
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
  if [ -n "$baseline" ]; then
    echo "$r base-full $("$baseline" bench "${args[@]}" --runs 10 --min-length 100 | grep optimized | sed 's/ *optimized *//')"
    echo "$r base-uniform $("$baseline" bench "${args[@]}" --runs 10 --min-length 25 | grep optimized | sed 's/ *optimized *//')"
  fi
done | tee "$work/rounds.txt"
python3 - "$work/rounds.txt" <<'SUMMARY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    fields = line.split()
    runs.setdefault(fields[1], []).append(float(fields[3]))  # fwd+bwd ms
for build, prefix in (("this rnnc", ""), ("baseline", "base-")):
    full, uniform = runs.get(prefix + "full"), runs.get(prefix + "uniform")
    if full and uniform:
        rounds = [u / f for u, f in zip(uniform, full)]
        print(f"{build}: fwd+bwd medians full {statistics.median(full):.1f} ms, uniform "
              f"{statistics.median(uniform):.1f} ms; uniform / full {statistics.median(uniform) / statistics.median(full):.3f}x "
              f"(median of the rounds' ratios {statistics.median(rounds):.3f}x)")
SUMMARY
