#!/usr/bin/env python3
"""The CUDA target checked on a machine with no GPU: every sample's .cu
bundle is compiled as C++ against the CUDA emulator (include/: fibers
for a block's threads, a barrier for __syncthreads, a reference cuBLAS) and
run beside its CPU bundle on the same random data (compare.cpp); outputs,
final states, the loss and every gradient must agree to 1e-9 in double.
Also every sample --forward-only, and -O0, --cuda-graphs and --tf32 builds of
a few samples.

Loops run in parallel over time (docs/cuda.md): the scan and Newton forms of
the samples whose loops allow them, and of Inputs/*.rnn (2 and 3 states
coupled per element, a width that leaves lanes idle), at T = 300 (several
chunks), T = 1 and odd lengths, forced with --time-parallel scan or newton,
against the CPU bundle with --time-parallel off (its loops step by step);
Newton both where it converges (RNNC_SCAN_REPORT must say "kept") and where it
falls back to the loop step by step ("not converged").

Every build runs under RNNC_EMULATOR_SEED 1, 2 and 3 (the order of streams and
blocks; 16-bit builds under 1); float, bf16 and f16 builds of every sample against CPU bundles of the same
dtype (16 bits within test_precision's bounds: both round the same floats); and
MUTANTS, mistakes the emulator must catch (docs/cuda.md).

usage: run.py --rnnc RNNC --compare COMPARE [--jobs N] [--only NAME ...]
              [--scans-only | --mutants-only | --double-only]"""
import argparse
import concurrent.futures
import glob
import json
import os
import subprocess
import sys
import shutil
import tempfile
import threading
import time

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "numeric"))
import numlib as nl  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RUNTIME = os.path.join(ROOT, "runtime", "include")
DIMS = {"gru": ["-D", "I=8", "-D", "H=16"]}
T, B = 5, 3


