#!/usr/bin/env python3
"""PyTorch's recurrent layers on the GPU, timed as `rnnc bench --device cuda`
times rnnc: one forward + backward over T steps, the backward computing the
gradients of every param, of the input sequence and of the initial states, for
L = sum <out, dy> (autograd.grad with grad_outputs dy: the same gradients as
backward of sum(out * dy), without the product's extra kernels), f32, I = H.

  lstm      torch.nn.LSTM (cuDNN)
  gru       torch.nn.GRU (cuDNN)
  peephole  samples/peephole_lstm.rnn's equations in plain PyTorch: W x for all
            steps in one GEMM, then a Python loop over t of R h + pointwise
            (both h and c are outputs, as in the sample: dy for each); run
            eagerly ("eager") and with its step under torch.compile
            ("compile"; if that fails the row says n/a and why)
  layernorm samples/layernorm_lstm.rnn's the same way (LN(W_x x) + b for all
            steps at once, the loop: LN(W_h h), the cell, LN(c); h the output)
            (bench/gpu/goals.py's rows; not in the main grid)

Each row: warmup runs, then the median and minimum of --runs runs, each timed
by CUDA events around forward + backward. TF32 is off (rnnc computes in plain
f32) unless --tf32. A row that fails, or that would start after --budget-s
seconds, has "error" instead of times.

Prints JSON: {"torch", "cuda", "cudnn", "gpu", "tf32", "seq", "runs",
"warmup", "rows": [{"cell", "impl", "batch", "hidden", "fwdbwd_ms",
"fwdbwd_ms_min"[, "compile_s"]} | {"cell", "impl", "batch", "hidden",
"error"}]}. Without torch or a CUDA device it prints {"error": why} and exits
77. --device cpu (timed by the wall clock) is for trying the script on a
machine without a GPU, at small sizes.

Usage: torch_rnn.py [--batch 1 16 64 256] [--hidden 256 1024] [--seq 100]
                    [--runs 20] [--warmup 5] [--cells lstm gru peephole]
                    [--no-compile] [--tf32] [--budget-s S] [--device cuda|cpu]"""
import argparse
import json
import statistics
import sys
import time

NO_GPU = 77


def peephole_step(zx, h, c, R, p_i, p_f, p_o):
    """One step of samples/peephole_lstm.rnn; zx = W x + b (computed for all t at once)."""
    import torch
    zi, zf, zg, zo = (zx + h @ R.t()).chunk(4, 1)
    i = torch.sigmoid(zi + p_i * c)
    f = torch.sigmoid(zf + p_f * c)
    c = f * c + i * torch.tanh(zg)
    o = torch.sigmoid(zo + p_o * c)
    return o * torch.tanh(c), c


def peephole_seq(step, x, h, c, W, R, b, p_i, p_f, p_o):
    import torch
    T, B, _ = x.shape
    zx = torch.addmm(b, x.reshape(T * B, -1), W.t()).view(T, B, -1)
    hs, cs = [], []
    for t in range(T):
        h, c = step(zx[t], h, c, R, p_i, p_f, p_o)
        hs.append(h)
        cs.append(c)
    return torch.stack(hs), torch.stack(cs)


def layernorm(v, gain, bias):
    import torch
    d = v - v.mean(1, keepdim=True)
    return gain * d / torch.sqrt((d * d).mean(1, keepdim=True) + 1e-5) + bias


