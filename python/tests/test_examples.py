"""The examples of samples/torch run as a user runs them: train_charlm.py's
loss falls over 50 steps, and the bidirectional tagger learns its task, on
sequences of one length and on packed sequences of their own lengths."""
import os
import re
import subprocess
import sys

from conftest import ROOT


def run(script, *args, cwd):
    return subprocess.run([sys.executable, os.path.join(ROOT, "samples", "torch", script), *args],
                          capture_output=True, text=True, cwd=cwd, timeout=600)


def test_train_charlm_loss_falls(tmp_path):
    r = run("train_charlm.py", "--steps", "50", "--checkpoint", str(tmp_path / "c.pt"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    first, last = map(float, re.search(r"loss ([\d.]+) -> ([\d.]+)", r.stdout).groups())
    assert last < first - 1.0, r.stdout[-500:]
    assert (tmp_path / "c.pt").exists()
    # --resume continues from the checkpoint's step.
    r = run("train_charlm.py", "--steps", "60", "--resume", "--checkpoint", str(tmp_path / "c.pt"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "step    60/60" in r.stdout and "step     1/60" not in r.stdout


def test_bitagger_learns(tmp_path):
    r = run("bitagger.py", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert float(re.search(r"accuracy on new sequences: ([\d.]+)", r.stdout).group(1)) > 0.9


def test_bitagger_learns_with_lengths(tmp_path):
    """Packed sequences of their own lengths: the forward cell and its h[t+1] twin (docs/lengths.md)."""
    r = run("bitagger.py", "--lengths", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert float(re.search(r"accuracy on new sequences: ([\d.]+)", r.stdout).group(1)) > 0.9
