#!/usr/bin/env python3
"""The CUDA target checked on a machine with no GPU: every sample's .cu
bundle is compiled as C++ against the CUDA emulator (include/: fibers
for a block's threads, a barrier for __syncthreads, a reference cuBLAS) and
run beside its CPU bundle on the same random data (compare.cpp); outputs,
final states, the loss and every gradient must agree to 1e-9 in double.
Also -O0, --cuda-graphs and --tf32 builds of a few samples.

Loops run in parallel over time (docs/cuda.md): the scan and Newton forms of
the samples whose loops allow them, and of Inputs/*.rnn (2 and 3 states
coupled per element, a width that leaves lanes idle), at T = 300 (several
chunks), T = 1 and odd lengths, forced with --time-parallel scan or newton,
against the CPU bundle with --time-parallel off (its loops step by step);
Newton both where it converges (RNNC_SCAN_REPORT must say "kept") and where it
falls back to the loop step by step ("not converged").

usage: run.py --rnnc RNNC --compare COMPARE [--jobs N] [--only NAME ...] [--scans-only]"""
import argparse
import concurrent.futures
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RUNTIME = os.path.join(ROOT, "runtime", "include")
DIMS = {"gru": ["-D", "I=8", "-D", "H=16"]}
T, B = 5, 3


