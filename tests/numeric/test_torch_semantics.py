#!/usr/bin/env python3
"""samples/lstm.rnn and samples/gru.rnn mean exactly torch.nn.LSTM and
torch.nn.GRU (one layer, time-major, bias=True), checked against independent
numpy implementations of torch's documented equations:

  LSTM (gate order i, f, g, o; weight_ih_l0 [4H, I], weight_hh_l0 [4H, H]):
    i, f, g, o = chunk(W_ih x + b_ih + W_hh h + b_hh, 4)
    c' = sigmoid(f) * c + sigmoid(i) * tanh(g);  h' = sigmoid(o) * tanh(c')
  GRU (gate order r, z, n; weight_ih_l0 [3H, I], weight_hh_l0 [3H, H]):
    r = sigmoid(W_ir x + b_ir + W_hr h + b_hr);  z = sigmoid(W_iz x + b_iz + W_hz h + b_hz)
    n = tanh(W_in x + b_in + r * (W_hn h + b_hn));  h' = (1 - z) * n + z * h

Also samples/charlm.rnn (embedding, two LSTMs, a linear layer, cross entropy
averaged over T and B) against the same LSTM. Each is run with --dtype f64
(tolerance 1e-10) and --dtype f32 (1e-5; the reference runs in float64 on the
float32-rounded params and inputs)."""
import os
import sys

import numpy as np

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numlib as nl  # noqa: E402

SEED = 20240611


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def torch_lstm(x, W_ih, W_hh, b_ih, b_hh, h0, c0):
    """x [T, B, I] -> (y [T, B, H], h_T, c_T), like torch.nn.LSTM(I, H)."""
    H = W_hh.shape[1]
    h, c, ys = h0, c0, []
    for xt in x:
        gates = xt @ W_ih.T + b_ih + h @ W_hh.T + b_hh
        i, f, g, o = (gates[:, k * H:(k + 1) * H] for k in range(4))
        c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
        h = sigmoid(o) * np.tanh(c)
        ys.append(h)
    return np.stack(ys), h, c


def torch_gru(x, W_ih, W_hh, b_ih, b_hh, h0):
    """x [T, B, I] -> (y [T, B, H], h_T), like torch.nn.GRU(I, H)."""
    H = W_hh.shape[1]
    h, ys = h0, []
    for xt in x:
        gi = xt @ W_ih.T + b_ih
        gh = h @ W_hh.T + b_hh
        i_r, i_z, i_n = (gi[:, k * H:(k + 1) * H] for k in range(3))
        h_r, h_z, h_n = (gh[:, k * H:(k + 1) * H] for k in range(3))
        r = sigmoid(i_r + h_r)
        z = sigmoid(i_z + h_z)
        n = np.tanh(i_n + r * h_n)
        h = (1 - z) * n + z * h
        ys.append(h)
    return np.stack(ys), h


def close(name, got, want, tol):
    """|got - want| <= tol * max(1, |want|) elementwise (values here are O(1))."""
    if got is None:
        raise nl.Failure(f"{name}: rnnc wrote no such array")
    if got.shape != want.shape:
        raise nl.Failure(f"{name}: shape {got.shape}, expected {want.shape}")
    err = np.abs(got.astype(np.float64) - want) / np.maximum(1.0, np.abs(want))
    if not np.all(err <= tol):
        k = np.unravel_index(np.argmax(err), err.shape)
        raise nl.Failure(f"{name}: max error {err.max():.3g} > {tol:g} at {k}: rnnc {got[k]!r}, reference {want[k]!r}")
    return float(err.max())


