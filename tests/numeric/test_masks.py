"""Dropout, DropConnect and zoneout (docs/language.md#dropout-and-zoneout): the
masks every engine draws for a seed, their statistics, evaluation mode, and
gradients with a fixed seed against finite differences."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numlib as nl  # noqa: E402
import rnnrun  # noqa: E402

# An LSTM with every kind of mask: dropout on its input (a mask per step),
# DropConnect on W_hh (a mask per call), zoneout on both states, variational
# dropout on its output.
ZONEOUT_LSTM = """
dim I = 3
dim H = 4
cell ZoneoutLSTM(x: [I]) -> y, h {
  param W_ih: [4*H, I]
  param W_hh: [4*H, H]
  param b: [4*H]
  xd = dropout(x, 0.25)
  i, f, g, o = split(W_ih @ xd + dropout(W_hh, 0.4) @ h[t-1] + b, 4)
  c = zoneout(sigmoid(f) * c[t-1] + sigmoid(i) * tanh(g), c[t-1], 0.3)
  h = zoneout(sigmoid(o) * tanh(c), h[t-1], 0.1)
  y = dropout(h, 0.5, per = sequence)
  loss = mean(y * y) + 0.1 * sum(h)
}
"""

# The masks alone, wide enough to count.
MASKS = """
dim W = 64
cell Masks(x: [W], a: [W], b: [W]) -> y, s, z {
  y = dropout(x, 0.3)
  s = dropout(x, 0.3, per = sequence)
  z = zoneout(a, b, 0.25)
}
"""

# A scan candidate (affine in h, diagonal) with a mask in its loop: run as a
# parallel scan (the scans draw the masks of each step and sequence), it must
# agree with the interpreter step by step.
ZONEOUT_MINGRU = """
dim I = 3
dim H = 5
cell ZoneoutMinGRU(x: [I]) -> h {
  param W: [2*H, I]
  param b: [2*H]
  zx, hc = split(W @ x + b, 2)
  z = sigmoid(zx)
  h = zoneout((1 - z) * h[t-1] + z * hc, h[t-1], 0.2)
  loss = mean(h * h)
}
"""

# DropConnect alone: with the unit vectors as inputs (e_t at step t), the
# output at step t is column t of the dropped matrix, for every sequence.
DROPCONNECT = """
dim W = 64
cell DropConnect(x: [W]) -> y {
  param M: [W, W]
  y = dropout(M, 0.3) @ x
}
"""

T, B = 6, 3


def rel_err(a, b):
    """The largest difference over the largest magnitude."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(a)), np.max(np.abs(b)), 1e-300))


