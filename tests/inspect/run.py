#!/usr/bin/env python3
"""rnnc-inspect as an independent check of the emitter (docs/inspect.md).

usage: run.py --rnnc RNNC --inspect RNNC_INSPECT --samples DIR --inputs DIR --work DIR

1. Every sample (samples/*.rnn) x target (cpu, cuda, cuda --jit): the bundle
   rnnc writes is inspected, must show no problem, and what clang finds in the
   source must match the manifest (<model>.json):
   - cpu: the kernels are exactly the manifest's, each with the manifest's
     equations (the comment names the .rnn by its file name) and launched;
   - both: a loop stage run in parallel over time has kernels of its own
     (cpu: scan_<stage>, newton_<stage>; cuda: scan_<stage>_<pass>,
     newton_<stage>_<pass>), each naming the equations of the stage's
     kernels (manifest "stages"[stage]) and launched (cuda: from
     launch_<name>);
   - cuda, --jit: a "fused" manifest kernel is a __global__ kernel of that
     name and those equations, launched from launch_<name>; a "grad_embed"
     one is a launch of the rnnc helper grad_embed from launch_<name>; the
     GEMM kinds (gemm, gemm_t, grad_matrix, grad_vector) are a checked cuBLAS
     call (cublasStatus_t) in launch_<name>, whose comment names the manifest's
     equations; no other kernel but rnnc helpers.
2. Each hand-made Inputs/*.cu, *.cpp names the problems it must raise as
   `// EXPECT: LINE KIND` lines (none: it must be clean); rnnc-inspect must
   report exactly those and exit 1 (0 when clean).
3. Bad input (a missing file, a directory that is no bundle, a file of another
   kind, a file that does not parse) is a one-line error naming it, exit 1.
Prints one line per case and exits 1 when any fails.
"""
import argparse
import concurrent.futures
import glob
import json
import os
import re
import shutil
import subprocess
import sys

DIMS = {"gru": ["-D", "I=32", "-D", "H=64"]}  # dims the sample leaves to the command line
TARGETS = {"cpu": ["--target", "cpu"], "cuda": ["--target", "cuda"], "jit": ["--target", "cuda", "--jit"]}
GEMM_KINDS = {"gemm", "gemm_t", "grad_matrix", "grad_vector"}


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600)
    return p.returncode, p.stdout, p.stderr


