"""The package's tests run against the repository's rnnc ($RNNC, else
build/rnnc) with a fresh build cache for the session. The C++ op library
(python/rnnc/csrc/ops.cpp, about 40 s to build on 2 cores) is cached apart, in
build/py-ops-cache ($RNNC_OPS_CACHE), keyed by its content like any entry."""
import os
import sys

import pytest

# Idle OpenMP threads sleep instead of spinning: torch's ops and the bundles share one OpenMP
# runtime, and on a 2-core machine spinning threads slow the examples and DDP ranks 1.3x or
# more (docs/torch.md, Threads). Set before torch loads libgomp; subprocesses inherit it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
SAMPLES = os.path.join(ROOT, "samples")


@pytest.fixture(autouse=True, scope="session")
def _cache(tmp_path_factory):
    os.environ["RNNC_CACHE"] = str(tmp_path_factory.mktemp("rnnc-cache"))
    os.environ.setdefault("RNNC_OPS_CACHE", os.path.join(ROOT, "build", "py-ops-cache"))
    # Absolute: the examples run in other folders.
    os.environ["RNNC"] = os.path.abspath(os.environ.get("RNNC") or os.path.join(ROOT, "build", "rnnc"))


def sample(name):
    return os.path.join(SAMPLES, name)
