#!/usr/bin/env python3
"""Runs the numeric tests of rnnc's reference interpreter (`rnnc run
--engine interp`), its backward, and the compiled engine against it:

  test_torch_semantics.py  samples/lstm.rnn, gru.rnn (and charlm.rnn, embed,
                           cross_entropy, mse, hard_sigmoid) against numpy
                           implementations of torch's definitions, f32 and f64
  test_gradients.py        every sample's gradients against central finite
                           differences (f64)
  test_directional.py      directional derivatives on every sample and on
                           randomly generated cells (f64)
  test_compiled.py         `--engine compiled` (and -O0) equals the
                           interpreter on every sample and on random cells,
                           forward and backward, f64 and f32; its f64
                           gradients against finite differences
  test_time_parallel.py    loops run in parallel over time (scans, Newton)
                           equal the same loops run step by step, f64 and f32
  test_threads.py          the compiled engine gives the same bits with 1, 2
                           and 3 threads, under several OpenBLAS core types
  test_masks.py            dropout, DropConnect and zoneout: the engines draw the same
                           masks; their statistics, evaluation, gradients
  test_lengths.py          --lengths: every sample with lengths equals each
                           sequence cut and run alone; bad lengths refused
  test_precision.py        --dtype bf16 and f16: every sample, compiled,
                           within a bound of f32 (docs/precision.md)

Usage: run_all.py [--rnnc PATH] [-j N] [-k SUBSTRING]
Prints one line per case, then `N passed, M failed`; exits 1 on any failure.
Registered with ctest as `numeric` (tests/CMakeLists.txt)."""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, HERE)
try:
    import numpy  # noqa: F401
except ImportError:
    print(f"run_all.py: error: the numeric tests need numpy, which {sys.executable} lacks "
          "(pip install numpy, or configure with -DPython3_EXECUTABLE=a python that has it)", file=sys.stderr)
    print("0 passed, 1 failed")
    sys.exit(1)
import numlib as nl  # noqa: E402
import test_compiled  # noqa: E402
import test_directional  # noqa: E402
import test_gradients  # noqa: E402
import test_threads  # noqa: E402
import test_lengths  # noqa: E402
import test_masks  # noqa: E402
import test_precision  # noqa: E402
import test_time_parallel  # noqa: E402
import test_torch_semantics  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rnnc", default=None, help="the rnnc binary (default: $RNNC or build/rnnc)")
    ap.add_argument("-j", type=int, default=max(2, min(8, os.cpu_count() or 2)), help="cases run in parallel")
    ap.add_argument("-k", default="", help="run only the cases whose name contains this")
    args = ap.parse_args()
    rnnc = os.path.abspath(args.rnnc) if args.rnnc else nl.find_rnnc([])
    if not (os.path.isfile(rnnc) and os.access(rnnc, os.X_OK)):
        print(f"run_all.py: error: no rnnc binary at {rnnc} (pass --rnnc PATH)", file=sys.stderr)
        print("0 passed, 1 failed")
        return 1
    cases = []
    for mod in (test_torch_semantics, test_gradients, test_directional, test_compiled, test_time_parallel,
                test_threads, test_masks, test_lengths, test_precision):
        cases += [c for c in mod.cases(rnnc) if args.k in c[0]]
    t0 = time.time()
    passed, failed = nl.run_cases(cases, workers=args.j)
    print(f"# {len(cases)} cases in {time.time() - t0:.1f}s with {args.j} workers, rnnc = {rnnc}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
