#!/usr/bin/env python3
"""Markdown table of run.sh's CSVs: µs per call, the better of the rounds with each round in parentheses,
vector ÷ scalar speed-ups, and each kernel's speed against a copy of the same bytes (copy time ÷ kernel time:
elements per second as a share of the copy's, since both count the same elements)."""
import csv
import glob
import os
import sys
from collections import defaultdict

here = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
scores = defaultdict(list)  # (jdk, kernels, benchmark, bytes, type) -> [µs per round]
for path in sorted(glob.glob(os.path.join(here, "jdk*-*-*.csv"))):
    jdk, kernels, _ = os.path.basename(path)[:-4].split("-")
    with open(path) as f:
        for row in csv.DictReader(f):
            name = row["Benchmark"].rsplit(".", 1)[1]
            key = (jdk, kernels, name, int(row["Param: bytes"]), row.get("Param: type") or "")
            scores[key].append(float(row["Score"]))

def best(key):
    return min(scores[key]) if scores.get(key) else None

def cell(key):
    values = scores.get(key)
    if not values:
        return "–"
    return f"{min(values):.3f} ({'/'.join(f'{v:.3f}' for v in values)})"

configs = [("jdk17", "scalar"), ("jdk17", "vector"), ("jdk25", "scalar"), ("jdk25", "vector")]
print("| benchmark | bytes | type | " + " | ".join(f"{j.upper()} {k}" for j, k in configs)
      + " | vector ÷ scalar, 17 / 25 | of copy: 17 scalar / vector, 25 scalar / vector |")
print("|---|---|---|" + "---|" * len(configs) + "---|---|")
rows = sorted({(k[2], k[3], k[4]) for k in scores}, key=lambda r: (r[0] != "copy", r[0], r[1], r[2]))
for name, size, dtype in rows:
    cells = [cell((j, k, name, size, dtype)) for j, k in configs]
    speedups, shares = [], []
    for j in ("jdk17", "jdk25"):
        s, v = best((j, "scalar", name, size, dtype)), best((j, "vector", name, size, dtype))
        speedups.append(f"{s / v:.1f}×" if s and v else "–")
        for k in ("scalar", "vector"):
            c, t = best((j, k, "copy", size, "")), best((j, k, name, size, dtype))
            shares.append(f"{100 * c / t:.0f} %" if c and t and name != "copy" else "–")
    print(f"| {name} | {size} | {dtype} | " + " | ".join(cells) + f" | {' / '.join(speedups)} | "
          + f"{shares[0]} / {shares[1]}, {shares[2]} / {shares[3]} |")