def sh(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError("{} failed ({}):\n{}{}".format(" ".join(cmd), r.returncode, r.stdout, r.stderr[-3000:]))
    return r.stdout


# Loops in parallel over time: (file, CUDA flags, T, B, dims, what RNNC_SCAN_REPORT must say). Small
# widths keep the emulator's blocks few; T = 300 cuts several chunks.
SCAN, NEWTON = ["--time-parallel", "scan"], ["--time-parallel", "newton"]
SMALL = ["-D", "I=8", "-D", "H=16"]
SCAN_RUNS = [
    ("mingru", SCAN, 300, 3, SMALL, None),
    ("mingru", SCAN, 1, 3, SMALL, None),
    ("mingru", SCAN, 77, 2, ["-D", "I=3", "-D", "H=12"], None),  # 12: half of the second group idle
    ("mingru", SCAN, 300, 1, ["-D", "I=2", "-D", "H=1"], None),  # one element: the loop steps (no scan)
    ("mingru", SCAN + ["--cuda-graphs"], 300, 3, SMALL, None),
    ("minlstm", SCAN, 300, 3, SMALL, None),
    ("qrnn", SCAN, 300, 2, SMALL, None),
    ("linear_indrnn", SCAN, 129, 2, SMALL, None),
    ("Inputs/coupled.rnn", SCAN, 300, 2, [], None),
    ("Inputs/coupled3.rnn", SCAN, 200, 2, [], None),
    ("Inputs/zoneout_mingru.rnn", SCAN, 100, 2, [], None),  # a mask drawn in the scan
    ("indrnn", NEWTON + ["--newton-iterations", "40"], 40, 2, SMALL, "kept"),
    ("indrnn", NEWTON, 300, 2, SMALL, "not converged"),
    ("sru", NEWTON + ["--newton-iterations", "12"], 60, 2, ["-D", "H=16"], "kept"),
    ("sru", NEWTON, 1, 2, ["-D", "H=16"], None),
    ("adding", NEWTON + ["--cuda-graphs"], 300, 2, ["-D", "H=16"], None),
    ("Inputs/coupled_tanh.rnn", NEWTON + ["--newton-iterations", "10"], 40, 2, [], "kept"),
    ("Inputs/reverse.rnn", NEWTON + ["--newton-iterations", "30"], 30, 2, [], "kept"),
    ("Inputs/reverse.rnn", NEWTON, 150, 3, [], None),
]


# Each build runs under these seeds of the emulator's stream and block order (seed % 3 picks how
# streams take turns: emulator_streams.h's Device::drain). Two-stream samples also run under more
# seeds of policy 0 (turns at random after any launch), where a race needs a lucky interleaving.
SEEDS = ("1", "2", "3")
STREAM_SEEDS = SEEDS + ("6", "9")
TWO_STREAMS = ("bitagger",)
# Float bundles against float CPU bundles, relative to each array's largest
# value. The emulated cuBLAS sums in double and rounds once; OpenBLAS sums in
# float, with its own blocking; the kernels' sums (layer norm, softmax) and
# the exp/tanh of two libms differ by an ulp or two. A dot product of K <= 384
# terms is then off by about sqrt(K) · 6e-8 ≈ 1e-6 of its terms' size, and a
# recurrence amplifies that by its gain each step: the random weights (std
# 0.4) give an H-wide tanh layer a gain of up to 0.4 · sqrt(H), so T = 5 steps
# may multiply an error by 10 to 10^4. Observed worst (seed 1): 3e-5 (dilated)
# on every sample but feedback, 5.1e-4 on feedback (two coupled layers of 256
# and 128 units); so 1e-4, and 2e-3 for feedback. A real mistake (a missing
# term, a wrong index, a skipped step) moves results by 1e-2 and more. With
# --tf32 the GEMM operands keep 10 bits of mantissa (2^-11 ≈ 5e-4 each):
# observed 4.1e-3 on the LSTM, so 1e-2.
FLOAT_TOLERANCE, TF32_TOLERANCE = 1e-4, 1e-2
FLOAT_TOLERANCE_OF = {"feedback": 2e-3}
# 16-bit builds (--dtype bf16|f16: docs/precision.md) against CPU bundles of the same dtype: both
# compute in float and round what they store to 16 bits, so a float-level difference (the GEMMs'
# sums, libm) shows only where it moves a 16-bit rounding, and then by a unit of it; the bounds
# are numlib's (tests/numeric/numlib.py: HALF_TOLERANCE, 24 units of roundoff). A product rounds
# its float operand (the state h) to 16 bits on both targets, so a float-level difference in h
# moves that rounding now and then by a unit, which the cell then amplifies as it does any error:
# observed (seeds 1-3, 2026-12-05) at most 4.8e-3 on every sample but feedback, whose two coupled
# layers at their full widths (256 and 128 units, random params: saturated h, input gradients up
# to 150) amplify it to 6.1e-2 in bf16 (f16: 1.1e-3); numlib.half_tolerance allows 0.12 there.
HALF_TOLERANCE = nl.HALF_TOLERANCE
F16_SAMPLES = ("lstm", "gru", "charlm", "mingru", "awd_lstm", "feedback")


_pch_lock, _pch_dirs = threading.Lock(), {}


def precompiled(work, header, flags):
    """A folder holding rnnc/<header>.gch, `header` of the runtime include folder in `flags`
    precompiled with `flags` (once per run: parsing the runtime and emulator headers is about a
    third of each build), to put first on the include path; GCC uses it only where its flags match.
    For rnnc/cpu.h also panels.o, rnnc/panels.h's kernels, which a bundle built with
    -DRNNC_PREBUILT_PANELS links instead of compiling them (docs/codegen.md's compiled engine)."""
    key = (header,) + tuple(flags)
    with _pch_lock:
        if key not in _pch_dirs:
            folder = os.path.join(work, "pch-{}".format(len(_pch_dirs)))
            os.makedirs(os.path.join(folder, "rnnc"))
            runtime = next(f[2:] for f in flags if f.startswith("-I"))
            sh(["c++"] + list(flags) + ["-x", "c++-header", os.path.join(runtime, "rnnc", header), "-o",
                                        os.path.join(folder, "rnnc", header + ".gch")])
            if header == "cpu.h":
                with open(os.path.join(folder, "panels.cpp"), "w") as f:
                    f.write('#include "rnnc/cpu.h"\n')
                sh(["c++"] + list(flags) + ["-DRNNC_PANELS_INSTANTIATE", "-c", os.path.join(folder, "panels.cpp"), "-o",
                                            os.path.join(folder, "panels.o")])
            _pch_dirs[key] = folder
        return _pch_dirs[key]


def build(rnnc, sample, flags, out, dims, cpu_flags, real, defines=(), runtime=RUNTIME, mutate=None):
    """Compiles `sample` for the CPU and for CUDA into `out` and builds both as shared
    libraries (the CUDA one against the emulator, its vector loads checked for
    alignment by UBSan); `mutate` edits the .cu text first. Returns (cpu.so, cuda.so, symbol)."""
    if not os.path.isdir(out + "/cpu"):
        sh([rnnc, "compile", sample, "--target", "cpu", "-o", out + "/cpu"] + dims + cpu_flags)
    sh([rnnc, "compile", sample, "--target", "cuda", "-o", out + "/cuda"] + dims + flags)
    model = json.load(open(glob.glob(out + "/cpu/*.json")[0]))["symbol"]
    cpp = glob.glob(out + "/cpu/*.cpp")[0]
    cu = glob.glob(out + "/cuda/*.cu")[0]
    if mutate:
        with open(cu) as f:
            text = f.read()
        changed = mutate(text)
        if changed == text:
            raise RuntimeError(f"the mutation left {cu} as it was")
        with open(cu, "w") as f:
            f.write(changed)
    real_flags = ["-DRNNC_REAL_DOUBLE"] if real == "double" else []
    common = ["-std=c++17", "-O1", "-fPIC"] + real_flags
    work = os.path.dirname(out)
    if not os.path.exists(out + "/cpu.so"):
        cpu = common + ["-I" + RUNTIME, "-fopenmp", "-DRNNC_PREBUILT_PANELS"]
        prebuilt = precompiled(work, "cpu.h", cpu)
        sh(["c++", "-I" + prebuilt] + cpu + ["-shared", cpp, os.path.join(prebuilt, "panels.o"), "-o", out + "/cpu.so",
                                             "-lopenblas"])
    cuda = common + ["-I" + runtime, "-DRNNC_CUDA_EMULATOR", *defines, "-I" + os.path.join(HERE, "include"), "-pthread",
                     "-fsanitize=alignment", "-fno-sanitize-recover=alignment"]
    sh(["c++", "-I" + precompiled(work, "cuda.h", cuda)] + cuda + ["-shared", "-x", "c++", cu, "-o", out + "/cuda.so"])
    return out + "/cpu.so", out + "/cuda.so", model


def compare(compare_bin, libs, steps, batch, tolerance, seed, env=None):
    cpu, cuda, model = libs
    cmd = [compare_bin, cpu, cuda, model, str(steps), str(batch), str(tolerance)]
    r = subprocess.run(cmd, capture_output=True, text=True,
                       env={**os.environ, "RNNC_SCAN_REPORT": "1", "RNNC_LOOP_REPORT": "1", "RNNC_EMULATOR_SEED": seed,
                            **(env or {})})
    return r, cmd


def check(rnnc, compare_bin, sample, flags, work, steps=T, batch=B, dims=None, cpu_flags=None, expect=None, real="double",
          defines=(), envs=({},), seeds=SEEDS):
    """Builds `sample` both ways and compares them under each seed, once per environment in `envs`."""
    name = os.path.basename(sample)[:-4]
    label = " ".join([name] + flags + ([f"T={steps}", f"B={batch}"] if (steps, batch) != (T, B) else []) +
                     ([real] if real != "double" else []) + list(defines) +
                     ["(also {})".format(" ".join(f"{k}={v}" for k, v in e.items())) for e in envs if e])
    start = time.monotonic()
    out = os.path.join(work, "".join(c if c.isalnum() else "_" for c in label))
    dims = DIMS.get(name, []) if dims is None else dims
    if cpu_flags is None:
        cpu_flags = [f for f in flags if f == "-O0"]
    try:
        libs = build(rnnc, sample, flags, out, dims, cpu_flags, real, defines)
    except RuntimeError as e:
        raise RuntimeError(f"{label}: {e}") from None
    tolerance = 1e-9 if real == "double" else \
        nl.half_tolerance(name, real) if real in HALF_TOLERANCE else \
        TF32_TOLERANCE if "--tf32" in flags else FLOAT_TOLERANCE_OF.get(name, FLOAT_TOLERANCE)
    # Step by step is the long-tested path: under the first seed only (the others' orders test it too
    # where a loop has no persistent variant).
    for seed, env in ((seed, env) for env in envs for seed in (seeds[:1] if env in (STEPWISE, FUSED) else seeds)):
        r, cmd = compare(compare_bin, libs, steps, batch, tolerance, seed, env)
        if r.returncode != 0:
            raise RuntimeError("{}: {} RNNC_EMULATOR_SEED={} {} failed ({}):\n{}{}".format(
                label, " ".join(f"{k}={v}" for k, v in env.items()), seed, " ".join(cmd), r.returncode, r.stdout, r.stderr[-3000:]))
        # Forced persistent or fused, every loop that has the variant must have run it (rnnc/persistent.h);
        # a loop not local to units has no fused variant.
        fell_back = [line for line in r.stderr.splitlines() if line.startswith("rnnc: stage") and "step by step" in line
                     and "not local to units" not in line]
        if env.get("RNNC_CUDA_LOOPS") in ("persistent", "fused") and fell_back:
            raise RuntimeError("{}: RNNC_CUDA_LOOPS={}, yet:\n{}".format(label, env["RNNC_CUDA_LOOPS"], "\n".join(fell_back)))
        if expect:
            said = [line for line in r.stderr.splitlines() if line.startswith("rnnc: newton")]
            if not said or not all(line.endswith(expect) or expect in line for line in said):
                raise RuntimeError("{}: RNNC_SCAN_REPORT should say {!r} for every Newton loop; it said:\n{}".format(
                    label, expect, "\n".join(said) or "nothing"))
    return label, time.monotonic() - start


STEPWISE, PERSISTENT, FUSED = {"RNNC_CUDA_LOOPS": "stepwise"}, {"RNNC_CUDA_LOOPS": "persistent"}, {"RNNC_CUDA_LOOPS": "fused"}


def delete_nth(marker, n):
    """A mutation: the n-th line (from 0) of the .cu holding `marker` deleted."""
    def mutate(text):
        lines, seen = text.splitlines(True), 0
        for k, line in enumerate(lines):
            if marker in line:
                if seen == n:
                    return "".join(lines[:k] + lines[k + 1:])
                seen += 1
        return text
    return mutate


def delete_lines(marker):
    """A mutation: every line of the .cu holding `marker` deleted."""
    return lambda text: "".join(line for line in text.splitlines(True) if marker not in line)


def replace(old, new):
    return lambda text: text.replace(old, new)


# What the emulator must catch: each a bundle or its runtime changed the way a
# real mistake would change it, which must fail under some seed of SEEDS
# (sample, CUDA flags, what is wrong, the mutation of the .cu, the mutation of
# rnnc/cuda.h, macros, environment).
MUTANTS = [
    ("bitagger", [], "stage 2 (stream 1) no longer waits for stage 0 (stream 0), whose GEMM it reads",
     delete_lines("cudaStreamWaitEvent(c.stream(1), c.event(0), 0)"), None, (), {}),
    ("bitagger", [], "stage 3 (stream 0) no longer waits for stage 2 (stream 1), whose states it reads",
     delete_lines("cudaStreamWaitEvent(c.stream(0), c.event(2), 0)"), None, (), {}),
    ("lstm", [], "the gradients are not cleared: backward adds to memory never written",
     delete_lines("cudaMemsetAsync(G, 0,"), None, (), {}),
    ("lstm", [], "a workspace 8 bytes off its 16-byte alignment", None, None, (), {"RNNC_EMULATOR_MISALIGN": "8"}),
    ("lstm", [], "the entry points' alignment check removed, the workspace 8 bytes off: a vector load faults",
     replace("!check_aligned(mem, params)", "false"), None, (), {"RNNC_EMULATOR_MISALIGN": "8"}),
    # Persistent loops (docs/cuda.md#persistent-loops): each barrier of a step is needed. The LSTM's
    # blocks own units (a grid barrier before each product, a block barrier before each cell); the
    # layer-norm LSTM's own slices of each kernel (a grid barrier after each).
    ("lstm", [], "forward's persistent loop without the grid barrier before its product",
     delete_nth("grid_sync(barrier);", 0), None, (), PERSISTENT),
    ("lstm", [], "backward's persistent loop without the grid barrier before its product",
     delete_nth("grid_sync(barrier);", 1), None, (), PERSISTENT),
    ("lstm", [], "forward's persistent loop without the block barrier between its product and its cell",
     delete_nth("__syncthreads(); // what the block wrote, before its units read it", 0), None, (), PERSISTENT),
    ("layernorm_lstm", [], "a persistent loop whose blocks own slices, without the grid barrier after its product",
     delete_nth("grid_sync(barrier);", 0), None, (), PERSISTENT),
    ("lstm", [], "a persistent block of backward loading W's first columns, not its own",
     replace("W[j * outputs + row]", "W[j * outputs + o]"), None, (), PERSISTENT),
    ("lstm", [], "a persistent kernel whose blocks all wait at a grid barrier but one",
     replace("__device__ __forceinline__ void grid_sync(unsigned *) { rnnc_emulator::grid_sync(); }",
             "__device__ __forceinline__ void grid_sync(unsigned *) { if (blockIdx.x) rnnc_emulator::grid_sync(); }"),
     None, (), PERSISTENT),
    # The fused variant (a kernel a step per product): the block barrier between a block's rows of
    # the product and its cell, the first step's lead (backward's cell before its product), its own columns.
    ("lstm", [], "forward's fused kernel without the block barrier between its product and its cell",
     delete_nth("__syncthreads(); // what the block wrote, before its units read it", 1), None, (), FUSED),
    ("lstm", [], "backward's fused variant without its first step's cell before the first product",
     replace("if (T > 0 &&", "if (T < 0 &&"), None, (), FUSED),
    # Values on chip: the persistent kernel's region of them laid over the block's weights.
    ("lstm", [], "the persistent kernel's values on chip over its weights",
     replace("real *chip = gemm_1_w + tile_rows(4 *", "real *chip = gemm_1_w + tile_rows(0 *"), None, (), PERSISTENT),
    # 16 bits on tensor cores: the fragments' layout and the barrier before the split reduction's sum.
    ("lstm", ["--dtype", "bf16"], "the tensor-core product's A fragment with rows + 8 and columns + 8 swapped",
     replace("a[1] = load_pair(at + 8 * kpad + j), a[2] = load_pair(at + j + 8);",
             "a[2] = load_pair(at + 8 * kpad + j), a[1] = load_pair(at + j + 8);"), None, (), PERSISTENT),
    ("lstm", ["--tf32"], "the TF32 product's A fragment with rows + 8 and columns + 4 swapped",
     replace("a[1] = __float_as_uint(at[8 * kpad + j]), a[2] = __float_as_uint(at[j + 4]);",
             "a[2] = __float_as_uint(at[8 * kpad + j]), a[1] = __float_as_uint(at[j + 4]);"), None, (), PERSISTENT),
    ("lstm", ["--dtype", "bf16"], "the warps' partial tiles summed before every warp has written its own",
     replace("__syncthreads(); // every warp's partial tile is in", ""), None, (), PERSISTENT),
    ("lstm", [], "a fused kernel of backward reading W's first columns, not its own",
     replace("const real w = product_operand(W[j * outputs + row]);", "const real w = product_operand(W[j * outputs + o]);"),
     None, (), FUSED),
    ("lstm", ["--cuda-graphs"], "a synchronize inside the capture",
     None, ("int failed = body(capture);", "cudaStreamSynchronize(capture);\n    int failed = body(capture);"), (), {}),
    ("lstm", ["--cuda-graphs"], "the loop captured on the legacy default stream",
     None, ("cudaStreamBeginCapture(capture,", "cudaStreamBeginCapture(nullptr,"), (), {}),
    ("charlm", [], "backward's loss seed without forward's loss scale (1024)",
     replace("(ws.loss_seed * ws.loss_scale[0])", "ws.loss_seed"), None, (), {"RNNC_EMULATOR_LOSS_SCALE": "1024"}),
    # Seed 6: streams take turns at random after any launch (policy 0), so one stream's rounding can
    # land between the other's rounding and its product (seed 3, also policy 0, happens not to).
    ("bitagger", ["--dtype", "bf16"], "its two streams' products round their float h into one scratch",
     replace("storage(ws, 1)", "storage(ws, 0)"), None, (), {"RNNC_EMULATOR_SEED": "6", **STEPWISE}),
    # Biases folded into the product before the loop (docs/cuda.md): each part adds something.
    ("lstm", [], "the folded product's GEMM without its bias epilogue", None,
     ("epilogue = CUBLASLT_EPILOGUE_BIAS;", "epilogue = CUBLASLT_EPILOGUE_DEFAULT;"), (), {}),
    ("lstm", [], "the sum of a product's two biases without the second",
     replace("a[e] = b1 ? b0[e % n] + b1[e % n] : b0[e % n];", "a[e] = b0[e % n];"), None, (), {}),
    ("lstm", [], "with no cuBLASLt algorithm, the GEMM overwriting the rows set to the bias", None,
     ("return gemm(h, false, true, M, N, K, A, W, C, T(1));", "return gemm(h, false, true, M, N, K, A, W, C, T(0));"),
     (), {"RNNC_EMULATOR_LT_ALGOS": "0"}),
    ("lstm", [], "per-thread default streams, and device_copy waits only for its own",
     None, ("return ok(cudaDeviceSynchronize(), \"cudaDeviceSynchronize\") &&", "return"),
     ("-DCUDA_API_PER_THREAD_DEFAULT_STREAM",), {}),
]


def check_mutant(rnnc, compare_bin, work, index, mutant):
    name, flags, what, mutate, runtime_edit, defines, env = mutant
    start = time.monotonic()
    out = os.path.join(work, f"mutant{index}")
    runtime = RUNTIME
    if runtime_edit:
        runtime = os.path.join(out, "runtime")
        shutil.copytree(RUNTIME, runtime)
        header = os.path.join(runtime, "rnnc", "cuda.h")
        with open(header) as f:
            text = f.read()
        if runtime_edit[0] not in text:
            raise RuntimeError(f"{what}: rnnc/cuda.h has no {runtime_edit[0]!r}")
        with open(header, "w") as f:
            f.write(text.replace(runtime_edit[0], runtime_edit[1]))
    sample = os.path.join(ROOT, "samples", name + ".rnn")
    dtype = flags[flags.index("--dtype") + 1] if "--dtype" in flags else None  # a 16-bit build: its CPU's too
    real, cpu_flags = (dtype, ["--dtype", dtype]) if dtype else ("double", [])
    tolerance = HALF_TOLERANCE[dtype] if dtype else 1e-9
    if "--tf32" in flags:  # TF32 is float's (a double build multiplies in double)
        real, tolerance = "float", TF32_TOLERANCE
    libs = build(rnnc, sample, flags, out, DIMS.get(name, []), cpu_flags, real, defines, runtime, mutate)
    for seed in SEEDS:
        r, _ = compare(compare_bin, libs, T, B, tolerance, seed, env)
        if r.returncode != 0:
            return f"{name}: {what}", time.monotonic() - start
    raise RuntimeError(f"{name}: {what}: the emulator passed it under every seed ({', '.join(SEEDS)})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rnnc", required=True)
    ap.add_argument("--compare", required=True)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--scans-only", action="store_true", help="only the loops run in parallel over time")
    ap.add_argument("--mutants-only", action="store_true", help="only what the emulator must catch")
    ap.add_argument("--double-only", action="store_true",
                    help="the double builds only: no float builds, no mutants (the sanitized tier: tests/emulator/CMakeLists.txt)")
    a = ap.parse_args()
    samples = sorted(glob.glob(os.path.join(ROOT, "samples", "*.rnn")))
    if a.only:
        samples = [s for s in samples if os.path.basename(s)[:-4] in a.only]
    named = lambda *names: [s for s in samples if os.path.basename(s)[:-4] in names]  # noqa: E731
    # The caller's own non-blocking stream, and (16 mod 32: enough for double's
    # two 16-byte accesses) a workspace 16 bytes off cudaMalloc's alignment.
    caller, off16 = {"RNNC_EMULATOR_CALLER_STREAM": "1"}, {"RNNC_EMULATOR_MISALIGN": "16"}
    # A product's biases folded into its GEMM (codegen/FoldBias.h): cuBLASLt's epilogue, and with
    # no cuBLASLt algorithm the fallback (rows set to the bias, a GEMM adding to them).
    no_lt = {"RNNC_EMULATOR_LT_ALGOS": "0"}
    envs_of = {"lstm": ({}, caller, off16, no_lt), "bitagger": ({}, caller), "gru": ({}, no_lt)}
    seeds_of = lambda s: STREAM_SEEDS if os.path.basename(s)[:-4] in TWO_STREAMS else SEEDS  # noqa: E731
    # Loops every way (docs/cuda.md#persistent-loops): the runs above with the cost model's choice
    # (persistent on the emulated device for most), and every sample again forced step by step
    # (under one seed: check()) and forced fused (a kernel a step per product, under one seed too).
    runs = [(s, [], {"envs": envs_of.get(os.path.basename(s)[:-4], ({},)) + (STEPWISE, FUSED), "seeds": seeds_of(s)})
            for s in samples]
    runs += [(s, [], {"real": "float", "seeds": seeds_of(s)}) for s in samples]
    # 16 bits: every sample in bf16, a few in f16 (the same text but for the store type), under one
    # seed (the float builds' three orders of streams and blocks test the same launches); the cost
    # model's choice, forced step by step (cublasGemmEx on the rounded state), forced persistent
    # (every loop that has the variant: its products on tensor cores) and, in bf16, forced fused.
    runs += [(s, ["--dtype", dtype], {"real": dtype, "cpu_flags": ["--dtype", dtype], "seeds": SEEDS[:1],
                                      "envs": ({}, STEPWISE, PERSISTENT, FUSED) if dtype == "bf16" else ({}, STEPWISE, PERSISTENT)})
             for dtype in HALF_TOLERANCE for s in samples
             if dtype == "bf16" or os.path.basename(s)[:-4] in F16_SAMPLES]
    # The tensor-core product's shuffle version (GPUs before sm_80) on the emulator's __shfl_sync.
    runs += [(s, ["--dtype", "bf16"], {"real": "bf16", "cpu_flags": ["--dtype", "bf16"], "seeds": SEEDS[:1],
                                       "defines": ("-DRNNC_SHUFFLE_MMA",), "envs": (PERSISTENT,)}) for s in named("lstm")]
    # Loss scaling (f16 training): backward's loss seed times options->loss_scale, read by the CUDA
    # kernels from the workspace, against the CPU's (a CUDA build that ignored it would be 1024x off).
    runs += [(s, [], {"real": "float", "envs": ({"RNNC_EMULATOR_LOSS_SCALE": "1024"},)})
             for s in samples if os.path.basename(s) == "charlm.rnn"]
    runs += [(s, ["--dtype", "f16"], {"real": "f16", "cpu_flags": ["--dtype", "f16"], "seeds": SEEDS[:1],
                                      "envs": ({"RNNC_EMULATOR_LOSS_SCALE": "1024"},)})
             for s in samples if os.path.basename(s) == "charlm.rnn"]
    for s in named("lstm", "bitagger"):
        runs += [(s, ["-O0"], {}), (s, ["--cuda-graphs"], {"envs": ({}, caller)}),
                 (s, [], {"defines": ("-DCUDA_API_PER_THREAD_DEFAULT_STREAM",), "envs": ({}, caller)})]
    for s in named("lstm"):
        # --tf32: cuBLAS's products in TF32, the persistent loops' on tensor cores (mma.sync m16n8k8;
        # also in its shuffle version), the fused variant's operands rounded to TF32.
        runs += [(s, ["--tf32"], {"real": "float", "envs": ({}, PERSISTENT, FUSED)}),
                 (s, ["--tf32"], {"real": "float", "defines": ("-DRNNC_SHUFFLE_MMA",), "envs": (PERSISTENT,)}),
                 (s, ["--cuda-graphs"], {"real": "float"})]
    # Forward-only builds (no workspace kept for backward: forward's loops write their states into
    # rings, which a persistent loop's blocks must not overwrite while others still read them).
    runs += [(s, ["--forward-only"], {"cpu_flags": ["--forward-only"], "seeds": seeds_of(s),
                                      "envs": ({}, FUSED) if os.path.basename(s)[:-4] in ("lstm", "bitagger", "mgu") else ({},)})
             for s in samples]
    # Sequences of their own lengths (compare.cpp gives both builds the same): a forward loop, a
    # bidirectional one, and loops run in parallel over time (T = 100: two chunks and more).
    for s in named("lstm", "bitagger", "zoneout_lstm"):
        runs.append((s, ["--lengths"], {"cpu_flags": ["--lengths"], "envs": ({}, FUSED)}))
    # ... and on tensor cores: the rows past the last one running are zeros in B's fragments.
    for s in named("lstm"):
        runs.append((s, ["--lengths", "--dtype", "bf16"], {"real": "bf16", "cpu_flags": ["--lengths", "--dtype", "bf16"],
                                                           "seeds": SEEDS[:1], "envs": (PERSISTENT, FUSED)}))
    # Each step's library calls cut to the sequences still running: a graph per set of lengths.
    for s in named("lstm"):
        runs.append((s, ["--lengths", "--cuda-graphs"], {"cpu_flags": ["--lengths"], "envs": ({}, caller)}))
    for s in named("mingru", "qrnn"):
        runs.append((s, ["--lengths", "--time-parallel", "scan"],
                     {"cpu_flags": ["--lengths", "--time-parallel", "off"], "steps": 100, "batch": 2}))
    if a.scans_only or a.mutants_only:
        runs = []
    if a.double_only:
        runs = [(s, f, kw) for s, f, kw in runs if kw.get("real", "double") == "double"]
    for file, flags, steps, batch, dims, expect in SCAN_RUNS if not a.mutants_only else []:
        path = os.path.join(HERE, file) if file.endswith(".rnn") else os.path.join(ROOT, "samples", file + ".rnn")
        if a.only and os.path.basename(path)[:-4] not in a.only:
            continue
        kw = {"steps": steps, "batch": batch, "dims": dims, "expect": expect, "cpu_flags": ["--time-parallel", "off"]}
        runs.append((path, flags, kw))
        if (expect or steps == 300 and file in ("mingru", "qrnn")) and not a.double_only:  # Newton and scans in float
            runs.append((path, flags, {**kw, "real": "float"}))
    mutants = [(k, m) for k, m in enumerate(MUTANTS) if not a.only or m[0] in a.only]
    if a.scans_only or a.double_only:
        mutants = []
    failed = 0
    with tempfile.TemporaryDirectory() as work, concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        futures = {pool.submit(check, a.rnnc, a.compare, s, f, work, **kw): "build" for s, f, kw in runs}
        futures.update({pool.submit(check_mutant, a.rnnc, a.compare, work, k, m): "mutant" for k, m in mutants})
        for fut in concurrent.futures.as_completed(futures):
            try:
                label, seconds = fut.result()
                what = "PASS" if futures[fut] == "build" else "PASS (caught)"
                print("{} {} ({:.1f} s)".format(what, label, seconds), flush=True)
            except Exception as e:  # noqa: BLE001 - every failure is reported
                failed += 1
                print("FAIL {}".format(e), flush=True)
    print("{} of {} checks hold ({} emulated CUDA builds against the CPU target, {} mistakes the emulator must catch)"
          .format(len(runs) + len(mutants) - failed, len(runs) + len(mutants), len(runs), len(mutants)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
