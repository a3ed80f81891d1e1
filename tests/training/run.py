#!/usr/bin/env python3
"""The training checks of the CPU backend, through `rnnc train` (ctest `training`):

  precision   --dtype bf16 learns the adding problem in at most 1.2x float32's
              steps (after adding, whose log it reads)
  loss-scaling  --dtype f16 with an overflow injected (the scale starts at
              2^30): steps skipped, the scale halved, then it learns as float32
  adding      the LSTM sample on the adding problem (T = 50) reaches a last-step
              MSE below 0.01 (predicting the mean gives about 0.17)
  text        a character model on a few hundred KB of text (this repository's
              docs and compiler sources) gets below the text's unigram entropy
  resume      20 steps, a checkpoint, 20 more steps from it: the same losses,
              bit for bit, as 40 steps in one run (and the same final params)
  refused     a damaged checkpoint (one byte flipped), a truncated one and one
              of another model are refused with exit 1 and a clear message
  nonfinite   a NaN gradient stops training naming the step and the param
              element; an infinite loss names the step; --skip-nonfinite skips
              exactly the steps whose loss is NaN, counts them, and a run
              resumed from a checkpoint skips the same steps, bit for bit
  memory      --max-memory below the plan, and a --bptt x --batch larger than
              the machine, are refused with the figures before anything is
              written
  determinism two runs with the same seed, one with 1 thread (OpenMP and BLAS)
              and one with 2, write the same checkpoint bytes and log, under
              OpenBLAS's own core type, Haswell and one more (SkylakeX on an
              AVX-512 machine, else Sandybridge); another seed does not
  eval        held-out evaluations (--eval-every, --eval-batches) print an eval
              line and fill the log's eval cells, give the same figures in two
              runs, and leave the training losses bit for bit as they are
              without them (adding and text, and across a resume)
  eval-mode   on a model with dropout, the eval loss of `rnnc train` is the
              loss of `rnnc run --mode eval` on the held-out tail with the
              trained params, and differs from `--mode train`'s
  eval-refused a negative --eval-every or --eval-batches, and a text too short
              to hold out a part, are refused with exit 1 and one clear line
  sigkill     a text run with a checkpoint every step, SIGKILLed at random
              moments (a third of them while a checkpoint is being written)
              and resumed each time, ends with the same checkpoint bytes and
              the same CSV log rows as a run never killed; no temporary file
              is left behind

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


def evals(path):
    """The log's evaluations: (step, eval_loss, eval_metric) of the rows that have one."""
    with open(path) as f:
        return [(row["step"], row["eval_loss"], row["eval_metric"]) for row in csv.DictReader(f) if row["eval_loss"]]


ADDING = ["train", os.path.join(SAMPLES, "lstm.rnn"), "--task", "adding", "--bptt", "50", "--batch", "32",
          "--lr", "0.01", "--seed", "1", "--steps", "800"]


def check_adding(rnnc, work, env):
    err = run([rnnc] + ADDING + ["--log", os.path.join(work, "adding.csv")], env)
    mse = final(err, "mse")
    assert mse < 0.01, f"adding: last-step MSE {mse} after 800 steps, expected < 0.01\n{err[-1500:]}"
    return f"mse {mse:.4f}"


def check_precision(rnnc, work, env):
    """--dtype bf16 (16-bit storage, float32 master weights: docs/precision.md) learns the adding problem
    as float32 does: the steps until the loss (a mean over 20 steps) first falls below 0.01 are within
    1.2x of float32's, which are read from check_adding's log (the same run: no learning-rate schedule,
    so its first 400 steps are these). Measured: f32 285, bf16 295 (f16, not run here: 255)."""
    def reached(log):
        ls = [float(v) for v in losses(log)][:400]
        return next((i for i in range(20, len(ls) + 1) if sum(ls[i - 20:i]) / 20 < 0.01), None)
    f32 = reached(os.path.join(work, "adding.csv"))
    assert f32 is not None, "float32 never got its 20-step mean loss below 0.01 in 400 steps"
    log = os.path.join(work, "precision-bf16.csv")
    run([rnnc] + ADDING[:-1] + ["400", "--dtype", "bf16", "--log", log], env)
    bf16 = reached(log)
    assert bf16 is not None and bf16 <= 1.2 * f32, f"--dtype bf16 took {bf16} steps to the loss float32 reached in {f32}"
    return f"f32 {f32} steps, bf16 {bf16} steps"


