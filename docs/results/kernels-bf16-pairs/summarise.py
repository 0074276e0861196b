#!/usr/bin/env python3
"""Markdown table of run.sh's output: per JDK and size, the copy and each kernel's µs per call, median (min-max)
over the rounds, and the kernel's share of the copy's element rate (copy median / kernel median), before and after."""
import collections
import os
import statistics
import sys

path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "jmh.txt")
runs = collections.defaultdict(list)
for line in open(path):
    f = line.split()
    _, jdk, tree, bench, size = f[:5]
    kernel = "copy" if bench.endswith(".copy") else f[7]
    runs[(jdk, int(size), kernel, tree)].append(float(f[-4]))
kernels = ["FLOAT32", "BFLOAT16"]
print("| JDK | size | build | copy µs | " + " | ".join("%s µs | of copy" % k for k in kernels) + " |")
print("|---|---|---|---:|" + "---:|---:|" * len(kernels))
for jdk in sorted({k[0] for k in runs}):
    for size in sorted({k[1] for k in runs}):
        for tree in ("before", "after"):
            copy = statistics.median(runs[(jdk, size, "copy", tree)])
            cells = [jdk.replace("jdk", ""), "%d KiB" % (size >> 10) if size < 1 << 20 else "%d MiB" % (size >> 20), tree,
                     "%.2f" % copy]
            for k in kernels:
                got = runs[(jdk, size, k, tree)]
                cells += ["%.2f (%.2f–%.2f)" % (statistics.median(got), min(got), max(got)),
                          "%.0f %%" % (100 * copy / statistics.median(got))]
            print("| " + " | ".join(cells) + " |")
