#!/usr/bin/env python3
"""Checks that every kernel of an emitted <model>.cpp carries its equations:

    // NAME: what it is
    //   FILE.rnn:LINE  <the text of that source line>
    static void NAME(...

usage: equations.py BUNDLE.cpp SOURCE.rnn
Each `FILE.rnn:LINE  text` must name SOURCE's file name, and `text` must be
SOURCE's line LINE (stripped). Prints `kernels: N, lines: L1 L2 ...` (the
distinct source lines named, sorted). The comments are read by the CUDA
check's reader (tests/cuda/kernel_comments.py): one rule for both targets.
"""
import os
import re
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "cuda"))
from kernel_comments import comment_above, parse_equation  # noqa: E402

cpp = open(sys.argv[1]).read().splitlines()
src = open(sys.argv[2]).read().splitlines()
base = os.path.basename(sys.argv[2])
kernels = 0
lines = set()
for i, line in enumerate(cpp):
    m = re.match(r"^static void (\w+)\(", line)
    if not m:
        continue
    name = m.group(1)
    kernels += 1
    above = comment_above(cpp, i)
    eqs = []  # the `//   ` lines at the end of the comment; the title is the line above them
    while above and above[-1].startswith("//   "):
        eqs.insert(0, above.pop())
    if not eqs:
        sys.exit(f"equations.py: kernel {name} has no equations comment")
    title = cpp[i - len(eqs) - 1] if i > len(eqs) else ""
    if not title.startswith(f"// {name}: "):
        sys.exit(f"equations.py: kernel {name}: expected '// {name}: ...' above its equations, got {title!r}")
    for e in eqs:
        em = parse_equation(e)
        if not em:
            sys.exit(f"equations.py: kernel {name}: malformed equation line {e!r}")
        f, n, text = em
        if f != base:
            sys.exit(f"equations.py: kernel {name}: names {f}, expected {base}")
        if not (1 <= n <= len(src)) or src[n - 1].strip() != text:
            sys.exit(f"equations.py: kernel {name}: {f}:{n} is {src[n - 1].strip() if 1 <= n <= len(src) else '(none)'!r}, comment says {text!r}")
        lines.add(n)
if kernels == 0:
    sys.exit("equations.py: no kernels")
print(f"kernels: {kernels}, lines: {' '.join(map(str, sorted(lines)))}")
