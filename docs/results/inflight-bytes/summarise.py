#!/usr/bin/env python3
"""The operator's speed-up over one call at a time (one-at-a-time median / flux median) in run.sh's outputs, per
cell and jar, one value per round, and the flux's median step time; a markdown table on stdout."""
import glob
import os
import re
import sys

out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
ROW = re.compile(r"^(?:\[0\])?\s+(\S+)\s+(flux|one-by-1)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)")
NAME = re.compile(r"(shm|local)-n(\d)-(\w+)-(before|after)-(\d+)\.txt$")
cells = {}
for path in sorted(glob.glob(os.path.join(out, "*-*-*-*-*.txt"))):
    m = NAME.search(os.path.basename(path))
    if not m:
        continue
    transport, n, shape, tree, rnd = m.groups()
    medians = {}
    with open(path) as f:
        for line in f:
            r = ROW.match(line)
            if r:
                medians[r.group(2)] = float(r.group(4))
    if len(medians) == 2:
        cell = cells.setdefault((transport, int(n), shape), {"before": [], "after": []})
        cell[tree].append((int(rnd), medians["one-by-1"] / medians["flux"], medians["flux"], medians["one-by-1"]))
order = {"200x16K": 0, "50x1M": 1, "4x64M": 2}
print("| transport, N | gradients | speed-up before (per round) | speed-up after (per round) | flux ms before | flux ms after | one at a time ms before | after |")
print("|---|---|---|---|---|---|---|---|")
for (transport, n, shape) in sorted(cells, key=lambda k: (k[0], -k[1], order.get(k[2], 9))):
    cell = cells[(transport, n, shape)]
    def col(tree, i):
        return ", ".join(f"{v[i]:.2f}" + ("×" if i == 1 else "") for v in sorted(cell[tree]))
    print(f"| {transport}, {n} | {shape} | {col('before', 1)} | {col('after', 1)} | {col('before', 2)} | {col('after', 2)} "
          f"| {col('before', 3)} | {col('after', 3)} |")
