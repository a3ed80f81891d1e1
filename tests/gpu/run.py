#!/usr/bin/env python3
"""The CUDA engine against the CPU engine (issue 6): for every sample
(SAMPLES/*.rnn, the small dims of tests/numeric), params from `rnnc init`,
random inputs, random initial states (every state a first CPU run writes to
final/), T = 12, B = 3, f32, and `--grad` (the loss if the model has one, else
random DY for every output):

    rnnc run --device cpu  --grad ...   once
    rnnc run --device cuda --grad ...   twice

Every file either engine writes (outputs, loss, final/, grad/, grad/initial/)
must be written by both with the same shape and dtype, and for each array
(b: the CPU's, a: the GPU's)

    max|a - b| / max(max|b|, 1e-30)  <=  1e-5;

the two CUDA runs must write byte-identical files. lstm and bitagger also
run with --cuda-graphs, within the same tolerance of the CPU. Every sample
again with --dtype bf16 (a few with f16) against the CPU's build of the same
dtype, within 4.8e-2 (f16: 6e-3; docs/precision.md). lstm and gru also
run with --tf32 (cuBLAS and the persistent loops in TF32), within 1e-2.

Loops run in parallel over time (docs/cuda.md): the scan samples with
--time-parallel scan and the Newton ones with --time-parallel newton on the
GPU, at T = 300 (several chunks) and T = 1, against the CPU with
--time-parallel off (its loops step by step); Newton within 1e-4 (its
tolerance in float), scans within 1e-5.

No GPU: when a first `rnnc run --device cuda` fails saying "no CUDA device",
or fails on a machine with no /dev/nvidia*, this prints why and exits 77,
which ctest reports as skipped (SKIP_RETURN_CODE 77). Otherwise it prints one
PASS/FAIL line per sample and `N passed, M failed`, and exits 1 on a failure.

Usage: run.py --rnnc PATH [--samples DIR] [-j N] [-k SUBSTRING]
Every rnnc runs with RNNC_CACHE set to a fresh temporary folder (removed at
the end); RNNC_NUMERIC_KEEP=1 keeps it and every scratch folder."""
import argparse
import glob
import os
import shlex
import subprocess
import sys
import tempfile
import zlib

import numpy as np

sys.dont_write_bytecode = True  # keep the source tree clean
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "numeric"))
import numlib as nl  # noqa: E402
from test_compiled import npy_files, rel_error  # noqa: E402

SKIP = 77
TOL = 1e-5
# 16-bit storage (docs/precision.md): the CUDA bf16/f16 build against the CPU's build of the same
# dtype. Both round the same float to the same bits, but the products sum in another order (tensor
# cores), which can move a value across a rounding boundary: tests/numeric/test_precision.py's
# bounds against f32 hold here too. Every sample in bf16, a few in f16. Products round the float
# state h to 16 bits, so a float-level difference in h can move that rounding, which feedback's
# two coupled layers at full width amplify (tests/emulator/run.py measured 6.1e-2 in bf16): numlib's
# half_tolerance.
F16_SAMPLES = ("lstm", "gru", "charlm", "mingru", "awd_lstm")
T, B = 12, 3
TIMEOUT_S = 300  # one rnnc run; a hang is a failure, not a stuck ctest
GRAPH_SAMPLES = ("lstm", "bitagger")  # also run with --cuda-graphs (one stream, two streams)
# Loops in parallel over time: (sample, flags of the CUDA run, T, tolerance); the CPU runs --time-parallel off.
SCAN, NEWTON = ["--time-parallel", "scan"], ["--time-parallel", "newton"]
SCAN_CASES = [
    ("mingru", SCAN, 300, TOL), ("mingru", SCAN, 1, TOL), ("mingru", SCAN + ["--cuda-graphs"], 300, TOL),
    ("minlstm", SCAN, 300, TOL), ("qrnn", SCAN, 300, TOL), ("linear_indrnn", SCAN, 77, TOL),
    ("indrnn", NEWTON, 300, 1e-4), ("sru", NEWTON, 300, 1e-4), ("adding", NEWTON + ["--cuda-graphs"], 300, 1e-4),
    ("indrnn", NEWTON + ["--newton-iterations", "12"], 12, 1e-4),
]


