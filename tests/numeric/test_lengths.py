"""Sequences of their own lengths (`rnnc run --lengths`, docs/lengths.md): for
every sample, a batch run with lengths equals each sequence cut to its length
and run alone: outputs (zero past the end), final states, the loss (a mean over
the valid steps), the gradients of params, inputs and initial states; on the
interpreter and the generated C++ (f64, 1e-12). Bad lengths are clear errors."""
import os
import subprocess
import sys
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numlib as nl  # noqa: E402

TOL = 1e-12
# Values read more than one step away keep no carry of their last steps (refused).
REFUSED = {"dilated"}


def seq(a, b):
    """Sequence b of a state, [B, n] or [k, B, n]."""
    return a[b:b + 1] if a.ndim == 2 else a[:, b:b + 1]


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape:
        return np.inf
    scale = max(float(np.max(np.abs(a), initial=0)), float(np.max(np.abs(b), initial=0)), 1e-300)
    return float(np.max(np.abs(a - b), initial=0)) / scale


class Case:
    def __init__(self, rnnc, path, seed, T=5, B=3):
        self.rnnc, self.path = rnnc, path
        self.dims, self.info = nl.small_dims(rnnc, path)
        rng = np.random.default_rng(seed)
        self.T, self.B = T, B
        self.lengths = np.array([self.T, 1] + [int(rng.integers(2, self.T)) for _ in range(B - 2)], dtype=np.int32)
        self.params = nl.random_params(self.info, rng)
        self.inputs = nl.random_inputs(self.info, rng, self.T, self.B)
        self.work = nl.scratch("lengths-" + os.path.basename(path)[:-4])
        first = nl.Runner(rnnc, path, self.dims, os.path.join(self.work, "first")).run(self.params, self.inputs)
        self.use_loss = first.loss() is not None
        self.states = {n: rng.normal(0.0, 0.5, first.final(n).shape) for n in first.final_names()
                       if first.final(n).dtype.kind == "f"}
        self.dy = {} if self.use_loss else {n: rng.normal(0, 1, (self.T, self.B, w)) for n, w in self.info.outputs}
        # Final-state seeds only without a loss: the loss's weight (len_b / Σ len) would scale the two terms apart.
        self.ds = {} if self.use_loss else {n: rng.normal(0, 1, a.shape) for n, a in self.states.items()}

    def batch(self, engine):
        f = os.path.join(self.work, "lengths.npy")
        np.save(f, self.lengths)
        # The workspace starts as NaNs: the rows past a sequence's end that the compiled code
        # skips must be written (zeros, carries) before anything reads them.
        r = nl.Runner(self.rnnc, self.path, self.dims, os.path.join(self.work, "batch-" + engine),
                      ["--engine", engine, "--lengths", f], env=dict(os.environ, RNNC_POISON_WORKSPACE="1"))
        return r.run(self.params, self.inputs, self.states, grad=self.dy, final_grad=self.ds)

    def alone(self, b):
        n = int(self.lengths[b])
        cut = lambda a: a[:n, b:b + 1]  # noqa: E731
        r = nl.Runner(self.rnnc, self.path, self.dims, os.path.join(self.work, f"alone-{b}"))
        return r.run(self.params, {k: cut(a) for k, a in self.inputs.items()},
                     {k: seq(a, b) for k, a in self.states.items()},
                     grad={k: cut(a) for k, a in self.dy.items()},
                     final_grad={k: seq(a, b) for k, a in self.ds.items()})


def check(case, got, alone):
    """got (the batch with lengths) against the runs alone; returns the worst error, raises on a bad one."""
    worst, valid = 0.0, int(case.lengths.sum())
    weight = [case.lengths[b] / valid if case.use_loss else 1.0 for b in range(case.B)]

    def same(what, a, b):
        nonlocal worst
        e = rel(a, b)
        worst = max(worst, e)
        if not e <= TOL:
            raise nl.Failure(f"{what}: relative error {e:.2e} against the sequence run alone\n"
                             f"  lengths {case.lengths.tolist()}, command: {' '.join(got.cmd)}")

    for b, res in enumerate(alone):
        n = int(case.lengths[b])
        for name, _ in case.info.outputs:
            y = got.output(name)
            same(f"output {name}, sequence {b}", y[:n, b:b + 1], res.output(name))
            if np.any(y[n:, b] != 0):
                raise nl.Failure(f"output {name} of sequence {b} is not zero after its {n} steps")
        for name in case.states:
            same(f"final state {name}, sequence {b}", seq(got.final(name), b), res.final(name))
            same(f"grad/initial/{name}, sequence {b}", seq(got.grad_initial(name), b),
                 weight[b] * res.grad_initial(name))
        for name in nl.float_inputs(case.info):
            g = got.grad(name)
            if g is None:
                continue
            same(f"grad/{name}, sequence {b}", g[:n, b:b + 1], weight[b] * res.grad(name))
            if np.any(g[n:, b] != 0):
                raise nl.Failure(f"grad/{name} of sequence {b} is not zero after its {n} steps")
    if case.use_loss:
        same("loss", np.array(got.loss()), np.array(sum(w * r.loss() for w, r in zip(weight, alone))))
    for name, _ in case.info.params:
        same(f"grad/{name}", got.grad(name), sum(w * r.grad(name) for w, r in zip(weight, alone)))
    return worst


