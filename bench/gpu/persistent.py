#!/usr/bin/env python3
"""Persistent loops against the same loops step by step (docs/cuda.md#persistent-loops):
rnnc bench --device cuda (bench/gpu/rnnc_bench.py's rows) of the LSTM and GRU at T = --seq,
each row with RNNC_CUDA_LOOPS=stepwise, then =persistent, then the cost model's own choice
(RNNC_LOOP_REPORT says which way each loop ran). Prints a Markdown table: forward and
forward+backward ms each way, the speedup, and which way the cost model picks.

Exit 77 when there is no GPU, 1 when a row failed or a forced persistent loop did not run
persistent, else 0.

Usage: persistent.py --rnnc PATH [--batch 1 4 16 64] [--hidden 256 768] [--seq 100]
                     [--runs 10] [--warmup 3] [--budget-s S]"""
import argparse
import glob
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rnnc_bench  # noqa: E402


def loops(stderr):
    """RNNC_LOOP_REPORT's lines: how each loop ran."""
    return sorted({line for line in stderr.splitlines() if line.startswith("rnnc: stage")})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rnnc", required=True)
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 4, 16, 64])
    ap.add_argument("--hidden", type=int, nargs="+", default=[256, 768])
    ap.add_argument("--seq", type=int, default=100)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--budget-s", type=float, default=None, help="start no row after this many seconds")
    args = ap.parse_args()
    start = time.monotonic()
    print("| cell | H | B | step by step fwd / fwd+bwd ms | persistent fwd / fwd+bwd ms | fwd+bwd speedup | auto picks |")
    print("|---|---:|---:|---:|---:|---:|---|")
    failed = False
    for cell in ("lstm", "gru"):
        for H in args.hidden:
            for B in args.batch:
                if args.budget_s is not None and time.monotonic() - start > args.budget_s:
                    print(f"| {cell} | {H} | {B} | not run: over the budget ({args.budget_s:.0f} s) | | | |")
                    continue
                report = {"RNNC_LOOP_REPORT": "1"}
                stepwise, stderr = rnnc_bench.bench(args.rnnc, cell, B, H, args, env={**report, "RNNC_CUDA_LOOPS": "stepwise"})
                if "error" in stepwise and ("no CUDA device" in stderr or not glob.glob("/dev/nvidia[0-9]*")):
                    print(f"no GPU: {stepwise['error']}", file=sys.stderr)
                    return 77
                persistent, forced = rnnc_bench.bench(args.rnnc, cell, B, H, args,
                                                      env={**report, "RNNC_CUDA_LOOPS": "persistent"})
                _, auto = rnnc_bench.bench(args.rnnc, cell, B, H, args, env=report)
                if "error" in stepwise or "error" in persistent:
                    failed = True
                    print(f"| {cell} | {H} | {B} | {stepwise.get('error', '')[:80]} | {persistent.get('error', '')[:80]} | | |")
                    continue
                if any("step by step" in line for line in loops(forced)):
                    failed = True  # forced persistent, yet a loop ran step by step
                    print(f"{cell} H={H} B={B}: RNNC_CUDA_LOOPS=persistent, yet {loops(forced)}", file=sys.stderr)
                ways = {"persistent" if "persistent" in line else "step by step" for line in loops(auto)}
                picks = " and ".join(sorted(ways)) or "?"
                print(f"| {cell} | {H} | {B} | {stepwise['forward_ms']:.3f} / {stepwise['fwdbwd_ms']:.3f} | "
                      f"{persistent['forward_ms']:.3f} / {persistent['fwdbwd_ms']:.3f} | "
                      f"{stepwise['fwdbwd_ms'] / persistent['fwdbwd_ms']:.2f}x | {picks} |", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