def write(d, name, text):
    path = os.path.join(d, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def lstm_params(rng):
    return {"W_ih": rng.normal(0, 0.6, (16, 3)), "W_hh": rng.normal(0, 0.6, (16, 4)), "b": rng.normal(0, 0.3, 16)}


def run(rnnc, path, params, inputs, out, mode, seed, engine="interp", grads=None, extra=()):
    rc, err = rnnrun.run(rnnc, path, params, inputs, out, grads=grads,
                         extra=["--mode", mode, "--seed", str(seed), "--engine", engine, *extra])
    if rc:
        raise nl.Failure(f"rnnc run ({engine}, {mode}) failed: {err}")
    return out


def same_results(ref, got, names, mode):
    """The interpreter's results (dir ref) against the compiled engine's (got), 1e-12 relative; the worst."""
    worst = 0.0
    for name in names:
        err = rel_err(rnnrun.load(ref, name), rnnrun.load(got, name))
        worst = max(worst, err)
        if err > 1e-12:
            raise nl.Failure(f"{mode}: {name} differs between the interpreter and the compiled code: {err:.2e}")
    return worst


def engines_agree(rnnc):
    """The interpreter and the generated C++ draw the same masks (f64, train and eval)."""
    d = nl.scratch("masks-engines")
    try:
        path = write(d, "z.rnn", ZONEOUT_LSTM)
        rng = np.random.default_rng(1)
        params = lstm_params(rng)
        inputs = {"x": rng.normal(0, 1, (T, B, 3))}
        worst = 0.0
        for mode in ("train", "eval"):
            ref = run(rnnc, path, params, inputs, os.path.join(d, f"i-{mode}"), mode, 7, grads={})
            got = run(rnnc, path, params, inputs, os.path.join(d, f"c-{mode}"), mode, 7, "compiled", grads={})
            names = ("y", "h", "loss", "grad/W_ih", "grad/W_hh", "grad/b", "grad/x", "grad/initial/c", "grad/initial/h")
            worst = max(worst, same_results(ref, got, names, mode))
        train_y = rnnrun.load(os.path.join(d, "i-train"), "y")
        eval_y = rnnrun.load(os.path.join(d, "i-eval"), "y")
        if np.array_equal(train_y, eval_y):
            raise nl.Failure("training and evaluation give the same output: no mask was drawn")
        return f"worst relative difference {worst:.1e}"
    finally:
        nl.cleanup(d)


def scan_candidate(rnnc):
    """A mask inside a loop the scans would take: compiled equals the interpreter, T = 300."""
    d = nl.scratch("masks-scan")
    try:
        path = write(d, "m.rnn", ZONEOUT_MINGRU)
        rng = np.random.default_rng(4)
        params = {"W": rng.normal(0, 0.5, (10, 3)), "b": rng.normal(0, 0.2, 10)}
        inputs = {"x": rng.normal(0, 1, (300, 4, 3))}
        ref = run(rnnc, path, params, inputs, os.path.join(d, "i"), "train", 9, grads={})
        got = run(rnnc, path, params, inputs, os.path.join(d, "c"), "train", 9, "compiled", grads={},
                  extra=["--time-parallel", "scan"])
        worst = same_results(ref, got, ("h", "loss", "grad/W", "grad/b", "grad/x", "grad/initial/h"), "train")
        return f"worst relative difference {worst:.1e}"
    finally:
        nl.cleanup(d)


def gradients_fd(rnnc):
    """With a fixed seed the masks are constants: gradients match central differences."""
    d = nl.scratch("masks-fd")
    try:
        path = write(d, "z.rnn", ZONEOUT_LSTM)
        rng = np.random.default_rng(2)
        params = lstm_params(rng)
        inputs = {"x": rng.normal(0, 1, (T, B, 3))}
        res = run(rnnc, path, params, inputs, os.path.join(d, "g"), "train", 11, grads={})
        eps, worst = 1e-6, 0.0
        for name, idx in (("W_ih", (5, 1)), ("W_hh", (9, 2)), ("W_hh", (2, 3)), ("W_hh", (14, 0)), ("W_hh", (7, 1)),
                          ("b", (13,)), ("b", (6,))):
            vals = []
            for sign in (1, -1):
                p = {k: v.copy() for k, v in params.items()}
                p[name][idx] += sign * eps
                out = run(rnnc, path, p, inputs, os.path.join(d, f"fd{sign}"), "train", 11)
                vals.append(float(rnnrun.load(out, "loss")))
            fd = (vals[0] - vals[1]) / (2 * eps)
            g = float(rnnrun.load(res, f"grad/{name}")[idx])
            err = abs(fd - g) / max(abs(fd), abs(g), 1e-6)
            worst = max(worst, err)
            if err > 1e-6:
                raise nl.Failure(f"d loss / d {name}{list(idx)}: backward {g:.10g}, finite differences {fd:.10g}")
        return f"worst relative error {worst:.1e}"
    finally:
        nl.cleanup(d)


def statistics(rnnc):
    """Evaluation is the expectation, exactly; training keeps with 1 - p, scales by 1 / (1 - p), and per = sequence
    draws one mask for all steps; the same seed draws the same masks, another seed others."""
    d = nl.scratch("masks-stats")
    try:
        path = write(d, "m.rnn", MASKS)
        rng = np.random.default_rng(3)
        Tn, Bn, W = 200, 8, 64
        x = rng.uniform(0.5, 2.0, (Tn, Bn, W))
        a, b = rng.normal(0, 1, (Tn, Bn, W)), rng.normal(0, 1, (Tn, Bn, W))
        inputs = {"x": x, "a": a, "b": b}
        ev = run(rnnc, path, {}, inputs, os.path.join(d, "eval"), "eval", 5)
        if not np.array_equal(rnnrun.load(ev, "y"), x) or not np.array_equal(rnnrun.load(ev, "s"), x):
            raise nl.Failure("dropout in evaluation is not the identity")
        if rel_err(rnnrun.load(ev, "z"), 0.25 * b + 0.75 * a) > 1e-15:
            raise nl.Failure("zoneout in evaluation is not p * old + (1 - p) * new")
        tr = run(rnnc, path, {}, inputs, os.path.join(d, "train"), "train", 5)
        y, s, z = rnnrun.load(tr, "y"), rnnrun.load(tr, "s"), rnnrun.load(tr, "z")
        ratio = y / x
        kept = np.isclose(ratio, 1 / 0.7, rtol=1e-12)
        if not np.all(kept | (y == 0)):
            raise nl.Failure("a dropout element is neither 0 nor x / (1 - p)")
        n = kept.size
        # The dropped fraction: binomial, sd sqrt(p (1 - p) / n) = 0.0014 here; the bound is 7 sd.
        dropped = 1 - kept.mean()
        if abs(dropped - 0.3) > 7 * np.sqrt(0.21 / n):
            raise nl.Failure(f"dropout(x, 0.3) dropped {dropped:.4f} of {n} elements")
        if abs(ratio.mean() - 1) > 7 * np.sqrt(0.21 / n) / 0.7:
            raise nl.Failure(f"the mean of dropout(x, p) / x is {ratio.mean():.4f}, not 1")
        seq = s / x
        if not np.allclose(seq, seq[:1], rtol=1e-12, atol=0):
            raise nl.Failure("dropout(x, p, per = sequence) drew different masks at different steps")
        if not (0.2 < (seq[0] == 0).mean() < 0.4):
            raise nl.Failure("dropout per sequence dropped an unlikely fraction")
        takes_new = z == a
        if not np.all(takes_new | (z == b)):
            raise nl.Failure("a zoneout element is neither new nor old")
        if abs(takes_new.mean() - 0.75) > 7 * np.sqrt(0.1875 / n):
            raise nl.Failure(f"zoneout(new, old, 0.25) took new for {takes_new.mean():.4f} of the elements")
        same = run(rnnc, path, {}, inputs, os.path.join(d, "same"), "train", 5, "compiled")
        if not np.array_equal(rnnrun.load(same, "y") == 0, y == 0) or not np.array_equal(rnnrun.load(same, "z"), z):
            raise nl.Failure("the same seed drew other masks on the compiled engine")
        other = run(rnnc, path, {}, inputs, os.path.join(d, "other"), "train", 6)
        if np.array_equal(rnnrun.load(other, "y") == 0, y == 0):
            raise nl.Failure("another seed drew the same masks")
        return f"dropped {dropped:.4f} (p = 0.3), zoneout took new {takes_new.mean():.4f} (0.75), n = {n}"
    finally:
        nl.cleanup(d)


def dropconnect(rnnc):
    """dropout(M, p) @ x: one mask per call, the same at every step and for every sequence; kept elements are
    M / (1 - p); evaluation is M exactly; the engines draw alike; another seed draws another mask."""
    d = nl.scratch("masks-dropconnect")
    try:
        path = write(d, "d.rnn", DROPCONNECT)
        rng = np.random.default_rng(6)
        W, Bn = 64, 3
        params = {"M": rng.uniform(0.5, 2.0, (W, W))}
        x = np.repeat(np.eye(W)[:, None, :], Bn, axis=1)  # [T = W, B, W]: e_t at step t
        dropped = lambda out: rnnrun.load(out, "y").transpose(1, 2, 0)  # noqa: E731  [B][row][t = column]
        ev = dropped(run(rnnc, path, params, {"x": x}, os.path.join(d, "eval"), "eval", 5))
        if rel_err(ev, np.broadcast_to(params["M"], ev.shape)) > 1e-15:
            raise nl.Failure("dropout(M, p) @ x in evaluation is not M @ x")
        tr = dropped(run(rnnc, path, params, {"x": x}, os.path.join(d, "train"), "train", 5))
        if not all(np.array_equal(tr[0], tr[b]) for b in range(Bn)):
            raise nl.Failure("DropConnect drew different masks for different sequences (or steps)")
        ratio = tr[0] / params["M"]
        kept = np.isclose(ratio, 1 / 0.7, rtol=1e-12)
        if not np.all(kept | (tr[0] == 0)):
            raise nl.Failure("a DropConnect element is neither 0 nor M / (1 - p)")
        frac = 1 - kept.mean()
        if abs(frac - 0.3) > 7 * np.sqrt(0.21 / kept.size):
            raise nl.Failure(f"dropout(M, 0.3) dropped {frac:.4f} of {kept.size} elements")
        same = dropped(run(rnnc, path, params, {"x": x}, os.path.join(d, "same"), "train", 5, "compiled"))
        if not np.array_equal(same == 0, tr == 0) or rel_err(same, tr) > 1e-12:
            raise nl.Failure("the compiled engine drew another DropConnect mask for the same seed")
        other = dropped(run(rnnc, path, params, {"x": x}, os.path.join(d, "other"), "train", 6))
        if np.array_equal(other == 0, tr == 0):
            raise nl.Failure("another seed drew the same DropConnect mask")
        return f"dropped {frac:.4f} of {kept.size} weights (p = 0.3), one mask for {Bn} sequences and {W} steps"
    finally:
        nl.cleanup(d)


def cases(rnnc):
    return [("masks-engines", lambda: engines_agree(rnnc)), ("masks-fd", lambda: gradients_fd(rnnc)),
            ("masks-stats", lambda: statistics(rnnc)),
            ("masks-dropconnect", lambda: dropconnect(rnnc)), ("masks-scan", lambda: scan_candidate(rnnc))]


if __name__ == "__main__":
    sys.exit(nl.main_for(cases))
