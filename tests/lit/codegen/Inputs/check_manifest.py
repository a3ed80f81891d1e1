#!/usr/bin/env python3
"""Asserts what the manifest of samples/lstm.rnn (default dims) contains and
that the header and the ABI table of the .cpp agree with it.

usage: check_manifest.py DIR   (DIR holds LSTM.json, LSTM.h, LSTM.cpp)
"""
import json
import math
import re
import sys

d = sys.argv[1]
m = json.load(open(f"{d}/LSTM.json"))
header = open(f"{d}/LSTM.h").read()
cpp = open(f"{d}/LSTM.cpp").read()


def expect(what, got, want):
    if got != want:
        sys.exit(f"check_manifest.py: {what}: got {got!r}, expected {want!r}")


for key in ("dims", "model", "symbol", "target", "rnnc_version", "source_hash", "params", "param_elements", "inputs",
            "outputs", "states", "loss", "seeds", "input_grads", "kernels", "stages", "buffers"):
    if key not in m:
        sys.exit(f"check_manifest.py: no key {key!r} (keys: {sorted(m)})")
expect("dims", m["dims"], {"I": 64, "H": 128})
expect("model", m["model"], "LSTM")
expect("symbol", m["symbol"], "rnnc_model_LSTM")
expect("target", m["target"], "cpu")
if not re.fullmatch(r"[0-9a-f]{16}", m["source_hash"]):
    sys.exit(f"check_manifest.py: source_hash {m['source_hash']!r} is not 16 hex digits")
# Every LSTM param is drawn as `rnnc init` draws it: uniform in ±1/sqrt(H), H = 128.
init = {"distribution": "uniform", "scale": 1 / math.sqrt(128)}
expect("params", m["params"], [
    {"name": "W_ih", "offset": 0, "shape": [512, 64], "init": init},
    {"name": "W_hh", "offset": 32768, "shape": [512, 128], "init": init},
    {"name": "b_ih", "offset": 98304, "shape": [512], "init": init},
    {"name": "b_hh", "offset": 98816, "shape": [512], "init": init},
])
expect("param_elements", m["param_elements"], 99328)
expect("inputs", m["inputs"], [{"name": "x", "width": 64}])
expect("outputs", m["outputs"], [{"name": "h", "width": 128}])
expect("states", m["states"], [{"depth": 1, "name": "c", "width": 128}, {"depth": 1, "name": "h", "width": 128}])
expect("loss", m["loss"], False)
expect("seeds", m["seeds"], [{"name": "h", "width": 128}])
expect("input_grads", m["input_grads"], [{"name": "x", "width": 64}])

# Kernels: unique names, every one with equations naming lstm.rnn lines 9-11.
names = [k["name"] for k in m["kernels"]]
expect("unique kernel names", len(set(names)), len(names))
seen = set()
for k in m["kernels"]:
    if not k["equations"]:
        sys.exit(f"check_manifest.py: kernel {k['name']} has no equations")
    for e in k["equations"]:
        em = re.fullmatch(r".*/samples/lstm\.rnn:(\d+)", e)
        if not em or int(em.group(1)) not in (9, 10, 11):
            sys.exit(f"check_manifest.py: kernel {k['name']}: equation {e!r} is not lstm.rnn:9..11")
        seen.add(int(em.group(1)))
    if f"static void {k['name']}(" not in cpp:
        sys.exit(f"check_manifest.py: kernel {k['name']} is not in LSTM.cpp")
expect("lines named by kernels", sorted(seen), [9, 10, 11])
kinds = {k["name"]: k for k in m["kernels"]}

# Stages: the forward has one loop (a per-step GEMM and a per-step fused kernel);
# the backward one loop in reverse time.
for s in m["stages"]:
    for k in s["kernels"]:
        if k not in kinds:
            sys.exit(f"check_manifest.py: stage names an unknown kernel {k}")
        expect(f"{k} per_step", kinds[k]["per_step"], s["loop"])
fwd = [s for s in m["stages"] if s["loop"] and not s["backward"]]
bwd = [s for s in m["stages"] if s["loop"] and s["backward"]]
expect("forward loops", len(fwd), 1)
expect("backward loops", len(bwd), 1)
expect("forward loop direction", fwd[0]["direction"], 1)
expect("backward loop direction", bwd[0]["direction"], -1)
expect("forward loop kernel kinds", [kinds[k]["kind"] for k in fwd[0]["kernels"]], ["gemm", "fused"])
hoisted = [k for s in m["stages"] if not s["loop"] and not s["backward"] for k in s["kernels"]]
expect("hoisted forward kernel kinds", [kinds[k]["kind"] for k in hoisted], ["gemm"])  # the bias sum sinks into the loop

# The state buffers keep one step of padding before step 0 (the initial state).
padded = [b for b in m["buffers"] if not b["backward"] and b["pad_before"] == 1]
expect("padded forward buffers (c and h)", len(padded), 2)

# The header and the ABI table agree with the manifest.
expect("header kParamElements", re.search(r"kParamElements = (\d+);", header).group(1), str(m["param_elements"]))
for p in m["params"]:
    hm = re.search(rf"kParam_{p['name']} = (\d+); +// offset of a \[([0-9, ]+)\] param", header)
    if not hm:
        sys.exit(f"check_manifest.py: header has no kParam_{p['name']}")
    expect(f"header offset of {p['name']}", int(hm.group(1)), p["offset"])
    expect(f"header shape of {p['name']}", [int(x) for x in hm.group(2).split(",")], p["shape"])
    shape = p["shape"] + [0] * (2 - len(p["shape"]))
    row = f'{{"{p["name"]}", {len(p["shape"])}, {{{shape[0]}, {shape[1]}}}, {p["offset"]}, 0, 0, 0, {p["init"]["scale"]}}},'
    if row not in cpp:
        sys.exit(f"check_manifest.py: the ABI table in LSTM.cpp has no row {row}")
if f"source hash {m['source_hash']}" not in header or f'"LSTM", "{m["source_hash"]}"' not in cpp:
    sys.exit("check_manifest.py: the header or the ABI table has another source hash")
print("manifest ok")