def check_loss_scaling(rnnc, work, env):
    """--dtype f16's dynamic loss scaling (docs/precision.md), with an overflow injected by starting the
    scale at 2^30: the first steps overflow, each is skipped and halves the scale (a few more later, as
    the gradients grow), and the run learns the adding problem in at most 1.5x float32's steps
    (measured: steps 1-11, 13, 17, 37, 38 skipped, the loss's 20-step mean below 0.01 at step 324 on
    an AMD Zen 4 and 375 on an Intel Sapphire Rapids, float32 285 on both: docs/precision.md). A fixed
    scale that overflows stops the run."""
    log = os.path.join(work, "loss-scaling.csv")
    err = run([rnnc] + ADDING[:-1] + ["400", "--dtype", "f16", "--loss-scale", "dynamic:1073741824", "--log", log], env)
    warned = re.findall(r"step (\d+): the gradients overflowed at loss scale ([0-9.e+]+); step skipped", err)
    assert warned and [int(s) for s, _ in warned] == list(range(1, len(warned) + 1)), err[-2000:]
    assert all(abs(float(v) / 2.0 ** (30 - k) - 1) < 1e-5 for k, (_, v) in enumerate(warned)), warned
    m = re.search(r"\((\d+) skipped by loss scaling, now ([0-9.e+]+)\)", err)
    assert m, err[-1500:]
    skipped, scale = int(m.group(1)), float(m.group(2))
    assert skipped >= 2 and abs(scale / 2.0 ** (30 - skipped) - 1) < 1e-5, (skipped, scale)
    ls = [float(v) for v in losses(log)]
    f32 = [float(v) for v in losses(os.path.join(work, "adding.csv"))][:400]
    reach = lambda xs: next((i for i in range(20, len(xs) + 1) if sum(xs[i - 20:i]) / 20 < 0.01), None)  # noqa: E731
    assert reach(ls) is not None and reach(ls) <= 1.5 * reach(f32), (reach(ls), reach(f32))
    # A checkpoint keeps where the scaling stands: 14 steps (11 skipped) saved, resumed to 45 (past the
    # skips at 17, 37, 38): the same losses and scale as the whole run's first 45 steps. Started afresh at
    # 2^30 instead, the resumed run would skip steps 15-25.
    ck, first, second = (os.path.join(work, n) for n in ("scaled.ck", "scaled-1.csv", "scaled-2.csv"))
    f16 = ADDING[:-2] + ["--dtype", "f16", "--loss-scale", "dynamic:1073741824", "--quiet", "--steps"]
    run([rnnc] + f16 + ["14", "--save", ck, "--log", first], env)
    err = run([rnnc] + f16 + ["45", "--resume", ck, "--log", second], env)
    resumed = losses(first) + losses(second)
    assert resumed == losses(log)[:45], f"the resumed f16 run has other losses:\n{resumed}\n{losses(log)[:45]}"
    # A fixed scale does not adapt: the first step's gradient is not finite and the run stops.
    err = run([rnnc] + ADDING[:-1] + ["5", "--dtype", "f16", "--loss-scale", "1073741824"], env, expect=1)
    assert "step 1: the gradient" in err and "training stopped" in err, err[-1500:]
    return (f"{skipped} steps skipped, scale {scale:g}; the loss below 0.01 at step {reach(ls)} (f32 {reach(f32)});"
            " resumed from a checkpoint alike")


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


