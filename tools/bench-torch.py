#!/usr/bin/env python3
"""The cost of the PyTorch binding (python/rnnc) per forward+backward call, side by side in one
run, on the same library the package builds:
  C++       the bundle's forward and backward called from a small C++ program (dlopen), no torch;
  cpp       the layer over the C++ op library (rnnc::forward/backward, csrc/ops.cpp; the default);
  custom_op the layer over torch.library.custom_op and ctypes (rnnc_py::forward/backward);
  ...ops    the same ops called directly, without the layer's Python (Recurrent.forward).
The binding's cost is a path's time minus the C++ time. Then a training step of the charlm
example's shape with the compiled LSTM and with nn.LSTM. Medians over --runs calls, the paths
interleaved round by round so that a noisy machine slows them alike; prints Markdown tables.

With --cuda (tools/gpu-check.sh's torch-layer phase): a forward+backward of the layer on CUDA
against nn.LSTM (cuDNN), T=100, B=64, I=H=256, float32.

usage: tools/bench-torch.py [--rnnc RNNC] [--runs N] [--steps N] [--no-charlm] [--cuda]"""
import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))

TIMER = r"""
#include <dlfcn.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include "rnnc/model.h"
int main(int argc, char **argv) {
  void *h = dlopen(argv[1], RTLD_NOW);
  if (!h) { std::fprintf(stderr, "%s\n", dlerror()); return 1; }
  auto entry = (const rnnc_model *(*)())dlsym(h, argv[2]);
  const rnnc_model *m = entry();
  long T = std::atol(argv[3]), B = std::atol(argv[4]), runs = std::atol(argv[5]);
  size_t rb = m->real_bytes;
  auto buf = [&](long n) { void *p = std::aligned_alloc(64, ((n * rb + 63) / 64) * 64 + 64); std::memset(p, 0, n * rb); return p; };
  void *params = buf(m->param_elements), *grads = buf(m->param_elements), *loss = buf(1);
  void *ws = std::aligned_alloc(64, ((m->workspace_bytes(T, B) + 63) / 64) * 64);
  std::vector<const void *> in, seeds, sseeds;
  std::vector<void *> out, fin, ig, sg;
  for (int k = 0; k < m->n_inputs; ++k) in.push_back(buf(T * B * m->inputs[k].shape[0]));
  for (int k = 0; k < m->n_outputs; ++k) out.push_back(buf(T * B * m->outputs[k].shape[0]));
  for (int k = 0; k < m->n_states; ++k) { long n = m->states[k].depth * B * m->states[k].shape[0];
    fin.push_back(buf(n)); sg.push_back(buf(n)); sseeds.push_back(nullptr); }
  for (int k = 0; k < m->n_seeds; ++k) seeds.push_back(buf(T * B * m->seeds[k].shape[0]));
  for (int k = 0; k < m->n_inputs; ++k) ig.push_back(buf(T * B * m->inputs[k].shape[0]));
  std::vector<double> t;
  for (long r = 0; r < runs + 20; ++r) {
    auto a = std::chrono::steady_clock::now();
    if (m->forward(ws, T, B, params, in.data(), nullptr, out.data(), fin.data(), m->has_loss ? loss : nullptr, nullptr, nullptr) ||
        m->backward(ws, T, B, params, in.data(), seeds.data(), sseeds.data(), grads, ig.data(), sg.data(), nullptr)) {
      std::fprintf(stderr, "%s\n", m->last_error()); return 1; }
    auto b = std::chrono::steady_clock::now();
    if (r >= 20) t.push_back(std::chrono::duration<double, std::micro>(b - a).count());
  }
  std::sort(t.begin(), t.end());
  std::printf("%.3f\n", t[t.size() / 2]);
}
"""


