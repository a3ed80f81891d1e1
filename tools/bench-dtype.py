#!/usr/bin/env python3
"""16-bit storage on the CPU against f32 (docs/precision.md): `rnnc bench
--dtype D` of the LSTM and GRU samples (I = H = 256, T = 100) for each dtype
in alternating rounds, so that every dtype sees the same machine; the table
quotes medians over the rounds, each dtype's ratio to f32's median, and the
workspace a call takes.

Usage: tools/bench-dtype.py [--rnnc build/rnnc] [--dtypes f32 bf16 f16]
                            [--cells lstm gru] [--batch 8 32] [--rounds 5] [--runs 10]"""
import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import machine  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CELLS = {"lstm": "samples/lstm.rnn", "gru": "samples/gru.rnn"}


def bench(rnnc, cell, dtype, B, T, runs, size):
    cmd = [rnnc, "bench", os.path.join(ROOT, CELLS[cell]), "-D", f"I={size}", "-D", f"H={size}", "--batch", str(B),
           "--seq", str(T), "--runs", str(runs), "--warmup", "3", "--no-baseline", "--json", "--dtype", dtype]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)["optimized"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rnnc", default=os.path.join(ROOT, "build", "rnnc"))
    ap.add_argument("--dtypes", nargs="+", default=["f32", "bf16", "f16"])
    ap.add_argument("--cells", nargs="+", default=["lstm", "gru"])
    ap.add_argument("--batch", type=int, nargs="+", default=[8, 32])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--seq", type=int, default=100)
    ap.add_argument("--size", type=int, default=256)
    args = ap.parse_args()
    print(f"machine: {machine()}; T = {args.seq}, I = H = {args.size}; medians of {args.rounds} alternating rounds "
          f"of {args.runs} runs each\n")
    print("| cell | B | dtype | forward ms | fwd+bwd ms | fwd+bwd vs f32 | workspace MB |")
    print("|---|---:|---|---:|---:|---:|---:|")
    for cell in args.cells:
        for B in args.batch:
            fwd = {d: [] for d in args.dtypes}
            step = {d: [] for d in args.dtypes}
            ws = {}
            for _ in range(args.rounds):
                for d in args.dtypes:
                    r = bench(args.rnnc, cell, d, B, args.seq, args.runs, args.size)
                    fwd[d].append(r["forward_ms"])
                    step[d].append(r["fwdbwd_ms"])
                    ws[d] = r["workspace_bytes"]
            base = statistics.median(step[args.dtypes[0]])
            for d in args.dtypes:
                s = statistics.median(step[d])
                print(f"| {cell} | {B} | {d} | {statistics.median(fwd[d]):.2f} | {s:.2f} | {s / base:.2f}x | "
                      f"{ws[d] / 1e6:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
