#!/usr/bin/env python3
"""Loops run in parallel over time (`--time-parallel`, docs/time-parallel.md)
against the same loops run step by step (`--time-parallel off`), both with
the compiled engine on the same files, forward and backward (`--grad` with
random DY): every array either run writes must agree to

    max|a - b| / max(max|a|, 1e-30)  <=  1e-12 (f64), 1e-5 (f32)

(a: the sequential run's; test_compiled's metric).

Scans (`--time-parallel scan`, which always scans when T >= 4):
- a linear recurrence h = a * h[t-1] + x with a in (0, 1), |a| > 1 (both
  signs), a = 0, and a mix; T = 1, 2, 3 (no chunks: the loop runs step by
  step), 5, 37, 128, 1000 and 100,000 (several chunks, T not a multiple of
  their count), in f64 and f32;
- two states coupled per element (2x2 blocks) and the samples whose loops
  are scans: mingru, minlstm, qrnn, qrnn_f, linear_indrnn (and their backward
  loops: reverse scans).
Newton (`--time-parallel newton`, RNNC_SCAN_REPORT=1 says whether the answer
was kept or the loop ran again step by step):
- a contractive tanh recurrence converges in the default 3 iterations at
  T = 64 (kept) and its answer is within 1e-9 of the steps' (f64); at
  T = 2000 after 12 iterations;
- with as many iterations as steps it is exact: kept, and equal to 1e-12;
- one iteration does not converge: the report says so, the outputs are the
  steps' bits (the fallback) and the gradients (a reverse scan) agree;
- indrnn, sru and adding (Newton forward, their backward loops scans: the
  adjoint) equal the steps, kept or not.
The derived step Jacobian (Tangent.cpp) of eleven cells covering every
differentiable op equals central differences, through Newton's residual after
one iteration (jacobian_case). Every rnnc here shares one fresh RNNC_CACHE, removed at the end."""
import atexit
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numlib as nl  # noqa: E402
import test_compiled as tc  # noqa: E402
import test_gradients as tg  # noqa: E402

TOL = {"f64": 1e-12, "f32": 1e-5}
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

LINEAR = """dim H = 4
cell Lin(x: [H]) -> h {
  param a: [H]
  h = a * h[t-1] + x
}
"""
COUPLED = """dim H = 4
cell Coupled(x: [H]) -> h {
  param a, b: [H]
  c = a * c[t-1] + 0.5 * n[t-1] + x
  n = b * n[t-1] - 0.25 * c[t-1]
  h = c + n
}
"""
TANH = """dim H = 4
cell Tanh(x: [H]) -> h {
  param u: [H]
  h = tanh(u * h[t-1] + x)
}
"""

_cache = tempfile.mkdtemp(prefix="rnnc-numeric-tp-cache-")
_env = {**os.environ, "RNNC_CACHE": _cache, "RNNC_SCAN_REPORT": "1"}
atexit.register(lambda: os.environ.get("RNNC_NUMERIC_KEEP") or shutil.rmtree(_cache, ignore_errors=True))


def cell_file(work, text):
    path = os.path.join(work, "cell.rnn")
    with open(path, "w") as f:
        f.write(text)
    return path


def run(rnnc, path, dims, work, mode, params, inputs, dy, dtype, extra=()):
    """One compiled run; returns (Result, stderr)."""
    runner = nl.Runner(rnnc, path, dims, os.path.join(work, mode),
                       extra=["--engine", "compiled", "--time-parallel", mode, *extra], env=_env)
    cmd, out = runner.cmdline(params, inputs, grad=dy, dtype=dtype)
    p = subprocess.run(cmd, capture_output=True, text=True, env=_env)
    if p.returncode != 0:
        raise nl.Failure(f"rnnc exited {p.returncode}: {p.stderr.strip()}\n  command: {' '.join(cmd)}")
    return nl.Result(out, cmd), p.stderr


def side_by_side(rnnc, path, mode, T, B, dtype, params=None, seed=1, extra=(), tol=None, dims=None, exact=()):
    """Runs `mode` and `off` on the same random data; returns (worst error,
    the parallel run's stderr). Raises Failure past the tolerance, or where
    an array named in `exact` differs at all."""
    work = nl.scratch("tp")
    try:
        found, info = nl.small_dims(rnnc, path)
        dims = dims or found
        rng = np.random.default_rng(seed)
        p = nl.random_params(info, rng)
        p.update(params or {})
        x = nl.random_inputs(info, rng, T, B)
        dy = {} if tg.has_loss(path) else {name: rng.normal(0.0, 1.0, (T, B, w)) for name, w in info.outputs}
        ref, _ = run(rnnc, path, dims, work, "off", p, x, dy, dtype)
        got, err = run(rnnc, path, dims, work, mode, p, x, dy, dtype, extra)
        worst, where, bad = tc.compare(ref, got, tol if tol is not None else TOL[dtype])
        for name in exact:
            a, b = ref.output(name), got.output(name)
            if not np.array_equal(a, b):
                bad.append(f"{name}.npy: not the steps' bits (max diff {float(np.max(np.abs(a - b))):.3g})")
        if bad:
            raise nl.Failure(f"{os.path.basename(path)} {mode} T={T} {dtype}: " + "; ".join(bad[:3])
                             + f"\n  {' '.join(got.cmd)}")
        nl.cleanup(work)
        return worst, err
    except nl.Failure:
        raise  # the scratch folder stays, for the command lines


