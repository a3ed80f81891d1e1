#!/usr/bin/env python3
"""Directional-derivative check of rnnc's backward, in f64: for a random
direction V over all params, float inputs and initial states,

    (L(p + eps V) - L(p - eps V)) / (2 eps)  ~  <grad L, V>,    eps = 1e-6,

to 1e-6 relative (or 1e-9 * S absolute, S the size of the terms of L), on
every sample (samples/*.rnn, small dims) and on GEN_CELLS randomly generated
cells. The objective is the loss (`--grad` alone) when there is one, else
sum <Y, DY> over the outputs with random DY.

The generator (class Gen) writes well-formed cells by construction: compound
expressions of the pointwise builtins (sigmoid tanh softplus silu sqrt log exp
-, and rarely the kinked relu abs hard_sigmoid), + - * /, min/max, scalar
literals and broadcasts, matmuls with (sometimes shared) params, vector
params, sum, mean, concat, split, a layer norm; states read at t-1..t-3 (h, an
LSTM-like c, extra named states s0, s1), an input read as x[t-1] or x[t+1],
cells that run backward in time (h[t+1]), an index input through embed,
losses (mse, cross_entropy, a custom scalar), and models around the cell (one
instance, two side by side, or one fed back its model's output y[t-1]).
T and B vary per cell (T 1..6, B 1..3). A cell rnnc rejects (exit 1) is
skipped and counted; at least 80% must be accepted.

Forward, too: a generated cell that is not wrapped in a model, and every
sample made of one cell, is also evaluated by eval_cell, an independent numpy
evaluator that reads the cell's text; rnnc's outputs, loss and final states
must match it to 1e-10.

Environment: RNNC_NUMERIC_GEN=N cells (default 60), RNNC_NUMERIC_GEN_SEED=S
(default 4242) for other cells, RNNC_NUMERIC_SHOW=1 prints every cell,
RNNC_NUMERIC_KEEP=1 keeps the scratch folders."""
import os
import re
import subprocess
import sys
import zlib

import numpy as np

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numlib as nl  # noqa: E402

EPS, RTOL, ATOL, T, B = nl.EPS, nl.RTOL, nl.ATOL, nl.T, nl.B
GEN_CELLS = int(os.environ.get("RNNC_NUMERIC_GEN", "60"))
GEN_MIN_ACCEPTED = 0.8  # fraction of generated cells rnnc must accept
SEED = int(os.environ.get("RNNC_NUMERIC_GEN_SEED", "4242"))


# ---------------------------------------------------------------- the generator

