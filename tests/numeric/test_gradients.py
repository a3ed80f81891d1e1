#!/usr/bin/env python3
"""Backward of every sample (samples/*.rnn) against central finite differences,
in f64.

For each sample: small dims (-D for every dim the file declares, and for the
free dims rnnc asks for), T = 4, B = 2; random params, inputs (index inputs in
range) and initial states for every state (found by a first run: DIR/final/).
The objective is the model's loss (`--grad` alone, L = DIR/loss.npy) and,
separately, L = sum <Y, DY> over every output with random DY (`--grad y=DY.npy`).
Then for a few random coordinates of every param (embedding tables: rows the
tokens use), every float input and every initial state:

    dL/dp ~ (L(p + eps) - L(p - eps)) / (2 eps),  eps = 1e-6,

(3 coordinates a param and input, 2 a state; 1 each with RNNC_NUMERIC_FD_COORDS=1)

with |a - b| / max(|a| + |b|, 1e-8) <= 1e-6, or |a - b| <= 1e-9 * S, where S
is max(1, |L|) for a loss and max(1, sum |Y * DY|) otherwise (the central
difference's own rounding error is about 1e-16 S / eps; this matters only for
near-zero gradients).

Also (grad/files/unreached): with --grad, every param, dense input and state
has its gradient file, zeros for those the objective does not reach
(docs/run.md: `DIR/grad/<input>.npy` for each dense input,
`DIR/grad/initial/<state>.npy` for each state), as params already do."""
import os
import sys
import zlib

import numpy as np

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numlib as nl  # noqa: E402

EPS, RTOL, ATOL, T, B = nl.EPS, nl.RTOL, nl.ATOL, nl.T, nl.B
# Coordinates checked per param, input and state; RNNC_NUMERIC_FD_COORDS=1
# checks one of each (the sanitized tier: each costs two runs of the
# instrumented interpreter, about a second for charlm).
PER_PARAM, PER_INPUT, PER_STATE = (1, 1, 1) if os.environ.get("RNNC_NUMERIC_FD_COORDS") == "1" else (3, 3, 2)


class Problem:
    """One sample with its dims, random data and all its states."""

    def __init__(self, rnnc, path, work, seed):
        self.path = path
        self.dims, self.info = nl.small_dims(rnnc, path)
        self.rng = np.random.default_rng(seed)
        self.runner = nl.Runner(rnnc, path, self.dims, work)
        self.params = nl.random_params(self.info, self.rng)
        self.inputs = nl.random_inputs(self.info, self.rng, T, B)
        first = self.runner.run(self.params, self.inputs)  # states start at zero
        self.has_loss = first.loss() is not None
        self.states = {n: self.rng.normal(0.0, 0.5, first.final(n).shape) for n in first.final_names()}
        self.dy = {n: self.rng.normal(0.0, 1.0, (T, B, w)) for n, w in self.info.outputs}

    def where(self):
        return f"{os.path.relpath(self.path, nl.ROOT)} with {' '.join(nl.dim_args(self.dims))} T={T} B={B}"

    def L(self, params, inputs, states, dy):
        return nl.objective(self.info, self.runner.run(params, inputs, states), dy)


def pick(rng, shape, n, rows=None):
    """n distinct flat indices of an array of `shape` (rows: allowed first indices)."""
    size = int(np.prod(shape))
    if rows is not None:
        cols = size // shape[0]
        pool = np.array([r * cols + c for r in sorted(set(rows)) for c in range(cols)])
    else:
        pool = np.arange(size)
    return [int(i) for i in rng.choice(pool, size=min(n, len(pool)), replace=False)]


