"""Sequences of their own lengths through the layer (docs/lengths.md): a model loaded with
lengths=True equals nn.LSTM on pack_padded_sequence (outputs, h_n, c_n, every gradient), a
bidirectional LSTM is two compiled cells (h[t-1] and h[t+1]), PackedSequences go in and come
out, on both bindings; bad lengths are clear errors."""
import pytest
import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

import rnnc
from conftest import sample

I, H, T, B = 3, 4, 6, 4
LENGTHS = [6, 2, 5, 1]

BACKWARD_LSTM = """
dim I = 3
dim H = 4
cell ReverseLSTM(x: [I]) -> h {
  param W_ih: [4*H, I]
  param W_hh: [4*H, H]
  param b_ih, b_hh: [4*H]
  i, f, g, o = split(W_ih @ x + b_ih + W_hh @ h[t+1] + b_hh, 4)
  c = sigmoid(f) * c[t+1] + sigmoid(i) * tanh(g)
  h = sigmoid(o) * tanh(c)
}
"""


def copy_weights(ours, lstm, suffix=""):
    with torch.no_grad():
        for mine, theirs in (("W_ih", "weight_ih_l0"), ("W_hh", "weight_hh_l0"), ("b_ih", "bias_ih_l0"),
                             ("b_hh", "bias_hh_l0")):
            ours.param(mine).copy_(getattr(lstm, theirs + suffix))


def data():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(T, B, I, generator=g, dtype=torch.float64)
    for b, n in enumerate(LENGTHS):
        x[n:, b] = 0  # padding: what pad_sequence gives
    return x.requires_grad_(), torch.randn(T, B, H, generator=g, dtype=torch.float64)


@pytest.fixture(params=["cpp", "custom_op"])
def bound(request):
    rnnc.torch.binding(request.param)
    yield request.param
    rnnc.torch.binding("cpp")


