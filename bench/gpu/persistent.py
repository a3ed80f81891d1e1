#!/usr/bin/env python3
"""Persistent loops against the same loops step by step (docs/cuda.md#persistent-loops):
bench/gpu/rnnc_bench.py run twice, with RNNC_CUDA_LOOPS=stepwise and =persistent, on the
LSTM and GRU at T = --seq, and the cost model's own choice (RNNC_LOOP_REPORT) for each row.
Prints a Markdown table: forward and forward+backward ms each way, the ratio, and which way
the cost model would have picked; the rows alternate the two modes, a row at a time.

Exit 77 when there is no GPU (rnnc_bench.py's), 1 when a row failed, else 0.

Usage: persistent.py --rnnc PATH [--batch 1 4 16 64] [--hidden 256 768] [--seq 100]
                     [--runs 10] [--budget-s S]"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def bench(rnnc, mode, cell, batch, hidden, seq, runs):
    """One rnnc_bench.py row under RNNC_CUDA_LOOPS=mode: (exit code, row, the loop reports)."""
    env = {**os.environ, "RNNC_CUDA_LOOPS": mode, "RNNC_LOOP_REPORT": "1"}
    p = subprocess.run([sys.executable, os.path.join(HERE, "rnnc_bench.py"), "--rnnc", rnnc, "--cells", cell,
                        "--batch", str(batch), "--hidden", str(hidden), "--seq", str(seq), "--runs", str(runs),
                        "--warmup", "3"], capture_output=True, text=True, env=env, timeout=400)
    try:
        data = json.loads(p.stdout)
    except json.JSONDecodeError:
        data = {"error": (p.stderr or p.stdout)[-300:]}
    reports = sorted({line for line in p.stderr.splitlines() if line.startswith("rnnc: stage")})
    row = data["rows"][0] if data.get("rows") else {"error": data.get("error", "no row")}
    return p.returncode, row, reports


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rnnc", required=True)
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 4, 16, 64])
    ap.add_argument("--hidden", type=int, nargs="+", default=[256, 768])
    ap.add_argument("--seq", type=int, default=100)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--budget-s", type=float, default=None, help="start no row after this many seconds")
    a = ap.parse_args()
    start = time.monotonic()
    print("| cell | H | B | step by step fwd / fwd+bwd ms | persistent fwd / fwd+bwd ms | fwd+bwd speedup | auto picks |")
    print("|---|---|---|---|---|---|---|")
    failed = False
    for cell in ("lstm", "gru"):
        for hidden in a.hidden:
            for batch in a.batch:
                if a.budget_s is not None and time.monotonic() - start > a.budget_s:
                    print(f"| {cell} | {hidden} | {batch} | not run: past the budget | | | |")
                    continue
                rc, stepwise, _ = bench(a.rnnc, "stepwise", cell, batch, hidden, a.seq, a.runs)
                if rc == 77:
                    print(json.dumps({"error": stepwise.get("error", "no GPU")}))
                    return 77
                _, persistent, reports = bench(a.rnnc, "persistent", cell, batch, hidden, a.seq, a.runs)
                _, _, auto = bench(a.rnnc, "auto", cell, batch, hidden, a.seq, 1)
                if "error" in stepwise or "error" in persistent:
                    failed = True
                    print(f"| {cell} | {hidden} | {batch} | {stepwise.get('error', '')[:80]} | "
                          f"{persistent.get('error', '')[:80]} | | |")
                    continue
                if any("step by step" in r for r in reports):
                    failed = True  # forced persistent, yet a loop did not run it
                picks = "persistent" if auto and all("persistent" in r for r in auto) else \
                    "step by step" if auto and all("step by step" in r for r in auto) else "mixed"
                print(f"| {cell} | {hidden} | {batch} | {stepwise['forward_ms']:.3f} / {stepwise['fwdbwd_ms']:.3f} | "
                      f"{persistent['forward_ms']:.3f} / {persistent['fwdbwd_ms']:.3f} | "
                      f"{stepwise['fwdbwd_ms'] / persistent['fwdbwd_ms']:.2f}x | {picks} |", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