def compare(target, manifest, found):
    """Differences between the manifest and what rnnc-inspect found, as messages."""
    bad = []
    kernels = {k["name"]: k for k in found["kernels"]}
    calls_in = {}
    for c in found["library_calls"]:
        calls_in.setdefault(c["function"], []).append(c)
    launches_in = {}
    for k in found["kernels"]:
        for l in k["launches"]:
            launches_in.setdefault(l["function"], []).append(k["name"])
    listed = set()
    for m in manifest["kernels"]:
        name, kind = m["name"], m["kind"]
        equations = [os.path.basename(e.rsplit(":", 1)[0]) + ":" + e.rsplit(":", 1)[1] for e in m["equations"]]
        launcher = "launch_" + name
        if target == "cpu" or kind == "fused":
            k = kernels.get(name)
            listed.add(name)
            if not k:
                bad.append(f"{name}: in the manifest, no such kernel in the source")
                continue
            if k["equations"] != equations:
                bad.append(f"{name}: the comment names {k['equations']}, the manifest {equations}")
            if not k["launches"]:
                bad.append(f"{name}: never launched")
            if target != "cpu" and launcher not in [l["function"] for l in k["launches"]]:
                bad.append(f"{name}: not launched from {launcher}")
        elif kind == "grad_embed":
            if "grad_embed" not in launches_in.get(launcher, []):
                bad.append(f"{name}: {launcher} does not launch the helper grad_embed")
        elif kind in GEMM_KINDS:
            calls = [c for c in calls_in.get(launcher, []) if c["status"] == "cublasStatus_t"]
            if not calls:
                bad.append(f"{name}: no cuBLAS call in {launcher}")
            elif not all(c["checked"] for c in calls):
                bad.append(f"{name}: a cuBLAS call in {launcher} is not checked")
            elif calls[0]["equations"] != equations:
                bad.append(f"{name}: the comment above {launcher} names {calls[0]['equations']}, the manifest {equations}")
        else:
            bad.append(f"{name}: manifest kind {kind!r} unknown to this test")
    by_name = {m["name"]: m for m in manifest["kernels"]}
    for k in found["kernels"]:
        if k["name"] in listed or k["helper"]:
            continue
        stage = scan_stage(manifest, k["name"])
        if stage is None:
            bad.append(f"{k['name']}: a kernel in the source, not in the manifest")
            continue
        equations = []
        for name in stage["kernels"]:
            for e in by_name[name]["equations"]:
                e = os.path.basename(e.rsplit(":", 1)[0]) + ":" + e.rsplit(":", 1)[1]
                if e not in equations:
                    equations.append(e)
        fused = k["name"].startswith("step_")  # a fused launch runs some of its loop's kernels
        if fused and not (k["equations"] and set(k["equations"]) <= set(equations)):
            bad.append(f"{k['name']}: the comment names {k['equations']}, not some of its loop's kernels' {equations}")
        if not fused and k["equations"] != equations:
            bad.append(f"{k['name']}: the comment names {k['equations']}, its loop's kernels {equations}")
        if not k["launches"]:
            bad.append(f"{k['name']}: never launched")
        elif fused:
            stage_function = "stage_" + k["name"].split("_")[1]
            if not any(l["function"] == stage_function and not l["cooperative"] for l in k["launches"]):
                bad.append(f"{k['name']}: not launched from {stage_function}")
        elif k["name"].startswith("persist_"):  # from its stage function, all its blocks at once
            stage_function = "stage_" + k["name"].split("_")[1]
            if not any(l["function"] == stage_function and l["cooperative"] for l in k["launches"]):
                bad.append(f"{k['name']}: no cooperative launch from {stage_function}")
        elif target != "cpu" and "launch_" + k["name"] not in [l["function"] for l in k["launches"]]:
            bad.append(f"{k['name']}: not launched from launch_{k['name']}")
    if found["problems"]:
        bad += [f"problem at line {p['line']}: {p['message']} [{p['kind']}]" for p in found["problems"]]
    want_language = "cuda" if target == "cuda" else "c++"
    if found["language"] != want_language:
        bad.append(f"language {found['language']}, expected {want_language}")
    if target == "jit" and not found["kernel_string"]:
        bad.append("no kernel string found in the --jit host part")
    return bad


def scan_stage(manifest, name):
    """The manifest stage whose loop kernel `name` runs in parallel over time
    (scan_2, newton_1_solve: stage 2, stage 1) or persistent (persist_1, which
    the stage must name) or fused (step_1_0, step_2_start, which the stage must
    list), or None."""
    m = re.fullmatch(r"step_(\d+)_(?:\d+|start)", name)  # the fused variant's kernels, which the stage lists
    if m:
        stages = manifest["stages"]
        stage = stages[int(m.group(1))] if int(m.group(1)) < len(stages) else None
        return stage if stage and name in stage.get("fused", []) else None
    m = re.fullmatch(r"persist_(\d+)", name)
    if m:
        stages = manifest["stages"]
        stage = stages[int(m.group(1))] if int(m.group(1)) < len(stages) else None
        return stage if stage and stage.get("persistent") == name else None
    m = re.fullmatch(r"(?:scan|newton)_(\d+)(?:_[a-z]+)?", name)
    if not m or int(m.group(1)) >= len(manifest["stages"]):
        return None
    stage = manifest["stages"][int(m.group(1))]
    return stage if stage["loop"] else None