def check_min_bptt(rnnc, work, env):
    """Text with sequences of random lengths (--min-bptt, a --lengths build): it learns, a resumed
    run replays the same lengths (the same losses), and it is refused where it does not apply."""
    corpus = docs_corpus(work)
    base = [rnnc, "train", os.path.join(SAMPLES, "gru.rnn"), "-D", "I=32", "-D", "H=64", "--task", f"text:{corpus}",
            "--bptt", "24", "--min-bptt", "6", "--batch", "8", "--seed", "5", "--lr", "0.005", "--quiet"]
    whole, first, second = (os.path.join(work, n) for n in ("mb-whole.csv", "mb-first.csv", "mb-second.csv"))
    ck = os.path.join(work, "mb.ckpt")
    run(base + ["--steps", "60", "--log", whole], env)
    run(base + ["--steps", "30", "--log", first, "--save", ck], env)
    run(base + ["--steps", "60", "--log", second, "--resume", ck], env)
    a, b = losses(whole), losses(first) + losses(second)
    assert len(a) == 60 and a == b, f"--min-bptt: resumed losses differ:\n{a}\n{b}"
    assert float(a[-1]) < float(a[0]), f"--min-bptt: the loss did not fall: {a[0]} -> {a[-1]}"
    plain = [b_ for b_ in base if b_ not in ("--min-bptt", "6")]
    err = run(plain + ["--steps", "40", "--resume", ck], env, expect=1)
    assert "source hash" in err or "task" in err, f"a --min-bptt checkpoint resumed without it: {err[-500:]}"
    err = run([rnnc, "train", os.path.join(SAMPLES, "gru.rnn"), "-D", "I=8", "-D", "H=8", "--task", "adding",
               "--min-bptt", "3", "--steps", "2"], env, expect=1)
    assert "--min-bptt goes with the text task" in err, err
    err = run(plain + ["--steps", "2", "--min-bptt", "30"], env, expect=1)
    assert "--min-bptt 30 is not in 1..24" in err, err
    return f"loss {float(a[0]):.3f} -> {float(a[-1]):.3f} in 60 steps, resumed identically; misuse refused"


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


