#!/usr/bin/env python3
"""Measures how `rnnc` compile time grows with model size.

Generates a model stacking L LSTM layers (the cell of samples/lstm.rnn, with
the input width inferred per layer) for each L in --layers into a temporary
directory, and times, end to end (process start to exit), after a few warm-up
runs:
  full       rnnc show FILE --stats --json   front end, lowering, every pass, stats
  front end  rnnc show FILE --ast            load, parse and Sema only (the baseline)
The difference is what lowering and the passes cost (plus printing stats rather
than the syntax tree). Prints the median of each (and p10/p90 of the full
run), milliseconds per layer, the cost of each added layer between two sizes
(flat when growth is linear), and the machine.

With --instructions, also runs the full command once per size under
valgrind's callgrind and prints the instructions executed in total and in the
front end, lowering, the pipeline and each pass, with the growth factor from
the previous size (4 per doubling is quadratic, 2 linear). Instruction counts
do not depend on the machine's load, so they show what grows superlinearly.

Usage: tools/bench-compile.py [--rnnc build/rnnc] [--runs 30] [--layers 1 4 16 64]
                              [--input 64] [--hidden 128] [--keep DIR] [--instructions]
Quote medians: the machines here are noisy.
"""
import argparse
import os

import re
import shutil
import subprocess
import tempfile

from benchlib import machine, measure

CELL = """\
# One LSTM layer (samples/lstm.rnn), its input width D inferred per instance.
dim I = {input}
dim H = {hidden}

cell LSTM(x: [D]) -> h {{
  param W_ih: [4*H, D]
  param W_hh: [4*H, H]
  param b_ih, b_hh: [4*H]
  i, f, g, o = split(W_ih @ x + b_ih + W_hh @ h[t-1] + b_hh, 4)
  c = sigmoid(f) * c[t-1] + sigmoid(i) * tanh(g)
  h = sigmoid(o) * tanh(c)
}}
"""

def model_text(layers, input_width, hidden):
    lines = [CELL.format(input=input_width, hidden=hidden), f"model Stack{layers}(x: [I]) -> h{layers} {{"]
    prev = "x"
    for k in range(1, layers + 1):
        lines.append(f"  h{k} = LSTM({prev})")
        prev = f"h{k}"
    lines.append("}")
    return "\n".join(lines) + "\n"


# Functions whose inclusive instruction counts --instructions reports, by label.
PARTS = [
    ("front end", r"rnnc::runFrontend\("),
    ("lowering", r"rnnc::lowerToGraph\("),
    ("pipeline", r"rnnc::runPipeline\("),
    ("canonicalize", r"rnnc::canonicalize\(rnnc::Graph&\)(\s\[|$)"),
    ("  Graph::users", r"rnnc::Graph::users\(\) const(\s\[|$)"),
    ("classify-time", r"rnnc::classifyTimePass\("),
    ("hoist", r"rnnc::hoistTimeParallel\("),
    ("stack-gemms", r"rnnc::stackGemms\("),
    ("fuse-pointwise", r"rnnc::fusePointwise\(rnnc::Compilation&\)(\s\[|$)"),
    ("schedule", r"rnnc::schedule\(rnnc::Compilation&\)(\s\[|$)"),
    ("plan-memory", r"rnnc::planMemory\(rnnc::Compilation&\)(\s\[|$)"),
    ("verifyGraph", r"rnnc::verifyGraph\[abi:cxx11\]\(rnnc::Graph const&\)(\s\[|$)"),
    ("Graph::param", r"rnnc::Graph::param\(.*\) const(\s\[|$)"),
]

def instructions(cmd, workdir):
    """Inclusive instruction counts of the PARTS in one run of cmd under callgrind.

    Each count is the function's main entry in callgrind_annotate (its own
    source file); code of it inlined from headers is listed apart and not
    added, so counts are slightly low. Growth between sizes is what matters."""
    out = os.path.join(workdir, "callgrind.out")
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"] + cmd, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    text = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", out], check=True,
                          capture_output=True, text=True, cwd=workdir).stdout
    counts = {}
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*)", line)
        if not m:
            continue
        n, what = int(m.group(1).replace(",", "")), m.group(2)
        if "PROGRAM TOTALS" in what:
            counts["total"] = n
        for label, pattern in PARTS:
            # The first (largest) line for a function is its inclusive cost over all its callers.
            if label not in counts and re.search(r":" + pattern, what):
                counts[label] = n
    os.remove(out)
    return counts

