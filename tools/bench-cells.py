#!/usr/bin/env python3
"""The cells no library has, on the CPU: the peephole LSTM and the layer-norm LSTM
(samples/peephole_lstm.rnn, samples/layernorm_lstm.rnn) compiled by rnnc, against the
same equations written in PyTorch the way a researcher would (a cell function called
once per step), run eagerly and with the cell under torch.compile. Forward+backward
with input gradients (or forward alone with --forward-only), I = H = 256, T = 100.
Rounds alternate the three so all see the same machine; the table quotes medians
over rounds and the ratios of the medians. torch runs in a subprocess with all the
machine's threads, as rnnc does.

Usage: tools/bench-cells.py [--rnnc build/rnnc] [--rounds 3] [--runs 10]
                            [--batch 1 8 32] [--cells peephole layernorm]
                            [--forward-only] [--no-compile]"""
import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import machine  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CELLS = {"peephole": "samples/peephole_lstm.rnn", "layernorm": "samples/layernorm_lstm.rnn"}

# The samples' equations, step by step. Weights are drawn as rnnc init draws
# them in spirit (uniform ±1/sqrt(H)); timing does not depend on the values.
TORCH = r"""
import statistics, sys, time, torch
cell, B, T, runs, size, forward_only, compiled = sys.argv[1], *map(int, sys.argv[2:6]), sys.argv[6] == "1", sys.argv[7] == "1"
torch.manual_seed(0)
I = H = size
def param(*shape):
    return (torch.rand(*shape) * 2 - 1).mul_(H ** -0.5).requires_grad_(not forward_only)
if cell == "peephole":
    W, R, b, p_i, p_f, p_o = param(4 * H, I), param(4 * H, H), param(4 * H), param(H), param(H), param(H)
    def step(x, h, c):
        zi, zf, zg, zo = (x @ W.t() + h @ R.t() + b).chunk(4, 1)
        i = torch.sigmoid(zi + p_i * c)
        f = torch.sigmoid(zf + p_f * c)
        c = f * c + i * torch.tanh(zg)
        o = torch.sigmoid(zo + p_o * c)
        return o * torch.tanh(c), c
else:
    W_x, W_h, b = param(4 * H, I), param(4 * H, H), param(4 * H)
    gain_x, bias_x, gain_h, bias_h = param(4 * H), param(4 * H), param(4 * H), param(4 * H)
    gain_c, bias_c = param(H), param(H)
    def ln(v, gain, bias):
        d = v - v.mean(1, keepdim=True)
        return gain * d / torch.sqrt((d * d).mean(1, keepdim=True) + 1e-5) + bias
    def step(x, h, c):
        f, i, o, g = (ln(h @ W_h.t(), gain_h, bias_h) + ln(x @ W_x.t(), gain_x, bias_x) + b).chunk(4, 1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(ln(c, gain_c, bias_c)), c
if compiled:
    step = torch.compile(step, dynamic=False)
x = torch.randn(T, B, I, requires_grad=not forward_only)
seed = torch.randn(T, B, H)
def once():
    h = c = torch.zeros(B, H)
    outs = []
    for t in range(T):
        h, c = step(x[t], h, c)
        outs.append(h)
    if not forward_only:
        torch.stack(outs).backward(seed)
def timed():
    if forward_only:
        with torch.no_grad():
            once()
    else:
        once()
times = []
for i in range(3 + runs):
    start = time.perf_counter()
    timed()
    if i >= 3:
        times.append((time.perf_counter() - start) * 1000)
print(statistics.median(times))
"""


def rnnc_ms(rnnc, cell, B, T, runs, size, forward_only):
    cmd = [rnnc, "bench", os.path.join(ROOT, CELLS[cell]), "-D", f"I={size}", "-D", f"H={size}", "--batch", str(B),
           "--seq", str(T), "--runs", str(runs), "--warmup", "3", "--json", "--no-baseline"]
    cmd += ["--forward-only"] if forward_only else []
    r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)["optimized"]
    return r["forward_ms" if forward_only else "fwdbwd_ms"]


def torch_ms(cell, B, T, runs, size, forward_only, compiled):
    cmd = [sys.executable, "-c", TORCH, cell, str(B), str(T), str(runs), str(size), "1" if forward_only else "0",
           "1" if compiled else "0"]
    return float(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rnnc", default=os.path.join(ROOT, "build", "rnnc"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--seq", type=int, default=100)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--cells", nargs="+", default=list(CELLS), choices=list(CELLS))
    ap.add_argument("--forward-only", action="store_true", help="forward alone (torch under no_grad)")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile (its first call compiles for minutes)")
    args = ap.parse_args()
    rows = []
    for cell in args.cells:
        for B in args.batch:
            ours, eager, comp = [], [], []
            for _ in range(args.rounds):
                ours.append(rnnc_ms(args.rnnc, cell, B, args.seq, args.runs, args.size, args.forward_only))
                eager.append(torch_ms(cell, B, args.seq, args.runs, args.size, args.forward_only, False))
                if not args.no_compile:
                    comp.append(torch_ms(cell, B, args.seq, args.runs, args.size, args.forward_only, True))
            print(f"# {cell} B={B}: rnnc {ours}  eager {eager}  compiled {comp}", file=sys.stderr, flush=True)
            rows.append((cell, B, ours, eager, comp))
    what = "forward alone" if args.forward_only else "forward+backward with input gradients"
    print(f"machine: {machine()}; T = {args.seq}, I = H = {args.size}; medians of {args.rounds} rounds of "
          f"{args.runs} runs each (ms, {what})\n")
    print("| cell | B | rnnc ms | eager ms | torch.compile ms | vs eager | vs torch.compile |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for cell, B, ours, eager, comp in rows:
        o, e = statistics.median(ours), statistics.median(eager)
        c = statistics.median(comp) if comp else float("nan")
        print(f"| {cell} | {B} | {o:.2f} | {e:.2f} | {c:.2f} | {e / o:.2f}x | {c / o:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
