"""from_torch layers equal nn.LSTM and nn.GRU (outputs, final states, every
gradient); gradcheck on cells torch lacks and on a model with two inputs and
a loss; torch.compile equals eager; parameters are named, initialized and
saved as rnnc names, initializes and saves them."""
import io
import json
import struct
import subprocess

import pytest
import torch

import rnnc
from conftest import sample

TOL = {torch.float32: 1e-5, torch.float64: 1e-10}


def rel(a, b):
    return ((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item()


@pytest.mark.parametrize("kind", [torch.nn.LSTM, torch.nn.GRU])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("T,B", [(1, 1), (7, 3)])
@pytest.mark.parametrize("with_state", [False, True])
def test_from_torch_equals_torch(kind, dtype, T, B, with_state):
    torch.manual_seed(T * 10 + B)
    ref = kind(5, 6).to(dtype)
    ours = rnnc.from_torch(ref)
    x = torch.randn(T, B, 5, dtype=dtype, requires_grad=True)
    h0 = torch.randn(1, B, 6, dtype=dtype, requires_grad=True)
    c0 = torch.randn(1, B, 6, dtype=dtype, requires_grad=True)
    lstm = kind is torch.nn.LSTM
    if with_state:
        y_ref, st = ref(x, (h0, c0) if lstm else h0)
        y, final = ours(x, state={"h": h0, "c": c0} if lstm else {"h": h0})
    else:
        y_ref, st = ref(x)
        y, final = ours(x)
    h_ref = st[0] if lstm else st
    assert rel(y, y_ref) <= TOL[dtype]
    assert rel(final["h"], h_ref) <= TOL[dtype]
    if lstm:
        assert rel(final["c"], st[1]) <= TOL[dtype]
    # The objective reads the outputs, h_n and (LSTM) c_n, a final state that is not an output.
    g, gh, gc = torch.randn_like(y_ref), torch.randn_like(h_ref), torch.randn(1, B, 6, dtype=dtype)
    wrt_ref = [x] + list(ref.parameters()) + ([h0] + ([c0] if lstm else []) if with_state else [])
    wrt = [x] + [ours.param(n) for n in ("W_ih", "W_hh", "b_ih", "b_hh")] + (
        [h0] + ([c0] if lstm else []) if with_state else [])
    grads_ref = torch.autograd.grad((y_ref * g).sum() + (h_ref * gh).sum() + ((st[1] * gc).sum() if lstm else 0),
                                    wrt_ref, retain_graph=True)
    grads = torch.autograd.grad((y * g).sum() + (final["h"] * gh).sum() + ((final["c"] * gc).sum() if lstm else 0),
                                wrt, retain_graph=True)
    for a, b in zip(grads, grads_ref):
        assert rel(a, b) <= TOL[dtype] * 10
    if lstm:  # c_n alone
        a = torch.autograd.grad(final["c"].sum(), wrt[:2])
        b = torch.autograd.grad(st[1].sum(), wrt_ref[:2])
        assert all(rel(u, v) <= TOL[dtype] * 10 for u, v in zip(a, b))


@pytest.mark.parametrize("name", ["lstm.rnn", "peephole_lstm.rnn", "indrnn.rnn", "mingru.rnn"])
def test_gradcheck(name):
    torch.manual_seed(1)
    m = rnnc.load(sample(name), dtype=torch.float64, I=3, H=4, seed=2)
    x = torch.randn(4, 2, 3, dtype=torch.float64, requires_grad=True)
    h0 = torch.randn(1, 2, 4, dtype=torch.float64, requires_grad=True)
    params = [p for _, p in m.named_parameters()]

    def f(x, h0, *params):
        out, final = m(x, state={"h": h0})
        # Every final state too (an LSTM's c is not an output): the ABI's state seeds.
        return (out if isinstance(out, torch.Tensor) else out[0],) + tuple(final[k] for k in sorted(final))

    assert torch.autograd.gradcheck(f, (x, h0, *params))


@pytest.mark.parametrize("binding", ["cpp", "custom_op"])
def test_gradcheck_final_states_only(binding):
    """Gradients through final states alone (no output is in the objective), both bindings."""
    from rnnc.torch import binding as use
    torch.manual_seed(6)
    m = rnnc.load(sample("lstm.rnn"), dtype=torch.float64, I=3, H=4, seed=4)
    x = torch.randn(3, 2, 3, dtype=torch.float64, requires_grad=True)
    c0 = torch.randn(1, 2, 4, dtype=torch.float64, requires_grad=True)
    params = [p for _, p in m.named_parameters()]

    def f(x, c0, *params):
        _, final = m(x, state={"c": c0})
        return final["c"], final["h"]

    before = use().name
    try:
        use(binding)
        assert torch.autograd.gradcheck(f, (x, c0, *params))
    finally:
        use(before)


def test_gradcheck_two_inputs_and_a_loss():
    torch.manual_seed(2)
    m = rnnc.load(sample("adding.rnn"), dtype=torch.float64, H=4, seed=3)
    assert m.inputs == ["x", "y"]
    x = torch.randn(5, 2, 2, dtype=torch.float64, requires_grad=True)
    y = torch.randn(5, 2, 1, dtype=torch.float64, requires_grad=True)
    params = [p for _, p in m.named_parameters()]

    def f(x, y, *params):
        outs, _ = m(x, y)
        return outs[-1]  # the loss, last

    assert torch.autograd.gradcheck(f, (x, y, *params))
    # Its objective is the loss: a gradient reaching its output 'pred' says so.
    # (Its final state 'h' is seeded through the ABI's state seeds.)
    with pytest.raises(NotImplementedError, match="output 'pred' of AddingIndRNN has a gradient"):
        outs, _ = m(x, y)
        (outs[0].sum() + outs[1]).backward()


def test_torch_compile_equals_eager():
    torch.manual_seed(3)
    m = rnnc.load(sample("mingru.rnn"), dtype=torch.float64, I=3, H=4)
    x = torch.randn(6, 2, 3, dtype=torch.float64, requires_grad=True)

    def f(x):
        y, _ = m(x)
        return (y * y).sum()

    compiled = torch.compile(f, fullgraph=True)
    assert torch.equal(f(x), compiled(x))
    g_eager = torch.autograd.grad(f(x), [x] + list(m.parameters()))
    g_compiled = torch.autograd.grad(compiled(x), [x] + list(m.parameters()))
    for a, b in zip(g_eager, g_compiled):
        assert torch.equal(a, b)


@pytest.mark.parametrize("binding", ["cpp", "custom_op"])
def test_compiled_backward_skips_the_gradient_of_data(binding):
    """Under torch.compile the layer's backward runs the backward op (on a copy of the
    workspace): it passes input_grads_mask, so that an input that does not require grad (a
    batch of data) costs no product there either, and the gradients are eager's."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd
    from rnnc.torch import binding as use
    ops = use(binding)
    try:
        torch.manual_seed(4)
        m = rnnc.load(sample("lstm.rnn"), dtype=torch.float64, I=3, H=4)
        x = torch.randn(5, 2, 3, dtype=torch.float64)

        def f(x):
            y, _ = m(x)
            return (y * y).sum()

        graphs = []

        def keep(gm, example_inputs):
            graphs.append(gm)
            return make_boxed_func(gm.forward)

        torch._dynamo.reset()
        backend = aot_autograd(fw_compiler=lambda gm, _: make_boxed_func(gm.forward), bw_compiler=keep)
        compiled = torch.compile(f, backend=backend, fullgraph=True)
        params = list(m.parameters())
        g_eager = torch.autograd.grad(f(x), params)
        g_compiled = torch.autograd.grad(compiled(x), params)
        for a, b in zip(g_eager, g_compiled):
            assert torch.equal(a, b)
        calls = [n for g in graphs for n in g.graph.nodes if n.target is ops.backward.default]
        assert len(calls) == 1, [str(n.target) for g in graphs for n in g.graph.nodes]
        mask = calls[0].kwargs.get("input_grads_mask", calls[0].args[9] if len(calls[0].args) > 9 else None)
        assert mask == [False]
    finally:
        torch._dynamo.reset()
        use("cpp")


@pytest.mark.parametrize("binding", ["cpp", "custom_op"])
def test_backward_op_input_grads_mask(binding):
    """The backward op computes an input's gradient only where the mask asks for it, and the
    other gradients are the same bits either way."""
    from rnnc.torch import binding as use
    ops = use(binding)
    try:
        torch.manual_seed(6)
        m = rnnc.load(sample("lstm.rnn"), dtype=torch.float64, I=3, H=4)
        lib = m._lib
        params = m._flat_params().detach()
        x = torch.randn(3, 2, 3, dtype=torch.float64)
        empty = torch.empty(0, dtype=torch.float64)
        gy = torch.randn(3, 2, 4, dtype=torch.float64)
        out_grads = [gy if o.name == "h" else empty for o in lib.outputs]
        results = {}
        for mask in (None, [True], [False]):
            with torch.no_grad():
                ws = ops.forward(lib.address, params, [x], [], 3, 2)[-1]
                results[str(mask)] = ops.backward(lib.address, ws, params, [x], out_grads, [empty, empty], empty, 3, 2,
                                                  input_grads_mask=mask)
        every, asked, skipped = results["None"], results["[True]"], results["[False]"]
        assert every[1].shape == (3, 2, 3) and torch.equal(every[1], asked[1])
        assert skipped[1].numel() == 0
        for k in (0, 2, 3):
            assert torch.equal(every[k], skipped[k]), k
        with pytest.raises(RuntimeError, match="input_grads_mask has 2 entries for 1 inputs"):
            ops.backward(lib.address, ws, params, [x], out_grads, [empty, empty], empty, 3, 2,
                         input_grads_mask=[True, False])
    finally:
        use("cpp")


def read_safetensors(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    return {k: torch.frombuffer(bytearray(data[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]),
                                dtype=torch.float32).reshape(v["shape"])
            for k, v in header.items() if k != "__metadata__"}


def test_params_named_and_initialized_as_rnnc_init(tmp_path):
    m = rnnc.load(sample("charlm.rnn"), seed=7)
    names = [n for n, _ in m.named_parameters()]
    assert "h1.W_hh" in names and "emb" in names
    assert list(m.state_dict()) == names
    out = tmp_path / "p.safetensors"
    subprocess.run([rnnc.find_rnnc(), "init", sample("charlm.rnn"), "--seed", "7", "-o", str(out)], check=True)
    for name, value in read_safetensors(out).items():
        assert torch.equal(m.param(name), value), name


def test_state_dict_save_load_and_dtype_change():
    torch.manual_seed(4)
    a = rnnc.load(sample("lstm.rnn"), I=3, H=4, seed=1)
    b = rnnc.load(sample("lstm.rnn"), I=3, H=4, seed=2)
    buf = io.BytesIO()
    torch.save(a.state_dict(), buf)
    buf.seek(0)
    b.load_state_dict(torch.load(buf))
    x = torch.randn(3, 2, 3)
    assert torch.equal(a(x)[0], b(x)[0])
    b.double()  # loads the f64 build
    assert rel(b(x.double())[0], a(x)[0].double()) <= 1e-6


def test_no_grad_and_batch_first():
    m = rnnc.load(sample("lstm.rnn"), I=3, H=4)
    x = torch.randn(2, 5, 3)
    with torch.no_grad():
        y, _ = m(x, batch_first=True)
    assert y.shape == (2, 5, 4) and not y.requires_grad
    assert torch.equal(y, m(x.transpose(0, 1))[0].transpose(0, 1).detach())


@pytest.mark.parametrize("binding", ["cpp", "custom_op"])
@pytest.mark.parametrize("name", ["lstm.rnn", "gru.rnn"])
def test_data_input_without_grad(binding, name):
    """An input that does not require grad (a batch of data) gets no gradient, and the params'
    gradients are the same bits as when it does (the C++ binding's backward passes no array
    for it, so the generated code skips W_ih^T·δ: docs/torch.md)."""
    from rnnc.torch import binding as use
    before = use().name
    try:
        use(binding)
        torch.manual_seed(3)
        m = rnnc.load(sample(name), I=5, H=6)
        x, g = torch.randn(7, 3, 5), torch.randn(7, 3, 6)
        grads = []
        for wants in (True, False):
            m.zero_grad()
            xi = x.clone().requires_grad_(wants)
            (m(xi)[0] * g).sum().backward()
            assert (xi.grad is not None) == wants
            grads.append([p.grad.clone() for p in m.parameters()])
        assert all(torch.equal(a, b) for a, b in zip(*grads))
    finally:
        use(before)


def test_cpu_workspaces_kept_for_reuse_never_shared_while_held():
    """The C++ binding keeps CPU workspaces for the next forward of their size
    (csrc/ops.cpp's cpuWorkspace): three graphs alive at once each keep their own, and the
    forwards after them, on workspaces handed out again, give the same gradients."""
    torch.manual_seed(8)
    m = rnnc.load(sample("lstm.rnn"), I=3, H=4)
    xs = [torch.randn(5, 2, 3, requires_grad=True) for _ in range(3)]
    ys = [m(x)[0] for x in xs]
    grads = [torch.autograd.grad(y.sum(), x)[0] for y, x in zip(ys, xs)]
    for x, g in zip(xs, grads):
        assert torch.equal(torch.autograd.grad(m(x)[0].sum(), x)[0], g)


def forward_only_builds(m):
    return [key for key in m._libs if key[3]]


@pytest.mark.parametrize("mode", ["no_grad", "inference_mode", "no_requires_grad"])
def test_inference_runs_the_forward_only_build(mode):
    """Without autograd, forward runs the --forward-only build: the same numbers as the training
    build, in a smaller workspace (there c, which only its loop reads, keeps a ring of two steps
    that takes the initial state and gives the final one)."""
    torch.manual_seed(7)
    m = rnnc.load(sample("lstm.rnn"), I=16, H=32)
    x = torch.randn(20, 4, 16)
    state = {"h": torch.randn(1, 4, 32), "c": torch.randn(1, 4, 32)}
    y_train, f_train = m(x, state=state)  # the params require grad: the training build
    assert y_train.requires_grad and not forward_only_builds(m)
    if mode == "no_grad":
        with torch.no_grad():
            y, final = m(x, state=state)
    elif mode == "inference_mode":
        with torch.inference_mode():
            y, final = m(x, state=state)
    else:
        m.requires_grad_(False)
        y, final = m(x, state=state)
    assert forward_only_builds(m), "the forward-only build did not run"
    lib = m._libs[forward_only_builds(m)[0]]
    assert not lib.has_backward
    assert torch.equal(y, y_train.detach())
    assert sorted(final) == ["c", "h"]
    for k in final:
        assert torch.equal(final[k], f_train[k].detach())
    train, infer = m.workspace_bytes(20, 4), m.workspace_bytes(20, 4, forward_only=True)
    assert 0 < infer < train, (infer, train)


def test_forward_only_build_has_no_backward():
    m = rnnc.load(sample("lstm.rnn"), I=3, H=4)
    with torch.no_grad():
        m(torch.randn(2, 1, 3))
    lib = m._libs[forward_only_builds(m)[0]]
    from rnnc.torch import binding
    with torch.no_grad():
        x = torch.randn(2, 1, 3)
        res = binding().forward(lib.address, m._flat_params(), [x], [], 2, 1)
    empty = torch.empty(0)
    with pytest.raises(RuntimeError, match="forward-only build; it has no backward"):
        binding().backward(lib.address, res[-1], m._flat_params().detach(), [x], [empty, empty], [empty, empty], empty,
                           2, 1)


@pytest.mark.parametrize("binding", ["cpp", "custom_op"])
def test_opcheck(binding):
    """torch.library.opcheck on forward (schema, autograd registration, fake tensors, AOT
    dispatch) and on backward, for both bindings."""
    from rnnc.torch import binding as use, full_workspace
    ops = use(binding)
    try:
        torch.manual_seed(8)
        m = rnnc.load(sample("lstm.rnn"), dtype=torch.float64, I=3, H=4)
        lib = m._lib
        params = m._flat_params().detach().requires_grad_()
        x = torch.randn(3, 2, 3, dtype=torch.float64, requires_grad=True)
        h0 = torch.randn(1, 2, 4, dtype=torch.float64, requires_grad=True)
        c0 = torch.randn(1, 2, 4, dtype=torch.float64, requires_grad=True)
        states = [{"h": h0, "c": c0}[s.name] for s in lib.states]
        torch.library.opcheck(ops.forward.default, (lib.address, params, [x], states, 3, 2))
        torch.library.opcheck(ops.forward.default, (lib.address, params, [x], [], 3, 2))
        with torch.no_grad():
            # forward returns a 0-element view on the workspace; opcheck copies arguments, so
            # backward takes the whole workspace too.
            ws = full_workspace(ops.forward(lib.address, params, [x], states, 3, 2)[-1]).clone()
        gy = torch.randn(3, 2, 4, dtype=torch.float64)
        gs = [torch.randn(1, 2, 4, dtype=torch.float64) for _ in range(2)]
        empty = torch.empty(0, dtype=torch.float64)
        names = [o.name for o in lib.outputs]
        out_grads = [gy if n == "h" else empty for n in names]
        # backward has no derivative of its own (double backward raises), so its autograd test is left out.
        torch.library.opcheck(ops.backward.default, (lib.address, ws, params.detach(), [x.detach()], out_grads, gs, empty, 3, 2),
                              test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_dynamic"))
    finally:
        use("cpp")


def test_packaged_cells_are_the_samples():
    import os
    from rnnc.torch import CELLS
    for name in ("lstm.rnn", "gru.rnn"):
        assert open(os.path.join(CELLS, name)).read() == open(sample(name)).read(), name


def test_loss_weight():
    torch.manual_seed(5)
    m = rnnc.load(sample("adding.rnn"), dtype=torch.float64, H=4)
    x = torch.randn(5, 2, 2, dtype=torch.float64)
    y = torch.randn(5, 2, 1, dtype=torch.float64)
    params = list(m.parameters())
    g1 = torch.autograd.grad(m(x, y)[0][-1], params)
    g2 = torch.autograd.grad(0.5 * m(x, y)[0][-1], params)
    for a, b in zip(g1, g2):
        assert torch.allclose(0.5 * a, b, rtol=1e-14, atol=0)
