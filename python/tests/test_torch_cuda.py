"""CUDA. Everywhere nvcc is installed: the CUDA bundle builds with nvcc and loads, and without a
GPU a CUDA layer raises a RuntimeError that says there is no CUDA device (nothing crashes).
With a GPU: from_torch layers equal nn.LSTM and nn.GRU (cuDNN) on cuda, outputs, final states
and gradients; torch.compile equals eager; bf16 and f16 layers equal the CPU's 16-bit layers.
GPU tests are skipped without a GPU."""
import os
import subprocess
import sys

import pytest
import torch

import rnnc
from conftest import sample

HAS_GPU = torch.cuda.is_available()
NVCC = os.environ.get("RNNC_NVCC", "/usr/local/cuda/bin/nvcc")
needs_gpu = pytest.mark.skipif(not HAS_GPU, reason="no CUDA device (torch.cuda.is_available() is False)")
needs_nvcc = pytest.mark.skipif(not os.path.isfile(NVCC), reason=f"no nvcc at {NVCC}")


def rel(a, b):
    return ((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item()


@needs_nvcc
def test_cuda_library_builds_and_loads():
    """rnnc compile --target cuda, nvcc, ctypes: the table is a CUDA one with the cell's ports."""
    from rnnc import _abi
    m = rnnc.load(sample("lstm.rnn"), I=3, H=4)  # on the CPU
    lib = m._library(torch.float32, torch.device("cuda"))
    assert lib.device == _abi.DEVICE_CUDA and lib.has_backward and lib.has_state_seeds
    assert [x.name for x in lib.inputs] == ["x"] and sorted(s.name for s in lib.states) == ["c", "h"]
    assert lib.workspace_bytes(5, 2) > 0
    key = [k for k in m._libs if k[1] == "cuda"][0]
    assert key[2] == (f"sm_{''.join(map(str, torch.cuda.get_device_capability()))}" if HAS_GPU else "sm_90")


@needs_nvcc
@pytest.mark.skipif(HAS_GPU, reason="checks the error without a GPU")
def test_no_gpu_raises_runtime_error():
    with pytest.raises(RuntimeError, match="no CUDA device"):
        rnnc.load(sample("lstm.rnn"), device="cuda", I=3, H=4)
    # The CUDA library itself, called without a device, fails with its reason; in a fresh
    # process, so that a crash would show as one.
    code = f"""
import torch, rnnc
m = rnnc.load({sample('lstm.rnn')!r}, I=3, H=4)
lib = m._library(torch.float32, torch.device("cuda"))
try:
    lib.forward(None, 2, 1, None, [None], None, [None], [None, None], None)
except RuntimeError as e:
    print("RuntimeError:", e)
"""
    env = {**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(rnnc.__file__))}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "RuntimeError: LSTM:" in r.stdout, r.stdout + r.stderr[-2000:]


@needs_gpu
@pytest.mark.parametrize("kind", [torch.nn.LSTM, torch.nn.GRU])
def test_from_torch_equals_cudnn(kind):
    torch.manual_seed(1)
    T, B, I, H = 9, 4, 16, 32
    ref = kind(I, H).cuda()
    ours = rnnc.from_torch(ref).cuda()
    x = torch.randn(T, B, I, device="cuda", requires_grad=True)
    h0 = torch.randn(1, B, H, device="cuda", requires_grad=True)
    lstm = kind is torch.nn.LSTM
    c0 = torch.randn(1, B, H, device="cuda", requires_grad=True)
    y_ref, st = ref(x, (h0, c0) if lstm else h0)
    y, final = ours(x, state={"h": h0, "c": c0} if lstm else {"h": h0})
    assert y.device.type == "cuda" and final["h"].device.type == "cuda"
    h_ref = st[0] if lstm else st
    assert rel(y, y_ref) <= 1e-4 and rel(final["h"], h_ref) <= 1e-4
    if lstm:
        assert rel(final["c"], st[1]) <= 1e-4
    g = torch.randn_like(y_ref)
    wrt_ref = [x, h0] + ([c0] if lstm else []) + list(ref.parameters())
    wrt = [x, h0] + ([c0] if lstm else []) + [ours.param(n) for n in ("W_ih", "W_hh", "b_ih", "b_hh")]
    obj_ref = (y_ref * g).sum() + h_ref.sum() + (st[1].sum() if lstm else 0)
    obj = (y * g).sum() + final["h"].sum() + (final["c"].sum() if lstm else 0)
    for a, b in zip(torch.autograd.grad(obj, wrt), torch.autograd.grad(obj_ref, wrt_ref)):
        assert rel(a, b) <= 1e-4


@needs_gpu
def test_cuda_on_a_side_stream_and_no_grad():
    """The bundle runs on torch's current stream; under no_grad the forward-only build (whose c
    keeps a ring of two steps: the initial state goes in, the final one comes out)."""
    torch.manual_seed(2)
    ref = torch.nn.LSTM(8, 16).cuda()
    ours = rnnc.from_torch(ref).cuda()
    x = torch.randn(5, 3, 8, device="cuda")
    h0, c0 = torch.randn(1, 3, 16, device="cuda"), torch.randn(1, 3, 16, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s), torch.no_grad():
        y, final = ours(x, state={"h": h0, "c": c0})
    torch.cuda.current_stream().wait_stream(s)
    assert any(k[3] for k in ours._libs)
    with torch.no_grad():
        y_ref, (h_ref, c_ref) = ref(x, (h0, c0))
    assert rel(y, y_ref) <= 1e-4
    assert rel(final["h"], h_ref) <= 1e-4 and rel(final["c"], c_ref) <= 1e-4


@needs_gpu
def test_cuda_torch_compile_equals_eager():
    torch.manual_seed(3)
    m = rnnc.load(sample("mingru.rnn"), I=3, H=4, device="cuda")
    x = torch.randn(6, 2, 3, device="cuda", requires_grad=True)

    def f(x):
        y, _ = m(x)
        return (y * y).sum()

    compiled = torch.compile(f, fullgraph=True)
    assert rel(compiled(x), f(x)) <= 1e-6
    for a, b in zip(torch.autograd.grad(f(x), [x] + list(m.parameters())),
                    torch.autograd.grad(compiled(x), [x] + list(m.parameters()))):
        assert rel(b, a) <= 1e-6


@needs_gpu
def test_cuda_inputs_must_be_on_the_device():
    m = rnnc.load(sample("lstm.rnn"), I=3, H=4, device="cuda")
    with pytest.raises(ValueError, match="input 'x' is on cpu; this LSTM is on cuda"):
        m(torch.randn(2, 1, 3))


@needs_gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_cuda_16bit_equals_cpu_16bit(dtype):
    """The 16-bit layer on CUDA against the same layer on the CPU (docs/precision.md): the
    same storage rounding, the products summed in another order; within test_precision's bounds."""
    torch.manual_seed(3)
    tol = {torch.bfloat16: 4.8e-2, torch.float16: 6e-3}[dtype]
    cpu = rnnc.load(sample("lstm.rnn"), I=16, H=32).to(dtype)
    gpu = rnnc.load(sample("lstm.rnn"), I=16, H=32).to(dtype)
    gpu.load_state_dict(cpu.state_dict())
    gpu = gpu.cuda()
    x = torch.randn(9, 4, 16, dtype=dtype)
    xs = [x.clone().requires_grad_(), x.cuda().requires_grad_()]
    ys = [cpu(xs[0])[0], gpu(xs[1])[0]]
    assert ys[1].dtype == dtype and rel(ys[1].float().cpu(), ys[0].float()) <= tol
    g = torch.randn_like(ys[0])
    grads = [torch.autograd.grad((y * g.to(y.device)).sum(), [x_, *m.parameters()])
             for y, x_, m in zip(ys, xs, (cpu, gpu))]
    for a, b in zip(grads[1], grads[0]):
        assert rel(a.float().cpu(), b.float()) <= tol