def rnnc_run(rnnc, args, env):
    cmd = [rnnc, "run", *args]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise nl.Failure(f"rnnc ran over {TIMEOUT_S}s: {shlex.join(cmd)}")
    return p, cmd


def no_gpu_reason(rnnc, samples, env):
    """Why the CUDA engine cannot be tested here, or None when it can: one
    small `rnnc run --device cuda` of samples/lstm.rnn (any sample if none)."""
    paths = sorted(glob.glob(os.path.join(samples, "*.rnn")))
    if not paths:
        return None  # the cases say there are no samples
    path = next((p for p in paths if os.path.basename(p) == "lstm.rnn"), paths[0])
    work = tempfile.mkdtemp(prefix="rnnc-gpu-probe-")
    try:
        dims, info = nl.small_dims(rnnc, path)
        params = os.path.join(work, "p.safetensors")
        if subprocess.run([rnnc, "init", path, *nl.dim_args(dims), "--seed", "1", "-o", params],
                          capture_output=True).returncode != 0:
            return None  # the cases report it
        args = [path, *nl.dim_args(dims), "--params", params, "--out", os.path.join(work, "out"),
                "--device", "cuda", "--dtype", "f32"]
        for name, x in nl.random_inputs(info, np.random.default_rng(1), 2, 1).items():
            f = os.path.join(work, name + ".npy")
            np.save(f, x.astype(np.float32) if x.dtype.kind == "f" else x)
            args += ["--input", f"{name}={f}"]
        p, _ = rnnc_run(rnnc, args, env)
    except nl.Failure:
        return None
    finally:
        nl.cleanup(work)
    if p.returncode == 0:
        return None
    said = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit {p.returncode}"
    if "no CUDA device" in p.stderr:
        return f"rnnc found no CUDA device ({said})"
    if not glob.glob("/dev/nvidia[0-9]*"):
        return f"this machine has no GPU (no /dev/nvidia*), and rnnc --device cuda said: {said}"
    return None  # a GPU is there: the cases report what went wrong


