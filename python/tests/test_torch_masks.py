"""Dropout and zoneout through the layer: .eval() is their expectation, .train() draws masks
from a seed taken from torch's generator (torch.manual_seed reproduces them), and with a fixed
seed the op's gradients pass gradcheck and equal `rnnc run --mode train`, on both bindings."""
import json
import struct
import subprocess

import numpy as np
import pytest
import torch

import rnnc
from conftest import sample


def write_safetensors(path, tensors):
    """float64 tensors by name, as safetensors."""
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        data = t.contiguous().numpy().tobytes()
        header[name] = {"dtype": "F64", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def test_eval_is_the_expectation_and_train_draws():
    torch.manual_seed(1)
    # H = 16: 32 units of two sequences, so p = 0.3 drops at least one whatever the seed (all kept:
    # 0.7^32 = 1e-5, where H = 4 kept all eight 6 % of the time).
    m = rnnc.load(sample("zoneout_lstm.rnn"), I=3, H=16)
    x = torch.randn(5, 2, 3)
    m.eval()
    (y, h), _ = m(x)
    assert torch.equal(y, h)  # dropout(h, p) in evaluation is h
    (y2, _), _ = m(x)
    assert torch.equal(y, y2)
    m.train()
    torch.manual_seed(7)
    (a, ha), _ = m(x)
    torch.manual_seed(7)
    (b, _), _ = m(x)
    (c, _), _ = m(x)
    assert torch.equal(a, b)  # the same generator state draws the same masks
    assert not torch.equal(a, c)  # the next call draws others
    assert not torch.equal(a, y)
    # y = dropout(h, 0.3, per = sequence): each unit of a sequence is dropped at every step or at
    # none (h itself is 0 where zoneout kept the zero initial state).
    live = ha != 0
    dropped = (a == 0) & live
    kept = (a != 0) & live
    assert not (dropped.any(0) & kept.any(0)).any() and dropped.any()


@pytest.mark.parametrize("binding", ["cpp", "custom_op"])
def test_fixed_seed_gradients(binding, tmp_path):
    from rnnc.torch import binding as use
    ops = use(binding)
    try:
        torch.manual_seed(3)
        m = rnnc.load(sample("zoneout_lstm.rnn"), dtype=torch.float64, I=3, H=4)
        lib = m._lib
        params = m._flat_params().detach().requires_grad_()
        x = torch.randn(4, 2, 3, dtype=torch.float64, requires_grad=True)

        def f(p, xx):
            res = ops.forward(lib.address, p, [xx], [], 4, 2, 11)
            return res[0], res[1]

        assert torch.autograd.gradcheck(f, (params, x))
        # The same masks as rnnc's own engines draw for seed 11 (call 0).
        rnn = sample("zoneout_lstm.rnn")
        write_safetensors(tmp_path / "p.safetensors", {n: v.detach() for n, v in m.named_parameters()})
        np.save(tmp_path / "x.npy", x.detach().numpy())
        rnnc_bin = rnnc._build.find_rnnc()
        subprocess.run([rnnc_bin, "run", rnn, "-D", "I=3", "-D", "H=4", "--params", str(tmp_path / "p.safetensors"),
                        "--input", f"x={tmp_path / 'x.npy'}", "--out", str(tmp_path / "out"), "--dtype", "f64",
                        "--mode", "train", "--seed", "11", "--engine", "interp"], check=True)
        y = f(params, x)[0].detach().numpy()
        ref = np.load(tmp_path / "out" / "y.npy")
        assert np.abs(y - ref).max() <= 1e-12 * np.abs(ref).max()
    finally:
        use("cpp")


DROPCONNECT = """
dim I = 3
dim H = 4
cell WeightDrop(x: [I]) -> h {
  param W_ih: [H, I]
  param W_hh: [H, H]
  h = tanh(W_ih @ x + dropout(W_hh, 0.5) @ h[t-1])
}
"""


@pytest.mark.parametrize("binding", ["cpp", "custom_op"])
def test_dropconnect(binding, tmp_path):
    """dropout(W_hh, p) @ h[t-1] through the layer: one mask per call (gradcheck with a fixed seed,
    rnnc's interpreter draws the same), W_hh's gradient zero exactly where the mask dropped it, and
    .eval() is the plain cell."""
    from rnnc.torch import binding as use
    ops = use(binding)
    try:
        rnn = tmp_path / "wd.rnn"
        rnn.write_text(DROPCONNECT)
        torch.manual_seed(4)
        m = rnnc.load(str(rnn), dtype=torch.float64)
        lib = m._lib
        params = m._flat_params().detach().requires_grad_()
        x = torch.randn(5, 2, 3, dtype=torch.float64, requires_grad=True)

        def f(p, xx):
            return ops.forward(lib.address, p, [xx], [], 5, 2, 13)[0]

        assert torch.autograd.gradcheck(f, (params, x))
        write_safetensors(tmp_path / "p.safetensors", {n: v.detach() for n, v in m.named_parameters()})
        np.save(tmp_path / "x.npy", x.detach().numpy())
        subprocess.run([rnnc._build.find_rnnc(), "run", str(rnn), "--params", str(tmp_path / "p.safetensors"),
                        "--input", f"x={tmp_path / 'x.npy'}", "--out", str(tmp_path / "out"), "--dtype", "f64",
                        "--mode", "train", "--seed", "13", "--engine", "interp"], check=True)
        ref = np.load(tmp_path / "out" / "h.npy")
        h = f(params, x)
        assert np.abs(h.detach().numpy() - ref).max() <= 1e-12 * np.abs(ref).max()
        # The gradient of W_hh (the last 16 params) is zero where the call's mask dropped it, and
        # only there: about half of the weights, the same set for every step and sequence.
        (g,) = torch.autograd.grad(h.sum(), params)
        dropped = (g[-16:] == 0).sum().item()
        assert 2 <= dropped <= 14
        m.eval()
        with torch.no_grad():
            plain = m(x)[0]
            W_ih, W_hh = m.W_ih, m.W_hh
            s, ref_eval = torch.zeros(2, 4, dtype=torch.float64), []
            for t in range(5):
                s = torch.tanh(x[t] @ W_ih.T + s @ W_hh.T)
                ref_eval.append(s)
        assert torch.allclose(plain, torch.stack(ref_eval), rtol=1e-12, atol=1e-14)
    finally:
        use("cpp")


@pytest.mark.parametrize("binding", ["cpp", "custom_op"])
def test_torch_compile_fullgraph_in_training(binding):
    """In training mode the layer draws each call's seed as a tensor (torch.randint, no .item()),
    so torch.compile(fullgraph=True) keeps the whole call in one graph: masks are drawn (training
    differs from evaluation, two calls differ), and gradients reach every param."""
    from rnnc.torch import binding as use
    use(binding)
    try:
        torch.manual_seed(5)
        m = rnnc.load(sample("zoneout_lstm.rnn"), dtype=torch.float64, I=3, H=4)
        x = torch.randn(5, 2, 3, dtype=torch.float64)

        def f(x):
            (y, h), _ = m(x)
            return y

        compiled = torch.compile(f, fullgraph=True)
        m.train()
        a, b = compiled(x), compiled(x)
        assert not torch.equal(a, b)  # a seed per call
        a.sum().backward()
        assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in m.parameters())
        m.eval()
        with torch.no_grad():
            assert torch.equal(compiled(x), f(x))  # evaluation: no masks (traced: the training build)
        assert not torch.equal(a.detach(), f(x).detach())
    finally:
        use("cpp")
