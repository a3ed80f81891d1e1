#!/usr/bin/env python3
"""The memory plan against the bundles (passes/PlanMemory.h, docs/codegen.md).

usage: run.py --rnnc RNNC --samples DIR --work DIR [--cxx CXX] [-j N]

For every sample (samples/*.rnn and samples/embed/*.rnn), optimized, at
-O0 and with --dtype bf16 (16-bit buffers, the float gradient sums and, on
CUDA, the scratch that rounds float operands of products to 16 bits), and
every bundle target (cpu, cuda, cuda --jit):

1. `rnnc show --stats --json` lists the plan's buffers and totals; the totals
   must be the buffers' sums, and `rnnc show --after plan-memory --backward`
   must print the same totals.
2. The manifest rnnc compile writes (<model>.json "buffers") must list the
   same buffers: names, widths, padding, steps kept, what each shares.
3. The bundle's own Workspace, layout() and workspace_bytes() (taken from the
   source it writes and compiled together into one program against the
   runtime's rnnc/workspace.h) must return, for each (T, B) of SIZES, what
   the stats say: the sum over the buffers with memory of their own of
   B·(T·bytes_per_step + fixed_bytes) (on the CPU, B·k·bytes_per_step for
   one that keeps a block of k = block_steps(T, B) steps, and nothing for
   one in the caller's array, plus its row of zeros), each rounded up to
   workspace.align_bytes, plus cuda_bytes_per_step·T·B (rounded) and the
   rounding scratch for CUDA, plus the fixed extras (mask key, dropped
   params, loss scale, float gradient sums; each rounded), and align_bytes
   at least.

Before that, the comparison is shown to fail where it must: on a layout with
one buffer one element wider, and on stats with one buffer's bytes changed.
Prints one line per failure and a summary; exit 1 when any check fails.
"""
import argparse
import concurrent.futures
import glob
import json
import os
import re
import shutil
import subprocess
import sys

DIMS = {"gru": ["-D", "I=8", "-D", "H=16"]}  # dims the sample leaves to the command line
TARGETS = {"cpu": ["--target", "cpu"], "cuda": ["--target", "cuda"], "jit": ["--target", "cuda", "--jit"]}
MODES = {"opt": [], "O0": ["-O0"], "bf16": ["--dtype", "bf16"]}  # bf16: 16-bit buffers, the float gradient sums
SIZES = [(1, 1), (7, 3), (100, 32), (513, 5)]


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}\n{p.stderr}")
    return p.stdout


def owns(b, cuda):
    """Whether buffer b has memory of its own on the target: CUDA's sharing is "shares", the CPU's
    "cpu_shares" where it differs (null: memory of its own)."""
    if not cuda and "cpu_shares" in b:
        return b["cpu_shares"] is None
    return "shares" not in b


