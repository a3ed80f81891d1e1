#!/bin/bash
# The cost of dropout's masks on the CPU (docs/benchmarks/cpu.md#dropout-masks):
# an LSTM (I = H = 256, T = 100, B = 32) without dropout, with dropout on its
# input and output drawn by rnnc (Philox), and with the same products by masks
# given as inputs (what a framework that stores its masks does), and with
# DropConnect on W_hh (one mask per call: `dropout(W_hh, 0.5) @ h[t-1]`). Alternating
# rounds of `rnnc bench` (training mode: the masks are drawn), one line each.
# usage: tools/bench-masks.sh [RNNC] [ROUNDS]
set -euo pipefail
rnnc=${1:-build/rnnc}
rounds=${2:-5}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export RNNC_CACHE=$work/cache
head='dim I = 256
dim H = 256'
cell() { # $1: ports, $2: the input product, $3: the output, $4: the recurrent weights (W_hh)
  printf '%s\ncell LSTM(%s) -> y {\n  param W_ih: [4*H, I]\n  param W_hh: [4*H, H]\n  param b_ih, b_hh: [4*H]\n' "$head" "$1"
  printf '  i, f, g, o = split(W_ih @ %s + b_ih + %s @ h[t-1] + b_hh, 4)\n' "$2" "${4:-W_hh}"
  printf '  c = sigmoid(f) * c[t-1] + sigmoid(i) * tanh(g)\n  h = sigmoid(o) * tanh(c)\n  y = %s\n}\n' "$3"
}
cell 'x: [I]' 'x' 'h' > "$work/none.rnn"
cell 'x: [I]' 'dropout(x, 0.2)' 'dropout(h, 0.3)' > "$work/drawn.rnn"
cell 'x: [I], m1: [I], m2: [H]' '(x * m1)' 'h * m2' > "$work/stored.rnn"
cell 'x: [I]' 'x' 'h' 'dropout(W_hh, 0.5)' > "$work/weights.rnn"
grep -m1 "model name" /proc/cpuinfo
echo "round variant  forward_ms fwd+bwd_ms tokens/s workspace_MB"
for r in $(seq "$rounds"); do
  for v in none drawn stored weights; do
    echo "$r $v $("$rnnc" bench "$work/$v.rnn" --batch 32 --seq 100 --runs 10 --no-baseline 2>&1 | grep optimized | sed 's/ *optimized *//')"
  done
done
