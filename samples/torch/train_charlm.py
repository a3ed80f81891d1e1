#!/usr/bin/env python3
"""A character-level language model trained in PyTorch with a compiled rnnc
cell: embedding -> the cell (samples/lstm.rnn by default, any .rnn with one
input and one output) -> linear -> cross-entropy, AdamW, truncated BPTT with
the state carried between windows, checkpoints with torch.save.

    python3 samples/torch/train_charlm.py [TEXT] [--cell FILE] [--steps N]
    torchrun --nproc_per_node 2 samples/torch/train_charlm.py   # DDP, gloo

TEXT defaults to docs/language.md. Under torchrun each rank reads its own
windows of the text; DistributedDataParallel averages the gradients."""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
try:
    import rnnc
except ImportError:  # run from the repository without installing the package
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import rnnc


class CharLM(torch.nn.Module):
    def __init__(self, vocab, embed, hidden, cell, seed):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, embed)
        self.cell = rnnc.load(cell, I=embed, H=hidden, seed=seed)
        if len(self.cell.inputs) != 1 or len(self.cell.outputs) != 1:
            raise SystemExit(f"{cell}: the example takes a cell with one input and one output")
        self.head = torch.nn.Linear(hidden, vocab)

    def forward(self, tokens, state=None):
        h, final = self.cell(self.embed(tokens), state=state)
        return self.head(h), final


def progress(step, steps, loss, rate):
    width = 30
    done = width * step // steps
    sys.stdout.write(f"\rstep {step:>5}/{steps} [{'#' * done}{'.' * (width - done)}] loss {loss:.3f}  {rate:.1f} steps/s")
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("text", nargs="?", default=os.path.join(ROOT, "docs", "language.md"))
    ap.add_argument("--cell", default=os.path.join(ROOT, "samples", "lstm.rnn"))
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--bptt", type=int, default=32)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--embed", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--checkpoint", default="charlm.pt", help="saved every --save-every steps and at the end")
    ap.add_argument("--save-every", type=int, default=100)
    ap.add_argument("--resume", action="store_true", help="start from --checkpoint")
    a = ap.parse_args()

    distributed = "RANK" in os.environ
    if distributed:
        dist.init_process_group("gloo")
    rank, world = (dist.get_rank(), dist.get_world_size()) if distributed else (0, 1)
    torch.manual_seed(a.seed)

    data = open(a.text, "rb").read()
    vocab = 256  # bytes
    stream = torch.tensor(list(data), dtype=torch.int64)
    per_rank = len(stream) // world
    stream = stream[rank * per_rank:(rank + 1) * per_rank]
    lanes = len(stream) // a.batch
    if lanes < a.bptt + 1:
        raise SystemExit(f"{a.text}: {len(data)} bytes is too short for batch {a.batch} x bptt {a.bptt}")
    lanes_view = stream[:lanes * a.batch].view(a.batch, lanes).t()  # [lanes, B]: B parallel streams

    model = CharLM(vocab, a.embed, a.hidden, a.cell, a.seed)
    step = 0
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr)
    if a.resume and os.path.exists(a.checkpoint):
        saved = torch.load(a.checkpoint)
        model.load_state_dict(saved["model"])
        opt.load_state_dict(saved["optimizer"])
        step = saved["step"]
    net = torch.nn.parallel.DistributedDataParallel(model) if distributed else model

    state, pos, first = None, 0, None
    start = time.time()
    while step < a.steps:
        if pos + a.bptt + 1 > lanes:
            state, pos = None, 0
        x, y = lanes_view[pos:pos + a.bptt], lanes_view[pos + 1:pos + a.bptt + 1]
        pos += a.bptt
        logits, final = net(x, state)
        loss = F.cross_entropy(logits.reshape(-1, vocab), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        state = {name: v.detach() for name, v in final.items()}  # truncated BPTT
        step += 1
        first = loss.item() if first is None else first
        if rank == 0:
            progress(step, a.steps, loss.item(), step / max(time.time() - start, 1e-9))
            if step % a.save_every == 0 or step == a.steps:
                torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step}, a.checkpoint)
    if rank == 0:
        print(f"\nloss {first:.3f} -> {loss.item():.3f}; checkpoint {a.checkpoint}")
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
