#!/usr/bin/env python3
"""A bidirectional tagger from two compiled rnnc cells: one reads the sequence
forward, the other reads it reversed; their outputs, side by side, go through
a linear layer to a tag per step. The task needs both directions: the tag of
step t counts the ones among its neighbours x[t-1] and x[t+1] (0, 1 or 2),
over random bits.

    python3 samples/torch/bitagger.py [--cell FILE] [--steps N]"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F

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


def batch(T, B, g):
    bits = torch.randint(0, 2, (T + 2, B), generator=g)
    tags = bits[:-2] + bits[2:]
    return F.one_hot(bits[1:-1], 2).float(), tags


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cell", default=os.path.join(ROOT, "samples", "gru.rnn"))
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--hidden", type=int, default=16)
    a = ap.parse_args()
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = BiTagger(a.cell, a.hidden, 3)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for step in range(1, a.steps + 1):
        x, tags = batch(20, 32, g)
        loss = F.cross_entropy(model(x).reshape(-1, 3), tags.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 50 == 0:
            print(f"step {step}: loss {loss.item():.3f}")
    with torch.no_grad():
        x, tags = batch(50, 256, g)
        accuracy = (model(x).argmax(-1) == tags).float().mean().item()
    print(f"accuracy on new sequences: {accuracy:.3f}")
    return 0 if accuracy > 0.9 else 1


if __name__ == "__main__":
    sys.exit(main())
