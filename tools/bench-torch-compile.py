#!/usr/bin/env python3
"""A training step of the compiled LSTM layer (samples/lstm.rnn through rnnc.load) eagerly and
under torch.compile(fullgraph=True), with the input as data (not requiring grad) and as an
activation (requiring grad), on the CPU: loss = mean(y^2), then backward. Eager runs the
autograd node's backward in place in the workspace; a compiled step runs the rnnc::backward op
on a copy of it. Rounds alternate eager and compiled; the table quotes medians over rounds of
each round's median step.

Usage: tools/bench-torch-compile.py [--seq 100] [--batch 32] [--size 256] [--rounds 5] [--runs 15]"""
import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import machine  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seq", type=int, default=100)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    import torch
    import rnnc
    T, B, H = args.seq, args.batch, args.size
    layer = rnnc.load(os.path.join(ROOT, "samples", "lstm.rnn"), I=H, H=H)

    def step(x):
        y, _ = layer(x)
        return y.square().mean()

    compiled = torch.compile(step, fullgraph=True)

    def median_ms(fn, x):
        times = []
        for i in range(3 + args.runs):
            layer.zero_grad(set_to_none=True)
            start = time.perf_counter()
            fn(x).backward()
            if i >= 3:
                times.append((time.perf_counter() - start) * 1e3)
        return statistics.median(times)

    print(f"machine: {machine()}; T = {T}, B = {B}, I = H = {H}; medians of {args.rounds} rounds of "
          f"{args.runs} steps (ms per forward+backward)\n")
    print("| x | eager ms | torch.compile ms | compiled / eager |")
    print("|---|---:|---:|---:|")
    for requires_grad in (False, True):
        x = torch.randn(T, B, H, requires_grad=requires_grad)
        eager, comp = [], []
        for _ in range(args.rounds):
            eager.append(median_ms(step, x))
            comp.append(median_ms(compiled, x))
        e, c = statistics.median(eager), statistics.median(comp)
        what = "requires grad" if requires_grad else "data (no grad)"
        print(f"| {what} | {e:.1f} | {c:.1f} | {c / e:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
