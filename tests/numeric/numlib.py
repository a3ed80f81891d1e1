"""Shared helpers for the numeric tests (test_torch_semantics, test_gradients,
test_directional): find rnnc, read what `rnnc show --params` prints, pick small
dims, make random params/inputs/states, run `rnnc run` and read its results.

Everything here is independent of rnnc's own code: safetensors are written by
rnnrun.write_safetensors and read back by the small reader below; arrays go
through numpy's .npy."""
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np

# What the gradient checks share: central differences with step EPS must agree
# with rnnc's gradients to RTOL relative (ATOL absolute near zero), on T steps
# of B sequences.
EPS = 1e-6
RTOL = 1e-6
ATOL = 1e-9
T, B = 4, 2

# 16-bit storage (--dtype bf16|f16, docs/precision.md): the bound on max|a - b| / max|a| between
# two builds that compute in float and store 16 bits (or one of them in f32): 24 units of the
# storage's roundoff (bf16 2^-9, f16 2^-12). Between two targets' 16-bit builds at a sample's full
# widths (the CUDA emulator and tests/gpu against the CPU: half_tolerance), feedback's two coupled
# layers amplify a moved rounding of a product's float operand (observed 6.1e-2 in bf16, seeds 1-3,
# 2026-12-05): 0.12 there.
HALF_TOLERANCE = {"bf16": 4.8e-2, "f16": 6e-3}
HALF_TOLERANCE_OF = {("feedback", "bf16"): 0.12}


def half_tolerance(sample, dtype):
    """The bound between two targets' 16-bit builds of `sample` (HALF_TOLERANCE_OF's exceptions)."""
    return HALF_TOLERANCE_OF.get((sample, dtype), HALF_TOLERANCE[dtype])

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SAMPLES = os.path.join(ROOT, "samples")
sys.path.insert(0, HERE)
from rnnrun import write_safetensors  # noqa: E402


class Failure(AssertionError):
    """A check that did not hold; the message says what and how to reproduce."""


def find_rnnc(argv=None):
    """--rnnc PATH on the command line, else $RNNC, else build/rnnc."""
    argv = sys.argv if argv is None else argv
    for i, a in enumerate(argv):
        if a == "--rnnc" and i + 1 < len(argv):
            return os.path.abspath(argv[i + 1])
        if a.startswith("--rnnc="):
            return os.path.abspath(a.split("=", 1)[1])
    return os.environ.get("RNNC", os.path.join(ROOT, "build", "rnnc"))


