"""The package's tests run against the repository's rnnc ($RNNC, else
build/rnnc) with a fresh build cache for the session."""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
SAMPLES = os.path.join(ROOT, "samples")


@pytest.fixture(autouse=True, scope="session")
def _cache(tmp_path_factory):
    os.environ["RNNC_CACHE"] = str(tmp_path_factory.mktemp("rnnc-cache"))
    if not os.environ.get("RNNC"):
        os.environ["RNNC"] = os.path.join(ROOT, "build", "rnnc")


def sample(name):
    return os.path.join(SAMPLES, name)