def lstm_case(rnnc, dtype, T, B, I, H, state_form):
    """state_form: 'none' (zero initial states), 'flat' ([B, H]) or 'k' ([1, B, H])."""
    def fn():
        rng = np.random.default_rng(SEED + T * 7 + H)
        ft = np.float32 if dtype == "f32" else np.float64
        k = 1.0 / np.sqrt(H)  # torch's init range
        p = {"W_ih": rng.uniform(-k, k, (4 * H, I)), "W_hh": rng.uniform(-k, k, (4 * H, H)),
             "b_ih": rng.uniform(-k, k, 4 * H), "b_hh": rng.uniform(-k, k, 4 * H)}
        p = {n: (a * 3).astype(ft) for n, a in p.items()}  # larger than init, so the gates are not all ~linear
        x = rng.normal(0, 1, (T, B, I)).astype(ft)
        h0 = rng.normal(0, 0.7, (B, H)).astype(ft)
        c0 = rng.normal(0, 0.7, (B, H)).astype(ft)
        states = {}
        if state_form == "none":
            h0, c0 = np.zeros((B, H)), np.zeros((B, H))
        elif state_form == "flat":
            states = {"h": h0, "c": c0}
        else:
            states = {"h": h0[None], "c": c0[None]}
        d = nl.scratch("lstm")
        try:
            r = nl.Runner(rnnc, os.path.join(nl.SAMPLES, "lstm.rnn"), {"I": I, "H": H}, d)
            res = r.run(p, {"x": x}, states, dtype=dtype)
            f64 = {n: a.astype(np.float64) for n, a in p.items()}
            y, hT, cT = torch_lstm(x.astype(np.float64), f64["W_ih"], f64["W_hh"], f64["b_ih"], f64["b_hh"],
                                   h0.astype(np.float64), c0.astype(np.float64))
            tol = 1e-5 if dtype == "f32" else 1e-10
            want_dtype = np.float32 if dtype == "f32" else np.float64
            if res.output("h") is not None and res.output("h").dtype != want_dtype:
                raise nl.Failure(f"h.npy is {res.output('h').dtype}, expected {want_dtype.__name__} for --dtype {dtype}")
            e = max(close("h (output)", res.output("h"), y, tol), close("final/h", res.final("h"), hT, tol),
                    close("final/c", res.final("c"), cT, tol))
            return f"max err {e:.2g}"
        finally:
            nl.cleanup(d)
    return fn


def gru_case(rnnc, dtype, T, B, I, H, with_state):
    def fn():
        rng = np.random.default_rng(SEED + 1000 + T * 7 + H)
        ft = np.float32 if dtype == "f32" else np.float64
        k = 1.0 / np.sqrt(H)
        p = {"W_ih": rng.uniform(-k, k, (3 * H, I)), "W_hh": rng.uniform(-k, k, (3 * H, H)),
             "b_ih": rng.uniform(-k, k, 3 * H), "b_hh": rng.uniform(-k, k, 3 * H)}
        p = {n: (a * 3).astype(ft) for n, a in p.items()}
        x = rng.normal(0, 1, (T, B, I)).astype(ft)
        h0 = rng.normal(0, 0.7, (B, H)).astype(ft) if with_state else np.zeros((B, H), ft)
        d = nl.scratch("gru")
        try:
            r = nl.Runner(rnnc, os.path.join(nl.SAMPLES, "gru.rnn"), {"I": I, "H": H}, d)
            res = r.run(p, {"x": x}, {"h": h0} if with_state else None, dtype=dtype)
            f64 = {n: a.astype(np.float64) for n, a in p.items()}
            y, hT = torch_gru(x.astype(np.float64), f64["W_ih"], f64["W_hh"], f64["b_ih"], f64["b_hh"],
                              h0.astype(np.float64))
            tol = 1e-5 if dtype == "f32" else 1e-10
            e = max(close("h (output)", res.output("h"), y, tol), close("final/h", res.final("h"), hT, tol))
            return f"max err {e:.2g}"
        finally:
            nl.cleanup(d)
    return fn


