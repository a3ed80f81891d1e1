#!/usr/bin/env python3
"""Reads a safetensors checkpoint without torch.

usage: ckpt.py FILE                 prints `meta KEY=VALUE` (rng left out) and
                                    `tensor NAME DTYPE SHAPE`, sorted
       ckpt.py --same A B           exit 1 unless A and B hold the same
                                    tensors (names, shapes, bytes)
"""
import json
import struct
import sys


def load(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    meta = h.pop("__metadata__", {})
    data = b[8 + n:]
    return meta, {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]]) for k, v in h.items()}


if sys.argv[1] == "--same":
    a, b = load(sys.argv[2])[1], load(sys.argv[3])[1]
    if a != b:
        diff = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
        sys.exit(f"ckpt.py: the checkpoints differ in {diff}")
    print(f"same {len(a)} tensors")
else:
    meta, tensors = load(sys.argv[1])
    for k in sorted(meta):
        if k != "rng":
            print(f"meta {k}={meta[k]}")
    for k in sorted(tensors):
        print(f"tensor {k} {tensors[k][0]} {tensors[k][1]}")
