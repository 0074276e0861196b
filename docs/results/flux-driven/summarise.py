#!/usr/bin/env python3
"""Summarises run.sh's outputs: per cell and build, the flux and one-at-a-time step medians and the speed-up (one at
a time / flux, from the same run), each as the median of the rounds with min - max. Usage: summarise.py DIR"""
import collections
import pathlib
import re
import statistics
import sys

ROW = re.compile(r"^(?:\[0\])?\s+(\d+x\d+)\s+(flux|one-by-1)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)")
NAME = re.compile(r"^(.+)-n(\d+)-(\w+)-(before|after)-(\d+)\.txt$")


def spread(values, fmt):
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))} - {fmt.format(max(values))})"


def main(directory):
    cells = collections.defaultdict(lambda: collections.defaultdict(list))
    wrong = 0
    for path in sorted(pathlib.Path(directory).glob("*.txt")):
        name = NAME.match(path.name)
        if not name:
            continue
        transport, n, shape, tree, _ = name.groups()
        medians = {}
        for line in path.read_text().splitlines():
            row = ROW.match(line)
            if row:
                medians[row.group(2)] = float(row.group(4))
            found = re.search(r"wrong elements over all ranks and steps: (\d+)", line)
            if found:
                wrong += int(found.group(1))
        if len(medians) != 2:
            sys.exit(f"{path}: no flux and one-by-1 rows")
        cell = cells[(transport, int(n), shape)]
        cell[tree + " flux"].append(medians["flux"])
        cell[tree + " one"].append(medians["one-by-1"])
        cell[tree + " speed-up"].append(medians["one-by-1"] / medians["flux"])
    print("| transport, N | gradients | before: speed-up | after: flux ms | after: one at a time ms | after: speed-up |")
    print("|---|---|---:|---:|---:|---:|")
    for (transport, n, shape), cell in sorted(cells.items(), key=lambda kv: (kv[0][0], kv[0][1], len(kv[0][2]))):
        print(f"| {transport}, {n} | {shape} | {spread(cell['before speed-up'], '{:.2f}x')} | "
              f"{spread(cell['after flux'], '{:.3g}')} | {spread(cell['after one'], '{:.3g}')} | "
              f"{spread(cell['after speed-up'], '{:.2f}x')} |")
    print(f"\nwrong elements over every file: {wrong}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent)
