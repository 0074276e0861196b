#!/usr/bin/env python3
"""Markdown table of a kernel run's JMH CSVs, named jdk{17,25}-CONFIG-ROUND.csv: µs per call, median with min - max
over the rounds, per JDK and configuration; FIRST's speed-up over SECOND (median ÷ median); and each kernel's speed
against a copy of the same bytes in the same configuration (copy median ÷ kernel median: elements per second as a
share of the copy's, since both count the same elements).
Usage: summarise.py [DIR [FIRST SECOND]]; the configurations default to vector and scalar (this directory's run.sh;
kernels-block/run.sh writes after and before)."""
import csv
import glob
import os
import statistics
import sys
from collections import defaultdict

here = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
first, second = sys.argv[2:4] if len(sys.argv) > 3 else ("vector", "scalar")
scores = defaultdict(list)  # (jdk, config, benchmark, bytes, type) -> [µs per round]
for path in sorted(glob.glob(os.path.join(here, "jdk*-*-*.csv"))):
    jdk, config, _ = os.path.basename(path)[:-4].split("-")
    with open(path) as f:
        for row in csv.DictReader(f):
            name = row["Benchmark"].rsplit(".", 1)[1]
            key = (jdk, config, name, int(row["Param: bytes"]), row.get("Param: type") or "")
            scores[key].append(float(row["Score"]))


def median(key):
    return statistics.median(scores[key]) if scores.get(key) else None


def cell(key):
    values = scores.get(key)
    if not values:
        return "–"
    return f"{statistics.median(values):.3f} ({min(values):.3f} - {max(values):.3f})"


configs = [(j, c) for j in ("jdk17", "jdk25") for c in (second, first)]
print("| benchmark | bytes | type | " + " | ".join(f"{j.upper()} {c}" for j, c in configs)
      + f" | {first} ÷ {second}, 17 / 25 | of copy: 17 {second} / {first}, 25 {second} / {first} |")
print("|---|---|---|" + "---|" * len(configs) + "---|---|")
rows = sorted({(k[2], k[3], k[4]) for k in scores}, key=lambda r: (r[0] != "copy", r[0], r[1], r[2]))
for name, size, dtype in rows:
    cells = [cell((j, c, name, size, dtype)) for j, c in configs]
    speedups, shares = [], []
    for j in ("jdk17", "jdk25"):
        s, f = median((j, second, name, size, dtype)), median((j, first, name, size, dtype))
        speedups.append(f"{s / f:.2f}×" if s and f else "–")
        for c in (second, first):
            copy, kernel = median((j, c, "copy", size, "")), median((j, c, name, size, dtype))
            shares.append(f"{100 * copy / kernel:.0f} %" if copy and kernel and name != "copy" else "–")
    print(f"| {name} | {size} | {dtype} | " + " | ".join(cells) + f" | {' / '.join(speedups)} | "
          + f"{shares[0]} / {shares[1]}, {shares[2]} / {shares[3]} |")
