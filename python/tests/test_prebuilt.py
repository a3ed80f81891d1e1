"""CPU libraries are built against a runtime prebuilt once per set of flags (docs/torch.md):
they compute the same bits as libraries built alone, and a damaged runtime folder is dropped
and the library built without it."""
import glob
import os
import subprocess
import sys

import rnnc
from conftest import sample

# Forward and backward of a small LSTM with the package's default parameters (seed 0): the
# output and the input's gradient, as hex.
SCRIPT = f"""
import torch, rnnc
torch.manual_seed(0)
m = rnnc.load({sample('lstm.rnn')!r}, I=3, H=5)
x = torch.randn(4, 2, 3, requires_grad=True)
y, _ = m(x)
y.square().sum().backward()
print(y.detach().numpy().tobytes().hex(), x.grad.numpy().tobytes().hex())
"""


def run(cache, **env):
    env = {**os.environ, "RNNC_CACHE": str(cache), "PYTHONPATH": os.path.dirname(os.path.dirname(rnnc.__file__)),
           **env}
    r = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


def test_prebuilt_runtime_same_bits_and_damaged_dropped(tmp_path):
    with_runtime = run(tmp_path / "cache")
    folders = [f for f in glob.glob(str(tmp_path / "cache" / "py-runtime-*")) if os.path.isdir(f)]
    assert len(folders) == 1, os.listdir(tmp_path / "cache")
    assert os.path.isfile(os.path.join(folders[0], "panels.o"))
    gch = os.path.join(folders[0], "rnnc", "cpu.h.gch")
    assert os.path.isfile(gch)

    alone = run(tmp_path / "alone", RNNC_PREBUILT="0")
    assert alone == with_runtime
    assert not glob.glob(str(tmp_path / "alone" / "py-runtime-*/"))

    # A truncated .gch (GCC refuses it) and the library gone: built again without the folder,
    # which is dropped.
    os.truncate(gch, 1 << 20)
    for entry in glob.glob(str(tmp_path / "cache" / "py-*")):
        if "py-runtime-" not in entry and os.path.isdir(entry):
            subprocess.run(["rm", "-rf", entry], check=True)
    assert run(tmp_path / "cache") == with_runtime
    assert not os.path.exists(folders[0])


def test_cache_forgets_what_it_has_not_used(tmp_path):
    """After a fresh build, the cache's own entries unused for $RNNC_CACHE_DAYS days go, and
    nothing else in its folder (docs/torch.md)."""
    cache = tmp_path / "cache"
    cache.mkdir()
    day, key = 86400, "0" * 22 + "aa"
    old = {f"py-{key}": 31 * day, "00000000000000aa": 31 * day, f"py-{key}.lock": 31 * day,
           f"py-runtime-{key}": 31 * day, f"py-{key}.x1y2z3ab": 2 * day, ".tmp-00000000000000aa-1f": 2 * day}
    kept = {"00000000000000bb": 2 * day, ".tmp-00000000000000bb-2e": 3600, "photos": 400 * day, "py-photos": 400 * day,
            "notes.lock": 400 * day}
    for name, age in {**old, **kept}.items():
        path = cache / name
        if name.endswith(".lock"):
            path.touch()
        else:
            path.mkdir()
        os.utime(path, (path.stat().st_atime - age, path.stat().st_mtime - age))
    run(cache)
    left = set(os.listdir(cache))
    assert set(kept) <= left, sorted(left)
    assert not set(old) & left, sorted(left)


def test_environment_flags_reach_the_build(tmp_path):
    """$RNNC_CXXFLAGS and $RNNC_LDFLAGS are added to a bundle's build, as rnnc's own engine adds
    them (tools/gpu-check.sh's pack of OpenBLAS on a machine without Debian's): a header forced in
    by the first, a library asked for by the second, each stops the build with its name."""
    marker = tmp_path / "marker.h"
    marker.write_text("#error the RNNC_CXXFLAGS marker was read\n")
    env = {**os.environ, "RNNC_CACHE": str(tmp_path / "a"), "RNNC_PREBUILT": "0",
           "PYTHONPATH": os.path.dirname(os.path.dirname(rnnc.__file__)), "RNNC_CXXFLAGS": f"-include {marker}"}
    r = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True)
    assert r.returncode != 0 and "the RNNC_CXXFLAGS marker was read" in r.stderr, r.stderr[-2000:]
    env = {**env, "RNNC_CACHE": str(tmp_path / "b"), "RNNC_CXXFLAGS": "", "RNNC_LDFLAGS": "-lrnnc_no_such_library"}
    r = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True)
    assert r.returncode != 0 and "rnnc_no_such_library" in r.stderr, r.stderr[-2000:]
