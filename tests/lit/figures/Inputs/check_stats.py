#!/usr/bin/env python3
"""Checks the JSON of `rnnc show FILE --stats --json` against assertions.

Usage: check_stats.py [--file F] ASSERTION...   (reads stdin without --file)

An assertion is one of
  KEY=VALUE   KEY!=VALUE   KEY<=VALUE   KEY>=VALUE   KEY<VALUE   KEY>VALUE
  KEY         (the key exists)
  --design-keys   (every key DESIGN.md section 5 lists exists, each figure a
                   non-negative integer)
where KEY is a dotted path into the object (`forward.step_gemms`); a `*`
component stands for every key at that level (`backward.*=0`). Every failed
assertion is printed; the exit status is 1 if any failed, 2 on bad usage.
"""
import json
import re
import sys

DIRECTION_KEYS = ["loops", "step_launches", "step_gemms", "hoisted_gemms", "flops_in_loops", "flops_hoisted",
                  "scan_loops", "newton_loops"]
DESIGN_KEYS = ([f"forward.{k}" for k in DIRECTION_KEYS] + [f"backward.{k}" for k in DIRECTION_KEYS] +
               ["streams", "saved_bytes_per_step"])

ASSERTION = re.compile(r"^([A-Za-z0-9_.*]+)(?:(<=|>=|!=|=|<|>)(-?[0-9]+(?:\.[0-9]+)?))?$")
COMPARE = {
    "=": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<=": lambda a, b: a <= b,
    ">=": lambda a, b: a >= b,
    "<": lambda a, b: a < b,
    ">": lambda a, b: a > b,
}


def lookup(obj, path):
    """All (dotted name, value) pairs `path` names; a missing key gives value None."""
    found = [("", obj)]
    for part in path.split("."):
        nxt = []
        for name, value in found:
            prefix = name + "." if name else ""
            if not isinstance(value, dict):
                nxt.append((prefix + part, None))
            elif part == "*":
                if not value:
                    nxt.append((prefix + "*", None))
                nxt.extend((prefix + k, v) for k, v in sorted(value.items()))
            else:
                nxt.append((prefix + part, value.get(part)))
        found = nxt
    return found


def main(argv):
    args = argv[1:]
    text_file = None
    if len(args) >= 2 and args[0] == "--file":
        text_file, args = args[1], args[2:]
    if not args:
        print(__doc__, file=sys.stderr)
        return 2
    text = open(text_file).read() if text_file else sys.stdin.read()
    try:
        stats = json.loads(text)
    except json.JSONDecodeError as e:
        print(f"check_stats: the input is not JSON ({e}):\n{text}", file=sys.stderr)
        return 1
    if not isinstance(stats, dict):
        print(f"check_stats: the JSON is not an object: {text}", file=sys.stderr)
        return 1
    failures = []
    for arg in args:
        if arg == "--design-keys":
            for key in DESIGN_KEYS:
                value = lookup(stats, key)[0][1]
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    failures.append(f"{key}: expected a non-negative integer, got {value!r}")
            continue
        m = ASSERTION.match(arg)
        if not m:
            print(f"check_stats: bad assertion '{arg}'", file=sys.stderr)
            return 2
        key, op, expected = m.groups()
        for name, value in lookup(stats, key):
            if value is None:
                failures.append(f"{name}: missing")
            elif op is None:
                continue
            elif isinstance(value, bool) or not isinstance(value, (int, float)):
                failures.append(f"{name}: expected a number, got {value!r}")
            elif not COMPARE[op](value, float(expected)):
                failures.append(f"{name} = {value}, expected {op} {expected}")
    if failures:
        print("check_stats: FAILED", file=sys.stderr)
        for f in failures:
            print("  " + f, file=sys.stderr)
        print("the JSON was:\n" + json.dumps(stats, indent=2, sort_keys=True), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
