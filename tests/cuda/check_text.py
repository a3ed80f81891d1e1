#!/usr/bin/env python3
"""The CUDA text of every sample, checked on a machine with no GPU (DESIGN.md
§7, issue 6 item 5). For each samples/*.rnn:

  rnnc compile --target cuda --jit      the kernel string compiled in-process
                                        by rnnc-nvrtc-check (compute_80 and
                                        compute_90 PTX, an sm_90 cubin with
                                        ptxas's report: no spills in rnnc's
                                        kernels; compute_90 as double)
  c++ -fsyntax-only -Wall -Wextra -Werror  the host part of the JIT bundle (.cpp)
                                        and its header; a few as double too
  (static)                              every launch of the host part names a
                                        kernel of the source, its block size is
                                        within the kernel's __launch_bounds__ and
                                        a multiple of 32; the manifest's fused
                                        kernels are the source's kernels; streams
                                        and events are in range, an event is
                                        recorded before a stream waits for it,
                                        a stage run as a loop is a loop, and
                                        stages that may run at once on two
                                        streams touch different memory when
                                        one of them writes it

and, when nvcc is there, `nvcc -arch=sm_90 -Werror all-warnings -c` on the .cu
bundles of a few samples (NVCC_SAMPLES: nvcc takes seconds a file), with the
model's entry point checked in the object.

The -O0 build of the LSTM goes through the same checks as the samples.

Before that, the static checks and the NVRTC checker are shown to fail where
they must: on the bidirectional tagger with a wait removed, with a buffer of
one loop sharing memory with one of the other loop, with a launch over its
__launch_bounds__; and with a spilling kernel, a syntax error, a kernel the
host part loads but the source lacks, a file that is not a --jit bundle, a warning.

Usage: check_text.py --rnnc RNNC --checker CHECKER --samples DIR
                     --cuda-include DIR... [--nvcc NVCC | --sanitized-tier]
                     [--cxx CXX] [--keep]
Exit 0 when all holds; 1 otherwise (each failure named).
"""
import argparse
import concurrent.futures
import contextlib
import glob
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

# Samples without dim lines of their own: the sizes they get here.
DIMS = {"gru": ["-D", "I=32", "-D", "H=64"]}
# The samples whose .cu goes through nvcc: a cell, a bidirectional model with
# an embedding and a loss, two stacked LSTMs, delays of 2 and 4 steps, and
# loops run in parallel over time (Newton forward, scans backward).
NVCC_SAMPLES = ["lstm", "bitagger", "charlm", "dilated", "adding"]
# The samples also compiled with -O0 (one launch per op per step: many kernels).
O0_SAMPLES = ["lstm"]
# The samples whose JIT host part is also compiled as double (the host code
# is the same text for every real type; a few suffice).
DOUBLE_SAMPLES = NVCC_SAMPLES
# 16-bit storage (docs/precision.md): every sample's --jit bundle in bf16, a
# few in f16 (the same text but for the store type); .cu through nvcc: a cell
# and a model with an embedding and a loss, one in each.
F16_SAMPLES = ["lstm", "charlm", "mingru", "awd_lstm"]
NVCC_16BIT = ["lstm-bf16", "charlm-f16"]
# Kernels every bundle carries, beside the fused ones (and a 16-bit bundle's conversions).
HELPERS = {"fill", "grad_embed", "mean", "set_rng", "drop_param", "fold_dropped_grad", "to_real", "to_store",
           "fill_store", "mean_store", "grad_embed_store", "column_sums_store", "bias_rows"}

failures = []


def fail(what):
    failures.append(what)
    print(f"FAILED: {what}", flush=True)


def run(cmd, **kw):
    """(returncode, stdout + stderr) of cmd."""
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    return p.returncode, p.stdout


def parallel(jobs):
    """Runs (label, cmd) jobs a few at a time; returns [(label, rc, output)] in order."""
    workers = max(1, min(len(jobs), os.cpu_count() or 1))
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        futures = [(label, pool.submit(run, cmd)) for label, cmd in jobs]
        return [(label, *f.result()) for label, f in futures]