def sample_case(rnnc, path, T=5, B=3):
    def fn():
        c = Case(rnnc, path, zlib.crc32(b"lengths:" + path.encode()), T, B)
        try:
            alone = [c.alone(b) for b in range(c.B)]
            worst = 0.0
            for engine in ("interp", "compiled"):
                worst = max(worst, check(c, c.batch(engine), alone))
            nl.cleanup(c.work)
            return f"lengths {c.lengths.tolist()}, worst relative error {worst:.1e}"
        except nl.Failure as e:
            raise nl.Failure(f"{e}\n(scratch kept in {c.work})")
    return fn


def refused(rnnc, path):
    """A value read k > 1 steps back: --lengths is refused at the read, with its line and column."""
    def fn():
        d = nl.scratch("lengths-refused")
        try:
            f = os.path.join(d, "l.npy")
            np.save(f, np.array([2, 1], dtype=np.int32))
            dims, info = nl.small_dims(rnnc, path)
            p = subprocess.run([rnnc, "run", path, *nl.dim_args(dims), "--params", "none.safetensors",
                                "--out", d, "--lengths", f], capture_output=True, text=True)
            if p.returncode != 1 or "--lengths needs every state read one step away" not in p.stderr:
                raise nl.Failure(f"expected the refusal, got exit {p.returncode}: {p.stderr}")
            if not p.stderr.startswith(f"{path}:"):
                raise nl.Failure(f"the refusal names no location: {p.stderr}")
            return p.stderr.splitlines()[0].replace(nl.ROOT + os.sep, "")
        finally:
            nl.cleanup(d)
    return fn


BAD_LENGTHS = [
    ("zero", np.array([3, 0], np.int32), "lengths[1] = 0 is not in 1..3"),
    ("above T", np.array([4, 1], np.int64), "lengths[0] = 4 is not in 1..3"),
    ("wrong batch", np.array([3, 1, 2], np.int32), "3 lengths for B = 2 sequences"),
    ("floats", np.array([3.0, 1.0]), "lengths need an int32 or int64 array [B], got float64"),
    ("a matrix", np.array([[3, 1]], np.int32), "lengths need an int32 or int64 array [B]"),
]


def bad_lengths(rnnc):
    """Each bad lengths file: exit 1 with its reason, for both engines."""
    d = nl.scratch("lengths-bad")
    try:
        path = os.path.join(nl.SAMPLES, "lstm.rnn")
        dims, info = nl.small_dims(rnnc, path)
        rng = np.random.default_rng(0)
        pf = os.path.join(d, "p.safetensors")
        nl.write_safetensors(pf, nl.random_params(info, rng))
        x = os.path.join(d, "x.npy")
        np.save(x, rng.normal(0, 1, (3, 2, dims.get("I", 4))))
        for what, lengths, message in BAD_LENGTHS:
            f = os.path.join(d, "l.npy")
            np.save(f, lengths)
            for engine in ("interp", "compiled"):
                p = subprocess.run([rnnc, "run", path, *nl.dim_args(dims), "--params", pf, "--input", f"x={x}",
                                    "--out", os.path.join(d, "out"), "--lengths", f, "--engine", engine],
                                   capture_output=True, text=True)
                if p.returncode != 1 or message not in p.stderr:
                    raise nl.Failure(f"lengths {what} ({engine}): expected exit 1 and '{message}', got "
                                     f"{p.returncode}: {p.stderr.strip()}")
        return f"{len(BAD_LENGTHS)} bad files refused by both engines"
    finally:
        nl.cleanup(d)


def cases(rnnc):
    out = []
    for f in sorted(os.listdir(nl.SAMPLES)):
        if not f.endswith(".rnn"):
            continue
        path = os.path.join(nl.SAMPLES, f)
        name = f[:-4]
        out.append((f"lengths/{name}", refused(rnnc, path) if name in REFUSED else sample_case(rnnc, path)))
    # Over 1024 rows: the CPU's products of every step at once pack the running rows in several chunks.
    for name in ("lstm", "gru"):
        out.append((f"lengths/{name}-chunks", sample_case(rnnc, os.path.join(nl.SAMPLES, name + ".rnn"), T=130, B=9)))
    out.append(("lengths/bad-files", lambda: bad_lengths(rnnc)))
    return out


if __name__ == "__main__":
    sys.exit(nl.main_for(cases))
