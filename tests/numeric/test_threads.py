"""The compiled engine gives the same bits for any number of threads
(docs/reliability.md, "Determinism"): every sample, forward and backward, run
with OMP_NUM_THREADS = OPENBLAS_NUM_THREADS = 1, 2 and 3, writes the same
bytes in every output, final state and gradient file. Each run of the set is
repeated under each OpenBLAS core type this machine can run: its own, Haswell
(AVX2, what most machines pick) and one more (SkylakeX where AVX-512 is there,
else Sandybridge), so that a machine of one kind catches what another would
hit. The dims are large enough that the products are cut into many tiles
(rnnc/cpu.h, gemm_tiles), and one case has a single sequence (B = 1: the
matrix-vector path); two have sequences of their own lengths (unsorted, B =
29: each step's products and kernels cut its running rows)."""
import atexit
import os
import subprocess

import numpy as np

import numlib as nl
from test_gradients import has_loss

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLES = os.path.join(ROOT, "samples")
THREADS = ("1", "2", "3")


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def core_types():
    """OPENBLAS_CORETYPE values to run under ("" is OpenBLAS's own pick)."""
    flags = cpu_flags()
    types = [""]
    if "avx2" in flags and "fma" in flags:
        types.append("Haswell")
        types.append("SkylakeX" if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags else "Sandybridge")
    return types


def files(out):
    found = {}
    for d, _, names in os.walk(out):
        for n in names:
            if n.endswith(".npy"):
                with open(os.path.join(d, n), "rb") as f:
                    found[os.path.relpath(os.path.join(d, n), out)] = f.read()
    return found


def case(rnnc, cache, name, size, T, B, dtype, lengths=False):
    def fn():
        path = os.path.join(SAMPLES, name + ".rnn")
        found, _ = nl.small_dims(rnnc, path)
        dims = {d: max(v, size) for d, v in found.items()}
        rc, text, err = nl.show_params(rnnc, path, dims)
        if rc != 0:
            raise nl.Failure(f"rnnc show {name} --params: exit {rc}: {err.strip()}")
        info = nl.Info(text)
        rng = np.random.default_rng(3)
        params = nl.random_params(info, rng)
        inputs = nl.random_inputs(info, rng, T, B)
        work = nl.scratch("threads")
        extra = ["--engine", "compiled"]
        if lengths:  # unsorted, from 1 to T: each step's products and kernels cover its running rows
            f = os.path.join(work, "lengths.npy")
            np.save(f, rng.integers(1, T + 1, size=B).astype(np.int32))
            extra += ["--lengths", f]
        runner = nl.Runner(rnnc, path, dims, work, extra=extra)
        grad = {} if has_loss(path) else {n: rng.normal(0.0, 1.0, (T, B, w)) for n, w in info.outputs}
        runs = 0
        for core in core_types():
            ref = None
            for threads in THREADS:
                env = dict(os.environ, RNNC_CACHE=cache, OMP_NUM_THREADS=threads, OPENBLAS_NUM_THREADS=threads)
                if core:
                    env["OPENBLAS_CORETYPE"] = core
                cmd, out = runner.cmdline(params, inputs, grad=grad, dtype=dtype)
                p = subprocess.run(cmd, capture_output=True, text=True, env=env)
                if p.returncode != 0:
                    raise nl.Failure(f"rnnc exited {p.returncode}: {p.stderr.strip()}\n  command: {' '.join(cmd)}")
                got = files(out)
                runs += 1
                if not got:
                    raise nl.Failure(f"no .npy written under {out}")
                if ref is None:
                    ref = (threads, got)
                    continue
                differ = sorted(k for k in set(ref[1]) | set(got) if ref[1].get(k) != got.get(k))
                if differ:
                    raise nl.Failure(f"{name} {dtype} {core or 'default core type'}: {threads} threads differ from "
                                     f"{ref[0]} in {', '.join(differ[:4])}\n  command: {' '.join(cmd)}")
        nl.cleanup(work)
        return f"{runs} runs ({', '.join(c or 'default' for c in core_types())}; {'/'.join(THREADS)} threads) equal"
    return fn


def cases(rnnc):
    cache = nl.scratch("threads-cache")
    atexit.register(nl.cleanup, cache)
    samples = sorted(f[:-4] for f in os.listdir(SAMPLES) if f.endswith(".rnn"))
    out = [(f"threads/{s}", case(rnnc, cache, s, 96, 16, 8, "f32")) for s in samples]
    out.append(("threads/lstm-f64", case(rnnc, cache, "lstm", 128, 16, 8, "f64")))
    # Sequences of their own lengths: each step's products and kernels cover the running rows.
    out += [(f"threads/{s}-lengths", case(rnnc, cache, s, 96, 16, 29, "f32", lengths=True)) for s in ("lstm", "bitagger")]
    out.append(("threads/lstm-B1", case(rnnc, cache, "lstm", 512, 8, 1, "f32")))
    return out


if __name__ == "__main__":
    import sys
    sys.exit(nl.main_for(cases))