def linear_case(rnnc, coeffs, T, dtype, B=2):
    def fn():
        work = nl.scratch("tp-cell")
        path = cell_file(work, LINEAR)
        a = np.asarray(coeffs, dtype=np.float64)
        worst, _ = side_by_side(rnnc, path, "scan", T, B, dtype, params={"a": a})
        nl.cleanup(work)
        return f"worst {worst:.2g}"
    return fn


def sample_case(rnnc, name, mode, T, dtype, extra=()):
    def fn():
        worst, err = side_by_side(rnnc, os.path.join(ROOT, "samples", name + ".rnn"), mode, T, 2, dtype, extra=extra)
        kept = "kept" if ": kept" in err else ("fell back" if "not converged" in err else "")
        return f"worst {worst:.2g}" + (f", newton {kept}" if kept else "")
    return fn


def coupled_case(rnnc, T, dtype):
    def fn():
        work = nl.scratch("tp-cell")
        worst, _ = side_by_side(rnnc, cell_file(work, COUPLED), "scan", T, 2, dtype,
                                params={"a": np.array([0.9, -0.5, 0.3, 1.01]), "b": np.array([0.7, 0.2, -0.95, 0.0])})
        nl.cleanup(work)
        return f"worst {worst:.2g}"
    return fn


def newton_case(rnnc, T, iterations, expect, tol, u=(0.2, -0.15, 0.1, 0.25), exact=()):
    """expect: "kept" or "not converged" in the report."""
    def fn():
        work = nl.scratch("tp-cell")
        extra = ["--newton-iterations", str(iterations)] if iterations else []
        worst, err = side_by_side(rnnc, cell_file(work, TANH), "newton", T, 2, "f64", params={"u": np.array(u)},
                                  extra=extra, tol=tol, exact=exact)
        nl.cleanup(work)
        if expect not in err:
            raise nl.Failure(f"newton T={T} iterations={iterations or 3}: expected '{expect}' in the report, got: "
                             f"{err.strip() or '(nothing)'}")
        return f"worst {worst:.2g}; {err.strip().splitlines()[0]}"
    return fn


# Cells h = f(h[t-1], x) whose step Jacobian rnnc derives (Tangent.cpp), each
# with the same f in numpy, for jacobian_case.
JACOBIAN_CELLS = {
    "tanh": ("h = tanh(u * h[t-1] + x)", lambda s, x, u: np.tanh(u * s + x)),
    "sigmoid": ("h = sigmoid(u * h[t-1] + x)", lambda s, x, u: 1 / (1 + np.exp(-(u * s + x)))),
    "softplus": ("h = softplus(u * h[t-1] + x) - 1", lambda s, x, u: np.log1p(np.exp(u * s + x)) - 1),
    "silu": ("h = silu(u * h[t-1] + x)", lambda s, x, u: (u * s + x) / (1 + np.exp(-(u * s + x)))),
    "exp-abs": ("h = exp(-abs(u * h[t-1] + x))", lambda s, x, u: np.exp(-np.abs(u * s + x))),
    "relu": ("h = relu(u * h[t-1] + x)", lambda s, x, u: np.maximum(u * s + x, 0)),
    "hard_sigmoid": ("h = hard_sigmoid(6 * u * h[t-1] + 3 * x)",
                     lambda s, x, u: np.clip((6 * u * s + 3 * x) / 6 + 0.5, 0, 1)),
    "log-square": ("h = log(1 + u * h[t-1] * h[t-1]) + x", lambda s, x, u: np.log(1 + u * s * s) + x),
    "sqrt": ("h = sqrt(1 + u * h[t-1] * h[t-1]) - x", lambda s, x, u: np.sqrt(1 + u * s * s) - x),
    "div": ("h = x / (1 + u * h[t-1] * h[t-1])", lambda s, x, u: x / (1 + u * s * s)),
    "min-max": ("h = max(u * h[t-1], x) + 0.5 * min(h[t-1], x)",
                lambda s, x, u: np.maximum(u * s, x) + 0.5 * np.minimum(s, x)),
}


