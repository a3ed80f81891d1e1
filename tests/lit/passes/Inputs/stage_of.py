#!/usr/bin/env python3
"""For schedule-O0-read-ahead.rnn: checks, in a `show --schedule` text read from
stdin, that the launch computing PRODUCER runs before the launch that reads it
one step ahead (READER reads PRODUCER[t+1]):

    stage_of.py PRODUCER READER

passes when PRODUCER's launch is in an earlier stage than READER's, or both are
in one stage that is a loop over t backward (step t+1 is done before step t).
PRODUCER and READER are the launch summaries as printed (`tanh`, `mul add`).
"""
import re
import sys


def main():
    producer, reader = sys.argv[1], sys.argv[2]
    stage, direction = -1, None
    where = {}
    for line in sys.stdin:
        m = re.match(r"stage (\d+): (loop over t (forward|backward)|all steps at once)", line)
        if m:
            stage, direction = int(m.group(1)), m.group(3) or "all"
            continue
        m = re.match(r"\s+(?:kernel|gemm)\s+k\d+: (.*?)(?:  #.*)?$", line.rstrip("\n"))
        if m and m.group(1) in (producer, reader):
            where.setdefault(m.group(1), (stage, direction))
    if producer not in where or reader not in where:
        print(f"stage_of: launches '{producer}' and '{reader}' not both found: {where}", file=sys.stderr)
        return 1
    (ps, _), (rs, rdir) = where[producer], where[reader]
    if ps < rs or (ps == rs and rdir == "backward"):
        return 0
    print(f"stage_of: '{reader}' reads '{producer}' one step ahead, but '{producer}' runs in stage {ps} and "
          f"'{reader}' in stage {rs} ({rdir}): at step t, step t+1 is not computed yet", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