class Gen:
    """Builds the text of one random, well-formed cell (and maybe a model
    around it). Every value has a width and a rough magnitude bound `mag`, so
    exp and products stay finite; kinks (relu, abs, hard_sigmoid, min, max) are
    rare and crossing one within eps is unlikely."""

    def __init__(self, rng, k):
        self.rng, self.k = rng, k
        self.lines, self.pool, self.params, self.nv = [], [], {}, 0

    def r(self, n):
        return int(self.rng.integers(n))

    def chance(self, p):
        return self.rng.random() < p

    def choice(self, seq):
        return seq[self.r(len(seq))]

    def param(self, shape, share=0.0):
        """A new param, or (with probability `share`) one already declared with this shape."""
        shape = tuple(shape)
        same = [n for n, s in self.params.items() if s == shape]
        if same and self.chance(share):
            return self.choice(same)
        name = f"P{len(self.params) + 1}"
        self.params[name] = shape
        self.lines.append(f"param {name}: [{', '.join(map(str, shape))}]")
        return name

    def assign(self, expr, width, mag, names=None):
        if names is None:
            self.nv += 1
            name = f"v{self.nv}"
            self.lines.append(f"{name} = {expr}")
            self.pool.append((name, width, min(mag, 1e6)))
            return name
        self.lines.append(f"{', '.join(names)} = {expr}")
        for n in names:
            self.pool.append((n, width, mag))
        return names

    def pick(self, width=None, max_mag=None, recent=True):
        """A pool value (recent ones more likely), optionally of a given width."""
        cands = [p for p in self.pool if (width is None or p[1] == width) and (max_mag is None or p[2] <= max_mag)]
        if not cands:
            return None
        w = np.arange(1, len(cands) + 1, dtype=float) ** (2 if recent else 0)
        return cands[int(self.rng.choice(len(cands), p=w / w.sum()))]

    # -- expressions: (text, width, mag); every compound one parenthesized

    def leaf(self, w=None):
        if w == 1 and self.chance(0.3):
            c = round(float(self.rng.uniform(0.2, 1.5)), 3)
            return (str(c), 1, c)
        v = self.pick(width=w)
        if v is not None:
            return v
        if w is None:
            return self.pick()
        # No value of that width: project one.
        u = self.pick(max_mag=10) or self.pick()
        P = self.param([w, u[1]], share=0.5)
        return (f"({P} @ {u[0]})", w, 2 * u[2] + 1)

    def unary(self, e):
        text, w, m = e
        ops = [("sigmoid({})", 1.0), ("tanh({})", 1.0), ("softplus({})", m + 1), ("silu({})", m + 0.3),
               ("sqrt(softplus({}) + 1)", np.sqrt(m + 2)), ("log(softplus({}) + 1)", np.log(m + 2)),
               ("(-{})", m), ("hard_sigmoid({})", 1.0), ("relu({})", m), ("abs({})", m)]
        weights = [3, 3, 2, 2, 2, 1, 1, 0.5, 0.4, 0.3]  # kinks (hard_sigmoid, relu, abs) rarely
        if m <= 6:
            ops.append(("exp(0.5 * {})", float(np.exp(0.5 * m))))
            weights.append(2)
        weights = np.array(weights) / sum(weights)
        f, mag = ops[int(self.rng.choice(len(ops), p=weights))]
        return (f.format(text), w, mag)

    def expr(self, depth, w=None):
        """A random expression of width w (any when None)."""
        if depth <= 0 or self.chance(0.25):
            return self.leaf(w)
        kind = self.choice(["unary", "unary", "binary", "binary", "scalar", "matmul", "vec", "minmax", "div",
                            "reduce", "concat"])
        if kind == "reduce" and w not in (None, 1):
            kind = "scalar"
        if kind == "concat" and (w is not None and w < 2):
            kind = "unary"
        if kind == "unary":
            return self.unary(self.expr(depth - 1, w))
        if kind in ("binary", "minmax", "div"):
            a = self.expr(depth - 1, w)
            b = self.expr(depth - 1, a[1]) if self.chance(0.8) else self.leaf(1)
            if kind == "minmax":
                if b[0] == a[0]:  # min(a, a): a tie everywhere, a kink
                    b = (str(round(float(self.rng.uniform(-0.5, 0.5)), 3)), 1, 0.5)
                return (f"{self.choice(['min', 'max'])}({a[0]}, {b[0]})", a[1], max(a[2], b[2]))
            if kind == "div":
                return (f"({a[0]} / (1.5 + tanh({b[0]})))", a[1], 2 * a[2])
            op = self.choice(["+", "-", "*"] if a[2] * b[2] <= 30 else ["+", "-"])
            if self.chance(0.3) and b[1] == a[1]:
                a, b = b, a
            return (f"({a[0]} {op} {b[0]})", a[1], a[2] * b[2] if op == "*" else a[2] + b[2])
        if kind == "scalar":
            a = self.expr(depth - 1, w)
            c = round(float(self.rng.uniform(-1.5, 1.5)), 3)
            form = self.choice(["({} * {})", "({} + {})", "({1} - {0})", "({} / {})"])
            if form == "({} / {})":
                c = round(float(self.rng.uniform(0.5, 2.0)), 3)
            return (form.format(a[0], c), a[1], a[2] * 1.5 + 1.5)
        if kind == "matmul":
            u = self.expr(depth - 1)
            if u[2] > 20:
                u = (f"tanh({u[0]})", u[1], 1.0)
            rows = w or self.choice([self.H, 2 * self.H, 3, 4, 6])
            P = self.param([rows, u[1]], share=0.4)
            text = f"{P} @ {u[0]}"
            if self.chance(0.4):
                text += f" + {self.param([rows], share=0.2)}"
            return (f"({text})", rows, 2 * u[2] + 1)
        if kind == "vec":
            a = self.expr(depth - 1, w)
            p = self.param([a[1]], share=0.3)
            return (f"({p} * {a[0]})", a[1], a[2])
        if kind == "reduce":
            a = self.expr(depth - 1)
            if self.chance(0.5) or a[1] * a[2] > 30:
                return (f"mean({a[0]})", 1, a[2])
            return (f"sum({a[0]})", 1, a[1] * a[2])
        # concat
        if w is None:
            a, b = self.expr(depth - 1), self.expr(depth - 1)
        else:
            w1 = 1 + self.r(w - 1)
            a, b = self.expr(depth - 1, w1), self.expr(depth - 1, w - w1)
        return (f"concat({a[0]}, {b[0]})", a[1] + b[1], max(a[2], b[2]))

    def statement(self):
        k = self.r(10)
        if k < 7:
            e = self.expr(1 + self.r(3))
            if e[2] > 100:
                e = (f"tanh({e[0]})", e[1], 1.0)
            return self.assign(e[0], e[1], e[2])
        if k < 9:  # split
            cands = [p for p in self.pool if p[1] >= 2 and (p[1] % 2 == 0 or p[1] % 3 == 0)]
            if not cands:
                return self.assign(*self.expr(2))
            v = cands[-1 - self.r(min(3, len(cands)))]
            n = 2 if v[1] % 2 == 0 else 3
            if v[1] % 6 == 0 and self.chance(0.5):
                n = 3
            names = []
            for _ in range(n):
                self.nv += 1
                names.append(f"v{self.nv}")
            return self.assign(f"split({v[0]}, {n})", v[1] // n, v[2], names)
        # layer norm: the scalars broadcast back
        v = self.pick()
        if v[1] < 2:
            return self.assign(*self.unary(v))
        d = self.assign(f"{v[0]} - mean({v[0]})", v[1], 2 * v[2])
        return self.assign(f"{d} / sqrt(mean({d} * {d}) + 1)", v[1], v[1] ** 0.5)

    def build(self):
        rng = self.rng
        k = self.k
        self.H = H = int(rng.integers(2, 5))
        I = int(rng.integers(2, 5))
        sign = "+" if self.chance(0.15) else "-"  # a cell running backward in time reads h[t+1]
        wrap = self.choice([None, None, None, "one", "two"])
        # Feedback through a model (the cell reads the model's output one step
        # back) needs every offset read in the cell to look back too.
        feedback = wrap == "one" and sign == "-" and self.chance(0.4)
        ports = [("x", I)]
        if self.chance(0.4):
            ports.append(("u", int(rng.integers(1, 4))))
        tok = self.chance(0.08)  # an index input through embed (see the known-issues note in the report)
        for n, w in ports:
            self.pool.append((n, w, 3.0))
        if tok:
            ports.append(("tok", -5))
        has_c = self.chance(0.4)
        Hc = int(rng.integers(2, 4))
        d1 = "h[t" + sign + "1]"
        states = [(d1, H, 1.0)]
        for d in (2, 3):
            if self.chance(0.3):
                states.append((f"h[t{sign}{d}]", H, 1.0))
        if has_c:
            states.append((f"c[t{sign}1]", Hc, 3.0))
        if self.chance(0.25):
            states.append((f"x[t{'-' if feedback else self.choice(['-', '+'])}1]", I, 3.0))
        extra = []  # more states: named values read before they are defined
        for j in range(self.choice([0, 0, 1, 2])):
            ws = int(rng.integers(1, 4))
            extra.append((f"s{j}", ws))
            for d in sorted({1 + self.r(3), 1 + self.r(3)}):
                states.append((f"s{j}[t{sign}{d}]", ws, 2.0))
        # First: the classic W x + U h[t-1] (+ b), so the cell is recurrent.
        W, U = self.param([H, I]), self.param([H, H])
        b = self.param([H])
        self.assign(f"{W} @ x + {b} + {U} @ {d1}" if self.chance(0.5) else f"{U} @ {d1} + {W} @ x + {b}", H, 6.0)
        self.pool.extend(states)
        if tok:
            self.lines.append(f"param E: [5, 3]")
            self.lines.append("e = embed(E, tok)")
            self.pool.append(("e", 3, 3.0))
        for _ in range(int(rng.integers(3, 9))):
            self.statement()
        # The states: h (and c) from recent values, and from every port and
        # v1 not read yet (so every input reaches the outputs).
        v = self.pick()
        Wh = self.param([H, v[1]])
        bh = self.param([H])
        first = next(i for i, l in enumerate(self.lines) if l.startswith("v1 ="))
        used = " ".join(self.lines[first + 1:])
        for n, w in [(n, w) for n, w in ports if w > 0] + [("v1", H)] + ([("e", 3)] if tok else []):
            if n != v[0] and not re.search(rf"\b{n}\b", used.replace("e = embed", "")):
                bh += f" + {self.param([H, w])} @ {n}"
        if self.chance(0.5):
            z = self.pick()
            Wz = self.param([H, z[1]])
            self.lines.append(f"z = sigmoid({Wz} @ {z[0]})")
            self.lines.append(f"h = z * {d1} + (1 - z) * tanh({Wh} @ {v[0]} + {bh})")
        else:
            self.lines.append(f"h = tanh({Wh} @ {v[0]} + {bh})")
        if has_c:
            a = self.pick()
            Wf = self.param([Hc, a[1]])
            Wc = self.param([Hc, H])
            self.lines.append(f"c = sigmoid({Wf} @ {a[0]}) * c[t{sign}1] + tanh({Wc} @ h)")
        for n, ws in extra:
            # A matmul gives the state its width (a value computed only from
            # its own earlier steps has none).
            e = self.expr(2)
            if e[2] > 20:
                e = (f"tanh({e[0]})", e[1], 1.0)
            P = self.param([ws, e[1]])
            if ws == 1 or self.chance(0.5):
                # (0.5 * s[t-1] + a scalar would leave a width-1 s ambiguous: the scalar broadcasts)
                self.lines.append(f"{n} = tanh({P} @ {e[0]})")
            else:
                self.lines.append(f"{n} = 0.5 * {n}[t{sign}{1 + self.r(2)}] + sigmoid({P} @ {e[0]})")
        y = self.pool[-1]
        if y[0].startswith("v") and y[2] > 50:
            y = (self.assign(f"tanh({y[0]})", y[1], 1.0), y[1], 1.0)
        outs = ["h"] + (["c"] if has_c and self.chance(0.5) else []) + ([y[0]] if y[0].startswith("v") else [])
        if self.chance(0.1):
            outs.append("x")  # a port as an output: a pass-through
        loss = self.chance(0.25) and y[0].startswith("v")
        if loss and not wrap:
            if self.chance(0.3) and y[1] >= 2:
                ports.append(("label", -y[1]))
                self.lines.append(f"loss = cross_entropy({y[0]}, label)")
            elif self.chance(0.5):
                ports.append(("target", y[1]))
                self.lines.append(f"loss = mse({y[0]}, target)")
            else:
                self.lines.append(f"loss = mean({y[0]} * {y[0]}) + sum(tanh(h))")

        def sig(ps):
            return ", ".join(f"{n}: index[{-w}]" if w < 0 else f"{n}: [{w}]" for n, w in ps)
        body = "\n".join("  " + l for l in self.lines)
        text = f"# generated by tests/numeric/test_directional.py: cell {k}\n"
        text += f"cell Gen{k}({sig(ports)}) -> {', '.join(outs)} {{\n{body}\n}}\n"
        entry = f"Gen{k}"
        if wrap:
            # A model around the cell (one instance, or two side by side on the
            # same inputs): instance params and states get a prefix.
            outw = {"h": H, "c": Hc, "x": I}
            mb, inst = [], []
            args = ", ".join(n for n, _ in ports)
            if feedback:
                # Feedback through the model: the instance reads the model's own output one step back.
                mb += [f"param Wf: [{I}, 3]", "xin = x + Wf @ y[t-1]"]
                args = ", ".join("xin" if n == "x" else n for n, _ in ports)
            for j in range(1 if wrap == "one" else 2):
                names = [f"o{j}_{i}" for i in range(len(outs))]
                mb.append(f"{', '.join(names)} = Gen{k}({args})")
                inst += names
            widths = sum(outw.get(o, y[1]) for o in outs) * (1 if wrap == "one" else 2)
            mb += [f"param Wo: [3, {widths}]", "param bo: [3]", f"y = Wo @ concat({', '.join(inst)}) + bo"]
            mports = list(ports)
            if loss:
                mports.append(("target", 3))
                mb.append("loss = mse(y, target)")
            text += f"\nmodel GenModel{k}({sig(mports)}) -> y {{\n" + "\n".join("  " + l for l in mb) + "\n}\n"
            entry = f"GenModel{k}"
        widths = {"h": H, "c": Hc, **{n: w for n, w in ports if w > 0}, **dict(extra)}
        return text, entry, {"widths": widths, "wrapped": bool(wrap)}


def gen_cell(seed, k):
    """(text, entry, meta): meta has the widths of the states and ports, and
    whether a model wraps the cell."""
    return Gen(np.random.default_rng(seed), k).build()


# ---------------------------------------------------------------- an independent forward evaluator

def _softplus(v):
    v = np.asarray(v, dtype=float)
    return np.where(v > 20, v, np.log1p(np.exp(np.minimum(v, 20))))  # torch.nn.functional.softplus (threshold 20)


def _sigmoid(v):
    return 1.0 / (1.0 + np.exp(-np.asarray(v, dtype=float)))


def _scalar(x):
    return np.array([float(x)])


def _ce(z, idx):
    z = np.asarray(z, dtype=float)
    m = z.max()
    return _scalar(m + np.log(np.exp(z - m).sum()) - z[int(idx)])


BUILTINS = {
    "sigmoid": _sigmoid, "tanh": np.tanh, "relu": lambda v: np.maximum(v, 0.0), "exp": np.exp, "log": np.log,
    "softplus": _softplus, "sqrt": np.sqrt, "abs": np.abs, "hard_sigmoid": lambda v: np.clip(np.asarray(v) / 6 + 0.5, 0, 1),
    "silu": lambda v: v * _sigmoid(v), "min": np.minimum, "max": np.maximum,
    "sum": lambda v: _scalar(np.sum(v)), "mean": lambda v: _scalar(np.mean(v)),
    "concat": lambda *a: np.concatenate([np.atleast_1d(np.asarray(x, dtype=float)) for x in a]),
    "embed": lambda table, idx: table[int(idx)], "cross_entropy": _ce,
    "mse": lambda a, b: _scalar(np.mean((np.asarray(a) - np.asarray(b)) ** 2)),
    # Evaluation mode (rnnc run's default): dropout is the identity, zoneout its expectation.
    "dropout": lambda x, p, per=None: x, "zoneout": lambda new, old, p: p * old + (1 - p) * new,
    "step": None, "sequence": None,  # dropout's per = step | sequence
}


def eval_cell(text, widths, params, inputs, states, T, B):
    """Evaluates a generated cell (one `cell`, no model) with numpy, step by
    step, straight from its text: the .rnn expressions of the generator are
    Python expressions once `v[t-k]` becomes a read of step t-k. Returns
    (outputs, loss or None, final states)."""
    m = re.search(r"cell \w+\((.*?)\) -> (.*?) \{\n(.*?)\n\}", text, re.S)
    port_names = [p.split(":")[0].strip() for p in m.group(1).split(",")]
    outs = [o.strip() for o in m.group(2).split(",")]
    stmts = []  # (names, code, split count)
    reads = re.compile(r"\b([A-Za-z_]\w*)\[t([+-])(\d+)\]")
    backward = False
    for line in m.group(3).splitlines():
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith("param") or line.startswith("#"):
            continue
        lhs, rhs = (x.strip() for x in line.split("=", 1))
        for name, sign, k in reads.findall(rhs):
            backward |= sign == "+" and name not in port_names
        n = None
        sm = re.fullmatch(r"split\((.*), (\d+)\)", rhs)
        if sm:
            rhs, n = sm.group(1), int(sm.group(2))
        code = compile(reads.sub(lambda r: f"__rd('{r.group(1)}', {'-' if r.group(2) == '+' else ''}{r.group(3)})", rhs),
                       "<cell>", "eval")
        stmts.append(([x.strip() for x in lhs.split(",")], code, n))
    # The states are those rnnc reports (a read in dead code is no state);
    # their depth is that of the arrays given.
    depth = {n: (a.shape[0] if a.ndim == 3 else 1) for n, a in states.items()}
    vals = {}  # name -> [T, B, w]

    def value(name, s, b):
        if 0 <= s < T:
            if name in inputs:
                return inputs[name][s, b]
            return vals[name][s, b]
        if s < 0 and name in states:
            st = states[name]
            st = st[None] if st.ndim == 2 else st
            if s >= -st.shape[0]:
                return st[st.shape[0] + s, b]
        return np.zeros(widths[name])

    loss = 0.0
    for step in range(T):
        t = T - 1 - step if backward else step
        for b in range(B):
            env = dict(BUILTINS)
            env.update(params)
            env.update({n: inputs[n][t, b] for n in port_names})
            env["__rd"] = lambda name, d, t=t, b=b: value(name, t - d, b)
            for names, code, n in stmts:
                v = eval(code, env)
                parts = np.split(np.atleast_1d(v), n) if n else [np.atleast_1d(np.asarray(v, dtype=float))]
                for name, part in zip(names, parts):
                    env[name] = part
                    if name == "loss":
                        loss += float(part[0])
                        continue
                    if name not in vals:
                        vals[name] = np.zeros((T, B, len(part)))
                    vals[name][t, b] = part
    outputs = {o: (inputs[o] if o in inputs else vals[o]) for o in outs}
    finals = {}
    for name, k in depth.items():
        cur = inputs[name] if name in inputs else vals[name]
        init = states.get(name, np.zeros((k, B, cur.shape[2])))
        init = init[None] if init.ndim == 2 else init
        full = np.concatenate([np.zeros((k - init.shape[0], B, cur.shape[2])), init, cur])[-k:]
        finals[name] = full[0] if k == 1 else full
    has_loss = any("loss" in names for names, _, _ in stmts)
    return outputs, (loss / (T * B) if has_loss else None), finals


def forward_check(text, widths):
    """A check for directional(): rnnc's outputs, loss and final states equal eval_cell's."""
    def check(params, inputs, states, res, T, B):
        outputs, loss, finals = eval_cell(text, widths, params, inputs, states, T, B)
        got = [(f"{n}.npy", res.output(n), v) for n, v in outputs.items()]
        got += [(f"final/{n}.npy", res.final(n), v) for n, v in finals.items()]
        if loss is not None:
            got.append(("loss.npy", None if res.loss() is None else np.array(res.loss()), np.array(loss)))
        worst = 0.0
        for what, a, want in got:
            if a is None or a.shape != want.shape:
                raise nl.Failure(f"forward: {what} is {None if a is None else a.shape}, the numpy evaluation gives "
                                 f"{want.shape}")
            err = np.abs(a - want) / (1 + np.abs(want))
            if not np.all(err <= 1e-10):
                i = np.unravel_index(np.argmax(err), err.shape)
                raise nl.Failure(f"forward (T={T} B={B}): {what}{list(map(int, i))} is {a[i]!r}, the numpy evaluation "
                                 f"of the cell gives {want[i]!r}")
            worst = max(worst, float(err.max()) if err.size else 0.0)
        return f"forward matches numpy (max err {worst:.1g})"
    return check


# ---------------------------------------------------------------- the check

def directional(rnnc, path, dims, seed, entry=None, T=T, B=B, check=None, engine=None, env=None):
    """Returns a note; raises nl.Failure on a mismatch. check(params, inputs,
    states, result, T, B), when given, checks the forward results too.
    engine: rnnc's --engine (default interp; test_compiled checks `compiled`);
    env: the environment of the rnnc runs (None: this process's)."""
    work = nl.scratch("dir")
    try:
        extra = ["--entry", entry] if entry else []
        p = subprocess.run([rnnc, "show", path, "--params", *nl.dim_args(dims), *extra],
                                         capture_output=True, text=True)
        if p.returncode != 0:
            raise nl.Failure(f"rnnc show --params exited {p.returncode}: {p.stderr.strip()}")
        info = nl.Info(p.stdout)
        rng = np.random.default_rng(seed)
        runner = nl.Runner(rnnc, path, dims, work, extra + ["--engine", engine or "interp"], env=env)
        params = nl.random_params(info, rng)
        inputs = nl.random_inputs(info, rng, T, B)
        first = runner.run(params, inputs)
        use_loss = first.loss() is not None
        states = {n: rng.normal(0.0, 0.5, first.final(n).shape) for n in first.final_names()}
        dy = None if use_loss else {n: rng.normal(0.0, 1.0, (T, B, w)) for n, w in info.outputs}
        g = runner.run(params, inputs, states, grad={} if use_loss else dy)
        L0 = nl.objective(info, g, dy)
        scale = nl.objective_scale(g, dy)
        if not np.isfinite(L0):
            raise nl.Failure(f"the objective is not finite: {L0}")
        note = check(params, inputs, states, g, T, B) + "; " if check else ""

        # The direction, and <grad, V>.
        Vp = {n: rng.normal(0.0, 1.0, a.shape) for n, a in params.items()}
        Vx = {n: rng.normal(0.0, 1.0, inputs[n].shape) for n in nl.float_inputs(info)}
        Vs = {n: rng.normal(0.0, 1.0, a.shape) for n, a in states.items()}
        dot, missing, absent = 0.0, [], []
        for src, V, get in ((params, Vp, g.grad), (inputs, Vx, g.grad), (states, Vs, g.grad_initial)):
            for n, v in V.items():
                a = get(n)
                where = "grad/initial" if get == g.grad_initial else "grad"
                if a is None:
                    # Not written: read as zero (the check of test_gradients.py,
                    # grad/files/unreached, asks for the file); a real
                    # dependence shows up as a mismatch below.
                    absent.append(f"{where}/{n}")
                    continue
                if a.shape != v.shape:
                    missing.append(f"{where}/{n}.npy: shape {a.shape}, expected {v.shape}")
                    continue
                dot += float(np.sum(a * v))
        Ls = []
        for sgn in (1, -1):
            Ls.append(nl.objective(info, runner.run({n: a + sgn * EPS * Vp[n] for n, a in params.items()},
                                                    {n: a + sgn * EPS * Vx[n] if n in Vx else a for n, a in inputs.items()},
                                                    {n: a + sgn * EPS * Vs[n] for n, a in states.items()}), dy))
        fd = (Ls[0] - Ls[1]) / (2 * EPS)
        err = nl.rel_err(dot, fd)
        obj = "loss (--grad)" if use_loss else "sum <Y, DY>"
        if missing or not (err <= RTOL or abs(dot - fd) <= ATOL * scale):
            raise nl.Failure(f"objective {obj}, T={T} B={B}, seed {seed}: <grad, V> = {dot:.12g}, "
                             f"finite difference {fd:.12g} (rel err {err:.3g})" + "".join("\n" + m for m in missing)
                             + (f"\n(not written, read as zero: {', '.join(absent)})" if absent else ""))
        return note + f"{obj}: <grad,V> {dot:.6g}, rel err {err:.2g}" + \
            (f" (not written: {', '.join(absent)})" if absent else "")
    finally:
        nl.cleanup(work)


def sample_case(rnnc, path):
    def fn():
        dims, _ = nl.small_dims(rnnc, path)
        name = os.path.basename(path)
        with open(path) as f:
            text = f.read()
        # A file with one cell (no model, no import) is also evaluated by eval_cell.
        single = len(re.findall(r"^cell ", text, re.M)) == 1 and not re.search(r"^(model|import) ", text, re.M)
        try:
            return directional(rnnc, path, dims, zlib.crc32(b"dir:" + name.encode()),
                               check=forward_check(text, {}) if single else None)
        except nl.Failure as e:
            raise nl.Failure(f"{os.path.relpath(path, nl.ROOT)} with {' '.join(nl.dim_args(dims))}: {e}")
    return fn


class GenStats:
    def __init__(self):
        self.accepted, self.rejected, self.rejections = 0, 0, []


def gen_case(rnnc, k, stats, gendir):
    def fn():
        text, entry, meta = gen_cell(SEED + k, k)
        path = os.path.join(gendir, f"gen{k}.rnn")
        with open(path, "w") as f:
            f.write(text)
        if os.environ.get("RNNC_NUMERIC_SHOW"):
            print(text)
        p = subprocess.run([rnnc, "check", path], capture_output=True, text=True)
        if p.returncode == 1:
            stats.rejected += 1
            stats.rejections.append((k, p.stderr.strip().splitlines()[0] if p.stderr.strip() else "", text))
            return "rejected by rnnc check (exit 1), skipped"
        if p.returncode != 0:
            raise nl.Failure(f"rnnc check exited {p.returncode}: {p.stderr.strip()}\n--- the cell:\n{text}")
        stats.accepted += 1
        try:
            r = np.random.default_rng(SEED + 2000 + k)
            check = None if meta["wrapped"] else forward_check(text, meta["widths"])
            return directional(rnnc, path, {}, SEED + 1000 + k, entry, T=int(r.choice([1, 2, 4, 4, 6])),
                               B=int(r.choice([1, 2, 3])), check=check)
        except nl.Failure as e:
            raise nl.Failure(f"{e}\n--- the cell ({path}, --entry {entry}):\n{text}")
    return fn


def cases(rnnc):
    out = []
    samples = sorted(os.path.join(nl.SAMPLES, f) for f in os.listdir(nl.SAMPLES) if f.endswith(".rnn"))
    for p in samples:
        out.append((f"directional/{os.path.basename(p)[:-4]}", sample_case(rnnc, p)))
    stats = GenStats()
    gendir = nl.scratch("gen")
    for k in range(GEN_CELLS):
        out.append((f"directional/gen{k}", gen_case(rnnc, k, stats, gendir)))

    def accepted():
        n = stats.accepted + stats.rejected
        msg = f"{stats.accepted} of {n} generated cells accepted"
        nl.cleanup(gendir)
        if n != GEN_CELLS or stats.accepted < GEN_MIN_ACCEPTED * GEN_CELLS:
            detail = "".join(f"\n  gen{k}: {first}" for k, first, _ in stats.rejections)
            raise nl.Failure(msg + f"; at least {GEN_MIN_ACCEPTED:.0%} must be" + detail +
                             (f"\n--- first rejected cell:\n{stats.rejections[0][2]}" if stats.rejections else ""))
        return msg + "".join(f"; gen{k} rejected: {first}" for k, first, _ in stats.rejections)
    out.append(("directional/generated-accepted", accepted, "after"))
    return out


def main():
    return nl.main_for(cases)


if __name__ == "__main__":
    sys.exit(main())
