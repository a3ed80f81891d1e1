#!/usr/bin/env python3
"""`rnnc train --device cuda` in every dtype it trains in (docs/precision.md): the adding
problem (samples/lstm.rnn, T = 50, B = 32, lr 0.01, seed 1, 400 steps) with float32 master
weights, in f32, bf16 and f16 (dynamic loss scaling) on the GPU, and f32 on the CPU. Each run
must bring the loss's 20-step mean below 0.01, and the 16-bit ones within 1.2x of the steps
f32 on the GPU took (tests/training/run.py asks the same of the CPU's bf16). Prints one line per
run and exits 0; 1 on a failure; 77 where rnnc finds no CUDA device (skipped, not passed).

Usage: train.py --rnnc PATH"""
import argparse
import csv
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
LSTM = os.path.join(os.path.dirname(os.path.dirname(HERE)), "samples", "lstm.rnn")
ADDING = ["--task", "adding", "--bptt", "50", "--batch", "32", "--lr", "0.01", "--seed", "1", "--steps", "400", "--quiet"]
SKIP = 77


def reached(log):
    """The first step at which the mean loss of the last 20 steps is below 0.01, or None."""
    with open(log) as f:
        ls = [float(row["loss"]) for row in csv.DictReader(f)]
    return next((i for i in range(20, len(ls) + 1) if sum(ls[i - 20:i]) / 20 < 0.01), None)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rnnc", required=True)
    rnnc = ap.parse_args().rnnc
    work = tempfile.mkdtemp(prefix="rnnc-gpu-train-")
    env = dict(os.environ, RNNC_CACHE=os.path.join(work, "cache"))
    try:
        return runs(rnnc, work, env)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def runs(rnnc, work, env):
    steps, failed = {}, 0
    cases = (("cuda", "f32"), ("cuda", "bf16"), ("cuda", "f16"), ("cpu", "f32"))
    for device, dtype in cases:
        log = os.path.join(work, f"{device}-{dtype}.csv")
        p = subprocess.run([rnnc, "train", LSTM, *ADDING, "--device", device, "--dtype", dtype, "--log", log], env=env,
                           capture_output=True, text=True, timeout=300)
        if p.returncode != 0 and device == "cuda" and "no CUDA device" in p.stderr:
            print(f"SKIPPED: {p.stderr.strip().splitlines()[-1]}")
            return SKIP
        if p.returncode != 0:
            print(f"FAIL {device} {dtype}: exit {p.returncode}: {p.stderr.strip()[-600:]}")
            failed += 1
            continue
        steps[device, dtype] = reached(log)
        good = steps[device, dtype] is not None
        if good and dtype != "f32" and steps.get(("cuda", "f32")):
            good = steps[device, dtype] <= 1.2 * steps["cuda", "f32"]
        failed += not good
        print(f"{'PASS' if good else 'FAIL'} {device} {dtype}: the 20-step mean loss below 0.01 at step "
              f"{steps[device, dtype]} (cuda f32: {steps.get(('cuda', 'f32'))})")
    print(f"{len(cases) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
