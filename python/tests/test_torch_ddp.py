"""Under DistributedDataParallel (gloo, 2 processes on the CPU, each with half
the batch) 5 SGD steps end with the same parameters as one process with the
whole batch. rnnc adds no communication: DDP's own hooks average the gradients."""
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import rnnc
from conftest import sample

STEPS, T, B = 5, 4, 6


def data():
    g = torch.Generator().manual_seed(11)
    return [torch.randn(T, B, 3, generator=g, dtype=torch.float64) for _ in range(STEPS)]


def train(model, batches):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x in batches:
        opt.zero_grad()
        y, _ = model(x)
        (y * y).mean().backward()
        opt.step()


def rank_main(rank, world, init_file, out):
    store = dist.FileStore(init_file, world)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world)
    m = rnnc.load(sample("lstm.rnn"), dtype=torch.float64, I=3, H=5, seed=1)
    ddp = torch.nn.parallel.DistributedDataParallel(m)
    half = B // world
    train(ddp, [x[:, rank * half:(rank + 1) * half] for x in data()])
    if rank == 0:
        torch.save(m.state_dict(), out)
    # Both ranks leave together: a rank that tears gloo down while the other
    # still talks to it aborts ("terminate called without an active exception").
    # gloo's barrier can return on rank 0 before rank 1 has read rank 0's last
    # message (a CI run aborted that way), so the ranks then meet once more on
    # the file store, which no gloo connection carries, before either closes.
    dist.barrier()
    store.set(f"left{rank}", "1")
    store.wait([f"left{r}" for r in range(world)])
    dist.destroy_process_group()


def test_ddp_two_ranks_equal_one(tmp_path):
    single = rnnc.load(sample("lstm.rnn"), dtype=torch.float64, I=3, H=5, seed=1)
    train(single, data())
    out = str(tmp_path / "rank0.pt")
    mp.spawn(rank_main, args=(2, str(tmp_path / "init"), out), nprocs=2, join=True)
    theirs = torch.load(out)
    for name, p in single.state_dict().items():
        assert torch.allclose(p, theirs[name], rtol=0, atol=1e-10), name
