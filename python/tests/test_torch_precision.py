"""16-bit storage in the Python layer (docs/precision.md): a module loaded or
moved to torch.bfloat16 / torch.float16 runs the --dtype bf16|f16 build on the
CPU, its outputs and gradients in that dtype and within the numeric tests'
bound of the float32 module's; under torch.autocast a float32 module runs the
16-bit build with its float32 params as master weights (float32 gradients);
nn.LSTM in bfloat16 agrees too; the bf16 CUDA bundle builds and loads (runs: test_torch_cuda)."""
import os

import pytest
import torch

import rnnc
from conftest import sample

# tests/numeric/test_precision.py's bounds: 24 times the unit roundoff.
TOL = {torch.bfloat16: 4.8e-2, torch.float16: 6e-3}


def rel(a, b):
    a, b = a.double(), b.double()
    return ((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item()


def run(m, x, dtype):
    x = x.detach().to(dtype).requires_grad_()
    y, final = m(x)
    (y.double() * torch.linspace(-1, 1, y.numel(), dtype=torch.float64).reshape(y.shape)).sum().backward()
    return y, final, x.grad, {n: p.grad for n, p in m.named_parameters()}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_module_within_bound_of_float32(dtype):
    torch.manual_seed(3)
    ref = rnnc.load(sample("lstm.rnn"), I=5, H=6)
    half = rnnc.load(sample("lstm.rnn"), I=5, H=6, dtype=dtype)
    half.load_state_dict({k: v.to(dtype) for k, v in ref.state_dict().items()})
    x = torch.randn(7, 3, 5)
    y_ref, f_ref, dx_ref, g_ref = run(ref, x, torch.float32)
    y, f, dx, g = run(half, x, dtype)
    assert y.dtype == dtype and dx.dtype == dtype and all(v.dtype == dtype for v in g.values())
    assert rel(y, y_ref) <= TOL[dtype]
    assert rel(f["c"], f_ref["c"]) <= TOL[dtype]
    assert rel(dx, dx_ref) <= TOL[dtype]
    for name in g_ref:
        assert rel(g[name], g_ref[name]) <= TOL[dtype], name
    assert rel(y, y_ref) > 0  # it did round


def test_to_bfloat16_equals_load_in_bfloat16():
    torch.manual_seed(4)
    a = rnnc.load(sample("gru.rnn"), I=4, H=5)
    b = rnnc.load(sample("gru.rnn"), I=4, H=5, dtype=torch.bfloat16)
    b.load_state_dict({k: v.to(torch.bfloat16) for k, v in a.state_dict().items()})
    a.to(torch.bfloat16)
    x = torch.randn(6, 2, 4, dtype=torch.bfloat16)
    assert torch.equal(a(x)[0], b(x)[0])


def test_autocast_keeps_float32_masters():
    torch.manual_seed(5)
    m = rnnc.load(sample("lstm.rnn"), I=5, H=6)
    x = torch.randn(5, 2, 5)
    y_ref, _, _, g_ref = run(m, x, torch.float32)
    m.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y, final = m(x)
    assert y.dtype == torch.bfloat16 and final["h"].dtype == torch.bfloat16
    (y.double() * torch.linspace(-1, 1, y.numel(), dtype=torch.float64).reshape(y.shape)).sum().backward()
    for name, p in m.named_parameters():
        assert p.dtype == torch.float32 and p.grad.dtype == torch.float32
        assert rel(p.grad, g_ref[name]) <= TOL[torch.bfloat16], name
    assert rel(y, y_ref) <= TOL[torch.bfloat16]
    # Outside autocast the module is float32 again.
    assert m(x)[0].dtype == torch.float32


def test_from_torch_in_bfloat16_agrees_with_nn_lstm():
    torch.manual_seed(6)
    ref = torch.nn.LSTM(5, 6)
    ours = rnnc.from_torch(ref).to(torch.bfloat16)
    x = torch.randn(8, 3, 5)
    y_ref, _ = ref(x)
    y, _ = ours(x.to(torch.bfloat16))
    assert rel(y, y_ref) <= TOL[torch.bfloat16]


@pytest.mark.skipif(not os.path.isfile(os.environ.get("RNNC_NVCC", "/usr/local/cuda/bin/nvcc")), reason="no nvcc")
def test_half_cuda_library_builds_and_loads():
    """The bf16 CUDA bundle builds with nvcc and loads: a CUDA table in bf16 (run on a GPU by test_torch_cuda)."""
    from rnnc import _abi
    m = rnnc.load(sample("lstm.rnn"), I=3, H=4)
    lib = m._library(torch.bfloat16, torch.device("cuda"))
    assert lib.device == _abi.DEVICE_CUDA and lib.dtype == 2  # RNNC_DTYPE_BF16 and lib.real_bytes == 2


def test_half_bundle_loads_in_its_dtype(tmp_path):
    import subprocess
    import os
    subprocess.run([os.environ["RNNC"], "compile", sample("lstm.rnn"), "-D", "I=3", "-D", "H=4", "--target", "cpu",
                    "--dtype", "f16", "-o", str(tmp_path / "b")], check=True)
    m = rnnc.load_bundle(str(tmp_path / "b"))
    assert next(m.parameters()).dtype == torch.float16
    y, _ = m(torch.randn(2, 1, 3, dtype=torch.float16))
    assert y.dtype == torch.float16
    with pytest.raises(TypeError, match="--dtype f16 bundle"):
        rnnc.load_bundle(str(tmp_path / "b"), dtype=torch.float32)