def check_sample(rnnc, path, use_loss):
    def fn():
        name = os.path.basename(path)
        work = nl.scratch("grad-" + name[:-4])
        try:
            pr = Problem(rnnc, path, work, zlib.crc32(name.encode()))
            if use_loss and not pr.has_loss:
                raise nl.Failure(f"{name} was expected to have a loss, no loss.npy")
            dy = None if use_loss else pr.dy
            g = pr.runner.run(pr.params, pr.inputs, pr.states, grad={} if use_loss else dy)
            L0 = nl.objective(pr.info, g, dy)
            scale = nl.objective_scale(g, dy)

            # Every gradient there, of the right shape.
            checks = []  # (label, kind, name, flat index, analytic)
            missing = []
            for n, shape in pr.info.params:
                a = g.grad(n)
                if a is None or a.shape != shape:
                    missing.append(f"grad/{n}.npy {None if a is None else a.shape}, expected {shape}")
                    continue
                rows = None
                if len(shape) == 2 and any(ix and w == shape[0] for _, w, ix in pr.info.inputs) and \
                        n.split(".")[-1].startswith("emb"):
                    rows = [int(r) for nm, w, ix in pr.info.inputs if ix and w == shape[0] for r in pr.inputs[nm].ravel()]
                for i in pick(pr.rng, shape, PER_PARAM, rows):
                    checks.append(("param", n, i, float(a.ravel()[i])))
            for n in nl.float_inputs(pr.info):
                a = g.grad(n)
                if a is None or a.shape != pr.inputs[n].shape:
                    missing.append(f"grad/{n}.npy {None if a is None else a.shape}, expected {pr.inputs[n].shape}")
                    continue
                for i in pick(pr.rng, a.shape, PER_INPUT):
                    checks.append(("input", n, i, float(a.ravel()[i])))
            for n, s in pr.states.items():
                a = g.grad_initial(n)
                if a is None or a.shape != s.shape:
                    missing.append(f"grad/initial/{n}.npy {None if a is None else a.shape}, expected {s.shape}")
                    continue
                for i in pick(pr.rng, a.shape, PER_STATE):
                    checks.append(("state", n, i, float(a.ravel()[i])))

            bad = []
            worst = worst_abs = 0.0
            for kind, n, i, analytic in checks:
                Ls = []
                for sgn in (1, -1):
                    params, inputs, states = pr.params, pr.inputs, pr.states
                    src = {"param": params, "input": inputs, "state": states}[kind]
                    a = src[n].copy()
                    a.ravel()[i] += sgn * EPS
                    if kind == "param":
                        params = {**params, n: a}
                    elif kind == "input":
                        inputs = {**inputs, n: a}
                    else:
                        states = {**states, n: a}
                    Ls.append(pr.L(params, inputs, states, dy))
                fd = (Ls[0] - Ls[1]) / (2 * EPS)
                err = nl.rel_err(analytic, fd)
                ok = err <= RTOL or abs(analytic - fd) <= ATOL * scale
                if ok:
                    worst = max(worst, err)
                    worst_abs = max(worst_abs, abs(analytic - fd))
                else:
                    shape = {"param": dict(pr.info.params).get(n), "input": pr.inputs.get(n, np.zeros(0)).shape,
                             "state": pr.states.get(n, np.zeros(0)).shape}[kind]
                    coord = np.unravel_index(i, shape)
                    where = {"param": f"grad/{n}", "input": f"grad/{n}", "state": f"grad/initial/{n}"}[kind]
                    bad.append(f"{where}{list(map(int, coord))}: rnnc {analytic:.12g}, finite difference {fd:.12g} "
                               f"(rel err {err:.3g})")
            obj = "loss (--grad)" if use_loss else "sum <Y, DY> over " + ", ".join(pr.dy)
            if missing or bad:
                raise nl.Failure(f"{pr.where()}, objective {obj}, seed crc32('{name}'):\n" + "\n".join(missing + bad))
            return f"{len(checks)} coordinates, worst rel err {worst:.2g}, abs err {worst_abs:.2g}"
        finally:
            nl.cleanup(work)
    return fn


UNREACHED_RNN = """\
# Written by tests/numeric/test_gradients.py: with --grad h=DY, u, s and P do not reach L.
cell Unreached(x: [2], u: [2]) -> h, y {
  param W: [3, 2]
  param U: [3, 3]
  param P: [2]
  h = tanh(W @ x + U @ h[t-1])
  s = tanh(P * u + s[t-1])
  y = s * 2
}
"""


def unreached_case(rnnc):
    def fn():
        work = nl.scratch("grad-unreached")
        try:
            path = os.path.join(work, "unreached.rnn")
            with open(path, "w") as f:
                f.write(UNREACHED_RNN)
            rng = np.random.default_rng(7)
            r = nl.Runner(rnnc, path, {}, work)
            params = {"W": rng.normal(0, 1, (3, 2)), "U": rng.normal(0, 1, (3, 3)), "P": rng.normal(0, 1, 2)}
            inputs = {"x": rng.normal(0, 1, (T, B, 2)), "u": rng.normal(0, 1, (T, B, 2))}
            states = {"h": rng.normal(0, 1, (B, 3)), "s": rng.normal(0, 1, (B, 2))}
            g = r.run(params, inputs, states, grad={"h": rng.normal(0, 1, (T, B, 3))})
            want = {"grad/W": (3, 2), "grad/U": (3, 3), "grad/P": (2,), "grad/x": (T, B, 2), "grad/u": (T, B, 2),
                    "grad/initial/h": (B, 3), "grad/initial/s": (B, 2)}
            zero = {"grad/P", "grad/u", "grad/initial/s"}
            bad = []
            for name, shape in want.items():
                f = os.path.join(g.out, name + ".npy")
                if not os.path.exists(f):
                    bad.append(f"{name}.npy not written (expected {'zeros ' if name in zero else ''}{list(shape)})")
                    continue
                a = np.load(f)
                if a.shape != shape:
                    bad.append(f"{name}.npy has shape {a.shape}, expected {shape}")
                elif name in zero and np.any(a != 0):
                    bad.append(f"{name}.npy is not zero: L does not depend on it")
            if bad:
                raise nl.Failure(f"{path} (--grad h=DY; T={T} B={B}):\n" + "\n".join(bad) + "\n--- the cell:\n"
                                 + UNREACHED_RNN)
            return "every gradient file written"
        finally:
            nl.cleanup(work)
    return fn


def samples():
    return sorted(os.path.join(nl.SAMPLES, f) for f in os.listdir(nl.SAMPLES) if f.endswith(".rnn"))


def has_loss(path):
    # A model with a `loss = ...` line in its own file (imported cells have none here).
    with open(path) as f:
        return any(line.strip().startswith("loss") and "=" in line for line in f)


def cases(rnnc):
    out = []
    for p in samples():
        name = os.path.basename(p)[:-4]
        if has_loss(p):
            out.append((f"grad/{name}/loss", check_sample(rnnc, p, True)))
        out.append((f"grad/{name}/outputs", check_sample(rnnc, p, False)))
    out.append(("grad/files/unreached", unreached_case(rnnc)))
    return out


def main():
    return nl.main_for(cases)


if __name__ == "__main__":
    sys.exit(main())
