#!/usr/bin/env python3
"""Summarises run.sh's outputs: per N, size and timer slack, the median (min-max) busbw over the rounds, out of
place and in place, and the ratio of the medians. Usage: summarise.py DIR."""
import glob
import os
import re
import statistics
import sys
from collections import defaultdict

ROW = re.compile(r"^\[0\]\s+(\d+)\s+\d+\s+\w+\s+\w+\s+-?\d+\s+([\d.]+)\s+[\d.]+\s+([\d.]+)\s+(\d+)\s+([\d.]+)\s+[\d.]+\s+([\d.]+)\s+(\d+)")
busbw = defaultdict(list)
wrong = 0
for path in sorted(glob.glob(os.path.join(sys.argv[1], "n*-slack-*-round*.txt"))):
    n, setting = re.match(r"n(\d+)-slack-(\w+)-round", os.path.basename(path)).groups()
    for line in open(path):
        m = ROW.match(line)
        if m:
            size = int(m.group(1))
            busbw[(int(n), size, setting, "out of place")].append(float(m.group(3)))
            busbw[(int(n), size, setting, "in place")].append(float(m.group(6)))
            wrong += int(m.group(4)) + int(m.group(7))

def cell(values):
    return f"{statistics.median(values):.2f} ({min(values):.2f}–{max(values):.2f})"

settings = sorted({k[2] for k in busbw}, key=lambda s: (s != "default", s))
if busbw:
    print(f"#wrong over all launches: {wrong}\n")
    print("| N | size | placement | " + " | ".join(f"slack {s} busbw GB/s" for s in settings) + " | ratio |")
    print("|---|---:|---|" + "---:|" * len(settings) + "---:|")
for n, size, placement in sorted({(k[0], k[1], k[3]) for k in busbw}, key=lambda k: (k[0], k[1], k[2] != "out of place")):
    cols = [busbw[(n, size, s, placement)] for s in settings]
    ratio = statistics.median(cols[-1]) / statistics.median(cols[0])
    print(f"| {n} | {size} | {placement} | " + " | ".join(cell(c) for c in cols) + f" | {ratio:.2f}× |")

STEP = re.compile(r"rank 0/\d+ mode=(\w+) .*: step ([\d.]+) ms, backward ([\d.]+) ms, exposed comm ([\d.]+) ms")
steps = defaultdict(list)
for path in sorted(glob.glob(os.path.join(sys.argv[1], "overlap-mlp-slack-*-round*.txt"))):
    setting = re.match(r"overlap-mlp-slack-(\w+)-round", os.path.basename(path)).group(1)
    for line in open(path):
        m = STEP.search(line)
        if m:
            for what, value in zip(("step", "backward", "exposed comm"), m.groups()[1:]):
                steps[(m.group(1), what, setting)].append(float(value))
if steps:
    settings = sorted({k[2] for k in steps}, key=lambda s: (s != "default", s))
    print("\noverlap-mlp, N = 4, rank 0, ms: median (min–max) over the rounds\n")
    print("| mode | time | " + " | ".join(f"slack {s}" for s in settings) + " |")
    print("|---|---|" + "---:|" * len(settings))
    for mode, what in sorted({(k[0], k[1]) for k in steps}, key=lambda k: (k[0] != "bucket", k[1])):
        print(f"| {mode} | {what} | " + " | ".join(
            f"{statistics.median(v):.1f} ({min(v):.1f}–{max(v):.1f})" for v in (steps[(mode, what, s)] for s in settings)) + " |")
