"""Bad input raises a Python exception that says what and where; nothing crashes."""
import os

import pytest
import torch

import rnnc
from conftest import sample


@pytest.fixture(scope="module")
def lstm():
    return rnnc.load(sample("lstm.rnn"), I=3, H=4)


def test_wrong_dtype(lstm):
    with pytest.raises(TypeError, match="input 'x' is torch.float64; this LSTM computes in torch.float32"):
        lstm(torch.randn(2, 1, 3, dtype=torch.float64))


def test_wrong_rank_and_width(lstm):
    with pytest.raises(ValueError, match=r"input 'x' must be \[T, B, 3\], not \[2, 3\]"):
        lstm(torch.randn(2, 3))
    with pytest.raises(ValueError, match="input 'x' has width 5, not 3"):
        lstm(torch.randn(2, 1, 5))


def test_wrong_state(lstm):
    with pytest.raises(ValueError, match=r"state 'h' must be \[1, 2, 4\]"):
        lstm(torch.randn(2, 2, 3), state={"h": torch.zeros(1, 3, 4)})
    with pytest.raises(KeyError, match="has no state 'z'"):
        lstm(torch.randn(2, 2, 3), state={"z": torch.zeros(1, 2, 4)})


def test_wrong_count(lstm):
    with pytest.raises(TypeError, match=r"LSTM takes 1 inputs \(x\), not 2"):
        lstm(torch.randn(2, 1, 3), torch.randn(2, 1, 3))


def test_index_out_of_range():
    m = rnnc.load(sample("charlm.rnn"))
    vocab = m.param("emb").shape[0]
    tok = torch.full((3, 2), vocab, dtype=torch.int64)
    with pytest.raises(IndexError, match=f"input 'tok': an index out of \\[0, {vocab}\\)"):
        m(tok, torch.zeros(3, 2, dtype=torch.int64))


def test_cell_with_errors_carries_the_diagnostic(tmp_path):
    bad = tmp_path / "bad.rnn"
    bad.write_text("cell C(I = 2, H = 3) {\n  input x: [I]\n  state h: [H]\n  h = tanh(W * x + undefined_thing)\n}\n")
    with pytest.raises(rnnc.CompileError, match=r"bad\.rnn:\d+:\d+: error"):
        rnnc.load(str(bad))


def test_missing_compiler(monkeypatch):
    monkeypatch.setenv("RNNC", "/nonexistent/rnnc")
    with pytest.raises(FileNotFoundError, match=r"\$RNNC is '/nonexistent/rnnc'"):
        rnnc.load(sample("lstm.rnn"), I=3, H=4)


def test_missing_file():
    with pytest.raises(FileNotFoundError, match="no such .rnn file"):
        rnnc.load(os.path.join("nowhere", "cell.rnn"))


def test_unsupported_device_and_dtype():
    with pytest.raises(NotImplementedError, match="device meta: rnnc runs on the CPU and on CUDA"):
        rnnc.load(sample("lstm.rnn"), device="meta", I=3, H=4)
    with pytest.raises(TypeError, match="takes torch.float32, torch.float64, torch.bfloat16 or torch.float16"):
        rnnc.load(sample("lstm.rnn"), dtype=torch.int32, I=3, H=4)


def test_input_on_another_device(lstm):
    with pytest.raises(ValueError, match="input 'x' is on meta; this LSTM is on cpu"):
        lstm(torch.empty(2, 1, 3, device="meta"))