def layernorm_step(lx, h, c, W_h, gain_h, bias_h, gain_c, bias_c):
    """One step of samples/layernorm_lstm.rnn; lx = LN(W_x x) + b (computed for all t at once)."""
    import torch
    f, i, o, g = (layernorm(h @ W_h.t(), gain_h, bias_h) + lx).chunk(4, 1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(layernorm(c, gain_c, bias_c)), c


def layernorm_seq(step, x, h, c, W_x, W_h, b, gain_x, bias_x, gain_h, bias_h, gain_c, bias_c):
    T, B, _ = x.shape
    lx = (layernorm(x.reshape(T * B, -1) @ W_x.t(), gain_x, bias_x) + b).view(T, B, -1)
    hs = []
    for t in range(T):
        h, c = step(lx[t], h, c, W_h, gain_h, bias_h, gain_c, bias_c)
        hs.append(h)
    import torch
    return (torch.stack(hs),)


def problem(cell, impl, B, H, T, dev, dtype="float32", forward=False):
    """(step, compile_s): step() runs one forward + backward (with `forward`, the forward alone,
    as in training: autograd keeps what backward would need). `dtype`: the cuDNN layers' and
    their data's (float32, bfloat16, float16); the cells in plain PyTorch are float32."""
    import torch
    g = torch.Generator(device="cpu").manual_seed(B * 7919 + H)
    rnd = lambda *s: torch.randn(*s, generator=g).to(dev)  # noqa: E731
    if cell in ("lstm", "gru"):
        dt = getattr(torch, dtype)
        x = rnd(T, B, H).to(dt).requires_grad_()
        net = (torch.nn.LSTM if cell == "lstm" else torch.nn.GRU)(H, H).to(dev, dt)
        h0 = rnd(1, B, H).to(dt).requires_grad_()
        c0 = rnd(1, B, H).to(dt).requires_grad_()
        state = (h0, c0) if cell == "lstm" else h0
        wrt = [*net.parameters(), x, *((h0, c0) if cell == "lstm" else (h0,))]
        dy = rnd(T, B, H).to(dt)

        def step():
            out, _ = net(x, state)
            return out if forward else torch.autograd.grad(out, wrt, dy)
        return step, None
    x = rnd(T, B, H).requires_grad_()
    k = 1.0 / H ** 0.5
    uni = lambda *s: ((torch.rand(*s, generator=g) * 2 - 1) * k).to(dev).requires_grad_()  # noqa: E731
    if cell == "peephole":
        params = [uni(4 * H, H), uni(4 * H, H), uni(4 * H), uni(H), uni(H), uni(H)]  # W R b p_i p_f p_o
        fn, seq = peephole_step, peephole_seq
    else:  # W_x W_h b gain_x bias_x gain_h bias_h gain_c bias_c
        params = [uni(4 * H, H), uni(4 * H, H), uni(4 * H), uni(4 * H), uni(4 * H), uni(4 * H), uni(4 * H), uni(H), uni(H)]
        fn, seq = layernorm_step, layernorm_seq
    h0, c0 = rnd(B, H).requires_grad_(), rnd(B, H).requires_grad_()
    dys = [rnd(T, B, H) for _ in range(2 if cell == "peephole" else 1)]  # the sample's outputs: h, c or h
    if impl == "compile":
        if not hasattr(torch, "compile"):
            raise RuntimeError(f"torch {torch.__version__} has no torch.compile")
        import torch._dynamo
        torch._dynamo.reset()  # compile afresh for this shape
        fn = torch.compile(fn, dynamic=False, fullgraph=True)

    def step():
        outs = seq(fn, x, h0, c0, *params)
        if forward:
            return outs
        return torch.autograd.grad(list(outs), [*params, x, h0, c0], dys)
    compile_s = None
    if impl == "compile":  # the first call compiles forward and backward: time it apart
        t0 = time.perf_counter()
        step()
        sync(dev)
        compile_s = time.perf_counter() - t0
    return step, compile_s


def sync(dev):
    import torch
    if dev == "cuda":
        torch.cuda.synchronize()


def measure(step, runs, warmup, dev):
    import torch
    for _ in range(warmup):
        step()
    sync(dev)
    times = []
    for _ in range(runs):
        if dev == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            step()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            step()
            times.append((time.perf_counter() - t0) * 1000.0)
    return statistics.median(times), min(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 16, 64, 256])
    ap.add_argument("--hidden", type=int, nargs="+", default=[256, 1024])
    ap.add_argument("--seq", type=int, default=100)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--cells", nargs="+", default=["lstm", "gru", "peephole"],
                    choices=["lstm", "gru", "peephole", "layernorm"])
    ap.add_argument("--no-compile", action="store_true", help="leave out peephole under torch.compile")
    ap.add_argument("--tf32", action="store_true", help="let cuBLAS and cuDNN use TF32")
    ap.add_argument("--budget-s", type=float, default=None, help="start no row after this many seconds")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    args = ap.parse_args()
    t_start = time.perf_counter()
    try:
        import torch
    except ImportError as e:
        print(json.dumps({"error": f"no torch ({e})"}))
        return NO_GPU
    if args.device == "cuda" and not torch.cuda.is_available():
        print(json.dumps({"error": f"no GPU (torch {torch.__version__}: torch.cuda.is_available() is False)"}))
        return NO_GPU
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    torch.backends.cudnn.allow_tf32 = args.tf32
    out = {"torch": torch.__version__, "cuda": torch.version.cuda,
           "cudnn": torch.backends.cudnn.version() if args.device == "cuda" else None,
           "gpu": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
           "tf32": args.tf32, "seq": args.seq, "runs": args.runs, "warmup": args.warmup, "rows": []}
    cells = ["eager"] + ([] if args.no_compile else ["compile"])
    impls = {"lstm": ["cudnn"], "gru": ["cudnn"], "peephole": cells, "layernorm": cells}
    plan = [(c, i, B, H) for c in args.cells for i in impls[c] for H in args.hidden for B in args.batch]
    plan.sort(key=lambda r: r[1] == "compile")  # the slow compiles last, where the budget cuts
    for cell, impl, B, H in plan:
        row = {"cell": cell, "impl": impl, "batch": B, "hidden": H}
        elapsed = time.perf_counter() - t_start
        if args.budget_s is not None and elapsed > args.budget_s:
            row["error"] = f"n/a: not run, over the time budget ({args.budget_s:.0f} s)"
        else:
            try:
                step, compile_s = problem(cell, impl, B, H, args.seq, args.device)
                row["fwdbwd_ms"], row["fwdbwd_ms_min"] = measure(step, args.runs, args.warmup, args.device)
                if compile_s is not None:
                    row["compile_s"] = round(compile_s, 2)
            except Exception as e:  # torch.compile's failures are many and varied: report, go on
                first = (str(e).strip().splitlines() or [""])[0][:200]
                row["error"] = f"n/a: {type(e).__name__}: {first}"
            if args.device == "cuda":
                torch.cuda.empty_cache()
        print(f"# torch {cell}/{impl} B={B} H={H}: "
              + (row["error"] if "error" in row else f"{row['fwdbwd_ms']:.3f} ms")
              + f" ({time.perf_counter() - t_start:.0f} s)", file=sys.stderr, flush=True)
        out["rows"].append(row)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
