"""Writes a valid set of `rnnc run` inputs for a small cell into a folder, and
bad variants on request, so the lit tests can check each refusal.

usage: make_run_inputs.py DIR CASE    (CASE: ok, or one of the bad cases below)"""
import json
import os
import struct
import sys

import numpy as np


def safetensors(path, tensors, header_patch=None):
    header, blobs, off = {}, [], 0
    for name, a in tensors.items():
        data = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": {"float32": "F32", "float64": "F64"}[str(a.dtype)], "shape": list(a.shape),
                        "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    if header_patch:
        header_patch(header)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def main():
    d, case = sys.argv[1], sys.argv[2]
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(0)
    H, I, T, B = 4, 3, 5, 2
    params = {"W": rng.normal(size=(H, I)).astype(np.float32), "U": rng.normal(size=(H, H)).astype(np.float32),
              "b": rng.normal(size=(H,)).astype(np.float32), "emb": rng.normal(size=(5, H)).astype(np.float32)}
    x = rng.normal(size=(T, B, I)).astype(np.float32)
    tok = rng.integers(0, 5, size=(T, B)).astype(np.int64)
    if case == "missing-param":
        del params["U"]
    if case == "extra-param":
        params["V"] = np.zeros(3, np.float32)
    if case == "param-shape":
        params["W"] = np.zeros((I, H), np.float32)
    if case == "x-dtype":
        x = x.astype(np.int32)
    if case == "x-width":
        x = np.zeros((T, B, I + 1), np.float32)
    if case == "tb-mismatch":
        tok = tok[:T - 1]
    if case == "index-range":
        tok[2, 1] = 5
    if case == "nan":
        x[1, 0, 0] = np.nan
    patch = None
    if case == "lying-safetensors":
        def patch(h):
            h["W"]["data_offsets"][1] += 4
    safetensors(os.path.join(d, "p.safetensors"), params, patch)
    np.save(os.path.join(d, "x.npy"), x)
    np.save(os.path.join(d, "tok.npy"), tok)
    if case == "truncated-npy":
        data = open(os.path.join(d, "x.npy"), "rb").read()
        open(os.path.join(d, "x.npy"), "wb").write(data[:-7])


main()
