#!/usr/bin/env python3
"""The compiled engine (`rnnc run --engine compiled`: generated C++, built with
c++ into a shared library) against the reference interpreter (`--engine
interp`), forward and backward: the generated code equals the interpreter on
every sample and on random cells, to 1e-12 relative in f64 and 1e-5 in f32;
its f64 gradients match finite differences.

For every sample (samples/*.rnn, small dims as test_gradients) and for
GEN_CELLS cells of test_directional's generator (gen_cell, its own fixed seed;
a cell `rnnc check` rejects is skipped): random params, inputs (index inputs
in range) and initial states for every state (those a first run writes to
DIR/final/), T in 4..6, B in 2..3, and `--grad` (the loss if there is one,
else L = sum <Y, DY> with random DY for every output) with `--final-grad`
(plus <s_final, DS> with random DS for every float state). Both engines run on the
same files, in f64 and in f32 (params, inputs, states and DY cast to float32),
and every file either writes must be written by both, with the same shape and
dtype: outputs, loss, final/<state>, grad/<param>, grad/<input>,
grad/initial/<state>. For each array (a: the interpreter's, b: the compiled
engine's)

    max|a - b| / max(max|a|, 1e-30)  <=  1e-12 (f64), 1e-5 (f32).

The samples also run compiled at -O0 (f64) against the interpreter, and
lstm, gru, sru, charlm and bitagger get a directional-derivative check of the
compiled engine in f64 (test_directional.directional with --engine compiled:
EPS, RTOL, ATOL of numlib).

The CPU bundles are built with -DRNNC_BLOCK_ROWS=5 (in RNNC_CXXFLAGS): their
hoisted products and weight gradients then run in blocks of 2 or 3 steps
(rnnc/workspace.h's block_steps at B = 2..3), so T = 4..6 spans two or three
blocks, the last often shorter (docs/codegen.md#blocks-of-steps); the other
tiers run the default, one block at their sizes.

Every rnnc of this file runs with RNNC_CACHE set to a fresh temporary folder,
so every library is compiled cold (as CI would), and the folder is removed at
the end. A failure names the sample (or prints the generated cell), the array,
its error and worst element, and both rnnc command lines; the scratch folder
of a failing case is kept so they can be rerun.

Environment: RNNC_NUMERIC_COMPILED_GEN=N cells (default 20),
RNNC_NUMERIC_COMPILED_SEED=S (default 5150) for other cells,
RNNC_NUMERIC_KEEP=1 keeps every scratch folder and the cache."""
import atexit
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import zlib

import numpy as np

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numlib as nl  # noqa: E402
import test_directional as td  # noqa: E402

TOL = {"f64": 1e-12, "f32": 1e-5}
TINY = 1e-30
GEN_CELLS = int(os.environ.get("RNNC_NUMERIC_COMPILED_GEN", "20"))
SEED = int(os.environ.get("RNNC_NUMERIC_COMPILED_SEED", "5150"))
FD_SAMPLES = ("lstm", "gru", "sru", "charlm", "bitagger")


class Shared:
    """The cache folder and environment of one test run, and the worst errors seen."""

    def __init__(self):
        self.cache = tempfile.mkdtemp(prefix="rnnc-numeric-cache-")
        flags = (os.environ.get("RNNC_CXXFLAGS", "") + " -DRNNC_BLOCK_ROWS=5").strip()  # many blocks
        self.env = {**os.environ, "RNNC_CACHE": self.cache, "RNNC_CXXFLAGS": flags}
        self.lock = threading.Lock()
        self.worst = {}  # label ("f64", "f32", "f64 -O0") -> (err, where)
        self.gen_accepted = self.gen_rejected = 0
        self.removed = False
        self.failed = False  # a case failed: keep the generated cells
        atexit.register(self.remove)

    def note(self, label, err, where):
        with self.lock:
            if label not in self.worst or err > self.worst[label][0]:
                self.worst[label] = (err, where)

    def libraries(self):
        try:
            return sum(1 for d in os.listdir(self.cache) if not d.startswith((".", "runtime-")))
        except OSError:
            return 0

    def remove(self):
        if not self.removed and not os.environ.get("RNNC_NUMERIC_KEEP"):
            shutil.rmtree(self.cache, ignore_errors=True)
            self.removed = True