def sh(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError("{} failed ({}):\n{}{}".format(" ".join(cmd), r.returncode, r.stdout, r.stderr[-3000:]))
    return r.stdout


# Loops in parallel over time: (file, CUDA flags, T, B, dims, what RNNC_SCAN_REPORT must say). Small
# widths keep the emulator's blocks few; T = 300 cuts several chunks.
SCAN, NEWTON = ["--time-parallel", "scan"], ["--time-parallel", "newton"]
SMALL = ["-D", "I=8", "-D", "H=16"]
SCAN_RUNS = [
    ("mingru", SCAN, 300, 3, SMALL, None),
    ("mingru", SCAN, 1, 3, SMALL, None),
    ("mingru", SCAN, 77, 2, ["-D", "I=3", "-D", "H=12"], None),  # 12: half of the second group idle
    ("mingru", SCAN, 300, 1, ["-D", "I=2", "-D", "H=1"], None),  # one element: the loop steps (no scan)
    ("mingru", SCAN + ["--cuda-graphs"], 300, 3, SMALL, None),
    ("minlstm", SCAN, 300, 3, SMALL, None),
    ("qrnn", SCAN, 300, 2, SMALL, None),
    ("linear_indrnn", SCAN, 129, 2, SMALL, None),
    ("Inputs/coupled.rnn", SCAN, 300, 2, [], None),
    ("Inputs/coupled3.rnn", SCAN, 200, 2, [], None),
    ("indrnn", NEWTON + ["--newton-iterations", "40"], 40, 2, SMALL, "kept"),
    ("indrnn", NEWTON, 300, 2, SMALL, "not converged"),
    ("sru", NEWTON + ["--newton-iterations", "12"], 60, 2, ["-D", "H=16"], "kept"),
    ("sru", NEWTON, 1, 2, ["-D", "H=16"], None),
    ("adding", NEWTON + ["--cuda-graphs"], 300, 2, ["-D", "H=16"], None),
    ("Inputs/coupled_tanh.rnn", NEWTON + ["--newton-iterations", "10"], 40, 2, [], "kept"),
    ("Inputs/reverse.rnn", NEWTON + ["--newton-iterations", "30"], 30, 2, [], "kept"),
    ("Inputs/reverse.rnn", NEWTON, 150, 3, [], None),
]


def check(rnnc, compare, sample, flags, work, steps=T, batch=B, dims=None, cpu_flags=None, expect=None):
    name = os.path.basename(sample)[:-4]
    label = " ".join([name] + flags + ([f"T={steps}", f"B={batch}"] if (steps, batch) != (T, B) else []))
    start = time.monotonic()
    out = os.path.join(work, label.replace(" ", "_").replace("-", "").replace("=", ""))
    dims = DIMS.get(name, []) if dims is None else dims
    if cpu_flags is None:
        cpu_flags = [f for f in flags if f == "-O0"]
    sh([rnnc, "compile", sample, "--target", "cpu", "-o", out + "/cpu"] + dims + cpu_flags)
    sh([rnnc, "compile", sample, "--target", "cuda", "-o", out + "/cuda"] + dims + flags)
    model = json.load(open(glob.glob(out + "/cpu/*.json")[0]))["symbol"]
    cpp = glob.glob(out + "/cpu/*.cpp")[0]
    cu = glob.glob(out + "/cuda/*.cu")[0]
    common = ["c++", "-std=c++17", "-O1", "-fPIC", "-shared", "-DRNNC_REAL_DOUBLE", "-I" + RUNTIME]
    sh(common + [cpp, "-o", out + "/cpu.so", "-fopenmp", "-lopenblas"])
    sh(common + ["-x", "c++", "-DRNNC_CUDA_EMULATOR", "-I" + os.path.join(HERE, "include"), cu, "-o", out + "/cuda.so",
                 "-pthread"])
    cmd = [compare, out + "/cpu.so", out + "/cuda.so", model, str(steps), str(batch)]
    r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "RNNC_SCAN_REPORT": "1"})
    if r.returncode != 0:
        raise RuntimeError("{} failed ({}):\n{}{}".format(" ".join(cmd), r.returncode, r.stdout, r.stderr[-3000:]))
    if expect:
        said = [line for line in r.stderr.splitlines() if line.startswith("rnnc: newton")]
        if not said or not all(line.endswith(expect) or expect in line for line in said):
            raise RuntimeError("{}: RNNC_SCAN_REPORT should say {!r} for every Newton loop; it said:\n{}".format(
                label, expect, "\n".join(said) or "nothing"))
    return label, time.monotonic() - start


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rnnc", required=True)
    ap.add_argument("--compare", required=True)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--scans-only", action="store_true", help="only the loops run in parallel over time")
    a = ap.parse_args()
    samples = sorted(glob.glob(os.path.join(ROOT, "samples", "*.rnn")))
    if a.only:
        samples = [s for s in samples if os.path.basename(s)[:-4] in a.only]
    runs = [(s, [], {}) for s in samples]
    for name in ("lstm", "bitagger"):
        for flags in (["-O0"], ["--cuda-graphs"]):
            runs += [(s, flags, {}) for s in samples if os.path.basename(s) == name + ".rnn"]
    if a.scans_only:
        runs = []
    for file, flags, steps, batch, dims, expect in SCAN_RUNS:
        path = os.path.join(HERE, file) if file.endswith(".rnn") else os.path.join(ROOT, "samples", file + ".rnn")
        if a.only and os.path.basename(path)[:-4] not in a.only:
            continue
        runs.append((path, flags, {"steps": steps, "batch": batch, "dims": dims, "expect": expect,
                                   "cpu_flags": ["--time-parallel", "off"]}))
    failed = 0
    with tempfile.TemporaryDirectory() as work, concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        futures = {pool.submit(check, a.rnnc, a.compare, s, f, work, **kw): (s, f, kw) for s, f, kw in runs}
        for fut in concurrent.futures.as_completed(futures):
            s, f, kw = futures[fut]
            label = " ".join([os.path.basename(s)[:-4]] + f + ([f"T={kw['steps']}", f"B={kw['batch']}"] if kw else []))
            try:
                _, seconds = fut.result()
                print("PASS {} ({:.1f} s)".format(label, seconds), flush=True)
            except Exception as e:  # noqa: BLE001 - every failure is reported
                failed += 1
                print("FAIL {}\n{}".format(label, e))
    print("{} of {} emulated CUDA builds agree with the CPU target".format(len(runs) - failed, len(runs)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
