#!/usr/bin/env python3
"""What only a GPU and NVIDIA's tools can check, run by tools/gpu-check.sh
after tests/gpu/run.py passed:

1. compute-sanitizer on `rnnc bench --device cuda` (forward and backward,
   random data): racecheck, synccheck, initcheck and memcheck on one bundle
   per feature (FEATURES: one stream, block reductions, two streams, CUDA
   graphs, a scan, Newton, dropout and zoneout masks, DropConnect, sequence lengths); what the emulator (tests/emulator) can only
   approximate.
   A report of errors is a failure; a tool that does not run here (gVisor) is
   "n/a" with its reason.
2. Launches per step, counted by Nsight Compute (ncu): every kernel of one
   forward+backward at T = 4 and T = 8; (n8 - n4) / 4 against what
   `rnnc show --stats --json` says (forward + backward step_launches; cuBLAS
   may run more than one kernel for a GEMM, so a difference is reported, not
   failed). Runs first the launch count, then the sanitizers, so a cut-short
   run still has the count.

Prints Markdown lines (for docs/benchmarks/gpu.md) and exits 1 when a
sanitizer reported errors.

Usage: device_checks.py --rnnc PATH [--samples DIR]"""
import argparse
import json
import os
import subprocess
import sys

ERRORS = 99  # compute-sanitizer's exit code when it found errors
TIMEOUT_S = 240


def run(cmd):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
        return p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired:
        return None, f"over {TIMEOUT_S} s"
    except OSError as e:
        return None, str(e)


def bench(rnnc, path, T, extra=()):
    return [rnnc, "bench", path, "-D", "I=32", "-D", "H=64", "--batch", "3", "--seq", str(T), "--runs", "1",
            "--warmup", "0", "--no-baseline", "--device", "cuda", *extra]


def last_line(text):
    lines = [l for l in text.strip().splitlines() if l.strip()]
    return lines[-1][:200] if lines else ""


# One bundle per feature: (sample, rnnc flags, T). Scans and Newton at T = 64: several chunks.
FEATURES = [
    ("lstm", [], 6),                                         # one stream, cuBLAS + fused kernels
    ("layernorm_lstm", [], 6),                               # block reductions: shared memory and barriers
    ("bitagger", [], 6),                                     # two streams joined by events
    ("lstm", ["--cuda-graphs"], 6),                          # loops captured and replayed as graphs
    ("mingru", ["--time-parallel", "scan"], 64),             # a loop as a parallel scan
    ("indrnn", ["--time-parallel", "newton", "--newton-iterations", "40"], 64),  # Newton's iterations
    ("zoneout_lstm", [], 6),                                 # masks drawn in the kernels (bench: training mode)
    ("bitagger", ["--min-length", "2"], 6),                  # --lengths: lengths copied in, read by every kernel
    ("lstm", ["--min-length", "2", "--cuda-graphs"], 6),     # --lengths: cuBLAS calls cut per step, memsets, graphs
    ("awd_lstm", [], 6),                                     # DropConnect: drop_param and fold_dropped_grad kernels
]


def sanitize(rnnc, samples):
    """racecheck, synccheck and initcheck on every feature's bundle, then
    memcheck on each: the first tools first, so a run cut short still checked
    every feature for races."""
    lines, failed = ["", "### compute-sanitizer", ""], False
    for tool in ("racecheck", "synccheck", "initcheck", "memcheck"):
        for name, extra, T in FEATURES:
            cmd = ["compute-sanitizer", "--tool", tool, "--error-exitcode", str(ERRORS)] + \
                  bench(rnnc, os.path.join(samples, name + ".rnn"), T, extra)
            rc, out = run(cmd)
            label = f"{tool} {name}{' ' + ' '.join(extra) if extra else ''}"
            if rc == 0:
                summary = next((l for l in out.splitlines() if "ERROR SUMMARY" in l), "no errors")
                lines.append(f"- {label}: clean ({summary.strip()})")
            elif rc == ERRORS:
                failed = True
                lines.append(f"- {label}: **errors**: {last_line(out)}")
                print(out[-4000:], file=sys.stderr)
            else:
                lines.append(f"- {label}: n/a (the tool did not run: {last_line(out)})")
            print(lines[-1], file=sys.stderr, flush=True)
    return lines, failed


def count_kernels(rnnc, path, T):
    rc, out = run(["ncu", "--clock-control", "none", "--metrics", "gpu__time_duration.sum", "--csv"] + bench(rnnc, path, T))
    if rc != 0:
        return None, last_line(out)
    return sum(1 for l in out.splitlines() if "gpu__time_duration.sum" in l), ""


def launches(rnnc, samples):
    lines = ["", "### Launches per step (ncu)", ""]
    for name in ("lstm", "gru"):
        path = os.path.join(samples, name + ".rnn")
        rc, out = run([rnnc, "show", path, "-D", "I=32", "-D", "H=64", "--stats", "--json"])
        try:
            stats = json.loads(out[out.index("{"):])
            expected = stats["forward"]["step_launches"] + stats["backward"]["step_launches"]
        except (ValueError, KeyError):
            expected = None
        n4, why = count_kernels(rnnc, path, 4)
        n8, why8 = count_kernels(rnnc, path, 8) if n4 is not None else (None, why)
        if n4 is None or n8 is None:
            lines.append(f"- {name}: n/a (ncu: {why or why8})")
        else:
            per_step = (n8 - n4) / 4
            lines.append(f"- {name}: {per_step:g} kernels per step, forward and backward "
                         f"({n4} kernels at T = 4, {n8} at T = 8); `rnnc show --stats` says {expected}")
        print(lines[-1], file=sys.stderr, flush=True)
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rnnc", required=True)
    ap.add_argument("--samples", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "samples"))
    a = ap.parse_args()
    lines = launches(a.rnnc, a.samples)
    print("\n".join(lines), flush=True)
    more, failed = sanitize(a.rnnc, a.samples)
    print("\n".join(more))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
