#!/usr/bin/env python3
"""The CPU benchmark of the issue: forward+backward of the LSTM and GRU samples
(I = H = 256, T = 100) at B = 1 and B = 32, rnnc optimized against rnnc -O0
(the paper's baseline: `rnnc bench` times both in one process) and against
oneDNN's LSTM and lbr-GRU primitives (bench/onednn, built separately: see
docs/benchmarks/cpu.md). Rounds alternate rnnc and oneDNN so both see the same
machine; the table quotes medians over rounds and the ratios of the medians.

--baseline OTHER_RNNC adds another rnnc build (say, main before a change, built in
a worktree) to the same alternating rounds: its column and the ratio of the medians
(above 1: this build is faster), for before/after comparisons on one noisy machine.

Usage: tools/bench-cpu.py [--rnnc build/rnnc] [--onednn build-bench/onednn-bench]
                          [--baseline OTHER_RNNC] [--rounds 5] [--runs 20] [--batch 1 32]"""
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


def rnnc_bench(rnnc, cell, B, T, runs, size):
    cmd = [rnnc, "bench", os.path.join(ROOT, CELLS[cell]), "-D", f"I={size}", "-D", f"H={size}", "--batch", str(B),
           "--seq", str(T), "--runs", str(runs), "--warmup", "3", "--json"]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def onednn_bench(onednn, cell, B, T, runs, size):
    cmd = [onednn, "--cell", cell, "--input", str(size), "--hidden", str(size), "--batch", str(B), "--seq", str(T),
           "--runs", str(runs), "--warmup", "3", "--json"]
    env = dict(os.environ, OMP_NUM_THREADS=str(os.cpu_count()))
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout)


def saved_bytes(rnnc, cell, size):
    cmd = [rnnc, "show", os.path.join(ROOT, CELLS[cell]), "-D", f"I={size}", "-D", f"H={size}", "--stats", "--json"]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)["saved_bytes_per_step"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rnnc", default=os.path.join(ROOT, "build", "rnnc"))
    ap.add_argument("--onednn", default=os.path.join(ROOT, "build-bench", "onednn-bench"))
    ap.add_argument("--baseline", default=None, help="another rnnc binary timed in the same rounds")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 32])
    ap.add_argument("--seq", type=int, default=100)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--cells", nargs="+", default=["lstm", "gru"])
    args = ap.parse_args()
    have_onednn = os.access(args.onednn, os.X_OK)
    if not have_onednn:
        print(f"# no oneDNN benchmark at {args.onednn}: build bench/onednn for that column", file=sys.stderr)
    rows = []
    for cell in args.cells:
        for B in args.batch:
            opt, o0, dnn, base, mem = [], [], [], [], None
            for _ in range(args.rounds):
                if args.baseline:
                    base.append(rnnc_bench(args.baseline, cell, B, args.seq, args.runs, args.size)["optimized"]["fwdbwd_ms"])
                r = rnnc_bench(args.rnnc, cell, B, args.seq, args.runs, args.size)
                opt.append(r["optimized"]["fwdbwd_ms"])
                o0.append(r["O0"]["fwdbwd_ms"])
                mem = r["optimized"]
                if have_onednn:
                    dnn.append(onednn_bench(args.onednn, cell, B, args.seq, args.runs, args.size)["fwdbwd_ms_median"])
            m_opt, m_o0 = statistics.median(opt), statistics.median(o0)
            m_dnn = statistics.median(dnn) if dnn else float("nan")
            saved = saved_bytes(args.rnnc, cell, args.size) * args.seq * B
            target = (saved + 3 * mem["param_bytes"]) * 1.1  # saved + params + Adam's two moments, + 10 %
            rows.append((cell, B, m_opt, m_o0, m_dnn, m_o0 / m_opt, m_dnn / m_opt, mem["training_bytes"], target,
                         min(opt), max(opt), base))
            print(f"# {cell} B={B}: rnnc {opt}  -O0 {o0}  oneDNN {dnn}" + (f"  baseline {base}" if base else ""),
                  file=sys.stderr, flush=True)
    print(f"machine: {machine()}; T = {args.seq}, I = H = {args.size}; medians of {args.rounds} rounds of "
          f"{args.runs} runs each (ms per forward+backward step)\n")
    if args.baseline:
        print(f"baseline: {args.baseline}\n")
        print("| cell | B | rnnc ms | rnnc range | baseline ms | baseline range | vs baseline |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for cell, B, o, *_, lo, hi, base in rows:
            m = statistics.median(base)
            print(f"| {cell} | {B} | {o:.2f} | {lo:.2f}–{hi:.2f} | {m:.2f} | {min(base):.2f}–{max(base):.2f} | "
                  f"{m / o:.2f}x |")
        return 0
    print("| cell | B | rnnc ms | rnnc range | -O0 ms | oneDNN ms | vs -O0 | vs oneDNN | training MB | target MB |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for cell, B, o, z, d, rz, rd, tb, tgt, lo, hi, _ in rows:
        print(f"| {cell} | {B} | {o:.2f} | {lo:.2f}–{hi:.2f} | {z:.2f} | {d:.2f} | {rz:.2f}x | {rd:.2f}x | "
              f"{tb / 1e6:.1f} | {tgt / 1e6:.1f} |")


if __name__ == "__main__":
    sys.exit(main())
