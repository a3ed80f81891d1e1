"""Compares `rnnc init` (a safetensors file) with init_check's output: the
runtime's initializer must draw the same values in the same order."""
import json
import struct
import sys

import numpy as np

blob = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", blob[:8])
header = json.loads(blob[8:8 + n])
data = blob[8 + n:]
expected = []
for name, e in sorted(((k, v) for k, v in header.items() if k != "__metadata__"), key=lambda kv: kv[1]["data_offsets"][0]):
    a, b = e["data_offsets"]
    expected += [(name, float(v)) for v in np.frombuffer(data[a:b], dtype="<f4")]
got = [(line.split()[0], float(line.split()[1])) for line in open(sys.argv[2])]
assert len(got) == len(expected), f"{len(got)} values, rnnc init wrote {len(expected)}"
order = [name for name, _ in expected]
for (gn, gv), (en, ev) in zip(got, expected):
    assert gn == en and np.float32(gv) == np.float32(ev), f"{gn}={gv} but rnnc init: {en}={ev}"
print(f"{len(got)} values equal")
