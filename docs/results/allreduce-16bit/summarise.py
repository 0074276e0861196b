#!/usr/bin/env python3
"""Markdown table of run.sh's outputs: out-of-place busbw (GB/s) per N, type and size, min / median / max over
the rounds, for the Vector API kernels and the scalar ones, the ratio of the medians, and the wrong results.
Usage: summarise.py [DIR [FIRST SECOND]]: FIRST and SECOND name the two configurations in the files' names
(default vector and scalar; kernels-block/e2e.sh writes after and before)."""
import glob
import os
import re
import statistics
import sys
from collections import defaultdict

here = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
first, second = sys.argv[2:4] if len(sys.argv) > 3 else ("vector", "scalar")
busbw = defaultdict(list)  # (n, type, kernels, size) -> [GB/s]
wrong = defaultdict(int)
for path in glob.glob(os.path.join(here, "n*-*-*-*.txt")):
    n, dtype, kernels, _ = os.path.basename(path)[:-4].split("-")
    for line in open(path):
        fields = line.split()
        if len(fields) >= 14 and fields[0] == "[0]" and fields[1].isdigit():
            size = int(fields[1])
            busbw[(n, dtype, kernels, size)].append(float(fields[8]))
            wrong[(n, dtype, kernels)] += int(fields[9]) + int(fields[13])

def stats(key):
    values = busbw.get(key)
    if not values:
        return None, "–"
    return statistics.median(values), f"{min(values):.2f} / {statistics.median(values):.2f} / {max(values):.2f}"

print(f"| N | type | size | {first} busbw, min / median / max | {second} busbw | {first} ÷ {second} |")
print("|---|---|---|---|---|---|")
for n, dtype, size in sorted({(k[0], k[1], k[3]) for k in busbw}, key=lambda r: (r[0], r[1], r[2])):
    v, vtext = stats((n, dtype, first, size))
    s, stext = stats((n, dtype, second, size))
    ratio = f"{v / s:.2f}×" if v and s else "–"
    label = "bfloat16" if dtype == "bfloat16" else "float16"
    print(f"| {n[1:]} | {label} | {size // 1024} KiB | {vtext} | {stext} | {ratio} |")
print()
print("wrong results: " + ", ".join(f"{k[0]} {k[1]} {k[2]}: {v}" for k, v in sorted(wrong.items())))