def charlm_case(rnnc, dtype):
    """samples/charlm.rnn: emb -> LSTM(H=256) -> LSTM(H=256) -> W_out h2 + b_out, mean cross entropy."""
    def fn():
        V, E, H, T, B = 7, 5, 256, 4, 3
        rng = np.random.default_rng(SEED + 77)
        ft = np.float32 if dtype == "f32" else np.float64
        k = 1.0 / np.sqrt(H)
        p = {"emb": rng.normal(0, 1, (V, E)), "W_out": rng.uniform(-k, k, (V, H)) * 3, "b_out": rng.uniform(-k, k, V)}
        for l, I in (("h1", E), ("h2", H)):
            p[f"{l}.W_ih"] = rng.uniform(-k, k, (4 * H, I)) * 2
            p[f"{l}.W_hh"] = rng.uniform(-k, k, (4 * H, H)) * 2
            p[f"{l}.b_ih"] = rng.uniform(-k, k, 4 * H)
            p[f"{l}.b_hh"] = rng.uniform(-k, k, 4 * H)
        p = {n: a.astype(ft) for n, a in p.items()}
        tok = rng.integers(0, V, (T, B)).astype(np.int64)
        target = rng.integers(0, V, (T, B)).astype(np.int64)
        st = {f"{l}.{s}": rng.normal(0, 0.5, (B, H)).astype(ft) for l in ("h1", "h2") for s in ("h", "c")}
        d = nl.scratch("charlm")
        try:
            r = nl.Runner(rnnc, os.path.join(nl.SAMPLES, "charlm.rnn"), {"V": V, "E": E}, d)
            res = r.run(p, {"tok": tok, "target": target}, st, dtype=dtype)
            q = {n: a.astype(np.float64) for n, a in p.items()}
            s = {n: a.astype(np.float64) for n, a in st.items()}
            x = q["emb"][tok]
            y1, h1T, c1T = torch_lstm(x, q["h1.W_ih"], q["h1.W_hh"], q["h1.b_ih"], q["h1.b_hh"], s["h1.h"], s["h1.c"])
            y2, h2T, c2T = torch_lstm(y1, q["h2.W_ih"], q["h2.W_hh"], q["h2.b_ih"], q["h2.b_hh"], s["h2.h"], s["h2.c"])
            logits = y2 @ q["W_out"].T + q["b_out"]
            m = logits.max(-1, keepdims=True)
            lse = (m + np.log(np.exp(logits - m).sum(-1, keepdims=True)))[..., 0]
            ce = lse - np.take_along_axis(logits, target[..., None], -1)[..., 0]
            loss = ce.mean()  # torch.nn.CrossEntropyLoss(reduction='mean') over T*B
            tol = 1e-5 if dtype == "f32" else 1e-10
            e = max(close("logits", res.output("logits"), logits, tol),
                    close("loss", None if res.loss() is None else np.array(res.loss()), np.array(loss), tol),
                    close("final/h1.h", res.final("h1.h"), h1T, tol), close("final/h1.c", res.final("h1.c"), c1T, tol),
                    close("final/h2.h", res.final("h2.h"), h2T, tol), close("final/h2.c", res.final("h2.c"), c2T, tol))
            return f"max err {e:.2g}"
        finally:
            nl.cleanup(d)
    return fn


OPS_RNN = """\
# Small models for torch's definitions of single builtins (written by test_torch_semantics.py).
model Embed(tok: index[7]) -> x {
  param emb: [7, 3]
  x = embed(emb, tok)
}

model CE(z: [6], target: index[6]) -> z {
  loss = cross_entropy(z, target)
}

model MSE(a: [4], b: [4]) -> a {
  loss = mse(a, b)
}

model HardSigmoid(x: [5]) -> y {
  y = hard_sigmoid(x)
}
"""