class Step:
    """Prints a step's name and how long it took."""

    def __init__(self, name):
        self.name = name

    def __enter__(self):
        self.start = time.monotonic()
        print(f"-- {self.name}", flush=True)

    def __exit__(self, *exc):
        print(f"   {self.name}: {time.monotonic() - self.start:.1f} s", flush=True)


def kernel_source(text):
    m = re.search(r'kKernelSource\[\] = R"rnnc_cuda\((.*?)\)rnnc_cuda";', text, re.S)
    return m.group(1) if m else None


def kernels_of(source):
    """{name: launch bound} of every RNNC_KERNEL in the source."""
    return {m.group(2): int(m.group(1))
            for m in re.finditer(r"RNNC_KERNEL __launch_bounds__\((\d+)\) void (\w+)\(", source)}


def static_checks(sample, path, manifest):
    """The host part's launches against the kernels (a .cu or a --jit .cpp)."""
    text = open(path).read()
    jit = path.endswith(".cpp")
    source = kernel_source(text) if jit else text
    if source is None:
        fail(f"{sample}: {path}: no kKernelSource")
        return
    kernels = kernels_of(source)
    if not kernels:
        fail(f"{sample}: {path}: no RNNC_KERNEL in the kernel source")
        return
    m = re.search(r"const char \*const kKernelNames\[\] = \{([^}]*)\};", text)
    names = re.findall(r'"(\w+)"', m.group(1)) if m else []
    if not names:
        fail(f"{sample}: {path}: no kKernelNames")
    for n in names:
        if n not in kernels:
            fail(f"{sample}: {path}: kKernelNames has {n}, which is not a kernel of the source")
    if set(names) != set(kernels):
        fail(f"{sample}: {path}: kKernelNames {sorted(names)} is not the source's kernels {sorted(kernels)}")
    if not jit:  # the .cu's table of __global__ functions is in the order of the names
        t = re.search(r"const void \*kernel_\[(\d+)\] = \{(.*?)\};", text, re.S)
        table = re.findall(r"reinterpret_cast<const void \*>\((\w+)\)", t.group(2)) if t else []
        if table != names:
            fail(f"{sample}: {path}: kernel_[] {table} is not in the order of kKernelNames {names}")
    launches = re.findall(r'launch\(kernel_\[(\d+)\], "(\w+)", [^\n]*?, (\d+), s0?, ', text)
    if not launches:
        fail(f"{sample}: {path}: no kernel launches found")
    # A persistent loop's one cooperative launch (docs/cuda.md#persistent-loops): 256 threads.
    launches += re.findall(r'launch_cooperative\(kernel_\[(\d+)\], "(\w+)", c\.grid, (\d+), ', text)
    # The fused variant's kernels a step, with their values on chip in dynamic shared memory.
    launches += re.findall(r'launch_shared\(kernel_\[(\d+)\], "(\w+)", c\.grid, (\d+), ', text)
    for index, name, block in launches:
        index, block = int(index), int(block)
        if index >= len(names) or names[index] != name:
            fail(f"{sample}: {path}: launch of kernel_[{index}] says {name}, but kKernelNames[{index}] is "
                 f"{names[index] if index < len(names) else 'past the end'}")
        elif block > kernels[name]:
            fail(f"{sample}: {path}: {name} launched with {block} threads, over its __launch_bounds__({kernels[name]})")
        if block % 32 or block > 1024:
            fail(f"{sample}: {path}: {name} launched with {block} threads (not a multiple of 32 up to 1024)")
    # Streams and events: within range, and every event a stream waits for
    # was recorded before, in the same entry point (a wait on an event never
    # recorded orders nothing).
    counts = re.search(r"constexpr int kStreams = (\d+), kEvents = (\d+);", text)
    if not counts:
        fail(f"{sample}: {path}: no kStreams, kEvents")
        return
    streams, events = int(counts.group(1)), int(counts.group(2))
    for e in re.findall(r"c\.event\((\d+)\)", text):
        if int(e) >= events:
            fail(f"{sample}: {path}: event {e} used, kEvents = {events}")
    for st in re.findall(r"c\.stream\((\d+)\)", text):
        if int(st) >= streams:
            fail(f"{sample}: {path}: stream {st} used, kStreams = {streams}")
    loops = {int(n): "for (int64_t t" in body for n, body in
             re.findall(r"^int stage_(\d+)\(.*?\n(.*?)^}", text, re.S | re.M)}
    for entry in ("forward", "backward"):
        body = re.search(rf"^int {entry}\(.*?^}}", text, re.S | re.M)
        if not body:
            fail(f"{sample}: {path}: no {entry}()")
            continue
        recorded = set()
        for line in body.group(0).split("\n"):
            r = re.search(r"cudaEventRecord\(c\.event\((\d+)\)", line)
            if r:
                recorded.add(r.group(1))
            w = re.search(r"cudaStreamWaitEvent\([^,]+, c\.event\((\d+)\)", line)
            if w and w.group(1) not in recorded:
                fail(f"{sample}: {path}: {entry} waits for event {w.group(1)} before recording it")
            run_ = re.search(r"run\(stage_(\d+), (\d+), (true|false), ws, P, G, T, B, (\d+), mem\)", line)
            if run_:
                n, index, loop, st = int(run_.group(1)), int(run_.group(2)), run_.group(3) == "true", int(run_.group(4))
                if n != index or n not in loops or loops[n] != loop or st >= streams:
                    fail(f"{sample}: {path}: {entry}: {run_.group(0)}: stage_{n} "
                         f"{'is a loop' if loops.get(n) else 'is not a loop' if n in loops else 'is not defined'}, "
                         f"kStreams = {streams}")
    # The ones column_sums multiplies by: as many as its rows.
    ones = re.search(r"ws->ones = c\.take<real>\(1, 0, (\d+)\);", text)
    for k in re.findall(r"column_sums\(blas, (?:\(r1 - r0\) \* (\d+)|r1 - r0), ", text):
        if not ones or int(k or 1) > int(ones.group(1)):
            fail(f"{sample}: {path}: a column_sums over (r1 - r0) * {k or 1} rows, ws.ones holds "
                 f"{ones.group(1) if ones else 'nothing'} per row")
    races(sample, path, text)
    launched = {name for _, name, _ in launches}
    fused = {k["name"] for k in manifest["kernels"] if k["kind"] == "fused"}
    # A loop run in parallel over time (docs/cuda.md) has kernels of its own:
    # scan_<stage>_<pass>, newton_<stage>_<pass>, the stage a loop of the manifest.
    scans = {k for k in kernels if re.fullmatch(r"(?:scan|newton)_(\d+)_[a-z]+", k)}
    for k in sorted(scans):
        stage = int(re.search(r"_(\d+)_", k).group(1))
        if stage >= len(manifest["stages"]) or not manifest["stages"][stage]["loop"]:
            fail(f"{sample}: {path}: kernel {k} runs a loop, but manifest stage {stage} is not one")
    # A loop that may run persistent has persist_<stage>, which the manifest's stage names.
    persists = {k for k in kernels if re.fullmatch(r"persist_\d+", k)}
    named = {s.get("persistent") for s in manifest["stages"]} - {None}
    if persists != named:
        fail(f"{sample}: {path}: persistent kernels {sorted(persists)}, the manifest's stages name {sorted(named)}")
    # Its fused variant (a kernel a step per product): step_<stage>_<j> and step_<stage>_start, the
    # manifest's stage lists them.
    steps = {k for k in kernels if re.fullmatch(r"step_\d+_(?:\d+|start)", k)}
    listed = {k for s in manifest["stages"] for k in s.get("fused", [])}
    if steps != listed:
        fail(f"{sample}: {path}: fused variants' kernels {sorted(steps)}, the manifest's stages list {sorted(listed)}")
    for s in manifest["stages"]:
        if s.get("fused") and not s.get("persistent"):
            fail(f"{sample}: {path}: a stage with a fused variant but no persistent kernel: {s}")
    if fused != set(kernels) - HELPERS - scans - persists - steps:
        fail(f"{sample}: manifest's fused kernels {sorted(fused)} are not the source's "
             f"{sorted(set(kernels) - HELPERS - scans - persists - steps)}")
    for k in sorted((fused | scans | persists | steps) - launched):
        fail(f"{sample}: {path}: kernel {k} is never launched")
    if manifest.get("target") != "cuda":
        fail(f"{sample}: manifest target is {manifest.get('target')!r}, not 'cuda'")


