#!/usr/bin/env python3
"""A bidirectional tagger from two compiled rnnc cells: one reads the sequence
forward, the other reads it reversed; their outputs, side by side, go through
a linear layer to a tag per step. The task needs both directions: the tag of
step t counts the ones among its neighbours x[t-1] and x[t+1] (0, 1 or 2),
over random bits.

With --lengths the sequences have lengths of their own (uniform in [T/4, T]),
given as PackedSequences: the forward cell is loaded with lengths=True, the
backward one is the same cell reading h[t+1] (it starts at each sequence's
last step, as nn.LSTM's reverse direction does), and a step past a sequence's
end is no neighbour (docs/lengths.md).

    python3 samples/torch/bitagger.py [--cell FILE] [--steps N] [--lengths]"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
try:
    import rnnc
except ImportError:  # run from the repository without installing the package
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import rnnc


class BiTagger(torch.nn.Module):
    def __init__(self, cell, hidden, tags):
        super().__init__()
        self.fwd = rnnc.load(cell, I=2, H=hidden, seed=1)
        self.bwd = rnnc.load(cell, I=2, H=hidden, seed=2)
        self.head = torch.nn.Linear(2 * hidden, tags)

    def forward(self, x):  # x: [T, B, 2] one-hot bits
        h_fwd, _ = self.fwd(x)
        h_bwd, _ = self.bwd(x.flip(0))
        return self.head(torch.cat([h_fwd, h_bwd.flip(0)], dim=-1))


class PackedBiTagger(torch.nn.Module):
    """The same, on PackedSequences: a backward cell (h[t+1]) instead of flipping."""

    def __init__(self, cell, hidden, tags):
        super().__init__()
        with open(cell) as f:
            text = f.read()
        self.fwd = rnnc.load(cell, I=2, H=hidden, seed=1, lengths=True)
        self.bwd = rnnc.load(text.replace("[t-1]", "[t+1]"), I=2, H=hidden, seed=2, lengths=True)
        self.head = torch.nn.Linear(2 * hidden, tags)

    def forward(self, x):  # x: a PackedSequence of [T, B, 2] one-hot bits
        h_fwd, _ = pad_packed_sequence(self.fwd(x)[0])
        h_bwd, _ = pad_packed_sequence(self.bwd(x)[0])
        return self.head(torch.cat([h_fwd, h_bwd], dim=-1))


def batch(T, B, g, lengths=None):
    bits = torch.randint(0, 2, (T + 2, B), generator=g)
    if lengths is not None:  # no neighbour past the end; no tag to learn there (-100: ignored)
        past = torch.arange(T + 2)[:, None] > lengths[None, :]
        bits[past] = 0
    tags = bits[:-2] + bits[2:]
    if lengths is not None:
        tags[torch.arange(T)[:, None] >= lengths[None, :]] = -100
    return F.one_hot(bits[1:-1], 2).float(), tags


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cell", default=os.path.join(ROOT, "samples", "gru.rnn"))
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--hidden", type=int, default=16)
    ap.add_argument("--lengths", action="store_true", help="sequences of lengths in [T/4, T], packed")
    a = ap.parse_args()
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = (PackedBiTagger if a.lengths else BiTagger)(a.cell, a.hidden, 3)

    def run(T, B):
        if not a.lengths:
            x, tags = batch(T, B, g)
            return model(x), tags
        lengths = torch.randint(T // 4, T + 1, (B,), generator=g)
        x, tags = batch(T, B, g, lengths)
        return model(pack_padded_sequence(x, lengths, enforce_sorted=False)), tags[:int(lengths.max())]

    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for step in range(1, a.steps + 1):
        scores, tags = run(20, 32)
        loss = F.cross_entropy(scores.reshape(-1, 3), tags.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 50 == 0:
            print(f"step {step}: loss {loss.item():.3f}")
    with torch.no_grad():
        scores, tags = run(50, 256)
        valid = tags != -100
        accuracy = (scores.argmax(-1) == tags)[valid].float().mean().item()
    print(f"accuracy on new sequences: {accuracy:.3f}")
    return 0 if accuracy > 0.9 else 1


if __name__ == "__main__":
    sys.exit(main())