def op_case(rnnc, dtype, entry):
    """torch.nn.Embedding, CrossEntropyLoss (mean), MSELoss (mean), Hardsigmoid."""
    def fn():
        rng = np.random.default_rng(SEED + 5)
        ft = np.float32 if dtype == "f32" else np.float64
        T, B = 4, 3
        d = nl.scratch("ops")
        try:
            path = os.path.join(d, "ops.rnn")
            with open(path, "w") as f:
                f.write(OPS_RNN)
            r = nl.Runner(rnnc, path, {}, d, extra=["--entry", entry])
            tol = 1e-5 if dtype == "f32" else 1e-10
            if entry == "Embed":
                emb = rng.normal(0, 1, (7, 3)).astype(ft)
                tok = rng.permutation(np.arange(T * B) % 7).reshape(T, B).astype(np.int64)
                res = r.run({"emb": emb}, {"tok": tok}, dtype=dtype)
                e = close("x = embed(emb, tok)", res.output("x"), emb.astype(np.float64)[tok], tol)
                res = r.run({"emb": emb}, {"tok": tok.astype(np.int32)}, dtype=dtype)
                e = max(e, close("x = embed(emb, tok) (int32 tok)", res.output("x"), emb.astype(np.float64)[tok], tol))
            elif entry == "CE":
                z = rng.normal(0, 2, (T, B, 6)).astype(ft)
                tgt = rng.permutation(np.arange(T * B) % 6).reshape(T, B).astype(np.int64)
                res = r.run({}, {"z": z, "target": tgt}, dtype=dtype)
                zz = z.astype(np.float64)
                ce = np.log(np.exp(zz).sum(-1)) - np.take_along_axis(zz, tgt[..., None], -1)[..., 0]
                e = close("loss = cross_entropy(z, target)", np.array(res.loss()), np.array(ce.mean()), tol)
            elif entry == "MSE":
                a = rng.normal(0, 1, (T, B, 4)).astype(ft)
                b = rng.normal(0, 1, (T, B, 4)).astype(ft)
                res = r.run({}, {"a": a, "b": b}, dtype=dtype)
                want = ((a.astype(np.float64) - b) ** 2).mean()
                e = close("loss = mse(a, b)", np.array(res.loss()), np.array(want), tol)
            else:
                x = np.concatenate([rng.normal(0, 3, (T, B, 3)), np.full((T, B, 2), 4.0) * rng.choice([-1, 1], (T, B, 2))],
                                   -1).astype(ft)
                res = r.run({}, {"x": x}, dtype=dtype)
                want = np.clip(x.astype(np.float64) / 6 + 0.5, 0, 1)  # torch.nn.functional.hardsigmoid
                e = close("y = hard_sigmoid(x)", res.output("y"), want, tol)
            return f"max err {e:.2g}"
        finally:
            nl.cleanup(d)
    return fn


def cases(rnnc):
    out = []
    for dtype in ("f64", "f32"):
        out += [
            (f"torch/lstm/{dtype}/T6B3I5H7/state", lstm_case(rnnc, dtype, 6, 3, 5, 7, "flat")),
            (f"torch/lstm/{dtype}/T5B2I3H4/state[k,B,n]", lstm_case(rnnc, dtype, 5, 2, 3, 4, "k")),
            (f"torch/lstm/{dtype}/T4B2I4H3/zero-state", lstm_case(rnnc, dtype, 4, 2, 4, 3, "none")),
            (f"torch/lstm/{dtype}/T3B4I8H16/state", lstm_case(rnnc, dtype, 3, 4, 8, 16, "flat")),
            (f"torch/gru/{dtype}/T6B3I5H7/state", gru_case(rnnc, dtype, 6, 3, 5, 7, True)),
            (f"torch/gru/{dtype}/T4B2I3H4/zero-state", gru_case(rnnc, dtype, 4, 2, 3, 4, False)),
            (f"torch/gru/{dtype}/T3B4I8H16/state", gru_case(rnnc, dtype, 3, 4, 8, 16, True)),
            (f"torch/charlm/{dtype}", charlm_case(rnnc, dtype)),
        ]
        out += [(f"torch/op/{e}/{dtype}", op_case(rnnc, dtype, e)) for e in ("Embed", "CE", "MSE", "HardSigmoid")]
    return out


def main():
    return nl.main_for(cases)


if __name__ == "__main__":
    sys.exit(main())
