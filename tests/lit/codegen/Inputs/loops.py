#!/usr/bin/env python3
"""Prints the sequential loops of an emitted <model>.cpp, one line each:

    forward loop up: gemm fused
    backward loop down: fused gemm

`up` is t = 0 .. T-1, `down` is t = T-1 .. 0 (`up, in blocks`: the steps of a
loop run block by block, docs/codegen.md "Blocks of steps"); then the kinds of
the launches inside the loop body, in order (the kernel name without its number). After the
loops of a function: `forward launches per step: N` (summed over its loops).
"""
import re
import sys

UP = "for (int64_t t = 0; t < T; ++t) {"
DOWN = "for (int64_t t = T - 1; t >= 0; --t) {"
LOOPS = {UP: "up", DOWN: "down", "for (int64_t t = t0; t < t1; ++t) {": "up, in blocks",
         "for (int64_t t = t1 - 1; t >= t0; --t) {": "down, in blocks"}
LAUNCH = re.compile(r"^\s*([a-z_]+?)_\d+\(ws, P, G, B, t \* B, \(t \+ 1\) \* B\);$")

text = open(sys.argv[1]).read().splitlines()
fn = None
per_step = {}
i = 0
while i < len(text):
    line = text[i]
    m = re.match(r"^int (forward|backward)\(", line)
    if m:
        fn = m.group(1)
        per_step[fn] = 0
    elif line == "}":
        fn = None
    elif fn and line.strip() in LOOPS:
        direction = LOOPS[line.strip()]
        kinds = []
        i += 1
        while text[i].strip() != "}":
            lm = LAUNCH.match(text[i])
            if not lm:
                sys.exit(f"loops.py: not a per-step launch inside a loop: {text[i]!r}")
            kinds.append(lm.group(1))
            i += 1
        per_step[fn] += len(kinds)
        print(f"{fn} loop {direction}: {' '.join(kinds)}")
    i += 1
for fn in ("forward", "backward"):
    if fn not in per_step:
        sys.exit(f"loops.py: no {fn} function")
    print(f"{fn} launches per step: {per_step[fn]}")