# Two models that go non-finite on the adding task's data (x = value, marker):
# log(v - 0.083) is NaN when a value is below 0.083, which happens in some
# segments of 4 x 2 values and not others; sqrt(|c| * m) has the gradient
# m / (2 sqrt(|c| m)) = 0/0 wherever the marker m is 0.
NAN_LOSS = """model NanLoss(x: [2], y: [1]) -> pred {
  param w: [1, 2]
  param b: [1]
  v, m = split(x, 2)
  pred = w @ x + b + 0 * log(v - 0.083)
  loss = mse(pred, y)
}
"""
NAN_GRAD = """model NanGrad(x: [2], y: [1]) -> pred {
  param w: [1, 2]
  param c: [1]
  v, m = split(x, 2)
  pred = w @ x + sqrt(abs(c) * m)
  loss = mse(pred, y)
}
"""


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def check_nonfinite(rnnc, work, env):
    grad_model = write(os.path.join(work, "nangrad.rnn"), NAN_GRAD)
    err = run([rnnc, "train", grad_model, "--task", "adding", "--bptt", "4", "--batch", "2", "--steps", "20"], env,
              expect=1)
    assert "step 1: the gradient of 'c' [0] is nan; training stopped" in err, f"NaN gradient:\n{err}"
    err = run([rnnc, "train", os.path.join(SAMPLES, "elman.rnn"), "-D", "I=8", "-D", "H=16", "--task", "adding",
               "--bptt", "10", "--batch", "4", "--steps", "20", "--optimizer", "sgd", "--lr", "1e30", "--clip", "0"],
              env, expect=1)
    assert re.search(r"step [0-9]+: (the loss is (inf|nan)|after the update, param '[^']+' \[[0-9, ]+\] is (inf|nan))", err), \
        f"diverging run:\n{err}"

    loss_model = write(os.path.join(work, "nanloss.rnn"), NAN_LOSS)
    base = [rnnc, "train", loss_model, "--task", "adding", "--bptt", "4", "--batch", "2", "--seed", "5",
            "--skip-nonfinite", "--quiet"]
    whole, first, second = (os.path.join(work, n) for n in ("nan-whole.csv", "nan-first.csv", "nan-second.csv"))
    ck_whole, ck = os.path.join(work, "nan-whole.ckpt"), os.path.join(work, "nan-half.ckpt")
    err = run(base[:-1] + ["--steps", "40", "--log", whole, "--save", ck_whole], env)
    rows = losses(whole)
    nans = [i + 1 for i, v in enumerate(rows) if v in ("nan", "-nan")]
    assert len(rows) == 40 and 0 < len(nans) < 40, f"expected some NaN losses among 40: {rows}"
    assert f"({len(nans)} skipped as non-finite)" in err, f"skip count {len(nans)} not reported:\n{err[-800:]}"
    for step in nans[:3]:
        assert f"warning: step {step}: the loss is nan" in err, f"no warning for step {step}:\n{err[-800:]}"
    run(base + ["--steps", "20", "--log", first, "--save", ck], env)
    run(base + ["--steps", "40", "--log", second, "--resume", ck, "--save", ck + ".end"], env)
    assert losses(first) + losses(second) == rows, "the resumed run skipped other steps"
    with open(ck_whole, "rb") as f1, open(ck + ".end", "rb") as f2:
        assert f1.read() == f2.read(), "the final checkpoints differ (params or skip count)"
    return f"NaN gradient and infinite loss stop with the step; {len(nans)} of 40 NaN steps skipped, resumed alike"


def check_memory(rnnc, work, env):
    ck, log = os.path.join(work, "mem.ckpt"), os.path.join(work, "mem.csv")
    base = [rnnc, "train", os.path.join(SAMPLES, "lstm.rnn"), "--task", "adding", "--steps", "5", "--save", ck,
            "--log", log]
    err = run(base + ["--max-memory", "1M"], env, expect=1)
    m = re.search(r"training with --batch 32 --bptt 50 needs ([0-9.]+) MiB, more than --max-memory 1.0 MiB", err)
    assert m, f"--max-memory 1M:\n{err}"
    err = run(base + ["--batch", "20000", "--bptt", "100000"], env, expect=1)
    assert re.search(r"needs [0-9.]+ (TiB|PiB), the machine has [0-9.]+ GiB", err), f"huge run:\n{err}"
    err = run(base + ["--max-memory", "lots"], env, expect=1)
    assert "--max-memory: 'lots' is not a size" in err, f"bad size:\n{err}"
    assert not os.path.exists(ck) and not os.path.exists(log), "a refused run wrote files"
    enough = f"{int(float(m.group(1))) + 1}M"
    run(base + ["--max-memory", enough, "--quiet"], env)  # the figure, rounded up, is enough
    return f"refused at 1 MiB (plan {m.group(1)} MiB) and beyond the machine; runs at the plan's figure"


