#!/usr/bin/env python3
"""The cost of the PyTorch binding (python/rnnc) per forward+backward call,
against the same bundle called from C++ (`rnnc bench`), side by side in one
run; and a training step of the charlm example's shape with the compiled LSTM
against nn.LSTM. Medians over --runs; prints a Markdown table with the CPU.

usage: tools/bench-torch.py [--rnnc RNNC] [--runs N]"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))


def cpu_model():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def median_ms(fn, runs, warmup=20):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rnnc", default=os.environ.get("RNNC", os.path.join(ROOT, "build", "rnnc")))
    ap.add_argument("--runs", type=int, default=300)
    a = ap.parse_args()
    os.environ["RNNC"] = a.rnnc
    import torch
    import rnnc

    torch.set_num_threads(os.cpu_count() or 1)
    lstm = os.path.join(ROOT, "samples", "lstm.rnn")
    rows = []
    # 1. The binding's cost: a cell so small that the generated code is nearly free.
    for T, B, H in ((1, 1, 8), (16, 4, 32)):
        out = subprocess.run([a.rnnc, "bench", lstm, "-D", f"I={H}", "-D", f"H={H}", "--batch", str(B), "--seq", str(T),
                              "--runs", str(a.runs), "--json", "--no-baseline"], capture_output=True, text=True, check=True)
        cxx = json.loads(out.stdout)["optimized"]["fwdbwd_ms"]
        m = rnnc.load(lstm, I=H, H=H)
        x = torch.randn(T, B, H, requires_grad=True)

        def step():
            y, _ = m(x)
            y.sum().backward()

        py = median_ms(step, a.runs)
        rows.append((f"LSTM T={T} B={B} H={H}: forward+backward", cxx, py, (py - cxx) * 1e3))
    # 2. A training step of the charlm example's shape: embedding -> LSTM -> linear -> cross-entropy.
    T, B, E, H, V = 32, 16, 32, 128, 256
    tokens = torch.randint(0, V, (T + 1, B))
    for name, cell in (("compiled LSTM (rnnc)", rnnc.load(lstm, I=E, H=H)), ("nn.LSTM", torch.nn.LSTM(E, H))):
        emb, head = torch.nn.Embedding(V, E), torch.nn.Linear(H, V)
        params = list(emb.parameters()) + list(cell.parameters()) + list(head.parameters())
        opt = torch.optim.AdamW(params, lr=1e-3)

        def train_step():
            h, _ = cell(emb(tokens[:-1]))
            loss = torch.nn.functional.cross_entropy(head(h).reshape(-1, V), tokens[1:].reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()

        rows.append((f"charlm step T={T} B={B} E={E} H={H}: {name}", None, median_ms(train_step, max(20, a.runs // 10), 5), None))
    print(f"CPU: {cpu_model()}, {os.cpu_count()} cores; torch {torch.__version__}; median of {a.runs} calls\n")
    print("| what | C++ (`rnnc bench`) ms | PyTorch layer ms | binding cost µs |")
    print("|---|---:|---:|---:|")
    for what, cxx, py, cost in rows:
        print(f"| {what} | {'' if cxx is None else f'{cxx:.4f}'} | {py:.4f} | {'' if cost is None else f'{cost:.0f}'} |")


if __name__ == "__main__":
    main()
