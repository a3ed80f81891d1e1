#!/usr/bin/env python3
"""16-bit storage (`--dtype bf16|f16`, docs/precision.md) against f32: every
sample, compiled, forward and backward, on the same float32 params, inputs,
states and seeds (test_compiled's Problem: small dims, T 4..6, B 2..3, the
loss or random DY, random DS for every float state). Every file the f32 run
writes must be written by the 16-bit run, same shape and dtype (16-bit runs
write float32 .npy files), with

    max|a - b| / max(max|a|, 1e-30)  <=  TOL[dtype]   (a: the f32 run's)

The bounds follow from the unit roundoff u of the storage (bf16 2^-9 =
2.0e-3, f16 2^-12 = 2.4e-4; round to nearest): every param, input and value
kept for backward is rounded once, each rounding a relative error of at most
u, and an array's error is a sum over the few roundings that reach it (a
step's gate values, the product's operands, the saved activations backward
reads), amplified by the small cells' derivatives. TOL allows 24u: 4.8e-2 for
bf16, 6e-3 for f16; the worst measured are 3.0e-2 and 3.0e-3 (docs/precision.md).

A second check per dtype: the values are not those of f32 (a run that stored
f32 would pass the bound): on lstm, some output must differ from f32.

`-k precision/` selects them (run_all.py). RNNC_NUMERIC_PRECISION_SAMPLES=a,b
runs those samples only (the sanitized tier's part: tools/sanitize.sh)."""
import os
import sys
import zlib

import numpy as np

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numlib as nl  # noqa: E402
import test_compiled as tc  # noqa: E402

TOL = nl.HALF_TOLERANCE


def precision_check(rnnc, shared, name, path, seed, dtype):
    def fn():
        dims, _ = nl.small_dims(rnnc, path)
        work = nl.scratch(f"precision-{name}-{dtype}")
        keep = True
        try:
            pr = tc.Problem(rnnc, path, dims, None, seed, work, shared)
            ref = pr.run("compiled", "f32")
            got = pr.run("compiled", dtype)
            worst, at, bad = tc.compare(ref, got, TOL[dtype])
            shared.note(dtype, worst, f"{name}: {at}")
            if bad:
                raise nl.Failure(f"{pr.where()}, --dtype {dtype} against f32:\n" + "\n".join(bad)
                                 + f"\nreproduce (scratch kept in {work}):\n  {tc.command(ref, shared.cache)}\n  "
                                 + tc.command(got, shared.cache))
            if name == "lstm" and worst == 0:
                raise nl.Failure(f"{pr.where()}: --dtype {dtype} gave exactly f32's results: nothing was stored "
                                 f"in 16 bits")
            keep = False
            return f"{len(tc.npy_files(ref.out))} arrays, worst rel err {worst:.2g} ({at})"
        finally:
            if keep:
                shared.failed = True
            else:
                nl.cleanup(work)
    return fn


def cases(rnnc):
    shared = tc.Shared()
    out = []
    only = [s for s in os.environ.get("RNNC_NUMERIC_PRECISION_SAMPLES", "").split(",") if s]
    samples = sorted(os.path.join(nl.SAMPLES, f) for f in os.listdir(nl.SAMPLES)
                     if f.endswith(".rnn") and (not only or f[:-4] in only))
    for p in samples:
        name = os.path.basename(p)[:-4]
        for dtype in ("bf16", "f16"):
            out.append((f"precision/{name}/{dtype}",
                        precision_check(rnnc, shared, name, p, zlib.crc32(b"precision:" + name.encode()), dtype)))

    def summary():
        shared.remove()
        return "; ".join(f"worst {label} {err:.2g} ({where})" for label, (err, where) in sorted(shared.worst.items()))
    out.append(("precision/summary", summary, "after"))
    return out


def main():
    return nl.main_for(cases)


if __name__ == "__main__":
    sys.exit(main())