def top_level_args(call):
    """The arguments of `f(a, g(b, c), d)` split at the top level."""
    args, depth, cur = [], 0, ""
    for ch in call[call.index("(") + 1:]:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            if depth == 0:
                break
            depth -= 1
        if ch == "," and depth == 0:
            args.append(cur.strip())
            cur = ""
        else:
            cur += ch
    args.append(cur.strip())
    return args


def buffers(expr):
    """The workspace arrays (ws.X) and param gradients (G) an argument points into."""
    found = set(re.findall(r"\bws\.(\w+)", expr))
    if re.search(r"\bG\b", expr):
        found.add("G")
    return found


def bodies(text):
    """(kernel, body) of every RNNC_KERNEL and every <kernel>_step device function (the body a
    loop's fused kernel shares with its persistent loop: docs/cuda.md#persistent-loops)."""
    found = re.findall(r"^RNNC_KERNEL __launch_bounds__\([^)]*\) void (\w+)\((.*?)^}", text, re.S | re.M)
    return found + re.findall(r"^__device__ void (\w+)_step\((.*?)^}", text, re.S | re.M)


def races(sample, path, text):
    """Stages that may run at the same time (on different streams, not
    ordered by events) must not touch the same memory when one writes it:
    the buffers a stage's kernels write (non-const pointers into ws, a GEMM's
    output, the param gradients G) against what the other reads or writes,
    buffers that share memory (ws->A = ws->B) counted as one."""
    alias = dict(re.findall(r"ws->(\w+) = ws->(\w+);", text))

    def root(b):
        seen = set()
        while b in alias and b not in seen:
            seen.add(b)
            b = alias[b]
        return b

    kernel_access = {}  # kernel -> (reads, writes); a loop's fused kernel's body is its <name>_step function
    for name, body in bodies(text):
        reads, writes = kernel_access.setdefault(name, (set(), set()))
        for const, b in re.findall(r"(const )?(?:real|int32_t) \*__restrict__ \w+ = ws\.(\w+)", body):
            (reads if const else writes).add(b)
    launcher = {}  # launch_X -> (reads, writes)
    for name, body in re.findall(r"^int (launch_\w+)\(.*?\n(.*?)^}", text, re.S | re.M):
        reads, writes = set(), set()
        k = re.search(r'launch\(kernel_\[\d+\], "(\w+)"', body)
        if k and k.group(1) in kernel_access:
            reads |= kernel_access[k.group(1)][0]
            writes |= kernel_access[k.group(1)][1]
        for const, b in re.findall(r"^  (const )?(?:real|int32_t) \*\w+ = (.*?);$", body, re.M):
            (reads if const else writes).update(buffers(b))
        for call in re.findall(r"\b(gemm\(blas,.*|column_sums\(blas,.*)$", body, re.M):
            args = top_level_args(call)
            if call.startswith("gemm") and len(args) >= 9:
                reads |= buffers(args[6]) | buffers(args[7])
                writes |= buffers(args[8])
            elif call.startswith("column_sums") and len(args) >= 6:
                reads |= buffers(args[3]) | buffers(args[4])
                writes |= buffers(args[5])
            else:
                fail(f"{sample}: {path}: cannot read the call {call}")
        launcher[name] = (reads, writes)
    stage_access = {}
    for n, body in re.findall(r"^int stage_(\d+)\(.*?\n(.*?)^}", text, re.S | re.M):
        reads, writes = set(), set()
        for l in re.findall(r"\b(launch_\w+)\(ws,", body):
            reads |= launcher.get(l, (set(), set()))[0]
            writes |= launcher.get(l, (set(), set()))[1]
        stage_access[int(n)] = ({root(b) for b in reads}, {root(b) for b in writes})

    for entry in ("forward", "backward"):
        body = re.search(rf"^int {entry}\(.*?^}}", text, re.S | re.M)
        if not body:
            continue
        done = {}     # stream -> stages that finished before what it runs next
        on = {}       # stream -> stages run on it so far
        event = {}    # event -> stages finished before it
        before = {}   # stage -> stages that finish before it starts
        stream_of = {}
        for line in body.group(0).split("\n"):
            m = re.search(r"cudaEventRecord\(c\.event\((\d+)\), (?:c\.stream\((\d+)\)|s0)\)", line)
            if m:
                st = int(m.group(2) or 0)
                event[m.group(1)] = done.get(st, set()) | on.get(st, set())
                continue
            m = re.search(r"cudaStreamWaitEvent\((?:c\.stream\((\d+)\)|s0), c\.event\((\d+)\)", line)
            if m:
                st = int(m.group(1) or 0)
                done[st] = done.get(st, set()) | event.get(m.group(2), set())
                continue
            m = re.search(r"run\(stage_(\d+), \d+, (?:true|false), ws, P, G, T, B, (\d+), mem\)", line)
            if m:
                n, st = int(m.group(1)), int(m.group(2))
                before[n] = done.get(st, set()) | on.get(st, set())
                on.setdefault(st, set()).add(n)
                stream_of[n] = st
        stages = sorted(before)
        for i, a in enumerate(stages):
            for b in stages[i + 1:]:
                if a in before[b] or b in before[a]:
                    continue
                ra, wa = stage_access.get(a, (set(), set()))
                rb, wb = stage_access.get(b, (set(), set()))
                clash = (wa & (rb | wb)) | (wb & ra)
                if clash:
                    fail(f"{sample}: {path}: {entry}: stage {a} (stream {stream_of[a]}) and stage {b} "
                         f"(stream {stream_of[b]}) may run at once and both touch {sorted(clash)}, one writing")


