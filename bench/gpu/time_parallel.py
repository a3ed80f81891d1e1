#!/usr/bin/env python3
"""The GPU benchmark of issue 9: loops run in parallel over time on CUDA
(docs/cuda.md, "Loops in parallel over time") against the same loops step by
step, float, forward + backward with the data on the GPU.

1. Scan: samples/mingru.rnn (I = 64, H = 128), B = 16, T = 2^7 .. 2^16.
   `rnnc bench --device cuda --json --no-baseline` of the model compiled with
   --time-parallel off (its loop one launch per step), off with --cuda-graphs,
   scan, and auto (the default: what the cost model picks): fwd+bwd ms, the
   median of --runs runs.
2. Newton: samples/indrnn.rnn (relu, I = 64, H = 128), B = 16, T = 2^7 ..
   2^14: off, newton with 3 iterations (the default), newton with 10, auto.
3. Error and convergence: `rnnc run --device cuda --grad` of both samples at
   T = 2^8, 2^12 and 2^14, B = 16 (params from `rnnc init`, random inputs and
   output gradients), the parallel form against --time-parallel off: the
   largest relative error (max|a - b| / max|b|) over every output and
   gradient; for Newton, what RNNC_SCAN_REPORT says (the residual, and
   whether the answer stood or the loop ran again step by step).

Prints a Markdown report on stdout (--json FILE: the rows as JSON too). Rows
run in order of T and none starts after --budget-s seconds. Exit 0 when every
row ran; 77 when there is no GPU (the first `rnnc bench --device cuda` says
"no CUDA device", or there is no /dev/nvidia*); 1 when a row failed.

Usage: time_parallel.py --rnnc PATH [--runs 10] [--warmup 3] [--budget-s S]
                        [--quick] [--json FILE] [--device cuda|cpu]
(--device cpu runs the same rows on the CPU engine: a check of this script
on a machine without a GPU.)"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

NO_GPU = 77
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
B = 16
DIMS = ["-D", "I=64", "-D", "H=128"]
TIMEOUT_S = 600  # one rnnc command (a 65536-step loop captured as a graph takes a while)


def sample(name):
    return os.path.join(ROOT, "samples", name + ".rnn")


class NoGpu(Exception):
    pass


def bench(rnnc, name, T, flags, args):
    """fwd+bwd ms of one `rnnc bench`, or {"error": ...}."""
    cmd = [rnnc, "bench", sample(name), *DIMS, "--batch", str(B), "--seq", str(T), "--runs", str(args.runs),
           "--warmup", str(args.warmup), "--device", args.device, "--json", "--no-baseline", *flags]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"error": f"over {TIMEOUT_S} s"}
    if p.returncode != 0:
        if "no CUDA device" in p.stderr or not glob.glob("/dev/nvidia[0-9]*"):
            raise NoGpu(p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit {p.returncode}")
        lines = p.stderr.strip().splitlines()
        return {"error": f"exit {p.returncode}: {lines[-1] if lines else ''}"}
    opt = json.loads(p.stdout)["optimized"]
    return {"ms": opt["fwdbwd_ms"], "ms_min": opt["fwdbwd_ms_min"]}


def npy_files(folder):
    return sorted(os.path.relpath(f, folder) for f in glob.glob(os.path.join(folder, "**", "*.npy"), recursive=True))


def accuracy(rnnc, name, T, flags, work, device):
    """The parallel form against --time-parallel off, one `rnnc run --grad` each."""
    rng = np.random.default_rng(T)
    params = os.path.join(work, f"{name}.safetensors")
    if not os.path.exists(params):
        subprocess.run([rnnc, "init", sample(name), *DIMS, "--seed", "1", "-o", params], check=True,
                       capture_output=True)
    x = os.path.join(work, f"x{T}.npy")
    dy = os.path.join(work, f"dy{T}.npy")
    np.save(x, rng.normal(0.0, 1.0, (T, B, 64)).astype(np.float32))
    np.save(dy, rng.normal(0.0, 1.0, (T, B, 128)).astype(np.float32))
    outs = {}
    report = ""
    for tag, mode in (("off", ["--time-parallel", "off"]), ("par", flags)):
        out = os.path.join(work, f"{name}-{T}-{tag}")
        cmd = [rnnc, "run", sample(name), *DIMS, "--params", params, "--input", f"x={x}", "--grad", f"h={dy}",
               "--device", device, "--dtype", "f32", "--out", out, *mode]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S,
                           env={**os.environ, "RNNC_SCAN_REPORT": "1"})
        if p.returncode != 0:
            return {"error": f"rnnc run exited {p.returncode}: {p.stderr.strip()[-300:]}"}
        outs[tag] = out
        if tag == "par":
            report = "; ".join(sorted({line.split(": ", 1)[1] for line in p.stderr.splitlines()
                                       if line.startswith("rnnc: newton")}))
    worst, where = 0.0, ""
    for f in npy_files(outs["off"]):
        b = np.load(os.path.join(outs["off"], f)).astype(np.float64)
        a = np.load(os.path.join(outs["par"], f)).astype(np.float64)
        err = float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-30)) if b.size else 0.0
        if not err <= worst:
            worst, where = err, f
    return {"error_rel": worst, "worst": where, "newton": report}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rnnc", required=True)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--budget-s", type=float, default=None, help="start no row after this many seconds")
    ap.add_argument("--quick", action="store_true", help="T = 2^7, 2^10, 2^13, 2^16 only, and no graphs")
    ap.add_argument("--json", help="also write the rows here")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    args = ap.parse_args()
    rnnc = os.path.abspath(args.rnnc)
    start = time.perf_counter()
    scan_T = [2 ** k for k in ([7, 10, 13, 16] if args.quick else range(7, 17))]
    newton_T = [2 ** k for k in ([7, 10, 13] if args.quick else range(7, 15))]
    scan_modes = {"off": ["--time-parallel", "off"], "off+graphs": ["--time-parallel", "off", "--cuda-graphs"],
                  "scan": ["--time-parallel", "scan"], "auto": []}
    newton_modes = {"off": ["--time-parallel", "off"], "newton": ["--time-parallel", "newton"],
                    "newton10": ["--time-parallel", "newton", "--newton-iterations", "10"], "auto": []}
    if args.quick or args.device == "cpu":
        del scan_modes["off+graphs"]
    rows = {"scan": [], "newton": [], "accuracy": []}
    failed = False

    def over():
        return args.budget_s is not None and time.perf_counter() - start > args.budget_s

    cache = tempfile.mkdtemp(prefix="rnnc-bench-tp-cache-")
    os.environ["RNNC_CACHE"] = cache  # the bundles, compiled once per mode
    try:
        for table, name, Ts, modes in (("scan", "mingru", scan_T, scan_modes), ("newton", "indrnn", newton_T, newton_modes)):
            for T in Ts:
                row = {"T": T}
                for mode, flags in modes.items():
                    if over():
                        row[mode] = {"error": "not run: over the time budget"}
                        continue
                    row[mode] = bench(rnnc, name, T, flags, args)
                    failed |= "error" in row[mode] and "budget" not in row[mode]["error"]
                rows[table].append(row)
                print(f"# {name} T={T}: " + ", ".join(f"{m} {r.get('ms', r.get('error'))}" for m, r in row.items()
                                                       if m != "T"), file=sys.stderr, flush=True)
        with tempfile.TemporaryDirectory() as work:
            for name, flags in (("mingru", ["--time-parallel", "scan"]), ("indrnn", ["--time-parallel", "newton"]),
                                ("indrnn", ["--time-parallel", "newton", "--newton-iterations", "10"])):
                for T in (2 ** 8, 2 ** 12, 2 ** 14):
                    if over():
                        continue
                    got = accuracy(rnnc, name, T, flags, work, args.device)
                    failed |= "error" in got
                    rows["accuracy"].append({"sample": name, "flags": " ".join(flags), "T": T, **got})
                    print(f"# {name} {' '.join(flags)} T={T}: {got}", file=sys.stderr, flush=True)
    except NoGpu as e:
        print(json.dumps({"error": f"no GPU: {e}"}))
        return NO_GPU
    finally:
        subprocess.run(["rm", "-rf", cache])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    print(report(rows, args))
    return 1 if failed else 0


def cell(r):
    return f"{r['ms']:.3f}" if "ms" in r else "—"


def ratio(a, b):
    return f"{a['ms'] / b['ms']:.1f}x" if "ms" in a and "ms" in b else "—"


def report(rows, args):
    out = [f"fwd+bwd ms, median of {args.runs} runs after {args.warmup}, B = {B}, I = 64, H = 128, float, "
           f"`rnnc bench --device {args.device}` (bench/gpu/time_parallel.py).", ""]
    if rows["scan"]:
        modes = [m for m in rows["scan"][0] if m != "T"]
        out += ["minGRU (a scan forward and backward):", "",
                "| T | " + " | ".join(f"`{m}`" for m in modes) + " | scan vs `off` |",
                "|---:|" + "---:|" * (len(modes) + 1)]
        for r in rows["scan"]:
            out.append(f"| {r['T']} | " + " | ".join(cell(r[m]) for m in modes) + f" | {ratio(r['off'], r['scan'])} |")
        out.append("")
    if rows["newton"]:
        modes = [m for m in rows["newton"][0] if m != "T"]
        out += ["IndRNN (relu: Newton forward, a scan backward):", "",
                "| T | " + " | ".join(f"`{m}`" for m in modes) + " | newton vs `off` |",
                "|---:|" + "---:|" * (len(modes) + 1)]
        for r in rows["newton"]:
            out.append(f"| {r['T']} | " + " | ".join(cell(r[m]) for m in modes) + f" | {ratio(r['off'], r['newton'])} |")
        out.append("")
    if rows["accuracy"]:
        out += ["Against `--time-parallel off` (`rnnc run --grad`, every output and gradient):", "",
                "| sample | flags | T | max rel error | where | RNNC_SCAN_REPORT |", "|---|---|---:|---:|---|---|"]
        for r in rows["accuracy"]:
            err = f"{r['error_rel']:.2g}" if "error_rel" in r else r.get("error", "")
            out.append(f"| {r['sample']} | `{r['flags']}` | {r['T']} | {err} | {r.get('worst', '')} | {r.get('newton', '')} |")
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
