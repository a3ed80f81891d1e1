"""Helpers for the numeric tests: write params as safetensors (the format is
simple enough to write here, independently of rnnc), run `rnnc run`, read its
outputs back with numpy."""
import json
import os
import struct
import subprocess
import tempfile

import numpy as np


def write_safetensors(path, tensors):
    """tensors: dict name -> numpy array (float32 or float64)."""
    header, blobs, offset = {}, [], 0
    for name, a in tensors.items():
        a = np.ascontiguousarray(a)
        dtype = {np.dtype("float32"): "F32", np.dtype("float64"): "F64"}[a.dtype]
        data = a.tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def run(rnnc, rnn, params, inputs, out, states=None, grads=None, dtype="f64", extra=()):
    """Runs rnnc; returns (returncode, stderr). params/inputs/states/grads are
    dicts of numpy arrays; grads=None means no --grad, {} means --grad alone.
    The engine is the reference interpreter (`--engine interp`) unless extra
    names another."""
    os.makedirs(out, exist_ok=True)
    work = tempfile.mkdtemp(dir=out)
    pfile = os.path.join(work, "params.safetensors")
    write_safetensors(pfile, params)
    if not any(a == "--engine" or a.startswith("--engine=") for a in extra):
        extra = [*extra, "--engine", "interp"]
    cmd = [rnnc, "run", rnn, "--params", pfile, "--out", out, "--dtype", dtype, *extra]
    for kind, arrays in (("--input", inputs), ("--state", states or {})):
        for name, a in arrays.items():
            f = os.path.join(work, f"{kind[2:]}.{name}.npy")
            np.save(f, a)
            cmd += [kind, f"{name}={f}"]
    if grads is not None:
        cmd += ["--grad"]
        for name, a in grads.items():
            f = os.path.join(work, f"grad.{name}.npy")
            np.save(f, a)
            cmd += [f"{name}={f}"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p.returncode, p.stderr


def load(out, name):
    return np.load(os.path.join(out, name + ".npy"))
