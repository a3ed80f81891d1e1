#!/usr/bin/env python3
"""The GPU benchmark's table: rnnc_bench.py's and torch_rnn.py's JSON side by
side, one row per cell, B, H and PyTorch implementation, ratio = PyTorch ms /
rnnc ms (above 1: rnnc is faster). Prints the table last. With --doc it
rewrites that file below its marker line (the method above it stays), with the
machine (nvidia-smi's name and driver), PyTorch, CUDA and cuDNN versions, the
rnnc commit, the date and --command. When rnnc_bench.py found no GPU, it says
so, leaves --doc alone and exits 77.

Usage: report.py --rnnc-json R.json --torch-json T.json [--doc docs/benchmarks/gpu.md]
                 [--command "bash tools/gpu-check.sh"] [--commit C]"""
import argparse
import datetime
import json
import os
import subprocess
import sys

NO_GPU = 77
MARKER = "<!-- results: written by bench/gpu/report.py (tools/gpu-check.sh) below this line -->"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REFERENCE = {"lstm": ["cudnn"], "gru": ["cudnn"], "peephole": ["eager", "compile"]}
LABEL = {"cudnn": "torch.nn (cuDNN)", "eager": "eager", "compile": "torch.compile"}


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        return {"error": f"no results in {path} ({e})"}


def sh(cmd):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=30)
        return p.stdout.strip() if p.returncode == 0 else ""
    except (OSError, subprocess.TimeoutExpired):
        return ""


def machine(torch, commit):
    gpu = sh(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]).replace(", ", ", driver ")
    nvcc = next((w for w in sh(["nvcc", "--version"]).split() if w.startswith("V1")), "")
    if not commit:
        commit = sh(["git", "rev-parse", "--short", "HEAD"])
        if commit and sh(["git", "status", "--porcelain", "--untracked-files=no"]):
            commit += " with local changes"
    return [f"GPU: {gpu or torch.get('gpu') or 'unknown'}",
            f"CUDA toolkit (nvcc): {nvcc or 'unknown'}; PyTorch {torch.get('torch', 'n/a')} "
            f"(CUDA {torch.get('cuda', 'n/a')}, cuDNN {torch.get('cudnn', 'n/a')}, TF32 {'on' if torch.get('tf32') else 'off'})",
            f"rnnc: {commit or 'unknown commit'}",
            f"date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC"]


def table(rnnc, torch):
    ours = {(r["cell"], r["batch"], r["hidden"]): r for r in rnnc.get("rows", [])}
    theirs = {(r["cell"], r["impl"], r["batch"], r["hidden"]): r for r in torch.get("rows", [])}
    notes, lines = {}, ["| cell | B | H | rnnc ms | rnnc --cuda-graphs ms | PyTorch | PyTorch ms | ratio |",
                         "|---|---:|---:|---:|---:|---|---:|---:|"]

    def ms(r):
        if r is None:
            return "n/a", None
        if "error" in r:
            k = notes.setdefault(r["error"], len(notes) + 1)
            return f"n/a [{k}]", None
        return f"{r['fwdbwd_ms']:.3f}", r["fwdbwd_ms"]
    for (cell, B, H), r in sorted(ours.items(), key=lambda kv: (list(REFERENCE).index(kv[0][0]), kv[0][2], kv[0][1])):
        ours_s, ours_v = ms(r)
        for impl in REFERENCE[cell]:
            ref_s, ref_v = ms(theirs.get((cell, impl, B, H)) or ({"error": torch["error"]} if "error" in torch else None))
            ratio = f"{ref_v / ours_v:.2f}x" if ours_v and ref_v else "n/a"
            graphs = f"{r['fwdbwd_ms_graphs']:.3f}" if r.get("fwdbwd_ms_graphs") else "n/a"
            lines.append(f"| {cell} | {B} | {H} | {ours_s} | {graphs} | {LABEL[impl]} | {ref_s} | {ratio} |")
    lines += [""] + [f"[{k}] {why}" for why, k in notes.items()]
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rnnc-json", required=True)
    ap.add_argument("--torch-json", required=True)
    ap.add_argument("--doc", help="the markdown file whose results part to rewrite")
    ap.add_argument("--command", default="bash tools/gpu-check.sh")
    ap.add_argument("--commit", help="the rnnc source measured (default: git rev-parse HEAD)")
    args = ap.parse_args()
    rnnc, torch = load(args.rnnc_json), load(args.torch_json)
    if "rows" not in rnnc:
        print(f"benchmarks: {rnnc.get('error', 'no results')}; PyTorch: {torch.get('error', 'ran')}")
        if args.doc:
            print(f"{args.doc} left as it was")
        return NO_GPU
    head = machine(torch, args.commit)
    note = (f"T = {rnnc['seq']}, I = H, f32; ms per forward + backward (params', inputs' and initial states' "
            f"gradients), median of {rnnc['runs']} runs after {rnnc['warmup']} (PyTorch: "
            f"{torch.get('runs', '?')} after {torch.get('warmup', '?')}); ratio = PyTorch ms / rnnc ms, "
            f"above 1: rnnc is faster.")
    lines = table(rnnc, torch)
    if args.doc:
        with open(args.doc) as f:
            text = f.read()
        if MARKER not in text:
            print(f"report.py: error: {args.doc} has no marker line {MARKER}", file=sys.stderr)
            return 1
        body = ["", "## Results", "", "```", args.command, "```", ""] + [f"- {m}" for m in head] + ["", note, ""]
        with open(args.doc + ".tmp", "w") as f:
            f.write(text.split(MARKER)[0] + MARKER + "\n" + "\n".join(body + lines).rstrip() + "\n")
        os.replace(args.doc + ".tmp", args.doc)
    print("\n".join(head + ["", note, ""] + lines).rstrip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
