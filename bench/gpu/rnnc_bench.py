#!/usr/bin/env python3
"""rnnc's side of the GPU benchmark: `rnnc bench --device cuda --json
--no-baseline` of samples/lstm.rnn, gru.rnn and peephole_lstm.rnn with
I = H, for every B and H of the grid, T = --seq: forward + backward (the
gradients of every param, the inputs and the initial states) with the data on
the GPU; rnnc reports the median and minimum of --runs runs after --warmup.

Prints JSON: {"seq", "runs", "warmup", "rows": [{"cell", "batch", "hidden",
"fwdbwd_ms", "fwdbwd_ms_min", "forward_ms", "workspace_bytes"} | {"cell",
"batch", "hidden", "error"}]}; a row that fails, or that would start after
--budget-s seconds (but the first, which runs whatever the budget), has
"error". When the first row fails saying "no CUDA device", or fails on a
machine with no /dev/nvidia*, it prints {"error": why}
and exits 77. Exit 1 when any row failed.

Usage: rnnc_bench.py --rnnc PATH [--batch 1 16 64 256] [--hidden 256 1024]
                     [--seq 100] [--runs 20] [--warmup 5]
                     [--cells lstm gru peephole] [--budget-s S]"""
import argparse
import glob
import json
import os
import subprocess
import sys
import time

NO_GPU = 77
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLES = {"lstm": "lstm.rnn", "gru": "gru.rnn", "peephole": "peephole_lstm.rnn", "layernorm": "layernorm_lstm.rnn"}
GRID_CELLS = ["lstm", "gru", "peephole"]  # the main table's (bench/gpu/report.py); goals.py times layernorm too
TIMEOUT_S = 300  # one rnnc bench, its compile included


def bench(rnnc, cell, B, H, args, extra=(), env=None):
    """One row: ({fwdbwd_ms, fwdbwd_ms_min, forward_ms, workspace_bytes} or {error}, rnnc's stderr);
    `env`: variables added to the environment (RNNC_CUDA_LOOPS: bench/gpu/persistent.py)."""
    cmd = [rnnc, "bench", os.path.join(ROOT, "samples", SAMPLES[cell]), "-D", f"I={H}", "-D", f"H={H}",
           "--batch", str(B), "--seq", str(args.seq), "--runs", str(args.runs), "--warmup", str(args.warmup),
           "--device", "cuda", "--json", "--no-baseline", *extra]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, env={**os.environ, **(env or {})})
    except subprocess.TimeoutExpired:
        return {"error": f"rnnc bench ran over {TIMEOUT_S} s"}, ""
    if p.returncode != 0:
        lines = p.stderr.strip().splitlines()
        return {"error": f"rnnc bench exited {p.returncode}: {lines[-1] if lines else ''}"}, p.stderr
    opt = json.loads(p.stdout)["optimized"]
    return {k: opt[k] for k in ("fwdbwd_ms", "fwdbwd_ms_min", "forward_ms", "workspace_bytes")}, p.stderr


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rnnc", required=True)
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 16, 64, 256])
    ap.add_argument("--hidden", type=int, nargs="+", default=[256, 1024])
    ap.add_argument("--seq", type=int, default=100)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--cells", nargs="+", default=GRID_CELLS, choices=list(SAMPLES))
    ap.add_argument("--budget-s", type=float, default=None, help="start no row after this many seconds")
    ap.add_argument("--graphs", action="store_true", help="also time each row built with --cuda-graphs")
    args = ap.parse_args()
    t_start = time.perf_counter()
    out = {"seq": args.seq, "runs": args.runs, "warmup": args.warmup, "rows": []}
    failed = False
    for cell in args.cells:
        for H in args.hidden:
            for B in args.batch:
                row = {"cell": cell, "batch": B, "hidden": H}
                # The first row runs whatever the budget: it tells a machine without a GPU (exit 77).
                if out["rows"] and args.budget_s is not None and time.perf_counter() - t_start > args.budget_s:
                    row["error"] = f"not run, over the time budget ({args.budget_s:.0f} s)"
                else:
                    got, stderr = bench(args.rnnc, cell, B, H, args)
                    if not out["rows"] and "error" in got and (
                            "no CUDA device" in stderr or not glob.glob("/dev/nvidia[0-9]*")):
                        print(json.dumps({"error": f"no GPU: {got['error']}"}))
                        return NO_GPU
                    row.update(got)
                    if args.graphs and "error" not in got:
                        graphs, _ = bench(args.rnnc, cell, B, H, args, ["--cuda-graphs"])
                        row["fwdbwd_ms_graphs"] = graphs.get("fwdbwd_ms")
                failed |= "error" in row
                print(f"# rnnc {cell} B={B} H={H}: "
                      + (row["error"] if "error" in row else f"{row['fwdbwd_ms']:.3f} ms")
                      + f" ({time.perf_counter() - t_start:.0f} s)", file=sys.stderr, flush=True)
                out["rows"].append(row)
    print(json.dumps(out, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
