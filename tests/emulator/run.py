#!/usr/bin/env python3
"""The CUDA target checked on a machine with no GPU: every sample's .cu
bundle is compiled as C++ against the CUDA emulator (include/: host threads
for a block's threads, a barrier for __syncthreads, a reference cuBLAS) and
run beside its CPU bundle on the same random data (compare.cpp); outputs,
final states, the loss and every gradient must agree to 1e-9 in double.
Also -O0, --cuda-graphs and --tf32 builds of a few samples.

usage: run.py --rnnc RNNC --compare COMPARE [--jobs N] [--only NAME ...]"""
import argparse
import concurrent.futures
import glob
import json
import os
import subprocess
import sys
import tempfile

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


def check(rnnc, compare, sample, flags, work):
    name = os.path.basename(sample)[:-4]
    label = " ".join([name] + flags)
    out = os.path.join(work, label.replace(" ", "_").replace("-", ""))
    dims = DIMS.get(name, [])
    o0 = [f for f in flags if f == "-O0"]
    sh([rnnc, "compile", sample, "--target", "cpu", "-o", out + "/cpu"] + dims + o0)
    sh([rnnc, "compile", sample, "--target", "cuda", "-o", out + "/cuda"] + dims + flags)
    model = json.load(open(glob.glob(out + "/cpu/*.json")[0]))["symbol"]
    cpp = glob.glob(out + "/cpu/*.cpp")[0]
    cu = glob.glob(out + "/cuda/*.cu")[0]
    common = ["c++", "-std=c++17", "-O1", "-fPIC", "-shared", "-DRNNC_REAL_DOUBLE", "-I" + RUNTIME]
    sh(common + [cpp, "-o", out + "/cpu.so", "-fopenmp", "-lopenblas"])
    sh(common + ["-x", "c++", "-DRNNC_CUDA_EMULATOR", "-I" + os.path.join(HERE, "include"), cu, "-o", out + "/cuda.so",
                 "-pthread"])
    report = sh([compare, out + "/cpu.so", out + "/cuda.so", model, str(T), str(B)])
    return label, report


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rnnc", required=True)
    ap.add_argument("--compare", required=True)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", nargs="*")
    a = ap.parse_args()
    samples = sorted(glob.glob(os.path.join(ROOT, "samples", "*.rnn")))
    if a.only:
        samples = [s for s in samples if os.path.basename(s)[:-4] in a.only]
    runs = [(s, []) for s in samples]
    for name in ("lstm", "bitagger"):
        for flags in (["-O0"], ["--cuda-graphs"]):
            runs += [(s, flags) for s in samples if os.path.basename(s) == name + ".rnn"]
    failed = 0
    with tempfile.TemporaryDirectory() as work, concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        futures = {pool.submit(check, a.rnnc, a.compare, s, f, work): (s, f) for s, f in runs}
        for fut in concurrent.futures.as_completed(futures):
            s, f = futures[fut]
            label = " ".join([os.path.basename(s)[:-4]] + f)
            try:
                _, report = fut.result()
                print("PASS {}".format(label))
            except Exception as e:  # noqa: BLE001 - every failure is reported
                failed += 1
                print("FAIL {}\n{}".format(label, e))
    print("{} of {} emulated CUDA builds agree with the CPU target".format(len(runs) - failed, len(runs)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