def read_safetensors(path):
    """A tiny safetensors reader: dict name -> numpy array."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    dtypes = {"F32": "<f4", "F64": "<f8", "I32": "<i4", "I64": "<i8"}
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        out[name] = np.frombuffer(data[b:end], dtype=dtypes[e["dtype"]]).reshape(e["shape"]).copy()
    return out


# ---------------------------------------------------------------- dims, show

# Small values for the dims the samples use; any other dim gets DEFAULT_DIM.
SMALL_DIMS = {"I": 3, "H": 4, "V": 5, "E": 3, "K": 4, "D": 3, "H1": 4, "H2": 3}
DEFAULT_DIM = 3


def file_dims(path):
    """The dims a file declares (`dim NAME = ...` lines)."""
    with open(path) as f:
        return re.findall(r"^\s*dim\s+([A-Za-z_][A-Za-z0-9_]*)\s*=", f.read(), re.M)


def dim_args(dims):
    out = []
    for k, v in dims.items():
        out += ["-D", f"{k}={v}"]
    return out


class Info:
    """What `rnnc show FILE --params` prints: kind, name, inputs, outputs, params."""

    def __init__(self, text):
        self.kind = self.name = None
        self.inputs = []   # (name, width, is_index)
        self.outputs = []  # (name, width)
        self.params = []   # (name, shape tuple)
        for line in text.splitlines():
            w = line.split()
            if not w:
                continue
            if w[0] in ("cell", "model") and len(w) == 2:
                self.kind, self.name = w
            elif w[0] == "input":
                m = re.match(r"\s*input (\S+): (index)?\[(\d+)\]", line)
                self.inputs.append((m.group(1), int(m.group(3)), m.group(2) is not None))
            elif w[0] == "output":
                m = re.match(r"\s*output (\S+): \[(\d+)\]", line)
                self.outputs.append((m.group(1), int(m.group(2))))
            elif w[0] == "param":
                m = re.match(r"\s*param (\S+): \[([\d, ]+)\]", line)
                self.params.append((m.group(1), tuple(int(s) for s in m.group(2).split(","))))
        if self.kind is None:
            raise Failure("could not read `rnnc show --params` output:\n" + text)


def show_params(rnnc, path, dims):
    p = subprocess.run([rnnc, "show", path, "--params", *dim_args(dims)], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def small_dims(rnnc, path):
    """-D values for every dim `path` declares, plus any free dim rnnc asks for
    (gru.rnn declares none). Returns (dims, Info)."""
    dims = {d: SMALL_DIMS.get(d, DEFAULT_DIM) for d in file_dims(path)}
    for _ in range(8):
        rc, out, err = show_params(rnnc, path, dims)
        if rc == 0 and "?" not in out:
            return dims, Info(out)
        if rc == 0:
            # A library of generic cells (no dim has a value): bind every name
            # used in a size (ports and params), like gru.rnn's I and H.
            with open(path) as f:
                text = re.sub(r"#.*", "", f.read())
            sizes = re.findall(r":\s*(?:index\s*)?\[([^\]]*)\]", text)
            names = {n for s in sizes for n in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", s)} - set(dims)
            if not names:
                raise Failure(f"rnnc show {path} --params: sizes unknown, and no dim to bind:\n{out}")
            dims.update({n: SMALL_DIMS.get(n, DEFAULT_DIM) for n in sorted(names)})
            continue
        m = re.search(r"unknown dim '([A-Za-z_][A-Za-z0-9_]*)'", err)
        if not m or m.group(1) in dims:
            raise Failure(f"rnnc show {path} --params {' '.join(dim_args(dims))}: exit {rc}\n{err}")
        dims[m.group(1)] = SMALL_DIMS.get(m.group(1), DEFAULT_DIM)
    raise Failure(f"{path}: could not find values for its dims")


# ---------------------------------------------------------------- random data

def random_params(info, rng, scale=1.0):
    """Matrices N(0, scale^2/cols), vectors N(0, 0.5^2)."""
    p = {}
    for name, shape in info.params:
        sd = scale / np.sqrt(shape[1]) if len(shape) == 2 else 0.5
        p[name] = rng.normal(0.0, sd, shape)
    return p


def random_inputs(info, rng, T, B):
    x = {}
    for name, w, is_index in info.inputs:
        x[name] = rng.integers(0, w, (T, B)).astype(np.int64) if is_index else rng.normal(0.0, 1.0, (T, B, w))
    return x


def float_inputs(info):
    return [n for n, _, is_index in info.inputs if not is_index]


# ---------------------------------------------------------------- running rnnc

def with_engine(extra, engine="interp"):
    """extra, plus `--engine ENGINE` unless extra names an engine already: the
    checks of test_torch_semantics, test_gradients and test_directional are
    of the reference interpreter's semantics, whatever engine is rnnc's
    default; test_compiled passes its own --engine."""
    extra = list(extra)
    if not any(a == "--engine" or a.startswith("--engine=") for a in extra):
        extra += ["--engine", engine]
    return extra


class Runner:
    """Runs `rnnc run` for one file with fixed dims, in a scratch directory:
    with `--engine interp` unless extra has an --engine; env (a dict), when
    given, is the environment of every rnnc it starts."""

    def __init__(self, rnnc, path, dims, workdir, extra=(), env=None):
        self.rnnc, self.path, self.dims, self.extra = rnnc, path, dims, with_engine(extra)
        self.work, self.env = workdir, env
        self.n = 0

    def cmdline(self, params, inputs, states=None, grad=None, dtype="f64", out=None, final_grad=None):
        """Writes the arrays; returns (cmd, out). grad: None (no --grad), {} (--grad alone), or name -> DY;
        final_grad (with grad): state name -> DS, the seeds of final states (--final-grad)."""
        self.n += 1
        d = os.path.join(self.work, f"r{self.n}")
        os.makedirs(d, exist_ok=True)
        out = out or os.path.join(d, "out")
        pf = os.path.join(d, "params.safetensors")
        write_safetensors(pf, params)
        cmd = [self.rnnc, "run", self.path, *dim_args(self.dims), *self.extra, "--params", pf, "--out", out,
               "--dtype", dtype]
        for flag, arrays in (("--input", inputs), ("--state", states or {})):
            for name, a in arrays.items():
                f = os.path.join(d, f"{flag[2:]}.{name}.npy")
                np.save(f, a)
                cmd += [flag, f"{name}={f}"]
        if grad is not None:
            cmd.append("--grad")
            for name, a in grad.items():
                f = os.path.join(d, f"dy.{name}.npy")
                np.save(f, a)
                cmd.append(f"{name}={f}")
            for name, a in (final_grad or {}).items():
                f = os.path.join(d, f"ds.{name}.npy")
                np.save(f, a)
                cmd += ["--final-grad", f"{name}={f}"]
        return cmd, out

    def run(self, params, inputs, states=None, grad=None, dtype="f64", final_grad=None):
        """Returns a Result; raises Failure when rnnc does not exit 0."""
        cmd, out = self.cmdline(params, inputs, states, grad, dtype, final_grad=final_grad)
        p = subprocess.run(cmd, capture_output=True, text=True, env=self.env)
        if p.returncode != 0:
            raise Failure(f"rnnc exited {p.returncode}"
                          + (" (internal compiler error)" if p.returncode not in (0, 1) else "")
                          + f": {p.stderr.strip()}\n  command: {' '.join(cmd)}")
        return Result(out, cmd)


class Result:
    def __init__(self, out, cmd=None):
        self.out, self.cmd = out, cmd  # cmd: the rnnc command line that wrote `out`

    def _load(self, *parts):
        f = os.path.join(self.out, *parts) + ".npy"
        return np.load(f) if os.path.exists(f) else None

    def output(self, name):
        return self._load(name)

    def loss(self):
        a = self._load("loss")
        return None if a is None else float(a)

    def final(self, name):
        return self._load("final", name)

    def final_names(self):
        d = os.path.join(self.out, "final")
        return sorted(f[:-4] for f in os.listdir(d) if f.endswith(".npy")) if os.path.isdir(d) else []

    def grad(self, name):
        return self._load("grad", name)

    def grad_initial(self, name):
        return self._load("grad", "initial", name)


def scratch(prefix):
    return tempfile.mkdtemp(prefix=f"rnnc-numeric-{prefix}-")


def cleanup(d):
    if not os.environ.get("RNNC_NUMERIC_KEEP"):
        shutil.rmtree(d, ignore_errors=True)


def objective(info, res, dy):
    """L: the loss (dy None) or sum over outputs of <Y, DY>."""
    if dy is None:
        v = res.loss()
        if v is None:
            raise Failure("no loss.npy written")
        return v
    return float(sum(np.sum(res.output(n) * a) for n, a in dy.items()))


def objective_scale(res, dy):
    """The size of the terms summed into L (|L| for a loss): a central
    difference of L carries a rounding error of about 1e-16 * this / eps."""
    if dy is None:
        return max(1.0, abs(res.loss()))
    return max(1.0, float(sum(np.sum(np.abs(res.output(n) * a)) for n, a in dy.items())))


def rel_err(a, b, floor=1e-8):
    return abs(a - b) / max(abs(a) + abs(b), floor)


# ---------------------------------------------------------------- the case runner

def run_cases(cases, workers=None, out=sys.stdout):
    """cases: list of (name, fn) or (name, fn, "after"). Runs them (in
    parallel; the "after" ones once all the others have finished), prints one
    line each, returns (passed, failed)."""
    from concurrent.futures import ThreadPoolExecutor
    import time
    import traceback
    workers = workers or max(2, min(8, os.cpu_count() or 2))

    def one(case):
        name, fn = case
        t0 = time.time()
        try:
            note = fn()
            return name, True, note, time.time() - t0
        except Failure as e:
            return name, False, str(e), time.time() - t0
        except Exception:  # a bug in the test itself, or an unexpected rnnc state
            return name, False, traceback.format_exc(), time.time() - t0

    passed = failed = 0
    first = [c[:2] for c in cases if len(c) < 3]
    after = [c[:2] for c in cases if len(c) >= 3]
    with ThreadPoolExecutor(workers) as ex:
        results = list(ex.map(one, first))  # waits for them all
        results_after = list(ex.map(one, after))
        for name, ok, note, dt in results + results_after:
            if ok:
                passed += 1
                print(f"PASS {name} ({dt:.1f}s){'  ' + note if note else ''}", file=out, flush=True)
            else:
                failed += 1
                print(f"FAIL {name} ({dt:.1f}s)\n    " + "\n    ".join(str(note).splitlines()), file=out, flush=True)
    return passed, failed


def main_for(cases_fn):
    """A test file's main(): runs its cases, prints `N passed, M failed`."""
    rnnc = find_rnnc()
    passed, failed = run_cases(cases_fn(rnnc))
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0
