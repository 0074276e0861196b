#!/usr/bin/env python3
"""Summarises bench-algorithms' CSVs: min / median / max per (experiment, algorithm, size), and the goals:
tree or rhd vs ring latency at 4 KiB / 8 ranks, auto vs the best forced algorithm at every size, and
hierarchical vs ring over 2 x 2 hosts. Also writes median-sweep-<algo>.csv (size, time, busbw) for plots."""
import csv
import glob
import os
import re
import statistics
import sys
from collections import defaultdict

out = sys.argv[1]
runs = defaultdict(list)      # (experiment, algo, size) -> [(time_us, busbw, chosen)]
for path in glob.glob(os.path.join(out, "*.csv")):
    m = re.match(r"(latency|sweep|hosts2x2)-(.+)-(\d+)\.csv$", os.path.basename(path))
    if not m:
        continue
    experiment, algo = m.group(1), m.group(2)
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            runs[(experiment, algo, int(row["size_bytes"]))].append(
                (float(row["oop_time_us"]), float(row["oop_busbw_gbs"]), f'{row["algorithm"]}/{row["chunk_bytes"]}'))


def median_time(experiment, algo, size):
    rows = runs.get((experiment, algo, size))
    return statistics.median(r[0] for r in rows) if rows else None


print("| experiment | algorithm | size (B) | runs | time µs min / median / max | busbw GB/s min / median / max | ran as |")
print("|---|---|---:|---:|---|---|---|")
for (experiment, algo, size), rows in sorted(runs.items()):
    t = sorted(r[0] for r in rows)
    b = sorted(r[1] for r in rows)
    chosen = ", ".join(sorted(set(r[2] for r in rows)))
    print(f"| {experiment} | {algo} | {size} | {len(rows)} | {t[0]:.1f} / {statistics.median(t):.1f} / {t[-1]:.1f}"
          f" | {b[0]:.3f} / {statistics.median(b):.3f} / {b[-1]:.3f} | {chosen} |")

print()
ring = median_time("latency", "ring", 4096)
if ring:
    for algo in ("rhd", "tree", "btree", "auto"):
        t = median_time("latency", algo, 4096)
        if t:
            print(f"- 4 KiB, 8 ranks: ring / {algo} latency = {ring:.1f} / {t:.1f} µs = **{ring / t:.2f}×** (goal ≥ 2× for tree or rhd)")

sizes = sorted({size for (e, _, size) in runs if e == "sweep"})
forced = ("ring", "rhd", "tree", "btree")
if sizes:
    print()
    print("| size (B) | best forced | its median µs | auto median µs | auto / best | within 10 % |")
    print("|---:|---|---:|---:|---:|---|")
    worst = 0
    for size in sizes:
        best = min((median_time("sweep", a, size), a) for a in forced if median_time("sweep", a, size))
        auto = median_time("sweep", "auto", size)
        ratio = auto / best[0]
        worst = max(worst, ratio)
        print(f"| {size} | {best[1]} | {best[0]:.1f} | {auto:.1f} | {ratio:.2f} | {'yes' if ratio <= 1.10 else 'NO'} |")
    print(f"\nWorst auto / best forced over the sweep: {worst:.2f}")
    for algo in forced + ("auto",):
        with open(os.path.join(out, f"median-sweep-{algo}.csv"), "w") as f:
            for size in sizes:
                rows = runs.get(("sweep", algo, size))
                if rows:
                    f.write(f"{size},{statistics.median(r[0] for r in rows):.3f},{statistics.median(r[1] for r in rows):.4f}\n")

ring2 = median_time("hosts2x2", "ring", 64 << 20)
if ring2:
    print()
    for algo in ("hier", "hier-leader", "auto"):
        t = median_time("hosts2x2", algo, 64 << 20)
        if t:
            print(f"- 2 hosts × 2 ranks, 64 MiB: ring / {algo} time = {ring2 / 1000:.1f} / {t / 1000:.1f} ms = **{ring2 / t:.2f}×** (goal > 1 for hier)")
