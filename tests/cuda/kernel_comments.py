#!/usr/bin/env python3
"""Every kernel rnnc writes into a CUDA bundle (a .cu, or the kernel string of
a --jit .cpp) is preceded by a comment naming it and the equations it came
from, each as `//   FILE.rnn:LINE  TEXT` where TEXT is that line of FILE
(without its trailing `#` comment):

    // fused_2: one step of B sequences
    //   lstm.rnn:9  i, f, g, o = split(W_ih @ x + b_ih + W_hh @ h[t-1] + b_hh, 4)
    RNNC_KERNEL __launch_bounds__(256) void fused_2(...

usage: kernel_comments.py SOURCE_DIR BUNDLE...
Prints one line per kernel ("fused_2: lstm.rnn:9 lstm.rnn:10 lstm.rnn:11";
with several bundles, each line starts with the bundle's file name) and exits
1 when a kernel has no such comment or a line does not match its file.

comment_above() and parse_equation() are the one reader of these comments;
tests/lit/codegen/Inputs/equations.py imports them for the CPU target's."""
import os
import re
import sys

HELPERS = {"fill", "grad_embed", "mean", "set_rng", "drop_param", "fold_dropped_grad", "bias_rows"}  # written once for every bundle: a plain comment says what they do
EQUATION = re.compile(r"//   ([\w.\-/]+\.rnn):(\d+)  (.*)$")


def comment_above(lines, at):
    """The comment right above lines[at]: the contiguous `//` lines ending on
    the line before it, top first."""
    above = []
    k = at - 1
    while k >= 0 and lines[k].startswith("//"):
        above.insert(0, lines[k])
        k -= 1
    return above


def parse_equation(line):
    """`//   FILE.rnn:LINE  TEXT` -> (FILE, LINE, TEXT); None for any other line."""
    e = EQUATION.match(line)
    return (e.group(1), int(e.group(2)), e.group(3)) if e else None


def check(bundle, src, sources, label):
    """The number of failures in one bundle."""
    lines = open(bundle).read().split("\n")
    bad = 0
    kernels = 0
    for at, line in enumerate(lines):
        m = re.match(r"RNNC_KERNEL __launch_bounds__\(\d+(?:, *\d+)?\) void (\w+)\(", line)
        if not m:
            continue
        name = m.group(1)
        kernels += 1
        above = comment_above(lines, at)
        if name in HELPERS:
            if not above:
                print(f"FAILED: {label}{name}: no comment above the kernel")
                bad += 1
            continue
        if not above or not above[0].startswith(f"// {name}: "):
            print(f"FAILED: {label}{name}: the comment above it does not start with `// {name}: `: {above[:1]}")
            bad += 1
            continue
        cites = []
        for c in above[1:]:
            e = parse_equation(c)
            if not e:
                print(f"FAILED: {label}{name}: not an equation line: {c!r}")
                bad += 1
                continue
            file, number, text = e
            path = os.path.join(src, file)
            if path not in sources:
                sources[path] = open(path).read().split("\n") if os.path.isfile(path) else None
            if sources[path] is None:
                print(f"FAILED: {label}{name}: {file}: no such file in {src}")
                bad += 1
                continue
            if not 1 <= number <= len(sources[path]):
                print(f"FAILED: {label}{name}: {file}:{number}: no such line")
                bad += 1
                continue
            want = sources[path][number - 1].split("#")[0].strip()
            if text.strip() != want:
                print(f"FAILED: {label}{name}: {file}:{number} is {want!r}, the comment says {text!r}")
                bad += 1
            cites.append(f"{file}:{number}")
        if not cites:
            print(f"FAILED: {label}{name}: no equations named")
            bad += 1
        print(f"{label}{name}: {' '.join(cites)}")
    if not kernels:
        print(f"FAILED: no kernels in {bundle}")
        bad += 1
    return bad


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    src, bundles = sys.argv[1], sys.argv[2:]
    sources = {}
    bad = 0
    for b in bundles:
        bad += check(b, src, sources, os.path.basename(b) + ": " if len(bundles) > 1 else "")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
