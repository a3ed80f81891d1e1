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
    """After a fresh build, entries unused for $RNNC_CACHE_DAYS days go (docs/torch.md)."""
    cache = tmp_path / "cache"
    cache.mkdir()
    month = 31 * 86400
    for name, age in (("py-0123", month), ("0123456789abcdef", month), ("py-0123.lock", month),
                      ("py-0123.abc", 2 * 86400), ("recent", 2 * 86400), (".tmp-recent", 3600)):
        path = cache / name
        if name.endswith(".lock"):
            path.touch()
        else:
            path.mkdir()
        os.utime(path, (path.stat().st_atime - age, path.stat().st_mtime - age))
    run(cache)
    left = sorted(os.listdir(cache))
    assert "recent" in left and ".tmp-recent" in left, left
    assert not {"py-0123", "0123456789abcdef", "py-0123.lock", "py-0123.abc"} & set(left), left
