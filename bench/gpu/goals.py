#!/usr/bin/env python3
"""Issue 23's goals on one GPU (docs/cuda.md#persistent-loops), each row against
its goal, the rows that decide a goal first (the step, the cells at B = 16 against eager,
then cuDNN's shapes from T = 1024 and B <= 16 on, torch.compile's columns
last), so that --budget-s cuts the rest:

  step    the LSTM in bf16 at H = 768, B = 16, T = 1024, its loops forced
          persistent: forward µs a step (goal: at most 2.5)
  cudnn   rnnc's LSTM and GRU (the cost model's choice of loop) against
          nn.LSTM / nn.GRU (cuDNN) in the same dtype: forward and
          forward+backward, B in {1, 4, 16, 64, 256}, H in {256, 768, 1024},
          T in {1024, 100}, f32 and bf16, then f16 where torch lets cuDNN run
          its persistent algorithm (f16, H % 128 = 0, B % 8 = 0). Goals: at
          least 1.0x cuDNN at every shape, at least 2x where cuDNN runs its
          standard algorithm with B <= 16
  cells   the peephole and layer-norm LSTMs at H = 256, T = 1024, B in {1, 16}
          against the same cells in PyTorch (bench/gpu/torch_rnn.py), eager and
          torch.compile, forward+backward. Goal: at least 30x eager on the peephole

rnnc's rows are `rnnc bench --device cuda` (bench/gpu/rnnc_bench.py: I = H, the
gradients of every param, input and initial state); PyTorch's run in this
process, TF32 off on both sides. Where the step goal is missed and ncu is
there, Nsight Compute's speed-of-light and occupancy lines of the persistent
kernel follow the table (why it is slower). Prints Markdown.

Exit 77 when there is no GPU (or no torch), 1 when a row failed, else 0: a
missed goal is a result, which the table states with its ratio.

Usage: goals.py --rnnc PATH [--runs 5] [--warmup 2] [--budget-s S]"""
import argparse
import glob
import os
import subprocess
import sys
import time
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rnnc_bench  # noqa: E402
import torch_rnn  # noqa: E402

NO_GPU = 77
TORCH_DTYPE = {"f32": "float32", "bf16": "bfloat16", "f16": "float16"}
STEP_GOAL_US, STANDARD_GOAL, CELL_GOAL = 2.5, 2.0, 30.0


def cudnn_persistent(dtype, H, B):
    """Whether torch lets cuDNN run a persistent algorithm for this shape (its
    use_persist_common_heuristics, as the issue names it): f16, H % 128 = 0, B % 8 = 0."""
    return dtype == "f16" and H % 128 == 0 and B % 8 == 0


def cudnn_rows():
    """(cell, dtype, H, B, T) in the order they decide the goals: T = 1024 and B <= 16 first."""
    rows = []
    for T in (1024, 100):
        for small in (True, False):
            for H in (768, 256, 1024):
                for B in (1, 4, 16, 64, 256):
                    if (B <= 16) != small:
                        continue
                    for dtype in ("bf16", "f32"):
                        for cell in ("lstm", "gru"):
                            rows.append((cell, dtype, H, B, T))
    rows += [(cell, "f16", H, B, 1024) for H in (768, 256, 1024) for B in (16, 64) for cell in ("lstm", "gru")]
    return rows


def ratio(theirs, ours):
    return theirs / ours if ours and theirs else None


def verdict(x, goal):
    if x is None:
        return "n/a"
    return f"met ({x:.2f}x)" if x >= goal else f"**missed** by {(1 - x / goal) * 100:.0f} % ({x:.2f}x of {goal:g}x)"


def timed_torch(torch, cell, impl, B, H, T, dtype, forward, runs, warmup):
    step, _ = torch_rnn.problem(cell, impl, B, H, T, "cuda", TORCH_DTYPE.get(dtype, "float32"), forward)
    ms, _ = torch_rnn.measure(step, runs, warmup, "cuda")
    torch.cuda.empty_cache()
    return ms