def test_lstm_equals_packed_nn_lstm(bound):
    torch.manual_seed(0)
    ref = torch.nn.LSTM(I, H, dtype=torch.float64)
    ours = rnnc.load(sample("lstm.rnn"), dtype=torch.float64, I=I, H=H, lengths=True)
    copy_weights(ours, ref)
    x, w = data()
    y, final = ours(x, lengths=LENGTHS)
    packed, (h_n, c_n) = ref(pack_padded_sequence(x, LENGTHS, enforce_sorted=False))
    y_ref, _ = pad_packed_sequence(packed, total_length=T)
    torch.testing.assert_close(y, y_ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(final["h"], h_n, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(final["c"], c_n, rtol=1e-12, atol=1e-12)
    # Every gradient: of the outputs and both final states.
    ours_loss = (y * w).sum() + final["h"].sum() + (final["c"] ** 2).sum()
    ref_loss = (y_ref * w).sum() + h_n.sum() + (c_n ** 2).sum()
    gx, *gp = torch.autograd.grad(ours_loss, [x] + [ours.param(n) for n in ("W_ih", "W_hh", "b_ih", "b_hh")])
    gx_ref, *gp_ref = torch.autograd.grad(ref_loss, [x, ref.weight_ih_l0, ref.weight_hh_l0, ref.bias_ih_l0,
                                                     ref.bias_hh_l0])
    torch.testing.assert_close(gx, gx_ref, rtol=1e-10, atol=1e-12)
    for a, b in zip(gp, gp_ref):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_initial_states_follow_their_sequences(bound):
    # The layer runs the batch longest first: each initial state, output and gradient must stay with
    # its own sequence.
    torch.manual_seed(4)
    ref = torch.nn.LSTM(I, H, dtype=torch.float64)
    ours = rnnc.load(sample("lstm.rnn"), dtype=torch.float64, I=I, H=H, lengths=True)
    copy_weights(ours, ref)
    x, w = data()
    h0 = torch.randn(1, B, H, dtype=torch.float64, requires_grad=True)
    c0 = torch.randn(1, B, H, dtype=torch.float64, requires_grad=True)
    y, final = ours(x, state={"h": h0, "c": c0}, lengths=torch.tensor(LENGTHS))
    packed, (h_n, c_n) = ref(pack_padded_sequence(x, LENGTHS, enforce_sorted=False), (h0, c0))
    y_ref, _ = pad_packed_sequence(packed, total_length=T)
    torch.testing.assert_close(y, y_ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(final["h"], h_n, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(final["c"], c_n, rtol=1e-12, atol=1e-12)
    grads = torch.autograd.grad((y * w).sum() + (final["c"] ** 2).sum(), [x, h0, c0])
    grads_ref = torch.autograd.grad((y_ref * w).sum() + (c_n ** 2).sum(), [x, h0, c0])
    for a, b in zip(grads, grads_ref):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_bidirectional_from_two_cells():
    torch.manual_seed(1)
    ref = torch.nn.LSTM(I, H, bidirectional=True, dtype=torch.float64)
    fwd = rnnc.load(sample("lstm.rnn"), dtype=torch.float64, I=I, H=H, lengths=True)
    bwd = rnnc.load(BACKWARD_LSTM, dtype=torch.float64, lengths=True)
    copy_weights(fwd, ref)
    copy_weights(bwd, ref, "_reverse")
    x, w = data()
    yf, ff = fwd(x, lengths=LENGTHS)
    yb, _ = bwd(x, lengths=LENGTHS)
    packed, (h_n, _) = ref(pack_padded_sequence(x, LENGTHS, enforce_sorted=False))
    y_ref, _ = pad_packed_sequence(packed, total_length=T)
    torch.testing.assert_close(torch.cat([yf, yb], 2), y_ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(ff["h"][0], h_n[0], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(yb[0], h_n[1], rtol=1e-12, atol=1e-12)  # the reverse pass ends at step 0
    w2 = torch.cat([w, w.flip(2)], 2)
    gx, = torch.autograd.grad((torch.cat([yf, yb], 2) * w2).sum(), [x])
    gx_ref, = torch.autograd.grad((y_ref * w2).sum(), [x])
    torch.testing.assert_close(gx, gx_ref, rtol=1e-10, atol=1e-12)


def test_packed_sequence_in_and_out():
    torch.manual_seed(2)
    ref = torch.nn.LSTM(I, H, dtype=torch.float64)
    ours = rnnc.load(sample("lstm.rnn"), dtype=torch.float64, I=I, H=H, lengths=True)
    copy_weights(ours, ref)
    x, _ = data()
    packed_x = pack_padded_sequence(x, LENGTHS, enforce_sorted=False)
    y, final = ours(packed_x)
    y_ref, (h_n, _) = ref(packed_x)
    assert isinstance(y, torch.nn.utils.rnn.PackedSequence)
    torch.testing.assert_close(y.data, y_ref.data, rtol=1e-12, atol=1e-12)
    assert torch.equal(y.batch_sizes, y_ref.batch_sizes)
    torch.testing.assert_close(final["h"], h_n, rtol=1e-12, atol=1e-12)


def test_bad_lengths():
    ours = rnnc.load(sample("lstm.rnn"), dtype=torch.float64, I=I, H=H, lengths=True)
    x, _ = data()
    with pytest.raises(ValueError, match=r"every length must be in 1..T \(T = 6\)"):
        ours(x, lengths=[6, 0, 5, 1])
    with pytest.raises(ValueError, match=r"every length must be in 1..T"):
        ours(x, lengths=[7, 2, 5, 1])
    with pytest.raises(ValueError, match=r"lengths must be \[B = 4\]"):
        ours(x, lengths=[6, 2])
    plain = rnnc.load(sample("lstm.rnn"), dtype=torch.float64, I=I, H=H)
    with pytest.raises(RuntimeError, match=r"loaded without lengths: rnnc.load\(..., lengths=True\)"):
        plain(x, lengths=LENGTHS)
    # Without lengths, a lengths model runs every sequence for T steps.
    y, _ = ours(x)
    with torch.no_grad():
        for n in ("W_ih", "W_hh", "b_ih", "b_hh"):
            plain.param(n).copy_(ours.param(n))
    torch.testing.assert_close(y, plain(x)[0], rtol=0, atol=0)