@pytest.mark.parametrize("binding", ["cpp", "custom_op"])
def test_ops_called_directly_with_bad_arguments(lstm, binding):
    """The ops check what they are given against the model table, whoever calls them."""
    from rnnc.torch import binding as use
    ops = use(binding)
    try:
        lib = lstm._lib
        p = lstm._flat_params().detach()
        x = torch.randn(2, 1, 3)
        with pytest.raises(RuntimeError, match="not the address of a model table"):
            ops.forward(12345, p, [x], [], 2, 1)
        with pytest.raises(RuntimeError, match=r"input 'x' must be \[2, 1, 3\]"):
            ops.forward(lib.address, p, [torch.randn(2, 1, 5)], [], 2, 1)
        with pytest.raises(RuntimeError, match="params must be"):
            ops.forward(lib.address, p[:3], [x], [], 2, 1)
        with pytest.raises(RuntimeError, match="states must be all or none"):
            ops.forward(lib.address, p, [x], [torch.zeros(1, 1, 4)], 2, 1)
        ws = ops.forward(lib.address, p, [x], [], 2, 1)[-1]
        empty = torch.empty(0)
        grads = [empty] * len(lib.outputs), [empty] * len(lib.states)
        with pytest.raises(RuntimeError, match="the workspace is not one of this model's"):
            ops.backward(lib.address, torch.empty(0, dtype=torch.uint8), p, [x], *grads, empty, 2, 1)
        with pytest.raises(RuntimeError, match="one gradient per output and per state"):
            ops.backward(lib.address, ws, p, [x], [], [], empty, 2, 1)
        with pytest.raises(RuntimeError, match="takes 1 inputs, not 0"):
            ops.backward(lib.address, ws, p, [], *grads, empty, 2, 1)
        with pytest.raises(RuntimeError, match=r"input 'x' must be \[2, 1, 3\]"):
            ops.backward(lib.address, ws, p, [torch.randn(2, 1, 5)], *grads, empty, 2, 1)
    finally:
        use("cpp")


def test_backward_without_the_inputs_says_so(lstm):
    """ABI 7: backward is given forward's inputs again (the CPU reads x there for dW_ih); a
    bundle given none fails and says so, and given them computes the gradient."""
    lib = lstm._lib
    T, B = 2, 1
    p = lstm._flat_params().detach().contiguous()
    x = torch.randn(T, B, 3)
    ws = torch.empty(lib.workspace_bytes(T, B), dtype=torch.uint8)
    lib.forward(ws.data_ptr(), T, B, p.data_ptr(), [x.data_ptr()], None, None, None, None)
    seed = torch.ones(T, B, 4)
    grads = torch.zeros(lib.param_elements)
    with pytest.raises(RuntimeError, match=r"backward needs the inputs forward was given \(inputs is NULL\)"):
        lib.backward(ws.data_ptr(), T, B, p.data_ptr(), None, [seed.data_ptr()], None, grads.data_ptr(), None, None)
    with pytest.raises(RuntimeError, match=r"\(inputs\[0\] is NULL\)"):
        lib.backward(ws.data_ptr(), T, B, p.data_ptr(), [None], [seed.data_ptr()], None, grads.data_ptr(), None, None)
    lib.backward(ws.data_ptr(), T, B, p.data_ptr(), [x.data_ptr()], [seed.data_ptr()], None, grads.data_ptr(), None,
                 None)
    assert torch.isfinite(grads).all() and grads.abs().sum() > 0


def test_abi_version_mismatch_says_so(tmp_path):
    """A library whose table speaks another ABI is refused with both versions named."""
    import subprocess
    from rnnc import _abi
    src = tmp_path / "old.c"
    src.write_text("struct { int abi; const char *name; } table = {2, \"Old\"};\n"
                   "void *rnnc_model_Old(void) { return &table; }\n")
    lib = tmp_path / "libold.so"
    subprocess.run(["cc", "-shared", "-fPIC", str(src), "-o", str(lib)], check=True)
    with pytest.raises(RuntimeError, match=f"speaks ABI 2; this package speaks {_abi.ABI_VERSION}"):
        _abi.Library(str(lib), "rnnc_model_Old")


def test_double_backward_says_so():
    m = rnnc.load(sample("lstm.rnn"), I=3, H=4, dtype=torch.float64)
    x = torch.randn(2, 1, 3, dtype=torch.float64, requires_grad=True)
    y, _ = m(x)
    g, = torch.autograd.grad(y.sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="double backward"):
        g.sum().backward()


def test_damaged_cache_entry_says_where():
    import subprocess
    import sys
    cache = os.environ["RNNC_CACHE"]
    load = f"import rnnc; rnnc.load({sample('elman.rnn')!r}, I=2, H=3)"
    env = {**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(rnnc.__file__))}
    subprocess.run([sys.executable, "-c", load], env=env, check=True)
    libs = [os.path.join(root, f) for root, _, files in os.walk(cache) for f in files if f == "libElman.so"]
    assert libs
    for lib in libs:
        with open(lib, "wb") as f:
            f.write(b"not a library")
    # A fresh process: this one's dlopen would hand back a library it already holds.
    r = subprocess.run([sys.executable, "-c", load], env=env, capture_output=True, text=True)
    assert r.returncode == 1
    assert "the cache entry is damaged; remove" in r.stderr and "/py-" in r.stderr, r.stderr[-2000:]
