#!/usr/bin/env python3
"""Training memory of the LSTM and GRU samples against issue 22's target.

For each cell and B: the training bytes (workspace + params + gradients + Adam's two
moments: `rnnc bench --json`'s training_bytes) and the target (the activations saved for
backward, `rnnc show --stats --json`'s saved_bytes_per_step times T·B, plus 3 x params,
+ 10 %). With --forward-only, the serving bytes instead (the forward-only build's workspace +
params: `rnnc bench --forward-only --json`'s serving_bytes), which have no target. Memory is
what the bundle allocates, exact: one run of each suffices, and the machine's load does not
matter. With --baseline, an older rnnc's figures side by side (--baseline-cxxflags: its
bundles built with those RNNC_CXXFLAGS, e.g. the same rnnc with one block of all T steps).

    python3 tools/bench-memory.py [--baseline OLD_RNNC] [--forward-only] [--size 256] [--batch 1 8 32 64]
"""
import argparse
import json
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def figures(rnnc, cell, size, T, B, forward_only=False, cxxflags=None):
    """(MB, target MB): training bytes and their target, or serving bytes and None."""
    sample = os.path.join(ROOT, "samples", f"{cell}.rnn")
    dims = ["-D", f"I={size}", "-D", f"H={size}"]
    bench = subprocess.run([rnnc, "bench", sample, *dims, "--batch", str(B), "--seq", str(T), "--runs", "1",
                            "--warmup", "0", "--json"] + (["--forward-only"] if forward_only else []),
                           check=True, capture_output=True, text=True,
                           env=None if cxxflags is None else {**os.environ, "RNNC_CXXFLAGS": cxxflags})
    o = json.loads(bench.stdout)["optimized"]
    if forward_only:
        return o["serving_bytes"] / 1e6, None
    show = subprocess.run([rnnc, "show", sample, *dims, "--stats", "--json"], check=True, capture_output=True, text=True)
    saved = json.loads(show.stdout)["saved_bytes_per_step"]
    return o["training_bytes"] / 1e6, (saved * T * B + 3 * o["param_bytes"]) * 1.1 / 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rnnc", default=os.path.join(ROOT, "build", "rnnc"))
    ap.add_argument("--baseline", help="an older rnnc, for a before column")
    ap.add_argument("--baseline-cxxflags", default=None,
                    help="RNNC_CXXFLAGS for the baseline's bundles (-DRNNC_BLOCK_ROWS=1000000000: one block, all T)")
    ap.add_argument("--cells", nargs="+", default=["lstm", "gru"])
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--seq", type=int, default=100)
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8, 32, 64])
    ap.add_argument("--forward-only", action="store_true", help="the serving bytes of the forward-only build")
    args = ap.parse_args()
    what = "serving" if args.forward_only else "training"
    before = "before MB | after MB | after / before | " if args.baseline else f"{what} MB | "
    target = "" if args.forward_only else "target MB | vs target |"
    print(f"T = {args.seq}, I = H = {args.size}\n")
    print(f"| cell | B | {before}{target}".rstrip())
    print("|---|---:|" + "---:|" * ((3 if args.baseline else 1) + (0 if args.forward_only else 2)))
    for cell in args.cells:
        for B in args.batch:
            now, goal = figures(args.rnnc, cell, args.size, args.seq, B, args.forward_only)
            then = figures(args.baseline, cell, args.size, args.seq, B, args.forward_only,
                           args.baseline_cxxflags)[0] if args.baseline else None
            old = f"{then:.1f} | " if then else ""
            ratio = f"{now / then:.2f} | " if then else ""
            versus = "" if goal is None else f"{goal:.1f} | {now / goal:.2f}x |"
            print(f"| {cell} | {B} | {old}{now:.1f} | {ratio}{versus}".rstrip(), flush=True)


if __name__ == "__main__":
    main()