def expected_bytes(stats, T, B, cuda):
    """workspace_bytes(T, B) by the plan, as the Carver of rnnc/workspace.h counts."""
    align = stats["workspace"]["align_bytes"]
    rounded = lambda n: (n + align - 1) // align * align
    # The CPU keeps a block of steps of some buffers: rnnc/workspace.h's block_steps.
    rows = stats["block_rows"]
    block = min(T, 1 if B >= rows else (rows + B - 1) // B)
    # and reads or writes others in the caller's arrays (with a row of zeros for a seed not passed).
    total = sum(rounded(B * block * b["bytes_per_step"]) if b.get("cpu_block") and not cuda
                else rounded(B * (T * b["bytes_per_step"] + b["fixed_bytes"]))
                for b in stats["workspace"]["buffers"]
                if owns(b, cuda) and not (b.get("cpu_caller") and not cuda))
    if not cuda and stats["zero_row_bytes"]:
        total += rounded(stats["zero_row_bytes"])
    if cuda and stats["cuda_bytes_per_step"]:
        total += rounded(B * T * stats["cuda_bytes_per_step"])
    if cuda and stats["grid_barrier_bytes"]:  # the persistent loops' grid barriers
        total += rounded(stats["grid_barrier_bytes"])
    total += rounded(stats["mask_key_bytes"])
    total += rounded(stats["dropped_param_bytes"]) + rounded(stats["dropped_grad_bytes"])
    if not cuda and stats["panel_bytes"]:  # the products' weights, packed once per call, on the CPU
        total += rounded(stats["panel_bytes"])
    total += rounded(stats["loss_scale_bytes"])  # forward's loss scale, kept for backward
    total += rounded(stats["grad_sum_bytes"])  # 16-bit storage's float gradient sums
    if cuda and stats["rounded_bytes_per_row"]:  # float operands of products rounded to 16 bits, by blocks
        per_row = stats["rounded_bytes_per_row"] // 2
        total += rounded(2 * stats["streams"] * max(per_row, min(T * B * per_row, stats["rounded_elements"])))  # one per stream
    if not cuda and stats["packed_bytes_per_row"]:  # --lengths: the running rows packed, on the CPU
        total += rounded(min(T * B, stats["packed_rows"]) * stats["packed_bytes_per_row"])
    return max(total, align)


def check_totals(stats, plan_text):
    """The totals against the buffers, and against `show --after plan-memory`."""
    bad = []
    buffers = stats["workspace"]["buffers"]
    own = [b for b in buffers if "shares" not in b]
    cpu_own = [b for b in buffers if owns(b, False)]
    sums = {"buffer_bytes_per_step": sum(b["bytes_per_step"] for b in own),
            "buffer_fixed_bytes": sum(b["fixed_bytes"] for b in own),
            "cpu_buffer_bytes_per_step": sum(b["bytes_per_step"] for b in cpu_own),
            "cpu_buffer_fixed_bytes": sum(b["fixed_bytes"] for b in cpu_own),
            "saved_bytes_per_step": sum(b["bytes_per_step"] for b in buffers if b["saved"])}
    for key, value in sums.items():
        if stats[key] != value:
            bad.append(f"stats {key} = {stats[key]}, the buffers sum to {value}")
    m = re.search(r"memory \S+: (\d+) buffers, (\d+) with memory of their own: (\d+) bytes per step and sequence "
                  r"plus (\d+) per sequence \(\d+ per step without sharing\); saved for backward (\d+) bytes", plan_text)
    if not m:
        return bad + [f"show --after plan-memory: no totals line in\n{plan_text}"]
    shown = tuple(int(x) for x in m.groups())
    wanted = (len(buffers), len(own), stats["buffer_bytes_per_step"], stats["buffer_fixed_bytes"],
              stats["saved_bytes_per_step"])
    if shown != wanted:
        bad.append(f"show --after plan-memory says {shown}, --stats --json {wanted} "
                   "(buffers, owners, bytes per step, fixed bytes, saved)")
    return bad


def check_manifest(stats, manifest, cuda):
    """The manifest's buffers against the plan's: each bundle lists its target's sharing."""
    keys = ["name", "width", "pad_before", "pad_after", "steps", "dtype", "backward", "shares"]
    plan = [{k: b.get(k) for k in keys} for b in stats["workspace"]["buffers"]]
    if not cuda:
        for p, b in zip(plan, stats["workspace"]["buffers"]):
            if "cpu_shares" in b:
                p["shares"] = b["cpu_shares"]
    listed = [{k: b.get(k) for k in keys} for b in manifest["buffers"]]
    if plan == listed:
        return []
    for i, (p, l) in enumerate(zip(plan, listed)):
        if p != l:
            return [f"buffer {i}: the plan says {p}, the manifest {l}"]
    return [f"the plan has {len(plan)} buffers, the manifest {len(listed)}"]


def block(text, start, end_line, last=False):
    """The text from the line that starts with `start` to the next line that is `end_line`."""
    at = text.rfind(start) if last else text.find(start)
    if at < 0:
        return None
    end = text.find("\n" + end_line + "\n", at)
    return None if end < 0 else text[at:end + len(end_line) + 2]


def layout_code(source):
    """The bundle's Workspace (the host's: a --jit bundle has a second one in its kernel string), layout() and
    workspace_bytes(), or None."""
    layout = block(source, "int64_t layout(int64_t T, int64_t B, void *base, Workspace *ws) {", "}")
    if layout is None:
        return None
    struct = block(source[:source.find(layout)], "struct Workspace {", "};", last=True)
    size = block(source, "int64_t workspace_bytes(int64_t T, int64_t B) {", "}")
    return None if struct is None or size is None else struct + layout + size


def measure(codes, work, cxx, cflags):
    """workspace_bytes(T, B) of each code for every size of SIZES, by one compiled program."""
    program = ["#include \"rnnc/half.h\"", "#include \"rnnc/workspace.h\"", "#include <algorithm>", "#include <cstdint>",
               "#include <cstdio>",
               "using real = float;", "using store = rnnc::bf16;"]
    for i, code in enumerate(codes):
        program += [f"namespace b{i} {{", "using rnnc::host::Carver;", "using rnnc::host::block_steps;", code, "}"]
    program += ["int main() {"]
    for i in range(len(codes)):
        for T, B in SIZES:
            program.append(f'  std::printf("%lld\\n", static_cast<long long>(b{i}::workspace_bytes({T}, {B})));')
    program += ["}"]
    path = os.path.join(work, "layouts.cpp")
    with open(path, "w") as f:
        f.write("\n".join(program) + "\n")
    binary = os.path.join(work, "layouts")
    run([cxx, "-std=c++17", "-O0", "-w"] + cflags + [path, "-o", binary])
    values = [int(x) for x in run([binary]).split()]
    return [values[i * len(SIZES):(i + 1) * len(SIZES)] for i in range(len(codes))]


def compare(stats, cuda, measured):
    """Differences between the stats and a bundle's workspace_bytes."""
    return [f"T = {T}, B = {B}: workspace_bytes {got}, the plan {want}"
            for (T, B), got in zip(SIZES, measured)
            for want in [expected_bytes(stats, T, B, cuda)] if got != want]


def bundle_case(rnnc, sample, mode, work):
    """Stats, plan text, and for each target the manifest and layout code; or an error."""
    name = os.path.splitext(os.path.basename(sample))[0]
    args = DIMS.get(name, []) + MODES[mode]
    case = {"label": f"{name} {mode}", "errors": [], "targets": {}}
    try:
        case["stats"] = json.loads(run([rnnc, "show", sample, "--stats", "--json"] + args))
        case["errors"] += check_totals(case["stats"], run([rnnc, "show", sample, "--after", "plan-memory",
                                                           "--backward"] + args))
        for target, flags in TARGETS.items():
            out = os.path.join(work, f"{name}-{mode}-{target}")
            shutil.rmtree(out, ignore_errors=True)
            run([rnnc, "compile", sample, "--no-format", "-o", out] + flags + args)
            manifest = json.load(open(glob.glob(os.path.join(out, "*.json"))[0]))
            source = open(glob.glob(os.path.join(out, manifest["model"] + ".c*"))[0]).read()
            code = layout_code(source)
            if code is None:
                case["errors"].append(f"{target}: no Workspace, layout() and workspace_bytes() in the source")
                continue
            case["errors"] += [f"{target}: {e}" for e in check_manifest(case["stats"], manifest, target != "cpu")]
            case["targets"][target] = code
    except (RuntimeError, OSError, ValueError, IndexError, KeyError) as e:
        case["errors"].append(str(e))
    return case


def self_test(case, work, cxx, cflags):
    """The checks fail on a layout one element wider and on stats with changed bytes."""
    code = case["targets"]["cpu"]
    wider = re.sub(r"c\.take<real>\((\d+), (\d+), (\d+)\)", lambda m: f"c.take<real>({m[1]}, {m[2]}, {int(m[3]) + 1})",
                   code, count=1)
    good, changed = measure([code, wider], work, cxx, cflags)
    failures = []
    if compare(case["stats"], False, good):
        failures.append("self-test: the unchanged layout does not match")
    if not compare(case["stats"], False, changed):
        failures.append("self-test: a layout one element wider still matches the plan")
    stats = json.loads(json.dumps(case["stats"]))
    # The first buffer the CPU's workspace holds (not the caller's array, not sharing).
    held = next(b for b in stats["workspace"]["buffers"] if not b.get("cpu_caller") and "shares" not in b)
    held["bytes_per_step"] += 4
    if not compare(stats, False, good):
        failures.append("self-test: changed stats still match the layout")
    return failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rnnc", required=True)
    ap.add_argument("--samples", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--cxx", default=os.environ.get("CXX", "c++"))
    ap.add_argument("-j", type=int, default=2)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    cflags = run([args.rnnc, "--print-cflags"]).split()
    samples = sorted(glob.glob(os.path.join(args.samples, "*.rnn")) + glob.glob(os.path.join(args.samples, "embed", "*.rnn")))
    if not samples:
        print(f"FAILED: no samples in {args.samples}")
        return 1
    jobs = [(s, m) for s in samples for m in MODES]
    with concurrent.futures.ThreadPoolExecutor(args.j) as pool:
        cases = list(pool.map(lambda sm: bundle_case(args.rnnc, sm[0], sm[1], args.work), jobs))
    failures = []
    lstm = [c for c in cases if c["label"] == "lstm opt" and "cpu" in c["targets"]]
    failures += self_test(lstm[0], args.work, args.cxx, cflags) if lstm else ["self-test: no lstm bundle"]
    codes, owners = [], []
    for case in cases:
        failures += [f"{case['label']}: {e}" for e in case["errors"]]
        for target, code in case["targets"].items():
            codes.append(code)
            owners.append((case, target))
    for (case, target), measured in zip(owners, measure(codes, args.work, args.cxx, cflags)):
        failures += [f"{case['label']} {target}: {e}" for e in compare(case["stats"], target != "cpu", measured)]
    for f in failures:
        print("FAILED:", f)
    print(f"{len(cases)} samples x modes, {len(codes)} bundles at {len(SIZES)} sizes: "
          f"{'ok' if not failures else str(len(failures)) + ' failures'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
