#!/usr/bin/env python3
"""bf16 on the GPU (issue 21, docs/precision.md): rnnc's `--dtype bf16` LSTM
and GRU against PyTorch's nn.LSTM / nn.GRU in bf16 (cuDNN), forward +
backward, I = H, T = --seq, for every B and H of the grid; and whether the
products ran on tensor cores: ncu's count of tensor-pipe instructions
(sm__inst_executed_pipe_tensor) in the GEMM kernels of one small rnnc run.

rnnc: `rnnc bench --device cuda --dtype bf16 --json --no-baseline` (the
median of --runs after --warmup; params, inputs and gradients on the GPU).
PyTorch: the layer in bf16 on the GPU, the input and initial states requiring
gradients, the loss the sum of the output; CUDA events around forward +
backward, the median of --runs after --warmup.

Prints a markdown table (the ratio is PyTorch's time over rnnc's: above 1,
rnnc is faster) and the tensor-core line; rows not started within --budget-s
say so. Exit 77 when there is no GPU; 1 when a row failed.

Usage: bf16.py --rnnc PATH [--batch 16 64 256] [--hidden 1024 2048] [--seq 100]
               [--runs 20] [--warmup 5] [--budget-s S]"""
import argparse
import glob
import os
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rnnc_bench  # noqa: E402

NO_GPU = 77


def torch_row(cell, B, H, args):
    import torch
    layer = (torch.nn.LSTM if cell == "lstm" else torch.nn.GRU)(H, H).to("cuda", torch.bfloat16)
    x = torch.randn(args.seq, B, H, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    h0 = torch.zeros(1, B, H, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    state = (h0, torch.zeros_like(h0, requires_grad=True)) if cell == "lstm" else h0
    times = []
    for i in range(args.warmup + args.runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        y, _ = layer(x, state)
        y.float().sum().backward()
        end.record()
        torch.cuda.synchronize()
        if i >= args.warmup:
            times.append(start.elapsed_time(end))
    return statistics.median(times)


def tensor_cores(rnnc, args):
    """ncu's tensor-pipe instruction count per GEMM kernel of one small bf16 LSTM run."""
    ncu = shutil.which("ncu") or ("/usr/local/cuda/bin/ncu" if os.path.exists("/usr/local/cuda/bin/ncu") else None)
    if not ncu:
        return "not measured: no ncu"
    cmd = [ncu, "--csv", "--metrics", "sm__inst_executed_pipe_tensor.sum", "--kernel-name-base", "demangled",
           rnnc, "bench", os.path.join(rnnc_bench.ROOT, "samples", "lstm.rnn"), "-D", "I=256", "-D", "H=256",
           "--batch", "64", "--seq", "4", "--runs", "1", "--warmup", "0", "--device", "cuda", "--dtype", "bf16",
           "--no-baseline"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    if p.returncode != 0:
        return f"not measured: ncu exited {p.returncode}: {p.stderr.strip().splitlines()[-1:]}"
    counts = {}
    for line in p.stdout.splitlines():
        cols = [c.strip('"') for c in line.split('","')]
        if len(cols) > 4 and cols[-3] == "sm__inst_executed_pipe_tensor.sum":
            name = next((c for c in cols if "gemm" in c.lower() or "xmma" in c.lower() or "cutlass" in c.lower()), None)
            if name:
                try:
                    counts[name[:60]] = counts.get(name[:60], 0) + float(cols[-1].replace(",", ""))
                except ValueError:
                    pass
    if not counts:
        return "no GEMM kernel found in ncu's report"
    used = {k: v for k, v in counts.items() if v > 0}
    return (f"tensor cores in use: {len(used)} of {len(counts)} GEMM kernels issue tensor-pipe instructions ("
            + "; ".join(f"{k}: {v:.0f}" for k, v in sorted(counts.items())) + ")")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rnnc", required=True)
    ap.add_argument("--batch", type=int, nargs="+", default=[16, 64, 256])
    ap.add_argument("--hidden", type=int, nargs="+", default=[1024, 2048])
    ap.add_argument("--seq", type=int, default=100)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--budget-s", type=float, default=None)
    args = ap.parse_args()
    t0 = time.perf_counter()
    try:
        import torch
        has_torch = torch.cuda.is_available()
    except ImportError:
        has_torch = False
    print("| cell | B | H | rnnc bf16 ms | cuDNN bf16 ms | cuDNN / rnnc |")
    print("|---|---:|---:|---:|---:|---:|")
    failed = False
    for cell in ("lstm", "gru"):
        for H in args.hidden:
            for B in args.batch:
                if args.budget_s is not None and time.perf_counter() - t0 > args.budget_s:
                    print(f"| {cell} | {B} | {H} | not run: over the budget ({args.budget_s:.0f} s) | | |")
                    continue
                got, stderr = rnnc_bench.bench(args.rnnc, cell, B, H, args, ["--dtype", "bf16"])
                if "error" in got and ("no CUDA device" in stderr or not glob.glob("/dev/nvidia[0-9]*")):
                    print(f"no GPU: {got['error']}", file=sys.stderr)
                    return NO_GPU
                if "error" in got:
                    failed = True
                    print(f"| {cell} | {B} | {H} | {got['error']} | | |")
                    continue
                ours = got["fwdbwd_ms"]
                theirs = torch_row(cell, B, H, args) if has_torch else None
                print(f"| {cell} | {B} | {H} | {ours:.3f} | " + (f"{theirs:.3f} | {theirs / ours:.2f}x |" if theirs else
                                                                 "no PyTorch with CUDA | |"), flush=True)
    print()
    print(tensor_cores(args.rnnc, args))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