def static_self_test(bundle, manifest, work):
    """The static checks fail where they must, on changed copies of the
    bidirectional tagger's bundle (two streams)."""
    text = open(bundle).read()
    waits = re.findall(r"RNNC_CUDA_CHECK\(cudaStreamWaitEvent\(c\.stream\(0\), c\.event\(\d+\), 0\)\);", text)
    fused = re.findall(r"RNNC_KERNEL __launch_bounds__\((\d+)\) void (fused_\d+)\(", text)
    writes = {}
    for name, body in bodies(text):
        writes.setdefault(name, []).extend(re.findall(r"^    real \*__restrict__ \w+ = ws\.(\w+) ", body, re.M))
    loops = re.findall(r"if \(run\(stage_(\d+), \d+, true, ws, P, G, T, B, (\d+), mem\)\)", text)
    streams = {st: n for n, st in loops}
    cases = {}
    if waits:  # the output stage no longer waits for the right-to-left loop
        cases["missing wait"] = (text.replace(waits[0], "", 1), r"may run at once and both touch")
    if {"0", "1"} <= set(streams):  # a buffer of one loop shares memory with one of the other
        up, down = f"stage_{streams['0']}(", f"stage_{streams['1']}("
        k_up = re.search(r"launch_(fused_\d+)\(ws", text[text.index("int " + up):]).group(1)
        k_down = re.search(r"launch_(fused_\d+)\(ws", text[text.index("int " + down):]).group(1)
        if writes.get(k_up) and writes.get(k_down):
            a, b = writes[k_down][-1], writes[k_up][-1]
            cases["shared buffer"] = (text.replace("  ws->ones = c.take", f"  ws->{a} = ws->{b};\n  ws->ones = c.take", 1),
                                      rf"may run at once and both touch \['{b}'\]")
    if fused:
        bound, name = fused[-1]
        cases["block size"] = (re.sub(rf'("{name}", grid_for\([^;]*?\)), \d+, s,', rf"\1, {int(bound) * 2}, s,", text),
                               rf"{name} launched with {int(bound) * 2} threads, over its __launch_bounds__")
    if len(cases) != 3:
        fail(f"static self-test: the bundle {bundle} lacks what the cases change ({sorted(cases)})")
    for case, (body, expected) in cases.items():
        path = os.path.join(work, "static-" + case.replace(" ", "-") + os.path.splitext(bundle)[1])
        with open(path, "w") as f:
            f.write(body)
        before = list(failures)
        with contextlib.redirect_stdout(io.StringIO()):
            static_checks(case, path, manifest)
        found = [f for f in failures[len(before):] if re.search(expected, f)]
        del failures[len(before):]
        if body == text or not found:
            fail(f"static self-test {case}: expected a failure matching /{expected}/")
        else:
            print(f"   static checks refuse {case}: {found[0]}")


