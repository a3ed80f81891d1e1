#!/usr/bin/env python3
"""Persistent and fused loops against the same loops step by step (docs/cuda.md#persistent-loops):
rnnc bench --device cuda (bench/gpu/rnnc_bench.py's rows) of the LSTM and GRU at T = --seq,
each row with RNNC_CUDA_LOOPS=stepwise, then =persistent, then =fused (a kernel a step per
product), then the cost model's own choice (RNNC_LOOP_REPORT says which way each loop ran),
in each --dtype (bf16: the persistent products on tensor cores, the fused ones FMA, step by step
cublasGemmEx). Prints a Markdown table: forward and forward+backward ms each way, the persistent
forward's microseconds a step (the goal: at most 2.5 for the LSTM at H = 768, B = 16 in bf16),
the speedups over step by step, and which way the cost model picks (the constants in
rnnc/persistent.h are checked against these rows).

Exit 77 when there is no GPU, 1 when a row failed or a forced persistent or fused loop ran
another way, else 0.

Usage: persistent.py --rnnc PATH [--batch 1 4 16 64] [--hidden 256 768] [--seq 100] [--dtype f32 bf16]
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
    ap.add_argument("--dtype", nargs="+", default=["f32", "bf16"], choices=["f32", "bf16", "f16"])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--budget-s", type=float, default=None, help="start no row after this many seconds")
    args = ap.parse_args()
    start = time.monotonic()
    print("| cell | dtype | H | B | step by step fwd / fwd+bwd ms | persistent fwd / fwd+bwd ms | persistent fwd µs a step "
          "| fused fwd / fwd+bwd ms | fwd+bwd speedup persistent / fused | auto picks |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
    failed = False
    # Each dtype beside the other; --budget-s cuts the last rows.
    rows = [(cell, dtype, H, B) for cell in ("lstm", "gru") for H in args.hidden for B in args.batch for dtype in args.dtype]
    for cell, dtype, H, B in rows:
        if args.budget_s is not None and time.monotonic() - start > args.budget_s:
            print(f"| {cell} | {dtype} | {H} | {B} | not run: over the budget ({args.budget_s:.0f} s) | | | | | |")
            continue
        report = {"RNNC_LOOP_REPORT": "1"}
        extra = ["--dtype", dtype]
        stepwise, stderr = rnnc_bench.bench(args.rnnc, cell, B, H, args, extra,
                                            env={**report, "RNNC_CUDA_LOOPS": "stepwise"})
        if "error" in stepwise and ("no CUDA device" in stderr or not glob.glob("/dev/nvidia[0-9]*")):
            print(f"no GPU: {stepwise['error']}", file=sys.stderr)
            return 77
        forced = {}
        for way in ("persistent", "fused"):
            forced[way] = rnnc_bench.bench(args.rnnc, cell, B, H, args, extra, env={**report, "RNNC_CUDA_LOOPS": way})
        _, auto = rnnc_bench.bench(args.rnnc, cell, B, H, args, extra, env=report)
        results = [stepwise] + [forced[way][0] for way in ("persistent", "fused")]
        if any("error" in r for r in results):
            failed = True
            print(f"| {cell} | {dtype} | {H} | {B} | " + " | ".join(r.get("error", "")[:80] for r in results) + " | | | |")
            continue
        for way, (_, said) in forced.items():
            # Forced, yet a loop ran another way (a loop not local to units has no fused variant).
            other = [line for line in loops(said) if f": {way}," not in line and "not local to units" not in line]
            if other:
                failed = True
                print(f"{cell} {dtype} H={H} B={B}: RNNC_CUDA_LOOPS={way}, yet {other}", file=sys.stderr)
        ways = {"persistent" if ": persistent," in line else "fused" if ": fused," in line else "step by step"
                for line in loops(auto)}
        picks = " and ".join(sorted(ways)) or "?"
        persistent, fused = results[1], results[2]
        print(f"| {cell} | {dtype} | {H} | {B} | {stepwise['forward_ms']:.3f} / {stepwise['fwdbwd_ms']:.3f} | "
              f"{persistent['forward_ms']:.3f} / {persistent['fwdbwd_ms']:.3f} | "
              f"{persistent['forward_ms'] * 1000 / args.seq:.2f} | "
              f"{fused['forward_ms']:.3f} / {fused['fwdbwd_ms']:.3f} | "
              f"{stepwise['fwdbwd_ms'] / persistent['fwdbwd_ms']:.2f}x / {stepwise['fwdbwd_ms'] / fused['fwdbwd_ms']:.2f}x "
              f"| {picks} |", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
