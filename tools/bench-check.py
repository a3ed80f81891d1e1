#!/usr/bin/env python3
"""Measures `rnnc check` end to end (process start to exit) on a sample.

Runs the command N times after a few warm-up runs and prints the median, the
10th and 90th percentiles and the minimum in milliseconds, plus the machine.
Usage: tools/bench-check.py [--rnnc build/rnnc] [--runs 200] [FILE ...]
(default file: samples/charlm.rnn). Quote medians: the machines here are noisy.
"""
import argparse
import os

from benchlib import machine, measure


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser()
    ap.add_argument("--rnnc", default=os.path.join(root, "build", "rnnc"))
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("files", nargs="*", default=[os.path.join(root, "samples", "charlm.rnn")])
    args = ap.parse_args()
    print(f"machine: {machine()}; runs: {args.runs}")
    baseline = measure(["/bin/true"], args.runs)
    print(f"/bin/true (process start alone): median {baseline['median']:.2f} ms")
    for f in args.files:
        r = measure([args.rnnc, "check", f], args.runs)
        print(f"rnnc check {os.path.relpath(f, root)}: median {r['median']:.2f} ms "
              f"(p10 {r['p10']:.2f}, p90 {r['p90']:.2f}, min {r['min']:.2f})")


if __name__ == "__main__":
    main()