def npy_files(out):
    """Every .npy under out, as paths relative to it without .npy."""
    found = []
    for root, _, files in os.walk(out):
        for f in files:
            if f.endswith(".npy"):
                found.append(os.path.relpath(os.path.join(root, f), out)[:-4])
    return sorted(found)


def rel_error(a, b):
    """max|a - b| / max(max|a|, TINY), and the index of the worst element
    (elements equal in both, infinities and NaNs included, do not count)."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    same = (a64 == b64) | (np.isnan(a64) & np.isnan(b64))
    diff = np.where(same, 0.0, np.abs(a64 - b64))
    diff = np.where(np.isnan(diff), np.inf, diff)
    if diff.size == 0:
        return 0.0, ()
    finite = np.abs(a64[np.isfinite(a64)])
    scale = max(float(finite.max()) if finite.size else 0.0, TINY)
    i = np.unravel_index(int(np.argmax(diff)), diff.shape)
    return float(diff[i]) / scale, tuple(int(k) for k in i)


def command(res, env_cache):
    return f"RNNC_CACHE={env_cache} " + " ".join(shlex.quote(a) for a in res.cmd)


def compare(ref, got, tol):
    """The files of two runs; returns (worst err, array, notes of mismatches)."""
    bad, worst, worst_at = [], 0.0, ""
    fa, fb = npy_files(ref.out), npy_files(got.out)
    for f in sorted(set(fa) - set(fb)):
        bad.append(f"{f}.npy: written by the interpreter, not by the compiled engine")
    for f in sorted(set(fb) - set(fa)):
        bad.append(f"{f}.npy: written by the compiled engine, not by the interpreter")
    for f in sorted(set(fa) & set(fb)):
        a = np.load(os.path.join(ref.out, f + ".npy"))
        b = np.load(os.path.join(got.out, f + ".npy"))
        if a.shape != b.shape or a.dtype != b.dtype:
            bad.append(f"{f}.npy: interpreter {a.dtype}{list(a.shape)}, compiled {b.dtype}{list(b.shape)}")
            continue
        err, i = rel_error(a, b)
        if err > worst or not worst_at:
            worst, worst_at = err, f
        if not err <= tol:
            bad.append(f"{f}.npy: rel err {err:.3g} > {tol:g}; worst at {list(i)}: interpreter {float(a[i])!r}, "
                       f"compiled {float(b[i])!r} (max|interpreter| {float(np.max(np.abs(a))) if a.size else 0.0:.6g})")
    return worst, worst_at, bad


class Problem:
    """A file (with dims and entry), its random data and every state."""

    def __init__(self, rnnc, path, dims, entry, seed, work, shared):
        self.rnnc, self.path, self.dims, self.entry, self.shared = rnnc, path, dims, entry, shared
        self.extra = ["--entry", entry] if entry else []
        p = subprocess.run([rnnc, "show", path, "--params", *nl.dim_args(dims), *self.extra],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise nl.Failure(f"rnnc show --params exited {p.returncode}: {p.stderr.strip()}")
        self.info = nl.Info(p.stdout)
        rng = np.random.default_rng(seed)
        self.T, self.B = int(rng.integers(4, 7)), int(rng.integers(2, 4))
        self.work = work
        self.params = nl.random_params(self.info, rng)
        self.inputs = nl.random_inputs(self.info, rng, self.T, self.B)
        first = self.runner("interp").run(self.params, self.inputs)  # states start at zero
        self.use_loss = first.loss() is not None
        self.states = {n: rng.normal(0.0, 0.5, first.final(n).shape) for n in first.final_names()}
        self.dy = None if self.use_loss else \
            {n: rng.normal(0.0, 1.0, (self.T, self.B, w)) for n, w in self.info.outputs}
        # Every float state's final value is seeded too (--final-grad).
        self.ds = {n: rng.normal(0.0, 1.0, first.final(n).shape) for n in first.final_names()
                   if first.final(n).dtype.kind == "f"}

    def runner(self, engine, opt=()):
        """A Runner of its own folder under work (a Runner numbers its runs from r1)."""
        self.n = getattr(self, "n", 0) + 1
        d = os.path.join(self.work, f"{self.n}-{engine}{''.join(opt)}")
        os.makedirs(d)
        return nl.Runner(self.rnnc, self.path, self.dims, d, self.extra + ["--engine", engine, *opt],
                         env=self.shared.env)

    def run(self, engine, dtype, opt=()):
        cast = (lambda a: a.astype(np.float32)) if dtype == "f32" else (lambda a: a)
        fl = lambda d: {n: (cast(a) if a.dtype.kind == "f" else a) for n, a in d.items()}  # noqa: E731
        return self.runner(engine, opt).run(fl(self.params), fl(self.inputs), fl(self.states),
                                            grad={} if self.use_loss else fl(self.dy), dtype=dtype,
                                            final_grad={} if "--param-grads-only" in opt else fl(self.ds))

    def where(self):
        d = f" with {' '.join(nl.dim_args(self.dims))}" if self.dims else ""
        e = f" --entry {self.entry}" if self.entry else ""
        obj = "--grad (the loss)" if self.use_loss else "--grad " + " ".join(f"{n}=DY" for n in self.dy)
        obj += "".join(f" --final-grad {n}=DS" for n in self.ds)
        path = os.path.relpath(self.path, nl.ROOT) if self.path.startswith(nl.ROOT + os.sep) else self.path
        return f"{path}{e}{d}, T={self.T} B={self.B}, {obj}"


def equal_check(rnnc, shared, name, path, dims, entry, seed, dtype, opt=(), text=None, both=()):
    """The case: interpreter vs compiled (with opt; `both` goes to both engines) in dtype on one file."""
    label = dtype + ("".join(" " + o for o in opt + both))

    def fn():
        work = nl.scratch("compiled-" + name.replace("/", "-"))
        keep = True  # a failing case keeps its scratch folder, for the commands it prints
        try:
            pr = Problem(rnnc, path, dims, entry, seed, work, shared)
            ref = pr.run("interp", dtype, both)
            got = pr.run("compiled", dtype, opt + both)
            worst, at, bad = compare(ref, got, TOL[dtype])
            shared.note(label, worst, f"{name}: {at}")
            if bad:
                raise nl.Failure(
                    f"{pr.where()}, --dtype {dtype}{''.join(' ' + o for o in opt)}: the compiled engine differs "
                    f"from the interpreter:\n" + "\n".join(bad)
                    + f"\nreproduce (scratch kept in {work}):\n  {command(ref, shared.cache)}\n  "
                    + command(got, shared.cache) + (f"\n--- the cell:\n{text}" if text else ""))
            keep = False
            return f"{len(npy_files(ref.out))} arrays, worst rel err {worst:.2g} ({at})"
        except nl.Failure as e:
            if "--- the cell" in str(e):
                raise
            raise nl.Failure(f"{e}\n(scratch kept in {work})" + (f"\n--- the cell ({path}):\n{text}" if text else ""))
        finally:
            if keep:
                shared.failed = True
            else:
                nl.cleanup(work)
    return fn


def fd_check(rnnc, shared, path):
    def fn():
        dims, _ = nl.small_dims(rnnc, path)
        name = os.path.basename(path)
        try:
            return td.directional(rnnc, path, dims, zlib.crc32(b"compiled-fd:" + name.encode()), T=5, B=2,
                                  engine="compiled", env=shared.env)
        except nl.Failure as e:
            raise nl.Failure(f"{os.path.relpath(path, nl.ROOT)} with {' '.join(nl.dim_args(dims))}, --engine compiled "
                             f"--dtype f64 (RNNC_CACHE={shared.cache}): {e}")
    return fn


def gen_cases(rnnc, shared, k, gendir):
    """The f64 and f32 cases of generated cell k (each checks the cell first)."""
    text, entry, _ = td.gen_cell(SEED + k, k)
    path = os.path.join(gendir, f"gen{k}.rnn")
    with open(path, "w") as f:
        f.write(text)
    verdict = {}
    lock = threading.Lock()

    def accepted():
        with lock:
            if "rc" not in verdict:
                p = subprocess.run([rnnc, "check", path], capture_output=True, text=True)
                verdict["rc"], verdict["err"] = p.returncode, p.stderr.strip()
                with shared.lock:
                    if p.returncode == 0:
                        shared.gen_accepted += 1
                    elif p.returncode == 1:
                        shared.gen_rejected += 1
        if verdict["rc"] not in (0, 1):
            raise nl.Failure(f"rnnc check exited {verdict['rc']}: {verdict['err']}\n--- the cell:\n{text}")
        return verdict["rc"] == 0

    out = []
    for dtype in ("f64", "f32"):
        check = equal_check(rnnc, shared, f"gen{k}/{dtype}", path, {}, entry, SEED + 1000 + k, dtype, text=text)

        def fn(check=check):
            if not accepted():
                return "rejected by rnnc check (exit 1), skipped"
            return check()
        out.append((f"compiled/gen{k}/{dtype}", fn))
    return out


def cases(rnnc):
    shared = Shared()
    gendir = nl.scratch("compiled-gen")
    atexit.register(lambda: shared.failed or nl.cleanup(gendir))  # when -k leaves out compiled/summary
    out = []
    samples = sorted(os.path.join(nl.SAMPLES, f) for f in os.listdir(nl.SAMPLES) if f.endswith(".rnn"))
    for p in samples:
        name = os.path.basename(p)[:-4]
        seed = zlib.crc32(b"compiled:" + name.encode())

        def lazy(dtype, opt=(), p=p, name=name, seed=seed):
            def fn():
                dims, _ = nl.small_dims(rnnc, p)
                tag = dtype + ("-O0" if opt else "")
                return equal_check(rnnc, shared, f"{name}/{tag}", p, dims, None, seed, dtype, opt)()
            return fn
        out.append((f"compiled/{name}/f64", lazy("f64")))
        out.append((f"compiled/{name}/f32", lazy("f32")))
        out.append((f"compiled/{name}/f64-O0", lazy("f64", ("-O0",))))

        # What training compiles: the params' gradients only (no input or
        # initial-state gradients), where loop-carried values keep a ring of steps.
        def params_only(p=p, name=name, seed=seed):
            dims, _ = nl.small_dims(rnnc, p)
            return equal_check(rnnc, shared, f"{name}/f64-params", p, dims, None, seed, "f64",
                               both=("--param-grads-only",))()
        out.append((f"compiled/{name}/f64-params", params_only))
        if name in FD_SAMPLES:
            out.append((f"compiled/{name}/fd", fd_check(rnnc, shared, p)))
    # Cells that once broke the compiler (most found by the fuzzer): compiled
    # against the interpreter, forward and backward, in f64.
    regressions = os.path.join(os.path.dirname(os.path.abspath(__file__)), "regressions")
    for f in sorted(os.listdir(regressions)):
        p = os.path.join(regressions, f)
        out.append((f"compiled/regressions/{f[:-4]}/f64",
                    equal_check(rnnc, shared, f"regressions/{f[:-4]}", p, {}, None, zlib.crc32(f.encode()), "f64")))
    for k in range(GEN_CELLS):
        out += gen_cases(rnnc, shared, k, gendir)

    def summary():
        n = shared.gen_accepted + shared.gen_rejected
        libs = shared.libraries()
        if not shared.failed:
            nl.cleanup(gendir)
        shared.remove()
        worst = "; ".join(f"worst {label} {err:.2g} ({where})" for label, (err, where) in sorted(shared.worst.items()))
        msg = f"{libs} libraries compiled; {shared.gen_accepted} of {n} generated cells accepted; {worst}"
        if n and shared.gen_accepted < n / 2:
            raise nl.Failure(msg + ": fewer than half the generated cells were accepted")
        return msg
    out.append(("compiled/summary", summary, "after"))
    return out


def main():
    return nl.main_for(cases)


if __name__ == "__main__":
    sys.exit(main())