def jacobian_case(rnnc, name):
    """The step Jacobian rnnc derives equals central differences of the step,
    observed through Newton's residual: one iteration from the first guess
    (the initial state h0 at every step) makes x[t] = f(h0, x_t) + J_t (x[t-1]
    - h0), J_t = df/dh at h0; the exact steps then run from x at each chunk's
    start, and the report prints the largest relative gap at the chunk ends.
    numpy redoes all of it with finite differences for J (T = 8: 4 chunks of
    2 steps) and must get the same residual to 5 digits (1e-9 absolute: the
    finite differences' own error)."""
    text, f = JACOBIAN_CELLS[name]

    def fn():
        work = nl.scratch("tp-jac")
        path = cell_file(work, f"dim H = 4\ncell J(x: [H]) -> h {{\n  param u: [H]\n  {text}\n}}\n")
        T, B, H = 8, 1, 4
        rng = np.random.default_rng(11)
        u = rng.uniform(0.3, 0.9, H)
        x = rng.normal(0.0, 1.0, (T, B, H))
        h0 = rng.normal(0.0, 0.5, (B, H))
        runner = nl.Runner(rnnc, path, {"H": H}, work, extra=["--engine", "compiled", "--time-parallel", "newton",
                                                             "--newton-iterations", "1"], env=_env)
        cmd, _ = runner.cmdline({"u": u}, {"x": x}, states={"h": h0[None]}, dtype="f64")
        p = subprocess.run(cmd, capture_output=True, text=True, env=_env)
        if p.returncode != 0:
            raise nl.Failure(f"rnnc exited {p.returncode}: {p.stderr.strip()}\n  {' '.join(cmd)}")
        import re
        m = re.search(r"residual (\S+):", p.stderr)
        if not m:
            raise nl.Failure(f"no Newton report in: {p.stderr.strip()}\n  {' '.join(cmd)}")
        got = float(m.group(1))
        eps = 1e-6
        xs, prev = [], h0
        for t in range(T):
            J = (f(h0 + eps, x[t], u) - f(h0 - eps, x[t], u)) / (2 * eps)
            prev = f(h0, x[t], u) + J * (prev - h0)
            xs.append(prev)
        residual = 0.0
        for c in range(3):  # chunks 0..2 of steps [2c, 2c + 2); chunk 3's end is not checked
            start = h0 if c == 0 else xs[2 * c - 1]
            exact = f(f(start, x[2 * c], u), x[2 * c + 1], u)
            residual = max(residual, float(np.max(np.abs(exact - xs[2 * c + 1]) / (1 + np.abs(exact)))))
        if not abs(got - residual) <= 1e-5 * residual + 1e-9:  # finite differences: ~1e-10 absolute
            raise nl.Failure(f"{name}: rnnc's residual {got!r}, numpy's with finite-difference Jacobians {residual!r}"
                             f"\n  {' '.join(cmd)}")
        nl.cleanup(work)
        return f"residual {got:.6g}"
    return fn


def cases(rnnc):
    rng = np.random.default_rng(7)
    inside = rng.uniform(0.05, 0.95, 4)
    outside = np.array([1.02, -1.03, 1.01, -1.015])
    out = []
    for dtype in ("f64", "f32"):
        for T in (1, 2, 3, 5, 37, 128, 1000):
            out.append((f"time-parallel/scan/a-in-0-1/T{T}/{dtype}", linear_case(rnnc, inside, T, dtype)))
        out.append((f"time-parallel/scan/a-in-0-1/T100000/{dtype}", linear_case(rnnc, inside, 100000, dtype, B=1)))
        out.append((f"time-parallel/scan/abs-a-over-1/T300/{dtype}", linear_case(rnnc, outside, 300, dtype)))
        out.append((f"time-parallel/scan/a-zero/T37/{dtype}", linear_case(rnnc, np.zeros(4), 37, dtype)))
        out.append((f"time-parallel/scan/mixed/T129/{dtype}",
                    linear_case(rnnc, np.array([0.0, 0.5, -1.01, 1.0]), 129, dtype)))
        out.append((f"time-parallel/scan/coupled/T200/{dtype}", coupled_case(rnnc, 200, dtype)))
        for name in ("mingru", "minlstm", "qrnn", "qrnn_f", "linear_indrnn"):
            out.append((f"time-parallel/scan/{name}/T77/{dtype}", sample_case(rnnc, name, "scan", 77, dtype)))
    for name in ("indrnn", "sru", "adding"):
        out.append((f"time-parallel/newton/{name}/T60/f64", sample_case(rnnc, name, "newton", 60, "f64")))
        out.append((f"time-parallel/newton/{name}/T60/f32", sample_case(rnnc, name, "newton", 60, "f32")))
    out.append(("time-parallel/newton/converges/T64", newton_case(rnnc, 64, 0, ": kept", 1e-9)))
    out.append(("time-parallel/newton/converges/T2000", newton_case(rnnc, 2000, 12, ": kept", 1e-9)))
    out.append(("time-parallel/newton/T-iterations-exact/T50", newton_case(rnnc, 50, 50, ": kept", 1e-12)))
    out.append(("time-parallel/newton/fallback/T300",
                newton_case(rnnc, 300, 1, "not converged", 1e-12, u=(0.99, -0.98, 0.97, 0.99), exact=("h",))))
    for name in JACOBIAN_CELLS:
        out.append((f"time-parallel/jacobian/{name}", jacobian_case(rnnc, name)))
    return out


def main():
    return nl.main_for(cases)


if __name__ == "__main__":
    sys.exit(main())
