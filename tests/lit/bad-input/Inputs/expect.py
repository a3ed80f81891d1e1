#!/usr/bin/env python3
"""Runs one rnnc command on bad input and checks what DESIGN.md §6 promises.

usage: expect.py [--exit N]... [--timeout S] [--max-rss-mb M] [--stdout F] [--stderr F] -- CMD...

The test fails (this script exits 1 and says why) when the command
  - runs longer than --timeout seconds (default 20): a hang;
  - exits with a code not given by --exit (default 1; repeat --exit to allow
    several, e.g. `--exit 0 --exit 1` for "success or a clean error");
  - prints 'internal compiler error' (a crash or a failed assertion);
  - exits non-zero without a clean diagnostic on stderr: a clang-style
    'FILE:LINE:COL: error: ...' line or a one-line 'rnnc: error: ...' (or
    'rnnc-opt: error: ...', tests/lit/opt/);
  - exits non-zero but wrote to stdout (a half-written result);
  - uses more than --max-rss-mb MiB of memory (default 1024). The address
    space is also capped (4x that, at least 2 GiB) so that a runaway
    allocation fails here instead of exhausting the machine.
stdout and stderr are saved to the files given, for FileCheck.
"""
import argparse
import os
import re
import resource
import subprocess
import sys

DIAG = re.compile(rb"^(\S.*:\d+:\d+|rnnc|rnnc-opt): error: ", re.M)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--exit", type=int, action="append", dest="codes")
    ap.add_argument("--timeout", type=float, default=20)
    ap.add_argument("--max-rss-mb", type=int, default=1024)
    ap.add_argument("--stdout")
    ap.add_argument("--stderr")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    codes = a.codes or [1]
    cap = max(4 * a.max_rss_mb, 2048) << 20

    def limit():
        # A sanitizer reserves terabytes of address space for its shadow memory,
        # so under one (RNNC_SANITIZER set) only the resident size is checked.
        if not os.environ.get("RNNC_SANITIZER"):
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    # A sanitized debug build runs 10-30x slower: the limit is for hangs, not speed.
    timeout = a.timeout * (10 if os.environ.get("RNNC_SANITIZER") else 1)
    problems = []
    try:
        p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout,
                           preexec_fn=limit)
        out, err, rc = p.stdout, p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        out, err, rc = e.stdout or b"", e.stderr or b"", None
        problems.append(f"did not finish within {timeout:g} s (a hang or unbounded work)")
    if a.stdout:
        open(a.stdout, "wb").write(out)
    if a.stderr:
        open(a.stderr, "wb").write(err)
    rss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    if rc is not None:
        if rc not in codes:
            problems.append(f"exit code {rc}, expected {' or '.join(map(str, codes))}")
        if b"internal compiler error" in err or b"internal compiler error" in out:
            problems.append("it reported an internal compiler error")
        if rc != 0 and not DIAG.search(err):
            problems.append("it failed without a clean 'FILE:LINE:COL: error:' or 'rnnc: error:' diagnostic")
        if rc != 0 and out:
            problems.append(f"it failed but wrote {len(out)} bytes to stdout")
    # AddressSanitizer's shadow memory and quarantine take about 2-3x more.
    max_rss_mb = a.max_rss_mb * (3 if os.environ.get("RNNC_SANITIZER") else 1)
    if rss_mb > max_rss_mb:
        problems.append(f"it used {rss_mb:.0f} MiB of memory (the limit here is {max_rss_mb} MiB)")
    if problems:
        sys.stderr.write("expect.py: " + " ".join(cmd)[:300] + "\n")
        for p_ in problems:
            sys.stderr.write("expect.py: FAIL: " + p_ + "\n")
        tail = err[-2000:].decode("utf-8", "replace")
        sys.stderr.write("expect.py: stderr (tail):\n" + tail + "\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
