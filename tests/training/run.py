#!/usr/bin/env python3
"""The training checks of the CPU backend, through `rnnc train` (ctest `training`):

  adding      the LSTM sample on the adding problem (T = 50) reaches a last-step
              MSE below 0.01 (predicting the mean gives about 0.17)
  text        a character model on a few hundred KB of text (this repository's
              docs and compiler sources) gets below the text's unigram entropy
  resume      20 steps, a checkpoint, 20 more steps from it: the same losses,
              bit for bit, as 40 steps in one run (and the same final params)
  refused     a damaged checkpoint (one byte flipped), a truncated one and one
              of another model are refused with exit 1 and a clear message

Usage: run.py --rnnc PATH. Uses a fresh RNNC_CACHE under a temporary directory."""
import argparse
import csv
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLES = os.path.join(ROOT, "samples")


def run(cmd, env, expect=0):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != expect:
        raise AssertionError(f"exit {p.returncode} (expected {expect}): {' '.join(cmd)}\n{p.stderr[-3000:]}")
    return p.stderr


def final(stderr, metric):
    m = re.search(rf"final {metric} ([0-9.eE+-]+|nan|inf)", stderr)
    if not m:
        raise AssertionError(f"no 'final {metric}' line in:\n{stderr[-2000:]}")
    return float(m.group(1))


def losses(path):
    with open(path) as f:
        return [row["loss"] for row in csv.DictReader(f)]


def check_adding(rnnc, work, env):
    err = run([rnnc, "train", os.path.join(SAMPLES, "lstm.rnn"), "--task", "adding", "--bptt", "50", "--batch", "32",
               "--steps", "800", "--lr", "0.01", "--seed", "1"], env)
    mse = final(err, "mse")
    assert mse < 0.01, f"adding: last-step MSE {mse} after 800 steps, expected < 0.01\n{err[-1500:]}"
    return f"mse {mse:.4f}"


def check_text(rnnc, work, env):
    corpus = os.path.join(work, "corpus.txt")
    with open(corpus, "wb") as out:
        for f in sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")) + glob.glob(os.path.join(ROOT, "compiler", "*", "*.cpp"))):
            with open(f, "rb") as src:
                out.write(src.read())
    size = os.path.getsize(corpus)
    assert size > 100_000, f"the corpus is only {size} bytes"
    err = run([rnnc, "train", os.path.join(SAMPLES, "lstm.rnn"), "--task", f"text:{corpus}", "--bptt", "50",
               "--batch", "32", "--steps", "300", "--lr", "0.005"], env)
    m = re.search(r"unigram entropy ([0-9.]+) bits", err)
    assert m, f"no unigram entropy in the start line:\n{err[:500]}"
    unigram, bpc = float(m.group(1)), final(err, "bpc")
    assert bpc < unigram, f"text: {bpc} bits per character after 300 steps, unigram entropy {unigram}"
    return f"{size // 1000} KB, bpc {bpc:.3f} < unigram {unigram:.3f}"


def check_resume(rnnc, work, env):
    base = [rnnc, "train", os.path.join(SAMPLES, "gru.rnn"), "-D", "I=8", "-D", "H=32", "--task", "adding",
            "--bptt", "20", "--batch", "8", "--seed", "3", "--quiet"]
    whole, first, second = (os.path.join(work, n) for n in ("whole.csv", "first.csv", "second.csv"))
    ck_whole, ck = os.path.join(work, "whole.ckpt"), os.path.join(work, "half.ckpt")
    run(base + ["--steps", "40", "--log", whole, "--save", ck_whole], env)
    run(base + ["--steps", "20", "--log", first, "--save", ck], env)
    run(base + ["--steps", "40", "--log", second, "--resume", ck, "--save", ck + ".end"], env)
    a, b = losses(whole), losses(first) + losses(second)
    assert len(a) == 40 and a == b, f"resumed losses differ:\n{a}\n{b}"
    with open(ck_whole, "rb") as f1, open(ck + ".end", "rb") as f2:
        assert f1.read() == f2.read(), "the final checkpoints differ"
    return "40 losses and the final checkpoint identical"


def check_refused(rnnc, work, env):
    base = [rnnc, "train", os.path.join(SAMPLES, "gru.rnn"), "-D", "I=8", "-D", "H=32", "--task", "adding",
            "--bptt", "20", "--batch", "8", "--quiet", "--steps", "30"]
    ck = os.path.join(work, "half.ckpt")
    blob = open(ck, "rb").read()
    cases = {}
    flipped = bytearray(blob)
    flipped[-5] ^= 0x40
    cases["flipped"] = (bytes(flipped), r"corrupt|checksum")
    cases["truncated"] = (blob[: len(blob) // 2], r"truncated|promises")
    for name, (data, pattern) in cases.items():
        bad = os.path.join(work, f"{name}.ckpt")
        with open(bad, "wb") as f:
            f.write(data)
        err = run(base + ["--resume", bad], env, expect=1)
        assert re.search(pattern, err) and bad in err, f"{name}: unexpected message:\n{err}"
    other = [rnnc, "train", os.path.join(SAMPLES, "elman.rnn"), "-D", "I=8", "-D", "H=32", "--task", "adding",
             "--bptt", "20", "--batch", "8", "--quiet", "--steps", "30", "--resume", ck]
    err = run(other, env, expect=1)
    assert "model" in err and ck in err, f"foreign checkpoint: unexpected message:\n{err}"
    return "flipped, truncated and foreign checkpoints refused"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rnnc", required=True)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="rnnc-training-")
    env = dict(os.environ, RNNC_CACHE=os.path.join(work, "cache"))
    failed = 0
    try:
        for name, check in (("adding", check_adding), ("text", check_text), ("resume", check_resume),
                            ("refused", check_refused)):
            try:
                print(f"PASS {name}: {check(os.path.abspath(args.rnnc), work, env)}", flush=True)
            except AssertionError as e:
                failed += 1
                print(f"FAIL {name}: {e}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