def sample_case(args, sample, target):
    name = os.path.splitext(os.path.basename(sample))[0]
    label = f"{name} {target}"
    out = os.path.join(args.work, "bundles", f"{name}-{target}")
    shutil.rmtree(out, ignore_errors=True)
    stem = os.path.splitext(os.path.basename(sample))[0]
    rc, _, err = run([args.rnnc, "compile", sample, *TARGETS[target], *DIMS.get(stem, []), "-o", out])
    if rc != 0:
        return label, [f"rnnc compile failed: {err.strip()}"]
    manifests = glob.glob(os.path.join(out, "*.json"))
    if len(manifests) != 1:
        return label, [f"expected one manifest in {out}, found {manifests}"]
    manifest = json.load(open(manifests[0]))
    rc, stdout, err = run([args.inspect, out, "--json"])
    try:
        found = json.loads(stdout)
    except json.JSONDecodeError:
        return label, [f"rnnc-inspect exit {rc}, no JSON: {err.strip()[:2000]}"]
    bad = compare(target, manifest, found)
    if rc != 0 and not bad:
        bad.append(f"rnnc-inspect exit {rc}: {err.strip()}")
    return label, bad


def expected_problems(path):
    return sorted((int(m.group(1)), m.group(2)) for m in re.finditer(r"//\s*EXPECT:\s*(\d+)\s+([\w-]+)", open(path).read()))


def input_case(args, path):
    label = os.path.basename(path)
    want = expected_problems(path)
    rc, stdout, err = run([args.inspect, path, "--json"])
    try:
        found = json.loads(stdout)
    except json.JSONDecodeError:
        return label, [f"rnnc-inspect exit {rc}, no JSON: {err.strip()[:2000]}"]
    got = sorted((p["line"], p["kind"]) for p in found["problems"])
    bad = []
    if got != want:
        bad.append(f"problems {got}, expected {want}")
    if rc != (1 if want else 0):
        bad.append(f"exit {rc}, expected {1 if want else 0}")
    # The text form says the same, one `FILE:LINE: problem: ... [KIND]` line each.
    rc, stdout, _ = run([args.inspect, path])
    text = sorted((int(m.group(1)), m.group(2)) for m in re.finditer(r":(\d+): problem: .* \[([\w-]+)\]$", stdout, re.M))
    if text != want:
        bad.append(f"text problems {text}, expected {want}")
    return label, bad


def bad_input_cases(args):
    empty = os.path.join(args.work, "not-a-bundle")
    os.makedirs(empty, exist_ok=True)
    open(os.path.join(empty, "notes.txt"), "w").write("no source here\n")
    cases = [
        ("missing file", os.path.join(args.work, "no-such-bundle"), "no such file or directory"),
        ("not a bundle", empty, "not a bundle"),
        ("not a source", os.path.join(empty, "notes.txt"), "not a .cu or .cpp file"),
        ("does not parse", os.path.join(args.inputs, "bad", "broken.cu"), "does not parse"),
        ("jit string does not parse", os.path.join(args.inputs, "bad", "broken_jit.cpp"), "does not parse"),
    ]
    results = []
    for label, path, words in cases:
        rc, stdout, err = run([args.inspect, path, "--json"])
        last = err.strip().splitlines()[-1] if err.strip() else ""
        bad = []
        if rc != 1:
            bad.append(f"exit {rc}, expected 1")
        if not last.startswith(f"rnnc-inspect: error: {path}") or words not in last:
            bad.append(f"last line of stderr {last!r}, expected 'rnnc-inspect: error: {path}: ...{words}...'")
        if stdout:
            bad.append(f"printed {stdout[:200]!r} on stdout")
        if "internal error" in err or "Sanitizer" in err:
            bad.append(f"crashed: {err[-2000:]}")
        results.append((f"bad input: {label}", bad))
    return results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rnnc", required=True)
    ap.add_argument("--inspect", required=True)
    ap.add_argument("--samples", required=True)
    ap.add_argument("--inputs", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    jobs = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        for sample in sorted(glob.glob(os.path.join(args.samples, "*.rnn"))):
            for target in TARGETS:
                jobs.append(pool.submit(sample_case, args, sample, target))
        for path in sorted(glob.glob(os.path.join(args.inputs, "*.cu")) + glob.glob(os.path.join(args.inputs, "*.cpp"))):
            jobs.append(pool.submit(input_case, args, path))
        results = [j.result() for j in jobs]
    results += bad_input_cases(args)
    failed = 0
    for label, bad in results:
        if bad:
            failed += 1
            print(f"FAILED: {label}")
            for b in bad:
                print(f"  {b}")
        else:
            print(f"ok: {label}")
    print(f"{len(results) - failed} of {len(results)} passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
