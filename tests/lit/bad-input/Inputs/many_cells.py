#!/usr/bin/env python3
"""Writes a .rnn file with N independent cells C0 .. C{N-1} (none instantiates
another, so each is checked on its own).

usage: many_cells.py N > file.rnn
"""
import sys

n = int(sys.argv[1])
sys.stdout.write("dim H = 4\n" + "".join(f"cell C{i}(x: [H]) -> h {{\n  h = tanh(x + h[t-1])\n}}\n"
                                         for i in range(n)))