def cpu_model():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def interleaved_medians(fns, runs, warmup=20):
    """{name: median µs}, one call of each per round."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times = {name: [] for name in fns}
    for _ in range(runs):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) * 1e6 for name, t in times.items()}


def cxx_median(lib, symbol, T, B, runs, include, work):
    exe = os.path.join(work, "timer")
    if not os.path.exists(exe):
        src = os.path.join(work, "timer.cpp")
        open(src, "w").write(TIMER)
        subprocess.run(["c++", "-std=c++17", "-O2", "-I" + include, src, "-o", exe, "-ldl"], check=True)
    out = subprocess.run([exe, lib, symbol, str(T), str(B), str(runs)], capture_output=True, text=True, check=True)
    return float(out.stdout)


def cuda_layer(torch, rnnc, runs):
    if not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 77
    T, B, H = 100, 64, 256
    ref = torch.nn.LSTM(H, H).cuda()
    ours = rnnc.from_torch(ref).cuda()
    x = torch.randn(T, B, H, device="cuda", requires_grad=True)
    gy = torch.randn(T, B, H, device="cuda")
    rows = {}
    for name, model in (("rnnc layer (from_torch)", ours), ("nn.LSTM (cuDNN)", ref)):
        def step(model=model):
            y, _ = model(x)
            y.backward(gy)

        def infer(model=model):
            with torch.no_grad():
                model(x)

        for what, fn in (("forward+backward", step), ("forward, no_grad", infer)):
            for _ in range(5):
                fn()
            torch.cuda.synchronize()
            times = []
            for _ in range(min(runs, 50)):
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
            rows[(name, what)] = statistics.median(times)
    print(f"{torch.cuda.get_device_name()}; torch {torch.__version__}; LSTM T={T} B={B} I=H={H} float32, "
          f"median ms of {min(runs, 50)}\n")
    print("| path | forward+backward ms | forward, no_grad ms |")
    print("|---|---:|---:|")
    for name in ("rnnc layer (from_torch)", "nn.LSTM (cuDNN)"):
        print(f"| {name} | {rows[(name, 'forward+backward')]:.3f} | {rows[(name, 'forward, no_grad')]:.3f} |")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rnnc", default=os.environ.get("RNNC", os.path.join(ROOT, "build", "rnnc")))
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--steps", type=int, default=50, help="charlm training steps per path")
    ap.add_argument("--no-charlm", action="store_true")
    ap.add_argument("--cuda", action="store_true", help="the layer against nn.LSTM (cuDNN) on the GPU")
    ap.add_argument("--issue-shape-only", action="store_true",
                    help="only the T=100 B=32 I=H=256 table (and the workspace allocation it pays)")
    a = ap.parse_args()
    os.environ["RNNC"] = a.rnnc
    import torch
    import rnnc
    from rnnc import _build
    from rnnc.torch import binding

    torch.set_num_threads(os.cpu_count() or 1)
    lstm = os.path.join(ROOT, "samples", "lstm.rnn")
    if a.cuda:
        return cuda_layer(torch, rnnc, a.runs)
    include = _build._runtime_include(a.rnnc)
    print(f"CPU: {cpu_model()}, {os.cpu_count()} cores; torch {torch.__version__}; "
          f"medians of {a.runs} calls, paths interleaved\n")
    print("| LSTM forward+backward | C++ µs | cpp layer µs | cpp ops µs | custom_op layer µs | custom_op ops µs "
          "| cost: cpp layer µs | cost: custom_op layer µs |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as work:
        for T, B, H in () if a.issue_shape_only else ((1, 1, 8), (16, 4, 32)):
            m = rnnc.load(lstm, I=H, H=H)
            lib = m._lib
            x = torch.randn(T, B, H, requires_grad=True)
            gy = torch.randn(T, B, H)
            empty = torch.empty(0)
            fns = {}
            for name in ("cpp", "custom_op"):
                ops = binding(name)

                def layer(ops=ops, name=name):
                    binding(name)
                    y, _ = m(x)
                    y.backward(gy)

                def direct(ops=ops):
                    p = m._flat_params().detach()
                    res = ops.forward(lib.address, p, [x.detach()], [], T, B)
                    ops.backward(lib.address, res[-1], p, [x.detach()], [gy], [empty, empty], empty, T, B)

                fns[name + " layer"], fns[name + " ops"] = layer, direct
            med = interleaved_medians(fns, a.runs)
            binding("cpp")
            cxx = cxx_median(lib.path, m._manifest["symbol"], T, B, a.runs, include, work)
            print(f"| T={T} B={B} I=H={H} | {cxx:.1f} | {med['cpp layer']:.1f} | {med['cpp ops']:.1f} | "
                  f"{med['custom_op layer']:.1f} | {med['custom_op ops']:.1f} | {med['cpp layer'] - cxx:.1f} | "
                  f"{med['custom_op layer'] - cxx:.1f} |")
    # The issue's shape through the cpp layer, the input a batch of data (no grad: the bundle's
    # backward gets no array for its gradient and skips W_ih^T·δ) and an input that wants one.
    T, B, H = 100, 32, 256
    m = rnnc.load(lstm, I=H, H=H)
    gy = torch.randn(T, B, H)
    data = {"x without grad": torch.randn(T, B, H), "x with grad": torch.randn(T, B, H, requires_grad=True)}

    def step(x):
        x.grad = None
        y, _ = m(x)
        y.backward(gy)

    binding("cpp")
    med = interleaved_medians({k: (lambda x=x: step(x)) for k, x in data.items()}, max(10, a.runs // 100), warmup=3)
    # What the workspace would cost fresh from torch's CPU allocator every call (csrc/ops.cpp keeps it).
    n = m._lib.workspace_bytes(T, B)
    kept = torch.empty(n, dtype=torch.uint8)
    med.update(interleaved_medians({"a fresh workspace, allocated and written": lambda: torch.empty(n, dtype=torch.uint8).fill_(1),
                                    "a kept workspace, written": lambda: kept.fill_(1)}, max(10, a.runs // 100), warmup=3))
    print(f"\n| LSTM forward+backward, cpp layer, T={T} B={B} I=H={H} ({n / 1e6:.1f} MB workspace) "
          f"| ms (median of {max(10, a.runs // 100)}) |")
    print("|---|---:|")
    for name, us in med.items():
        print(f"| {name} | {us / 1e3:.2f} |")
    if a.no_charlm:
        return
    # A training step of the charlm example's shape: embedding -> LSTM -> linear -> cross-entropy.
    T, B, E, H, V = 32, 16, 32, 128, 256
    tokens = torch.randint(0, V, (T + 1, B))
    steps = {}
    for name, cell in (("compiled LSTM (rnnc, cpp ops)", rnnc.load(lstm, I=E, H=H)), ("nn.LSTM", torch.nn.LSTM(E, H))):
        emb, head = torch.nn.Embedding(V, E), torch.nn.Linear(H, V)
        params = list(emb.parameters()) + list(cell.parameters()) + list(head.parameters())
        opt = torch.optim.AdamW(params, lr=1e-3)

        def train_step(cell=cell, emb=emb, head=head, opt=opt):
            h, _ = cell(emb(tokens[:-1]))
            loss = torch.nn.functional.cross_entropy(head(h).reshape(-1, V), tokens[1:].reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()

        steps[name] = train_step
    med = interleaved_medians(steps, a.steps, warmup=5)
    print(f"\n| charlm training step T={T} B={B} E={E} H={H} V={V} | ms (median of {a.steps}) |")
    print("|---|---:|")
    for name, us in med.items():
        print(f"| {name} | {us / 1e3:.3f} |")


if __name__ == "__main__":
    sys.exit(main())