def check_eval(rnnc, work, env):
    """Evaluations print a line and fill the log, replay the same held-out data (the same figures in two
    runs), and change no training loss: adding with --eval-every 1, 7 or none; text (carried states) with
    --eval-every 5 or none, and resumed from a checkpoint."""
    base = [rnnc, "train", os.path.join(SAMPLES, "gru.rnn"), "-D", "I=8", "-D", "H=32", "--task", "adding",
            "--bptt", "20", "--batch", "8", "--seed", "3", "--steps", "21"]
    logs = {}
    for name, extra in (("none", []), ("one", ["--eval-every", "1"]), ("seven", ["--eval-every", "7"]),
                        ("seven-again", ["--eval-every", "7"]), ("off", ["--eval-batches", "0"])):
        logs[name] = os.path.join(work, f"ev-{name}.csv")
        err = run(base + extra + ["--log", logs[name]], env)
        if name == "seven":
            lines = [l for l in err.splitlines() if l.startswith("eval step ")]
            assert [l.split()[2] for l in lines] == ["7/21", "14/21", "21/21"], f"eval lines:\n{err[-1500:]}"
            assert re.match(r"eval step 7/21  loss [0-9.]+  mse [0-9.]+$", lines[0]), lines[0]
            m = re.search(r"final mse [0-9.]+, loss [0-9.]+ after 21 steps; eval mse ([0-9.]+), loss ([0-9.]+)$", err)
            assert m, f"no eval figures in the final line:\n{err[-800:]}"
            last = evals(logs[name])[-1]
            assert m.group(1) == f"{float(last[2]):.4f}", f"final line {m.group(0)!r} vs log {last}"
    a = losses(logs["none"])
    assert len(a) == 21, a
    for name in ("one", "seven", "off"):
        assert losses(logs[name]) == a, f"training losses change with {name}:\n{a}\n{losses(logs[name])}"
    assert [e[0] for e in evals(logs["seven"])] == ["7", "14", "21"], evals(logs["seven"])
    assert evals(logs["seven"]) == evals(logs["seven-again"]), "two runs evaluated differently"
    assert evals(logs["none"]) == evals(logs["seven"])[-1:] == evals(logs["one"])[-1:], \
        "the evaluation after the last step differs between runs"
    assert evals(logs["off"]) == [], "--eval-batches 0 evaluated"

    corpus = docs_corpus(work)
    text = [rnnc, "train", os.path.join(SAMPLES, "gru.rnn"), "-D", "I=16", "-D", "H=32", "--task", f"text:{corpus}",
            "--bptt", "16", "--batch", "8", "--seed", "4", "--lr", "0.005", "--quiet", "--eval-batches", "4"]
    whole, plain, first, second = (os.path.join(work, f"evt-{n}.csv") for n in ("whole", "plain", "first", "second"))
    ck = os.path.join(work, "evt.ckpt")
    run(text + ["--steps", "30", "--eval-every", "5", "--log", whole], env)
    run(text + ["--steps", "30", "--log", plain], env)
    run(text + ["--steps", "15", "--eval-every", "5", "--log", first, "--save", ck], env)
    run(text + ["--steps", "30", "--eval-every", "5", "--log", second, "--resume", ck], env)
    t = losses(whole)
    assert len(t) == 30 and t == losses(plain), "text: --eval-every changed the training losses"
    assert losses(first) + losses(second) == t, "text: a resumed run with evaluations has other losses"
    assert evals(first)[:3] + evals(second) == evals(whole), \
        f"text: the resumed run evaluated otherwise:\n{evals(whole)}\n{evals(first)}\n{evals(second)}"
    assert evals(plain) == evals(whole)[-1:], "text: the evaluation after the last step differs"
    first_bpc, last_bpc = float(evals(whole)[0][2]), float(evals(whole)[-1][2])
    assert last_bpc < first_bpc, f"text: the held-out bpc did not fall: {first_bpc} -> {last_bpc}"
    return (f"eval lines and log cells; 21 adding and 30 text losses identical with and without evaluations, "
            f"resumed too; held-out bpc {first_bpc:.3f} -> {last_bpc:.3f}")


# A character model with dropout on its input and its readout: in eval mode both are the identity.
DROPOUT_LM = """dim V = 16
cell Rec(x: [8]) -> h {
  param W_ih: [24, 8]
  param W_hh: [24, 24]
  param b: [24]
  h = tanh(W_ih @ x + W_hh @ h[t-1] + b)
}
model DropLM(tok: index[V], target: index[V]) -> logits {
  param emb: [V, 8]
  x = dropout(embed(emb, tok), 0.5)
  h = Rec(x)
  param W_out: [V, 24]
  param b_out: [V]
  logits = W_out @ dropout(h, 0.3) + b_out
  loss = cross_entropy(logits, target)
}
"""


