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
--baseline-cxxflags FLAGS builds the baseline's bundles with those flags (RNNC_CXXFLAGS):
the same rnnc with -DRNNC_BLOCK_ROWS=1000000000 runs every loop in one block.

--torch adds PyTorch's own nn.LSTM / nn.GRU on the CPU (oneDNN or its native kernels,
as torch picks; run in a subprocess with all the machine's threads) to the rounds.
--forward-only times forward alone: rnnc's forward-only build in evaluation mode
(`rnnc bench --forward-only`), torch under inference_mode, and oneDNN's forward (its
forward_training, which also writes the workspace its backward would read).

Usage: tools/bench-cpu.py [--rnnc build/rnnc] [--onednn build-bench/onednn-bench]
                          [--baseline OTHER_RNNC] [--torch] [--forward-only]
                          [--rounds 5] [--runs 20] [--batch 1 32] [--size 256]"""
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


def rnnc_bench(rnnc, cell, B, T, runs, size, forward_only=False, cxxflags=None):
    env = None if cxxflags is None else {**os.environ, "RNNC_CXXFLAGS": cxxflags}
    cmd = [rnnc, "bench", os.path.join(ROOT, CELLS[cell]), "-D", f"I={size}", "-D", f"H={size}", "--batch", str(B),
           "--seq", str(T), "--runs", str(runs), "--warmup", "3", "--json"] + (["--forward-only"] if forward_only else [])
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout)


TORCH = r"""
import statistics, sys, time, torch
cell, B, T, runs, size, forward_only = sys.argv[1], *map(int, sys.argv[2:6]), sys.argv[6] == "1"
torch.manual_seed(0)
layer = (torch.nn.LSTM if cell == "lstm" else torch.nn.GRU)(size, size)
x = torch.randn(T, B, size, requires_grad=not forward_only)
g = torch.randn(T, B, size)
def once():
    if forward_only:
        with torch.inference_mode():
            layer(x)
        return
    out, _ = layer(x)
    out.backward(g)
times = []
for i in range(3 + runs):
    start = time.perf_counter()
    once()
    if i >= 3:
        times.append((time.perf_counter() - start) * 1000)
print(statistics.median(times))
"""


def torch_bench(cell, B, T, runs, size, forward_only):
    cmd = [sys.executable, "-c", TORCH, cell, str(B), str(T), str(runs), str(size), "1" if forward_only else "0"]
    return float(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


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
    ap.add_argument("--baseline-cxxflags", default=None,
                    help="RNNC_CXXFLAGS for the baseline's bundles (e.g. -DRNNC_BLOCK_ROWS=1000000000: one block)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 32])
    ap.add_argument("--seq", type=int, default=100)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--cells", nargs="+", default=["lstm", "gru"])
    ap.add_argument("--torch", action="store_true", help="add PyTorch's nn.LSTM / nn.GRU on the CPU")
    ap.add_argument("--forward-only", action="store_true", help="time forward alone (served models)")
    args = ap.parse_args()
    key = "forward_ms" if args.forward_only else "fwdbwd_ms"
    have_onednn = os.access(args.onednn, os.X_OK)
    if not have_onednn:
        print(f"# no oneDNN benchmark at {args.onednn}: build bench/onednn for that column", file=sys.stderr)
    rows = []
    for cell in args.cells:
        for B in args.batch:
            opt, o0, dnn, base, pt, mem = [], [], [], [], [], None
            for _ in range(args.rounds):
                if args.baseline:
                    base.append(rnnc_bench(args.baseline, cell, B, args.seq, args.runs, args.size,
                                           args.forward_only, args.baseline_cxxflags)["optimized"][key])
                r = rnnc_bench(args.rnnc, cell, B, args.seq, args.runs, args.size, args.forward_only)
                opt.append(r["optimized"][key])
                o0.append(r["O0"][key])
                mem = r["optimized"]
                if have_onednn:
                    dnn.append(onednn_bench(args.onednn, cell, B, args.seq, args.runs, args.size)[key + "_median"])
                if args.torch:
                    pt.append(torch_bench(cell, B, args.seq, args.runs, args.size, args.forward_only))
            m_opt, m_o0 = statistics.median(opt), statistics.median(o0)
            m_dnn = statistics.median(dnn) if dnn else float("nan")
            m_pt = statistics.median(pt) if pt else float("nan")
            saved = saved_bytes(args.rnnc, cell, args.size) * args.seq * B
            target = (saved + 3 * mem["param_bytes"]) * 1.1  # saved + params + Adam's two moments, + 10 %
            held = mem["serving_bytes"] if args.forward_only else mem["training_bytes"]
            rows.append((cell, B, m_opt, m_o0, m_dnn, m_o0 / m_opt, m_dnn / m_opt, held, target,
                         min(opt), max(opt), base, m_pt))
            print(f"# {cell} B={B}: rnnc {opt}  -O0 {o0}  oneDNN {dnn}" + (f"  baseline {base}" if base else "") +
                  (f"  torch {pt}" if pt else ""), file=sys.stderr, flush=True)
    what = "forward alone" if args.forward_only else "forward+backward step"
    print(f"machine: {machine()}; T = {args.seq}, I = H = {args.size}; medians of {args.rounds} rounds of "
          f"{args.runs} runs each (ms per {what})\n")
    if args.baseline:
        flags = f" with RNNC_CXXFLAGS={args.baseline_cxxflags}" if args.baseline_cxxflags else ""
        print(f"baseline: {args.baseline}{flags}\n")
        print("| cell | B | rnnc ms | rnnc range | baseline ms | baseline range | vs baseline |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for cell, B, o, *_, lo, hi, base, _pt in rows:
            m = statistics.median(base)
            print(f"| {cell} | {B} | {o:.2f} | {lo:.2f}–{hi:.2f} | {m:.2f} | {min(base):.2f}–{max(base):.2f} | "
                  f"{m / o:.2f}x |")
        return 0
    # Columns of a comparison that did not run (no oneDNN build, no --torch) are left out.
    dnn_head = (" oneDNN ms |", " vs oneDNN |", "---:|---:|") if have_onednn else ("", "", "")
    torch_head = (" PyTorch ms | vs PyTorch |", "---:|---:|") if args.torch else ("", "")
    memory_head = (" serving MB |", "---:|") if args.forward_only else (" training MB | target MB |", "---:|---:|")
    print(f"| cell | B | rnnc ms | rnnc range | -O0 ms |{dnn_head[0]} vs -O0 |{dnn_head[1]}{torch_head[0]}"
          f"{memory_head[0]}")
    print(f"|---|---:|---:|---:|---:|---:|{dnn_head[2]}{torch_head[1]}{memory_head[1]}")
    for cell, B, o, z, d, rz, rd, tb, tgt, lo, hi, _, p in rows:
        dnn = (f" {d:.2f} |", f" {rd:.2f}x |") if have_onednn else ("", "")
        torch_cols = f" {p:.2f} | {p / o:.2f}x |" if args.torch else ""
        memory = f" {tb / 1e6:.1f} |" if args.forward_only else f" {tb / 1e6:.1f} | {tgt / 1e6:.1f} |"
        print(f"| {cell} | {B} | {o:.2f} | {lo:.2f}–{hi:.2f} | {z:.2f} |{dnn[0]} {rz:.2f}x |{dnn[1]}"
              f"{torch_cols}{memory}")


if __name__ == "__main__":
    sys.exit(main())
