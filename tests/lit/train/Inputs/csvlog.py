#!/usr/bin/env python3
"""Checks a training CSV log: the header
`step,loss,metric,grad_norm,lr,seconds,eval_loss,eval_metric` once, then one
row per step, steps FIRST..LAST consecutive, every field a finite number (the
two eval cells both empty, or both numbers), lr equal to LR.

usage: csvlog.py FILE FIRST LAST LR   prints `rows N, steps FIRST..LAST`
"""
import math
import sys

path, first, last, lr = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
lines = open(path).read().split("\n")
if lines[-1] != "":
    sys.exit("csvlog.py: the log does not end with a newline")
lines = lines[:-1]
if lines[0] != "step,loss,metric,grad_norm,lr,seconds,eval_loss,eval_metric":
    sys.exit(f"csvlog.py: header is {lines[0]!r}")
rows = lines[1:]
if any(r.startswith("step,") for r in rows):
    sys.exit("csvlog.py: a second header")
steps = []
for r in rows:
    f = r.split(",")
    if len(f) != 8:
        sys.exit(f"csvlog.py: row {r!r} has {len(f)} fields")
    if (f[6] == "") != (f[7] == ""):
        sys.exit(f"csvlog.py: row {r!r} has one eval cell of two")
    vals = [float(x) for x in f if x != ""]
    if not all(math.isfinite(v) for v in vals):
        sys.exit(f"csvlog.py: row {r!r} is not finite")
    if vals[4] != lr:
        sys.exit(f"csvlog.py: row {r!r}: lr {vals[4]} != {lr}")
    if vals[3] < 0 or vals[5] < 0:
        sys.exit(f"csvlog.py: row {r!r}: negative norm or time")
    steps.append(int(f[0]))
if steps != list(range(first, last + 1)):
    sys.exit(f"csvlog.py: steps are {steps}, expected {first}..{last}")
print(f"rows {len(rows)}, steps {steps[0]}..{steps[-1]}")
