#!/usr/bin/env python3
"""Writes a .rnn file with one cell of N equations, each reading the one before
and the cell's state: v_i = tanh(v_{i-1} + h[t-1]). Everything it computes is
one recurrent component, and backward keeps every v_i.

usage: long_cell.py N > file.rnn
"""
import sys

n = int(sys.argv[1])
lines = ["cell Long(x: [2]) -> h {\n", "  v0 = x\n"]
lines += [f"  v{i} = tanh(v{i - 1} + h[t-1])\n" for i in range(1, n)]
lines.append(f"  h = v{n - 1}\n}}\n")
sys.stdout.write("".join(lines))