def checker_self_test(checker, bundle, work):
    """The checker fails on what it must catch, naming it."""
    text = open(bundle).read()
    spill = r'''
// More live values than 32 registers hold (1024 threads, 2 blocks an SM): ptxas spills.
RNNC_KERNEL __launch_bounds__(1024, 2) void fused_spill(real *a, int64_t n) {
  real v[48];
#pragma unroll
  for (int k = 0; k < 48; ++k) v[k] = a[threadIdx.x + k * n];
  for (int64_t e = 0; e < n; ++e) {
#pragma unroll
    for (int k = 0; k < 48; ++k) v[k] = v[k] * v[(k + 7) % 48] + a[e * 48 + k];
  }
#pragma unroll
  for (int k = 0; k < 48; ++k) a[threadIdx.x + k * n] = v[k];
}
'''
    names = 'const char *const kKernelNames[] = {"'
    cases = {
        "spill": (text.replace(')rnnc_cuda";', spill + ')rnnc_cuda";', 1).replace(names, names + 'fused_spill", "', 1),
                  r"kernel fused_spill spills on sm_90"),
        "syntax": (text.replace("__launch_bounds__(", "void __launch_bounds__(", 1), r"float compute_80: nvrtcCompileProgram"),
        "missing": (text.replace(names, names + 'fused_missing", "', 1),
                    r"loads kernel 'fused_missing', which the kernel source does not define"),
        "not-jit": (text.replace("kKernelSource", "kSomethingElse"), r"no `kKernelSource"),
        "warning": (text.replace(')rnnc_cuda";', '#warning a warning is an error\n)rnnc_cuda";', 1), r"NVRTC warned"),
    }
    for case, (body, expected) in cases.items():
        if body == text:
            fail(f"checker self-test {case}: the bundle did not have the text to change")
            continue
        path = os.path.join(work, f"{case}.cpp")
        with open(path, "w") as f:
            f.write(body)
        rc, out = run([checker, "--quiet", path])
        if rc != 1 or not re.search(expected, out):
            fail(f"checker self-test {case}: expected exit 1 and /{expected}/, got {rc}:\n{out}")
        else:
            print(f"   checker refuses {case}: {[l for l in out.splitlines() if re.search(expected, l)][0]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rnnc", required=True)
    ap.add_argument("--checker", required=True)
    ap.add_argument("--samples", required=True)
    ap.add_argument("--cuda-include", required=True, nargs="+", help="the toolkit's include directories")
    ap.add_argument("--nvcc")
    ap.add_argument("--sanitized-tier", action="store_true",
                    help="NVRTC on the LSTM only, no nvcc: the compilers' work on the same text is the plain tier's")
    ap.add_argument("--cxx", default=os.environ.get("CXX", "c++"))
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()
    begin = time.monotonic()

    samples = sorted(glob.glob(os.path.join(args.samples, "*.rnn")))
    if not samples:
        print(f"no samples in {args.samples}")
        return 1
    work = tempfile.mkdtemp(prefix="rnnc-cuda-text-")
    env = dict(os.environ, RNNC_CACHE=os.path.join(work, "cache"))
    rc, cflags = run([args.rnnc, "--print-cflags"])
    if rc:
        print(f"rnnc --print-cflags failed: {cflags}")
        return 1
    cflags = cflags.split()
    names = [os.path.basename(s)[:-4] for s in samples]
    # --jit bundles: every sample, and the -O0 baseline of one (what bench runs beside it).
    variants = [(n, s, DIMS.get(n, [])) for n, s in zip(names, samples)]
    variants += [(f"{n}-O0", s, DIMS.get(n, []) + ["-O0"]) for n, s in zip(names, samples) if n in O0_SAMPLES]
    variants += [(f"{n}-bf16", s, DIMS.get(n, []) + ["--dtype", "bf16"]) for n, s in zip(names, samples)]
    variants += [(f"{n}-f16", s, DIMS.get(n, []) + ["--dtype", "f16"]) for n, s in zip(names, samples) if n in F16_SAMPLES]
    # --tf32: the persistent loops' products on tensor cores in TF32 (#define RNNC_TF32 in the kernels).
    variants += [(f"{n}-tf32", s, DIMS.get(n, []) + ["--tf32"]) for n, s in zip(names, samples) if n in O0_SAMPLES]
    base = dict(zip(names, samples))

    with Step(f"rnnc compile --target cuda --jit, {len(samples)} samples, -O0 and --tf32 of {', '.join(O0_SAMPLES)}, "
              f"all in bf16 and {', '.join(F16_SAMPLES)} in f16; .cu of {', '.join(NVCC_SAMPLES + NVCC_16BIT)}"):
        jobs = [(n, [args.rnnc, "compile", s, "--target", "cuda", "--jit", *flags, "-o",
                     os.path.join(work, "jit", n)]) for n, s, flags in variants]
        jobs += [(n + " (.cu)", [args.rnnc, "compile", s, "--target", "cuda", *DIMS.get(n, []), "-o",
                                 os.path.join(work, "cu", n)]) for n, s in zip(names, samples) if n in NVCC_SAMPLES]
        jobs += [(v + " (.cu)", [args.rnnc, "compile", base[v.rsplit("-", 1)[0]], "--target", "cuda", "--dtype",
                                 v.rsplit("-", 1)[1], "-o", os.path.join(work, "cu", v)])
                 for v in NVCC_16BIT if v.rsplit("-", 1)[0] in base]
        with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 1) as pool:
            done = list(pool.map(lambda j: (j[0], *run(j[1], env=env)), jobs))
        for label, rc, out in done:
            if rc:
                fail(f"rnnc compile {label}: exit {rc}\n{out}")
    bundles = {}  # sample -> (jit .cpp, .h, manifest)
    for n, _, _ in variants:
        cpp = glob.glob(os.path.join(work, "jit", n, "*.cpp"))
        if len(cpp) != 1:
            if not any(f.startswith(f"rnnc compile {n}:") for f in failures):
                fail(f"{n}: the --jit bundle has {len(cpp)} .cpp files")
            continue
        model = os.path.basename(cpp[0])[:-4]
        header, manifest = cpp[0][:-4] + ".h", cpp[0][:-4] + ".json"
        if not os.path.isfile(header) or not os.path.isfile(manifest):
            fail(f"{n}: the --jit bundle lacks {model}.h or {model}.json")
            continue
        if glob.glob(os.path.join(work, "jit", n, "*.cu")):
            fail(f"{n}: the --jit bundle has a .cu")
        bundles[n] = (cpp[0], header, json.load(open(manifest)))

    with Step("the launches against the kernels (static)"):
        for n, (cpp, _, manifest) in bundles.items():
            static_checks(n, cpp, manifest)
            for cu in glob.glob(os.path.join(work, "cu", n, "*.cu")):
                static_checks(n + " (.cu)", cu, manifest)

    if "bitagger" in bundles:
        with Step("the static checks fail where they must"):
            static_self_test(bundles["bitagger"][0], bundles["bitagger"][2], work)
    else:
        fail("no bitagger bundle for the static checks' self-test")

    if "lstm" in bundles:
        with Step("the checker fails where it must"):
            checker_self_test(args.checker, bundles["lstm"][0], work)
    else:
        fail("no lstm bundle for the checker's self-test")

    nvrtc = {n: b for n, b in bundles.items() if not args.sanitized_tier or n == "lstm"}
    with Step(f"NVRTC: compute_80, compute_90, sm_90 (ptxas -v), double compute_90; {len(nvrtc)} bundles"
              + (" (the sanitized tier: the plain tier runs them all)" if args.sanitized_tier else "")):
        for n, rc, out in parallel([(n, [args.checker, b[0]]) for n, b in nvrtc.items()]):
            for line in out.splitlines():
                if not line.startswith("NVRTC "):
                    print(f"   {line}")
            if rc:
                fail(f"rnnc-nvrtc-check {n}: exit {rc}")

    with Step(f"{args.cxx} -fsyntax-only -Wall -Wextra -Werror: {len(bundles)} JIT host parts and headers; "
                  f"double: {', '.join(DOUBLE_SAMPLES)}"):
        flags = [args.cxx, "-std=c++17", "-Wall", "-Wextra", "-Werror", *cflags, *("-I" + d for d in args.cuda_include), "-fsyntax-only"]
        jobs = []
        for n, (cpp, header, _) in bundles.items():
            jobs.append((f"{n} float", [*flags, cpp]))
            if n in DOUBLE_SAMPLES:
                jobs.append((f"{n} double", [*flags, "-DRNNC_REAL_DOUBLE", cpp]))
            # The header as a program includes it (a header as the main file warns of its #pragma once).
            include = os.path.join(work, f"include-{n}.cpp")
            with open(include, "w") as f:
                f.write(f'#include "{header}"\n')
            jobs.append((f"{n} header", [*flags, include]))
        for label, rc, out in parallel(jobs):
            if rc:
                fail(f"{args.cxx} -fsyntax-only {label}: exit {rc}\n{out}")

    if args.sanitized_tier:
        print("-- nvcc: left out in the sanitized tier (the plain tier runs it)")
    elif args.nvcc and os.access(args.nvcc, os.X_OK):
        cus = [(n, glob.glob(os.path.join(work, "cu", n, "*.cu"))) for n in NVCC_SAMPLES + NVCC_16BIT
               if n.split("-")[0] in names]
        with Step(f"nvcc -arch=sm_90 -Werror all-warnings -c: {', '.join(n for n, _ in cus)}"):
            jobs = []
            for n, found in cus:
                if len(found) != 1:
                    fail(f"{n}: the .cu bundle has {len(found)} .cu files")
                    continue
                jobs.append((n, [args.nvcc, "-std=c++17", "-arch=sm_90", *cflags, "-Werror", "all-warnings",
                                 "-c", found[0], "-o", found[0][:-3] + ".o"]))
            for label, rc, out in parallel(jobs):
                if rc:
                    fail(f"nvcc {label}: exit {rc}\n{out}")
                    continue
                cu = dict(jobs)[label][-3]
                symbol = bundles[label][2]["symbol"] if label in bundles else None
                rc, syms = run(["nm", "-g", "--defined-only", cu[:-3] + ".o"])
                if symbol and (rc or not re.search(rf"\bT {symbol}\b", syms)):
                    fail(f"nvcc {label}: {symbol} is not defined in the object")
    else:
        print("-- nvcc: not found, the .cu bundles are not compiled (SKIPPED)")

    print(f"total: {time.monotonic() - begin:.1f} s")
    if failures:
        print(f"{len(failures)} failure(s); the bundles are in {work}")
        return 1
    if args.keep:
        print(f"the bundles are in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