def read_safetensors(path):
    import json
    import numpy as np
    with open(path, "rb") as f:
        blob = f.read()
    n = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8:8 + n])
    header.pop("__metadata__", None)
    out = {}
    for name, t in header.items():
        assert t["dtype"] == "F32", t
        b, e = t["data_offsets"]
        out[name] = np.frombuffer(blob[8 + n + b:8 + n + e], dtype=np.float32).reshape(t["shape"])
    return out


def write_safetensors(path, tensors):
    import json
    header, data = {}, b""
    for name, a in tensors.items():
        raw = a.astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text + data)


def check_eval_mode(rnnc, work, env):
    """The eval loss `rnnc train` reports after the last step is `rnnc run --mode eval`'s loss on the
    first segment of the held-out tail (the last 10%, cut into B streams) with the trained params;
    `--mode train` (masks drawn) gives another."""
    import numpy as np
    model = write(os.path.join(work, "droplm.rnn"), DROPOUT_LM)
    text = "".join("abcdefgh"[(i * i + i // 3) % 8] for i in range(4000)).encode()
    path = os.path.join(work, "droplm.txt")
    with open(path, "wb") as f:
        f.write(text)
    T, B = 12, 4
    log, ck = os.path.join(work, "droplm.csv"), os.path.join(work, "droplm.ckpt")
    run([rnnc, "train", model, "--task", f"text:{path}", "--bptt", str(T), "--batch", str(B), "--steps", "5",
         "--seed", "3", "--eval-batches", "1", "--quiet", "--log", log, "--save", ck], env)
    (step, eval_loss, _), = evals(log)
    assert step == "5", step
    params = {k: v for k, v in read_safetensors(ck).items() if "/" not in k}  # not adam.m/..., carry/...
    write_safetensors(os.path.join(work, "droplm-params.safetensors"), params)

    held = max((len(text) + 9) // 10, B * (T + 1))
    tail, stream = text[len(text) - held:], held // B
    rank = {c: i for i, c in enumerate(sorted(set(text)))}
    tok = np.array([[rank[tail[b * stream + t]] for b in range(B)] for t in range(T)], np.int32)
    target = np.array([[rank[tail[b * stream + t + 1]] for b in range(B)] for t in range(T)], np.int32)
    np.save(os.path.join(work, "droplm-tok.npy"), tok)
    np.save(os.path.join(work, "droplm-target.npy"), target)
    got = {}
    for mode in ("eval", "train"):
        out = os.path.join(work, f"droplm-{mode}")
        run([rnnc, "run", model, "--params", os.path.join(work, "droplm-params.safetensors"),
             "--input", f"tok={os.path.join(work, 'droplm-tok.npy')}",
             "--input", f"target={os.path.join(work, 'droplm-target.npy')}", "--out", out, "--mode", mode,
             "--seed", "3"], env)
        got[mode] = float(np.load(os.path.join(out, "loss.npy")))
    ev = float(eval_loss)
    assert abs(got["eval"] - ev) <= 1e-5 * abs(ev), f"train's eval loss {ev}, rnnc run --mode eval {got['eval']}"
    assert abs(got["train"] - ev) > 1e-3 * abs(ev), f"--mode train gave the eval loss {ev}: masks not drawn?"
    return f"eval loss {ev:.6f} = rnnc run --mode eval {got['eval']:.6f}; --mode train {got['train']:.6f}"


def check_eval_refused(rnnc, work, env):
    base = [rnnc, "train", os.path.join(SAMPLES, "gru.rnn"), "-D", "I=8", "-D", "H=8", "--task", "adding",
            "--bptt", "10", "--batch", "2", "--steps", "2", "--quiet"]
    for flag in ("--eval-every", "--eval-batches"):
        err = run(base + [flag, "-1"], env, expect=1)
        first = err.splitlines()[0]
        assert first.startswith("rnnc: error: ") and flag in first, f"{flag} -1:\n{err}"
    short = os.path.join(work, "short-eval.txt")
    with open(short, "wb") as f:
        f.write(b"abcdefgh" * 4)  # 32 bytes: 2 streams of 10+1 train, but not with 2 more held out (44)
    text = [rnnc, "train", os.path.join(SAMPLES, "gru.rnn"), "-D", "I=8", "-D", "H=8", "--task", f"text:{short}",
            "--bptt", "10", "--batch", "2", "--steps", "2", "--quiet"]
    err = run(text, env, expect=1)
    assert err.count("\n") == 1 and "too short to hold out a part for evaluation" in err and "at least 44" in err, err
    run(text + ["--eval-batches", "0"], env)  # without an evaluation it trains on all of it
    return "negative --eval-every and --eval-batches, and a 32-byte text with 2 x 11 to hold out, refused"


def docs_corpus(work):
    """A text corpus: this repository's docs, concatenated (once per work folder)."""
    corpus = os.path.join(work, "docs-corpus.txt")
    if not os.path.exists(corpus):
        with open(corpus, "wb") as out:
            for f in sorted(glob.glob(os.path.join(ROOT, "docs", "*.md"))):
                with open(f, "rb") as src:
                    out.write(src.read())
    return corpus


def core_types():
    """OPENBLAS_CORETYPE values to train under ("" is OpenBLAS's own pick): Haswell (AVX2, where this
    issue was first seen) and one more where the machine runs it (SkylakeX with AVX-512, else Sandybridge)."""
    flags = set()
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((set(l.split(":", 1)[1].split()) for l in f if l.startswith("flags")), set())
    except OSError:
        pass
    if not {"avx2", "fma"} <= flags:
        return [""]
    return ["", "Haswell", "SkylakeX" if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags else "Sandybridge"]


def check_determinism(rnnc, work, env):
    corpus = docs_corpus(work)
    base = [rnnc, "train", os.path.join(SAMPLES, "lstm.rnn"), "-D", "H=128", "--task", f"text:{corpus}",
            "--bptt", "20", "--batch", "32", "--steps", "10", "--quiet"]
    out = {}
    runs = [(core, "7", threads) for core in core_types() for threads in ("1", "2")] + [("", "8", "2")]
    for core, seed, threads in runs:
        name = f"{core or 'default'}-{seed}-{threads}"
        ck, log = os.path.join(work, f"det-{name}.ckpt"), os.path.join(work, f"det-{name}.csv")
        run_env = dict(env, OPENBLAS_NUM_THREADS=threads, OMP_NUM_THREADS=threads)
        if core:
            run_env["OPENBLAS_CORETYPE"] = core
        run(base + ["--seed", seed, "--save", ck, "--log", log], run_env)
        with open(ck, "rb") as f, open(log) as g:
            out[core, seed, threads] = (f.read(), [r[:5] for r in csv.reader(g)])
    for core in core_types():
        assert out[core, "7", "1"] == out[core, "7", "2"], \
            f"the same seed gave different training (1 vs 2 threads, core type {core or 'default'})"
    assert out["", "7", "2"][0] != out["", "8", "2"][0], "another seed gave the same checkpoint"
    types = ", ".join(c or "default" for c in core_types())
    return f"seed 7 with 1 and 2 threads: identical checkpoint and log under each core type ({types}); seed 8 differs"


def check_sigkill(rnnc, work, env):
    import random
    import signal
    import time
    corpus = docs_corpus(work)
    # Enough steps that 30 kills, each a few steps in, cannot finish the run even when the machine's
    # load makes the measured step time twice what the kills see (150 once left 17 kills on a busy machine).
    steps = 300
    base = [rnnc, "train", os.path.join(SAMPLES, "gru.rnn"), "-D", "I=32", "-D", "H=128", "--task", f"text:{corpus}",
            "--bptt", "10", "--batch", "4", "--seed", "9", "--save-every", "1", "--quiet"]
    ref_dir, dir_ = os.path.join(work, "kill-ref"), os.path.join(work, "kill")
    os.makedirs(ref_dir)
    os.makedirs(dir_)
    run(base + ["--steps", "1"], env)  # compiles the model into the cache: later runs start at once
    t0 = time.monotonic()
    run(base + ["--steps", "1"], env)
    startup = time.monotonic() - t0
    base += ["--steps", str(steps)]
    t0 = time.monotonic()
    run(base + ["--save", os.path.join(ref_dir, "c.ckpt"), "--log", os.path.join(ref_dir, "log.csv")], env)
    per_step = max(time.monotonic() - t0 - startup, 0.0) / steps
    ck, log = os.path.join(dir_, "c.ckpt"), os.path.join(dir_, "log.csv")
    rng = random.Random(1234)
    kills = mid_write = 0
    for attempt in range(60):
        cmd = base + ["--save", ck, "--log", log] + (["--resume", ck] if os.path.exists(ck) else [])
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if attempt < 30:
            if attempt % 3 == 0:
                # Wait for a checkpoint's temporary file, then kill while it is being written.
                deadline = time.monotonic() + startup * 2 + per_step * steps * 2
                while p.poll() is None and time.monotonic() < deadline:
                    if any(n.endswith(".rnnc-tmp") for n in os.listdir(dir_)):
                        p.send_signal(signal.SIGKILL)
                        break
            else:
                # From before the first step to a few steps in: 30 kills end well before the last step.
                time.sleep(rng.uniform(0, startup + 4 * per_step))
                p.send_signal(signal.SIGKILL) if p.poll() is None else None
        _, err = p.communicate()
        if p.returncode == -signal.SIGKILL:
            kills += 1
            temps = [n for n in os.listdir(dir_) if n.endswith(".rnnc-tmp")]
            mid_write += bool(temps)
            continue
        assert p.returncode == 0, f"attempt {attempt}: exit {p.returncode}\n{err[-2000:]}"
        break
    else:
        raise AssertionError("the run never finished")
    assert kills >= 20 and mid_write >= 5, f"only {kills} kills, {mid_write} mid-write: the test did not test"
    with open(os.path.join(ref_dir, "c.ckpt"), "rb") as f1, open(ck, "rb") as f2:
        assert f1.read() == f2.read(), "the final checkpoint differs from the run never killed"

    def rows(path):
        with open(path) as f:
            return [r[:5] for r in csv.reader(f)]  # all but the seconds
    a, b = rows(os.path.join(ref_dir, "log.csv")), rows(log)
    assert a == b, f"the log differs from the run never killed: {len(a)} vs {len(b)} rows"
    left = [n for n in os.listdir(dir_) if n not in ("c.ckpt", "log.csv")]
    assert not left, f"left behind: {left}"
    return f"{kills} SIGKILLs ({mid_write} mid-write) over {steps} steps: same checkpoint and log, nothing left"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rnnc", required=True)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="rnnc-training-")
    env = dict(os.environ, RNNC_CACHE=os.path.join(work, "cache"))
    failed = 0
    try:
        for name, check in (("adding", check_adding), ("precision", check_precision),
                            ("loss-scaling", check_loss_scaling), ("text", check_text), ("resume", check_resume),
                            ("min-bptt", check_min_bptt), ("refused", check_refused), ("nonfinite", check_nonfinite), ("memory", check_memory),
                            ("eval", check_eval), ("eval-mode", check_eval_mode), ("eval-refused", check_eval_refused),
                            ("determinism", check_determinism), ("sigkill", check_sigkill)):
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
