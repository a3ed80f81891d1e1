#!/usr/bin/env python3
"""The CPU benchmark of issue 9: loops run in parallel over time against the
same loops step by step, forward + backward (`rnnc bench`, compiled engine,
float), over T = 2^7 .. 2^16 at small B·n (the case a GPU cares about).

Cells: `linear` (h = a * h[t-1] + x: the loop alone, no GEMM), minGRU
(samples/mingru.rnn: two hoisted GEMMs and the scan) and IndRNN
(samples/indrnn.rnn, Newton forward, a scan backward), each with
I = H = --size. For each (cell, T) the modes run in alternation for --rounds
rounds (each `rnnc bench` reports the median of --runs runs); the table
quotes the median over rounds and the ratios of the medians (above 1, the
parallel loop is faster). Columns: `off` (a bundle compiled with
--time-parallel off: each step's kernels open an OpenMP region, ~0.3 us),
serial steps (the parallel bundle run with RNNC_TIME_PARALLEL=off: its loops
step by step on one thread, no region per step: the fair baseline for the
scan itself), parallel (scan, or Newton with 3 iterations), and auto (the
default: what the cost model picks).

Usage: tools/bench-time-parallel.py [--rnnc build/rnnc] [--rounds 3] [--runs 5]
                                    [--batch 1] [--size 16] [--seq 128 ...] [--markdown]"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import machine  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINEAR = "dim H = 16\ncell Linear(x: [H]) -> h {\n  param a: [H]\n  h = a * h[t-1] + x\n}\n"


def cells(tmp):
    path = os.path.join(tmp, "linear.rnn")
    with open(path, "w") as f:
        f.write(LINEAR)
    return {
        "linear": (path, "scan"),
        "mingru": (os.path.join(ROOT, "samples", "mingru.rnn"), "scan"),
        "indrnn": (os.path.join(ROOT, "samples", "indrnn.rnn"), "newton"),
    }


def bench(rnnc, path, mode, B, T, size, runs):
    """fwd+bwd ms; mode "serial": the parallel bundle with RNNC_TIME_PARALLEL=off (its loops step by step)."""
    env = dict(os.environ)
    if mode == "serial":
        env["RNNC_TIME_PARALLEL"] = "off"
        mode = "newton" if "indrnn" in path else "scan"
    dims = ["-D", f"H={size}"] + (["-D", f"I={size}"] if "samples" in path else [])
    cmd = [rnnc, "bench", path, *dims, "--batch", str(B), "--seq", str(T), "--runs", str(runs), "--warmup", "2",
           "--json", "--no-baseline", "--time-parallel", mode]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out)["optimized"]["fwdbwd_ms"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rnnc", default=os.path.join(ROOT, "build", "rnnc"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--size", type=int, default=16)
    ap.add_argument("--seq", type=int, nargs="+", default=[2 ** k for k in range(7, 17)])
    ap.add_argument("--cells", nargs="+", default=["linear", "mingru", "indrnn"])
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        known = cells(tmp)
        for cell in args.cells:
            path, mode = known[cell]
            for T in args.seq:
                times = {m: [] for m in ("off", "serial", mode, "auto")}
                for _ in range(args.rounds):
                    for m in times:
                        times[m].append(bench(args.rnnc, path, m, args.batch, T, args.size, args.runs))
                med = {m: statistics.median(v) for m, v in times.items()}
                rows.append((cell, mode, T, med["off"], med["serial"], med[mode], med["auto"]))
                print(f"# {cell} T={T}: off {med['off']:.3f} ms, serial {med['serial']:.3f} ms, {mode} {med[mode]:.3f} ms, "
                      f"auto {med['auto']:.3f} ms", file=sys.stderr, flush=True)
    threads = os.environ.get("OMP_NUM_THREADS", str(os.cpu_count()))
    head = (f"Machine: {machine()}; OMP threads {threads}. B = {args.batch}, I = H = {args.size}, float, "
            f"forward + backward, median of {args.rounds} rounds of `rnnc bench --runs {args.runs}`.")
    if args.markdown:
        print(head + "\n")
        print("| cell | plan | T | `off` (ms) | serial steps (ms) | parallel (ms) | vs `off` | vs serial | auto (ms) |")
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
        for cell, mode, T, off, ser, par, auto in rows:
            print(f"| {cell} | {mode} | {T} | {off:.3f} | {ser:.3f} | {par:.3f} | {off / par:.2f}x | {ser / par:.2f}x "
                  f"| {auto:.3f} |")
    else:
        print(head)
        for cell, mode, T, off, ser, par, auto in rows:
            print(f"{cell:8s} {mode:7s} T={T:6d}  off {off:9.3f}  serial {ser:9.3f}  {mode} {par:9.3f}  "
                  f"x{off / par:5.2f} x{ser / par:5.2f}  auto {auto:9.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