def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rnnc", default=os.path.join(root, "build", "rnnc"))
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--layers", type=int, nargs="+", default=[1, 4, 16, 64])
    ap.add_argument("--input", type=int, default=64, help="I, the model's input width")
    ap.add_argument("--hidden", type=int, default=128, help="H, each layer's width")
    ap.add_argument("--keep", metavar="DIR", help="write the generated models here and keep them")
    ap.add_argument("--instructions", action="store_true",
                    help="also count instructions per part under valgrind --tool=callgrind")
    args = ap.parse_args()

    workdir = args.keep or tempfile.mkdtemp(prefix="rnnc-bench-compile-")
    os.makedirs(workdir, exist_ok=True)
    try:
        print(f"machine: {machine()}")
        print(f"rnnc: {args.rnnc}; runs: {args.runs} (after 3 warm-up runs); I = {args.input}, H = {args.hidden}")
        true = measure(["/bin/true"], args.runs)
        print(f"/bin/true (process start alone): median {true['median']:.2f} ms")
        rows = []
        for layers in args.layers:
            path = os.path.join(workdir, f"stack{layers}.rnn")
            with open(path, "w") as f:
                f.write(model_text(layers, args.input, args.hidden))
            # A run that fails (a user error or a crash) stops the benchmark with its message.
            check = subprocess.run([args.rnnc, "show", path, "--stats", "--json"], capture_output=True, text=True)
            if check.returncode != 0:
                raise SystemExit(f"rnnc failed on {path} (exit {check.returncode}):\n{check.stderr}")
            full = measure([args.rnnc, "show", path, "--stats", "--json"], args.runs)
            front = measure([args.rnnc, "show", path, "--ast"], args.runs)
            rows.append((layers, full, front))
        print()
        print("| layers | full: median ms (p10-p90) | ms per layer | front end (--ast): median ms | "
              "lowering + passes: ms | per layer | added layer costs: ms |")
        print("|---:|---:|---:|---:|---:|---:|---:|")
        prev = None
        for layers, full, front in rows:
            passes = full["median"] - front["median"]
            added = ""
            if prev is not None and layers != prev[0]:
                added = f"{(full['median'] - prev[1]['median']) / (layers - prev[0]):.3f}"
            print(f"| {layers} | {full['median']:.2f} ({full['p10']:.2f}-{full['p90']:.2f}) | "
                  f"{full['median'] / layers:.3f} | {front['median']:.2f} | {passes:.2f} | "
                  f"{passes / layers:.3f} | {added} |")
            prev = (layers, full)
        print()
        print("added layer costs: (full(L) - full(previous L)) / (L - previous L); flat when growth is linear.")
        if args.instructions:
            counts = []
            for layers in args.layers:
                path = os.path.join(workdir, f"stack{layers}.rnn")
                counts.append((layers, instructions([args.rnnc, "show", path, "--stats", "--json"], workdir)))
            labels = ["total"] + [label for label, _ in PARTS]
            print()
            print("instructions (millions, inclusive; x: growth from the previous size)")
            print("| part | " + " | ".join(f"L={layers}" for layers, _ in counts) + " |")
            print("|---|" + "---:|" * len(counts))
            for label in labels:
                cells = []
                for k, (layers, c) in enumerate(counts):
                    n = c.get(label, 0)
                    cell = f"{n / 1e6:.2f}"
                    if k > 0 and counts[k - 1][1].get(label):
                        cell += f" (x{n / counts[k - 1][1][label]:.1f})"
                    cells.append(cell)
                print(f"| {label.strip()} | " + " | ".join(cells) + " |")
        if args.keep:
            print(f"models kept in {workdir}")
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)

if __name__ == "__main__":
    main()
