#!/usr/bin/env python3
"""Writes a .rnn file with a cell B declaring P params and a model M that
instantiates B N times: a small file whose instances hold P * N params.

usage: wide_instances.py P N > file.rnn
"""
import sys

p, n = int(sys.argv[1]), int(sys.argv[2])
out = ["dim H = 4\ncell B(x: [H]) -> h {\n"]
out += [f"  param p{i}: [H]\n" for i in range(p)]
out.append("  h = x\n}\nmodel M(x: [H]) -> y {\n")
out += [f"  y{j} = B(x)\n" for j in range(n)]
out.append("  y = x\n}\n")
sys.stdout.write("".join(out))