def case(rnnc, path, env, cuda_flags=(), cpu_flags=(), T=T, tol=TOL, lengths=None, dtype="f32"):
    """CPU once, CUDA twice, on the same files; compare. lengths: each sequence's (`--lengths`)."""
    name = os.path.basename(path)[:-4]
    label = " ".join([name, *cuda_flags] + ([f"T={T}"] if cuda_flags else []) +
                     ([f"lengths={','.join(map(str, lengths))}"] if lengths else []) +
                     ([f"--dtype {dtype}"] if dtype != "f32" else []))

    def fn():
        dims, info = nl.small_dims(rnnc, path)
        work = tempfile.mkdtemp(prefix=f"rnnc-gpu-{name}-")
        rng = np.random.default_rng(zlib.crc32(b"gpu:" + label.encode()))
        where = f"{path} {' '.join(nl.dim_args(dims))}, T={T} B={B}, {dtype}" + (f", {' '.join(cuda_flags)}" if cuda_flags else "")
        f32 = lambda a: a.astype(np.float32) if a.dtype.kind == "f" else a  # noqa: E731

        def save(tag, arrays):
            out = []
            for n, a in arrays.items():
                f = os.path.join(work, f"{tag}.{n}.npy")
                np.save(f, f32(a))
                out.append(f"{n}={f}")
            return out

        params = os.path.join(work, "params.safetensors")
        p = subprocess.run([rnnc, "init", path, *nl.dim_args(dims), "--seed", str(rng.integers(1 << 30)),
                            "-o", params], capture_output=True, text=True)
        if p.returncode != 0:
            raise nl.Failure(f"{where}: rnnc init exited {p.returncode}: {p.stderr.strip()}")
        base = [path, *nl.dim_args(dims), "--params", params, "--dtype", dtype]
        for arg in save("input", nl.random_inputs(info, rng, T, B)):
            base += ["--input", arg]
        if lengths:
            np.save(os.path.join(work, "lengths.npy"), np.array(lengths, dtype=np.int32))
            base += ["--lengths", os.path.join(work, "lengths.npy")]

        def run(device, out, extra):
            flags = list(cuda_flags if device == "cuda" else cpu_flags)
            p, cmd = rnnc_run(rnnc, [*base, *extra, *flags, "--device", device, "--out", os.path.join(work, out)], env)
            if p.returncode != 0:
                raise nl.Failure(f"{where}: rnnc exited {p.returncode}: {p.stderr.strip()}\n  {shlex.join(cmd)}"
                                 f"\n(scratch kept in {work})")
            result = nl.Result(os.path.join(work, out), cmd)
            result.stderr = p.stderr  # RNNC_LOOP_REPORT's lines: how each loop ran
            return result

        # A first CPU run (no --grad) names the states and their shapes, and
        # says whether the model has a loss.
        first = run("cpu", "first", [])
        extra = []
        for arg in save("state", {n: rng.normal(0.0, 0.5, first.final(n).shape) for n in first.final_names()}):
            extra += ["--state", arg]
        extra.append("--grad")
        if first.loss() is None:
            extra += save("dy", {n: rng.normal(0.0, 1.0, (T, B, w)) for n, w in info.outputs})

        cpu, gpu, again = run("cpu", "cpu", extra), run("cuda", "cuda", extra), run("cuda", "cuda2", extra)
        bad, worst, worst_at = [], 0.0, ""
        fc = npy_files(cpu.out)

        def against_cpu(other, label):
            nonlocal worst, worst_at
            fo = npy_files(other.out)
            bad.extend(f"{f}.npy: written by the CPU engine only{label}" for f in sorted(set(fc) - set(fo)))
            bad.extend(f"{f}.npy: written by the CUDA engine only{label}" for f in sorted(set(fo) - set(fc)))
            for f in sorted(set(fc) & set(fo)):
                b, a = np.load(os.path.join(cpu.out, f + ".npy")), np.load(os.path.join(other.out, f + ".npy"))
                if a.shape != b.shape or a.dtype != b.dtype:
                    bad.append(f"{f}.npy{label}: CPU {b.dtype}{list(b.shape)}, CUDA {a.dtype}{list(a.shape)}")
                    continue
                err, i = rel_error(b, a)
                if err >= worst:
                    worst, worst_at = err, f + label
                if not err <= tol:
                    bad.append(f"{f}.npy{label}: rel err {err:.3g} > {tol:g}; worst at {list(i)}: CPU {float(b[i])!r}, "
                               f"CUDA {float(a[i])!r} (max|CPU| {float(np.max(np.abs(b))) if b.size else 0.0:.6g})")

        against_cpu(gpu, "")
        # Forced persistent (tools/gpu-check.sh's persist phase): every loop that has the variant ran it.
        if os.environ.get("RNNC_CUDA_LOOPS") == "persistent":
            stepwise = [line for line in gpu.stderr.splitlines() if line.startswith("rnnc: stage") and "step by step" in line]
            bad.extend(f"RNNC_CUDA_LOOPS=persistent, yet {line}" for line in stepwise)
        if name in GRAPH_SAMPLES and not cuda_flags:  # the loops replayed as CUDA graphs compute the same
            against_cpu(run("cuda", "cuda-graphs", extra + ["--cuda-graphs"]), " (--cuda-graphs)")
        for f in npy_files(gpu.out):
            with open(os.path.join(gpu.out, f + ".npy"), "rb") as x:
                g2 = os.path.join(again.out, f + ".npy")
                if not os.path.exists(g2):
                    bad.append(f"{f}.npy: written by the first CUDA run only")
                    continue
                with open(g2, "rb") as y:
                    if x.read() != y.read():
                        bad.append(f"{f}.npy: two CUDA runs differ")
        if bad:
            raise nl.Failure(f"{where}: the CUDA engine against the CPU engine and itself:\n" + "\n".join(bad)
                             + f"\nreproduce (scratch kept in {work}; RNNC_CACHE={env['RNNC_CACHE']}):\n  "
                             + shlex.join(cpu.cmd) + "\n  " + shlex.join(gpu.cmd))
        nl.cleanup(work)
        err = f"worst rel err {worst:.2g} ({worst_at})" if worst else "all equal"
        return f"{len(fc)} arrays, {err}; the two CUDA runs bitwise equal"
    return f"gpu/{label}", fn


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rnnc", required=True, help="the rnnc binary")
    ap.add_argument("--samples", default=nl.SAMPLES, help="the folder of .rnn samples (default: the repo's)")
    ap.add_argument("-j", type=int, default=max(2, min(8, os.cpu_count() or 2)), help="samples run in parallel")
    ap.add_argument("-k", default="", help="only the samples whose case name contains this")
    args = ap.parse_args()
    rnnc, samples = os.path.abspath(args.rnnc), os.path.abspath(args.samples)
    cache = tempfile.mkdtemp(prefix="rnnc-gpu-cache-")
    env = {**os.environ, "RNNC_CACHE": cache}
    failed = 0
    try:
        why = no_gpu_reason(rnnc, samples, env)
        if why:
            print(f"SKIPPED: {why}")
            return SKIP
        cases = [case(rnnc, p, env) for p in sorted(glob.glob(os.path.join(samples, "*.rnn")))]
        for p in sorted(glob.glob(os.path.join(samples, "*.rnn"))):
            name = os.path.basename(p)[:-4]
            cases.append(case(rnnc, p, env, tol=nl.half_tolerance(name, "bf16"), dtype="bf16"))
            if name in F16_SAMPLES:
                cases.append(case(rnnc, p, env, tol=nl.half_tolerance(name, "f16"), dtype="f16"))
        # --tf32: cuBLAS's products and the persistent and fused loops' in TF32 (docs/cuda.md#persistent-loops),
        # within the emulator's TF32 bound (tests/emulator/run.py: 1e-2).
        for name in ("lstm", "gru"):
            cases.append(case(rnnc, os.path.join(samples, name + ".rnn"), env, ["--tf32"], tol=1e-2))
        for name, flags, steps, tol in SCAN_CASES:
            path = os.path.join(samples, name + ".rnn")
            if os.path.exists(path):
                cases.append(case(rnnc, path, env, flags, ["--time-parallel", "off"], steps, tol))
        # Dropout, DropConnect and zoneout in training mode: CUDA draws the CPU's masks for one seed.
        masks = os.path.join(samples, "zoneout_lstm.rnn")
        if os.path.exists(masks):
            train = ["--mode", "train", "--seed", "5"]
            cases.append(case(rnnc, masks, env, train, train))
            # DropConnect: the dropped params made and folded back by their own kernels.
            awd = os.path.join(samples, "awd_lstm.rnn")
            if os.path.exists(awd):
                cases.append(case(rnnc, awd, env, train, train))
            # A mask drawn inside a parallel scan (against the CPU step by step).
            scanned = os.path.join(os.path.dirname(HERE), "emulator", "Inputs", "zoneout_mingru.rnn")
            cases.append(case(rnnc, scanned, env, SCAN + train, ["--time-parallel", "off"] + train, 64))
        # Sequences of their own lengths: a bidirectional model (two streams), and a scan.
        for name, flags, steps in (("bitagger", [], T), ("mingru", SCAN, 64)):
            path = os.path.join(samples, name + ".rnn")
            if os.path.exists(path):
                lengths = [steps] + [1 + (7 * b + 3) % steps for b in range(1, B)]
                cases.append(case(rnnc, path, env, flags, ["--time-parallel", "off"] if flags else [], steps,
                                  lengths=lengths))
        cases = [c for c in cases if args.k in c[0]]
        if not cases:
            print(f"no samples in {samples}" + (f" matching -k {args.k}" if args.k else ""))
            return 1
        passed, failed = nl.run_cases(cases, workers=args.j)
        print(f"{passed} passed, {failed} failed")
        return 1 if failed else 0
    finally:
        if not failed:  # a failure's commands name the cache
            nl.cleanup(cache)


if __name__ == "__main__":
    sys.exit(main())
