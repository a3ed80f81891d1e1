#!/usr/bin/env python3
"""Checks `rnnc bench --json` output read from stdin.

usage: check_bench.py B T RUNS [--no-baseline] [--forward-only]
Prints `variants: optimized O0` (or `variants: optimized`) when every check
holds: the sizes echoed, every timing positive and finite, tokens_per_s =
B*T / fwd+bwd seconds, training_bytes = workspace + 4 * param_bytes,
speedup_vs_O0 = O0's fwd+bwd time / the optimized one's. With
--forward-only: forward times only (no fwd+bwd), tokens_per_s = B*T /
forward seconds, serving_bytes = workspace + param_bytes, the speedup of the
forward times.
"""
import json
import math
import sys

B, T, runs = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
baseline = "--no-baseline" not in sys.argv
forward_only = "--forward-only" in sys.argv
time_key = "forward_ms" if forward_only else "fwdbwd_ms"
d = json.load(sys.stdin)


def fail(msg):
    sys.exit(f"check_bench.py: {msg}\n{json.dumps(d, indent=2)}")


def close(a, b):
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b))


for key, want in (("batch", B), ("seq", T), ("runs", runs)):
    if d.get(key) != want:
        fail(f"{key} is {d.get(key)!r}, expected {want}")
if not isinstance(d.get("model"), str) or not d["model"]:
    fail("no model name")
if not isinstance(d.get("threads"), int) or d["threads"] < 1:
    fail("no thread count")
variants = ["optimized", "O0"] if baseline else ["optimized"]
for absent in ({"O0", "speedup_vs_O0"} if not baseline else set()):
    if absent in d:
        fail(f"--no-baseline, yet {absent!r} is there")
for v in variants:
    e = d.get(v)
    if not isinstance(e, dict):
        fail(f"no {v!r} entry")
    times = ("forward_ms", "forward_ms_min") if forward_only else ("forward_ms", "fwdbwd_ms", "fwdbwd_ms_min")
    for k in times + ("tokens_per_s",):
        if not isinstance(e.get(k), (int, float)) or not math.isfinite(e[k]) or e[k] <= 0:
            fail(f"{v}.{k} is {e.get(k)!r}")
    memory = "serving_bytes" if forward_only else "training_bytes"
    for k in ("workspace_bytes", "param_bytes", memory):
        if not isinstance(e.get(k), int) or e[k] <= 0:
            fail(f"{v}.{k} is {e.get(k)!r}")
    for absent in (("fwdbwd_ms", "fwdbwd_ms_min", "training_bytes") if forward_only else ("serving_bytes",)):
        if absent in e:
            fail(f"{v}.{absent} is there")
    if e[time_key + "_min"] > e[time_key]:
        fail(f"{v}: the minimum time exceeds the median")
    if not close(e["tokens_per_s"], B * T / (e[time_key] / 1000)):
        fail(f"{v}.tokens_per_s is not B*T per {time_key} second")
    if forward_only and e["serving_bytes"] != e["workspace_bytes"] + e["param_bytes"]:
        fail(f"{v}.serving_bytes is not workspace + params")
    if not forward_only and e["training_bytes"] != e["workspace_bytes"] + 4 * e["param_bytes"]:
        fail(f"{v}.training_bytes is not workspace + 4 * params")
if baseline:
    if d["optimized"]["param_bytes"] != d["O0"]["param_bytes"]:
        fail("the two variants have different params")
    if not isinstance(d.get("speedup_vs_O0"), (int, float)) or \
            not close(d["speedup_vs_O0"], d["O0"][time_key] / d["optimized"][time_key]):
        fail(f"speedup_vs_O0 is not O0.{time_key} / optimized.{time_key}")
if d.get("forward_only", False) != forward_only:
    fail(f"forward_only is {d.get('forward_only')!r}")
print(f"model {d['model']}, param_bytes {d['optimized']['param_bytes']}")
print("variants: " + " ".join(variants))
