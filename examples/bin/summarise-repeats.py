#!/usr/bin/env python3
"""Summarises allreduce-perf CSVs of repeated runs: min / median / max of time and busbw per (ranks, size)."""
import csv
import statistics
import sys
from collections import defaultdict

runs = defaultdict(list)
for path in sys.argv[1:]:
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            runs[(row.get("algorithm", "ring"), int(row["ranks"]), int(row["size_bytes"]))].append(row)

print("| algorithm | ranks | size (B) | runs | time µs min / median / max | busbw GB/s min / median / max |")
print("|---|---:|---:|---:|---|---|")
for (algorithm, ranks, size), rows in sorted(runs.items()):
    times = sorted(float(r["oop_time_us"]) for r in rows)
    bus = sorted(float(r["oop_busbw_gbs"]) for r in rows)
    print(f"| {algorithm} | {ranks} | {size} | {len(rows)} | {times[0]:.1f} / {statistics.median(times):.1f} / {times[-1]:.1f}"
          f" | {bus[0]:.2f} / {statistics.median(bus):.2f} / {bus[-1]:.2f} |")