def ncu_why(rnnc):
    """Nsight Compute's speed of light and occupancy of the persistent forward kernel, or why not."""
    cmd = ["ncu", "--clock-control", "none", "--kernel-name", "regex:persist_", "--launch-count", "1",
           "--section", "SpeedOfLight", "--section", "Occupancy", "--section", "LaunchStats",
           rnnc, "bench", os.path.join(rnnc_bench.ROOT, "samples", "lstm.rnn"), "-D", "I=768", "-D", "H=768",
           "--dtype", "bf16", "--batch", "16", "--seq", "64", "--runs", "1", "--warmup", "0", "--device", "cuda",
           "--no-baseline"]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                           env={**os.environ, "RNNC_CUDA_LOOPS": "persistent"})
    except (OSError, subprocess.TimeoutExpired) as e:
        return [f"- ncu did not run: {e}"]
    keep = ("Duration", "Compute (SM) Throughput", "Memory Throughput", "Registers Per Thread", "Shared Memory",
            "Achieved Occupancy", "Theoretical Occupancy", "Block Limit", "Grid Size", "Block Size", "DRAM Throughput",
            "L1/TEX Cache Throughput", "L2 Cache Throughput")
    lines = [f"    {l.strip()}" for l in p.stdout.splitlines() if l.strip().startswith(keep)]
    return lines or [f"- ncu printed no section (exit {p.returncode}): {(p.stderr or p.stdout).strip()[-300:]}"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rnnc", required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--budget-s", type=float, default=None, help="start no row after this many seconds")
    args = ap.parse_args()
    start = time.monotonic()
    try:
        import torch
    except ImportError as e:
        print(f"no torch: {e}", file=sys.stderr)
        return NO_GPU
    if not torch.cuda.is_available():
        print("no GPU: torch.cuda.is_available() is False", file=sys.stderr)
        return NO_GPU
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    over = lambda: args.budget_s is not None and time.monotonic() - start > args.budget_s  # noqa: E731
    failed = False

    def rnnc_row(cell, dtype, H, B, T, env=None):
        nonlocal failed
        got, stderr = rnnc_bench.bench(args.rnnc, cell, B, H, types.SimpleNamespace(seq=T, runs=args.runs,
                                                                                    warmup=args.warmup),
                                       ["--dtype", dtype], env)
        if "error" in got:
            if "no CUDA device" in stderr or not glob.glob("/dev/nvidia[0-9]*"):
                raise SystemExit(NO_GPU)
            failed = True
        return got

    header = (f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}; "
              f"medians of {args.runs} runs after {args.warmup}; I = H.")
    step_table = ["| goal | shape | forward ms | µs a step | result |", "|---|---|---:|---:|---|"]
    cudnn_table = ["| cell | dtype | H | B | T | cuDNN's algorithm | fwd ms rnnc / cuDNN | fwd x | fwd+bwd ms rnnc / cuDNN "
                   "| fwd+bwd x | goal |", "|---|---|---:|---:|---:|---|---:|---:|---:|---:|---|"]
    cells_table = ["| cell | H | B | T | fwd+bwd ms rnnc | eager ms | x eager | torch.compile ms | x compile | goal |",
                   "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]

    def row(table, line):
        table.append(line)
        print(line, file=sys.stderr, flush=True)

    # The step goal.
    step = rnnc_row("lstm", "bf16", 768, 16, 1024, {"RNNC_CUDA_LOOPS": "persistent"})
    step_missed = False
    shape = "LSTM bf16 H = 768 B = 16 T = 1024, persistent"
    if "error" in step:
        row(step_table, f"| at most {STEP_GOAL_US} µs a step | {shape} | {step['error']} | | n/a |")
    else:
        us = step["forward_ms"] * 1000 / 1024
        step_missed = us > STEP_GOAL_US
        result = "met" if not step_missed else f"**missed** by {(us / STEP_GOAL_US - 1) * 100:.0f} %"
        row(step_table, f"| at most {STEP_GOAL_US} µs a step | {shape} | {step['forward_ms']:.3f} | {us:.2f} | {result} |")

    measured = {}  # (cell, B) -> {"ours": ms or error, "eager": ms or why, "compile": ms or why}

    def cells(B, impls):
        """The cells cuDNN lacks, against PyTorch: rnnc and `impls` (eager first; torch.compile's
        first call compiles for a minute, so its column is filled last, if the budget allows)."""
        for cell in ("peephole", "layernorm"):
            got = measured.setdefault((cell, B), {})
            if "ours" not in got:
                if over():
                    got["ours"] = f"not run: over the budget ({args.budget_s:.0f} s)"
                    continue
                ours = rnnc_row(cell, "f32", 256, B, 1024)
                got["ours"] = ours.get("fwdbwd_ms", f"rnnc: {ours.get('error')}")
            if not isinstance(got["ours"], float):
                continue
            for impl in impls:
                if over():
                    got[impl] = f"not run: over the budget ({args.budget_s:.0f} s)"
                    continue
                try:
                    got[impl] = timed_torch(torch, cell, impl, B, 256, 1024, "f32", False, args.runs, args.warmup)
                except Exception as e:  # noqa: BLE001 - torch.compile's failures are many: report, go on
                    got[impl] = f"n/a: {type(e).__name__}"
            print(f"# {cell} B = {B}: {got}", file=sys.stderr, flush=True)

    cells(16, ("eager",))
    # Against cuDNN.
    for cell, dtype, H, B, T in cudnn_rows():
        algorithm = "persistent" if cudnn_persistent(dtype, H, B) else "standard"
        lead = f"| {cell} | {dtype} | {H} | {B} | {T} | {algorithm} |"
        if over():
            row(cudnn_table, f"{lead} not run: over the budget ({args.budget_s:.0f} s) | | | | |")
            continue
        ours = rnnc_row(cell, dtype, H, B, T)
        if "error" in ours:
            row(cudnn_table, f"{lead} rnnc: {ours['error']} | | | | |")
            continue
        try:
            fwd = timed_torch(torch, cell, "cudnn", B, H, T, dtype, True, args.runs, args.warmup)
            both = timed_torch(torch, cell, "cudnn", B, H, T, dtype, False, args.runs, args.warmup)
        except Exception as e:  # noqa: BLE001 - a shape cuDNN refuses is a row, not the end
            first = (str(e).strip().splitlines() or [""])[0][:120]
            row(cudnn_table, f"{lead} cuDNN: {type(e).__name__}: {first} | | | | |")
            continue
        x_fwd, x_both = ratio(fwd, ours["forward_ms"]), ratio(both, ours["fwdbwd_ms"])
        goal = STANDARD_GOAL if algorithm == "standard" and B <= 16 else 1.0
        worst = min((x for x in (x_fwd, x_both) if x is not None), default=None)
        row(cudnn_table, f"{lead} {ours['forward_ms']:.3f} / {fwd:.3f} | {x_fwd or 0:.2f} | "
                         f"{ours['fwdbwd_ms']:.3f} / {both:.3f} | {x_both or 0:.2f} | >= {goal:g}x: {verdict(worst, goal)} |")
    cells(1, ("eager",))
    cells(16, ("compile",))
    cells(1, ("compile",))
    for (cell, B), got in measured.items():
        ours = got["ours"]
        if not isinstance(ours, float):
            cells_table.append(f"| {cell} | 256 | {B} | 1024 | {ours} | | | | | |")
            continue
        show = lambda k: f"{got[k]:.3f}" if isinstance(got.get(k), float) else got.get(k, "n/a")  # noqa: E731
        x = {k: ratio(got[k], ours) if isinstance(got.get(k), float) else None for k in ("eager", "compile")}
        times_x = lambda k: "n/a" if x[k] is None else f"{x[k]:.1f}"  # noqa: E731
        goal = f">= {CELL_GOAL:g}x eager: {verdict(x['eager'], CELL_GOAL)}" if cell == "peephole" else ""
        cells_table.append(f"| {cell} | 256 | {B} | 1024 | {ours:.3f} | {show('eager')} | {times_x('eager')} | "
                           f"{show('compile')} | {times_x('compile')} | {goal} |")
    print(header)
    for table in (step_table, cells_table, cudnn_table):
        print()
        print("\n".join(table))
    if step_missed:
        print()
        print("Why the step goal is missed: Nsight Compute on the persistent forward kernel (T = 64):")
        print()
        print("\n".join(ncu_why(args.rnnc)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
