#!/usr/bin/env python3
"""Writes a .rnn file with a chain of cells A1 .. An and a model M that
instantiates A1: each A_i (i < n) instantiates A_{i+1} `fan` times and adds
the results; An is a small recurrent cell.

usage: cell_chain.py N FAN > file.rnn
"""
import sys

n, fan = int(sys.argv[1]), int(sys.argv[2])
out = ["dim H = 4\n"]
for i in range(1, n + 1):
    if i < n:
        body = "".join(f"  y{k} = A{i + 1}(x)\n" for k in range(fan))
        total = " + ".join(f"y{k}" for k in range(fan))
        out.append(f"cell A{i}(x: [H]) -> h {{\n{body}  h = {total}\n}}\n")
    else:
        out.append(f"cell A{i}(x: [H]) -> h {{\n  param b: [H]\n  h = tanh(x + b + h[t-1])\n}}\n")
out.append("model M(x: [H]) -> y {\n  y = A1(x)\n}\n")
sys.stdout.write("".join(out))
