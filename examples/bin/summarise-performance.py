#!/usr/bin/env python3
"""Writes docs/performance.md (to stdout) from examples/bin/performance-suite's output folder.

    python3 examples/bin/summarise-performance.py docs/results/performance > docs/performance.md

Reads DIR/limits/copy-t<threads>.csv (JMH), DIR/<stage>/{small,large}/all.csv and env.txt (compare-allreduce).
A stage that has not run is left out. Standard library only.
"""
import csv
import glob
import os
import re
import statistics
import sys
from collections import defaultdict

SUITE = "examples/bin/performance-suite"
NAMES = {
    "gradsync-auto": "gradsync `auto`",
    "gradsync-udp": "gradsync `aeron-udp`",
    "mpi-shm": "Open MPI vader",
    "mpi-tcp": "Open MPI tcp",
    "gloo": "Gloo",
}
# stage: (title, gradsync's row, baselines, whether the shared-memory limit applies)
COMPARISONS = {
    "shm": ("Inside a host: gradsync `auto` against Open MPI's shared memory", "gradsync-auto", ["mpi-shm"], True),
    "udp": ("Over the network stack: gradsync `aeron-udp` against Open MPI's TCP and Gloo (loopback)", "gradsync-udp",
            ["mpi-tcp", "gloo"], False),
}


def human(size):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return "%d %s" % (size // scale, unit)
    return "%d B" % size


def spread(values, fmt):
    values = sorted(values)
    med = statistics.median(values)
    if len(values) == 1:
        return fmt % med
    return (fmt + " (" + fmt + "–" + fmt + ")") % (med, values[0], values[-1])


def read_env(path):
    env = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                key, _, value = line.partition(":")
                env[key.strip()] = value.strip()
    return env


def copy_rates(root):
    """{threads: {bytes: [per-copier GB/s]}}: bytes copied per second by each of `threads` copiers running at once."""
    rates = {}
    for threads in (1, 2, 4):
        path = os.path.join(root, "limits", "copy-t%d.csv" % threads)
        if not os.path.exists(path):
            continue
        rates[threads] = {}
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                size = int(row["Param: bytes"])
                us = float(row["Score"])
                rates[threads][size] = size / us / 1e3
    return rates


def limit_factor(n):
    """busbw of the least-traffic AllReduce over shared memory, per GB/s of copy (see the text)."""
    return 4.0 * (n - 1) / (3 * n - 1)


def load_runs(root, stage):
    """{(impl, ranks, placement, size): {repeat: (time_us, busbw)}}, both size ranges of a stage."""
    runs = defaultdict(dict)
    envs = []
    for part in ("small", "large"):
        folder = os.path.join(root, stage, part)
        path = os.path.join(folder, "all.csv")
        if not os.path.exists(path):
            continue
        envs.append(read_env(os.path.join(folder, "env.txt")))
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                if int(row["wrong"] or 0) > 0:
                    sys.exit("summarise-performance: %s reports wrong elements (%s)" % (path, row))
                key = (row["impl"], int(row["ranks"]), row["placement"], int(row["size_bytes"]))
                runs[key][int(row["repeat"])] = (float(row["time_us"]), float(row["busbw_gbs"]))
    return runs, envs


def pick(runs, impl, n, size):
    for placement in ("out-of-place", "in-place"):
        got = runs.get((impl, n, placement, size))
        if got:
            return got
    return None


def comparison(root, stage, rates, out):
    title, ours, baselines, limited = COMPARISONS[stage]
    runs, envs = load_runs(root, stage)
    if not runs:
        return
    out.append("## " + title + "\n")
    for env in envs:
        out.append("- `%s` (%s; load before %s; git %s)%s" % (
            env.get("command", "?"), env.get("date", "?"), env.get("load before", "?"), env.get("git", "?"),
            "".join("; %s: %s" % (key, env[key]) for key in ("dirty", "note") if key in env)))
    out.append("")
    if not limited:
        out.append("Every byte crosses the kernel's socket buffers here (a copy on each side of a link), which the "
                   "shared-memory limit above does not model, so these tables have no limit column.\n")
    ranks = sorted({key[1] for key in runs})
    sizes = sorted({key[3] for key in runs})
    for n in ranks:
        copiers = rates.get(n, {}) if limited else {}
        header = ["size"] + ["%s busbw GB/s" % NAMES[i] for i in [ours] + baselines] \
            + ["÷ %s" % NAMES[b] for b in baselines]
        if copiers:
            header += ["limit GB/s", "%s of limit" % NAMES[ours]]
        header += ["%s µs" % NAMES[i] for i in [ours] + baselines]
        counts = sorted({len(v) for k, v in runs.items() if k[1] == n})
        out.append("**N = %d** (%s repeats):\n" % (n, "%d" % counts[0] if len(counts) == 1
                                                   else "%d–%d" % (counts[0], counts[-1])))
        out.append("| " + " | ".join(header) + " |")
        out.append("|" + "---:|" * len(header))
        for size in sizes:
            cells = [human(size)]
            medians = {}
            times = {}
            for impl in [ours] + baselines:
                got = pick(runs, impl, n, size)
                if got:
                    busbw = [b for _, b in got.values()]
                    medians[impl] = statistics.median(busbw)
                    times[impl] = [t for t, _ in got.values()]
                    cells.append(spread(busbw, "%.2f"))
                else:
                    cells.append("–")
            for b in baselines:
                cells.append("**%.2f×**" % (medians[ours] / medians[b]) if ours in medians and b in medians
                             and medians[b] > 0 else "–")
            if copiers:
                rate = copiers.get(size)
                if rate:
                    limit = limit_factor(n) * rate
                    cells.append("%.1f" % limit)
                    cells.append("%.0f %%" % (100 * medians[ours] / limit) if ours in medians else "–")
                else:
                    cells += ["–", "–"]
            for impl in [ours] + baselines:
                cells.append(spread(times[impl], "%.1f") if impl in times else "–")
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
        small = [s for s in sizes if s <= 4096]
        for size in small:
            for b in baselines[:1]:
                a, z = pick(runs, ours, n, size), pick(runs, b, n, size)
                if a and z:
                    ratios = [a[r][0] / z[r][0] for r in sorted(set(a) & set(z))]
                    out.append("%s at N = %d: gradsync's time ÷ %s's in each repeat: %s." % (
                        human(size), n, NAMES[b], ", ".join("%.1f×" % r for r in ratios)))
        out.append("")


def limits(root, rates, out):
    if not rates:
        return
    env = read_env(os.path.join(root, "limits", "env.txt"))
    out.append("## The physical limit: this machine's copy\n")
    out.append(
        "JMH `KernelBenchmark.copy` (an off-heap `Unsafe.copyMemory`, as the data path's own copies), with 1, 2 and 4 "
        "threads copying at once, each its own buffers (%s, %s). The rate is bytes copied per second by each copier "
        "while the others copy too: at N ranks on one host, N copies compete for the same caches and memory.\n"
        % (env.get("date", "?"), env.get("java", "?")))
    out.append(
        "What it implies for a single-copy AllReduce over shared memory, as vader's (CMA) and gradsync's direct "
        "AllReduce work: each of N ranks reduces its 1/N of the buffer from the peers' inputs read in place, then "
        "copies the other N − 1 reduced segments from their owners; so each rank reads S, writes S/N and copies "
        "(N − 1)/N · S, where a copy of S reads S and writes S. So each rank moves "
        "(3 − 1/N)/2 copies' worth of bytes (1.25 at N = 2, 1.375 at N = 4), and busbw = S/t · 2(N − 1)/N can at most "
        "reach **4(N − 1)/(3N − 1) × the per-copier copy rate** (0.8× at N = 2, 1.09× at N = 4), arithmetic free. "
        "The tables below give that limit at N = 2 from the 2-thread copy and at N = 4 from the 4-thread copy "
        "(4 ranks on this machine's 2 CPUs share them, as the copiers do).\n")
    sizes = sorted({s for t in rates.values() for s in t})
    threads = sorted(rates)
    out.append("| size | " + " | ".join("copy, %d at once (GB/s each)" % t for t in threads)
               + " | limit N = 2 (busbw GB/s) | limit N = 4 |")
    out.append("|" + "---:|" * (len(threads) + 3))
    for size in sizes:
        cells = [human(size)] + ["%.1f" % rates[t][size] if size in rates[t] else "–" for t in threads]
        for n in (2, 4):
            rate = rates.get(n, {}).get(size)
            cells.append("%.1f" % (limit_factor(n) * rate) if rate else "–")
        out.append("| " + " | ".join(cells) + " |")
    out.append("")


FLUX_ROW = re.compile(r"^(?:\[0\])?\s+(\d+x\d+)\s+(flux|one-by-1)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)")
FLUX_NAME = re.compile(r"^(.+)-n(\d+)-(\w+)-(\d+)\.txt$")
SHAPES = ["200x16K", "50x1M", "4x64M"]


def operator(root, out):
    cells = defaultdict(lambda: defaultdict(list))
    for path in sorted(glob.glob(os.path.join(root, "operator", "*.txt"))):
        name = FLUX_NAME.match(os.path.basename(path))
        if not name:
            continue
        transport, n, shape, _ = name.groups()
        medians = {}
        with open(path) as f:
            for line in f:
                row = FLUX_ROW.match(line)
                if row:
                    medians[row.group(2)] = float(row.group(4))
                wrong = re.search(r"wrong elements over all ranks and steps: (\d+)", line)
                if wrong and int(wrong.group(1)) > 0:
                    sys.exit("summarise-performance: %s reports wrong elements" % path)
        if len(medians) != 2:
            sys.exit("summarise-performance: %s has no flux and one-by-1 rows (the run failed)" % path)
        cell = cells[(transport, int(n), shape)]
        cell["flux"].append(medians["flux"])
        cell["one"].append(medians["one-by-1"])
        cell["speed-up"].append(medians["one-by-1"] / medians["flux"])
    if not cells:
        return
    counts = sorted({len(c["flux"]) for c in cells.values()})
    rounds = "%d" % counts[0] if len(counts) == 1 else "%d–%d" % (counts[0], counts[-1])
    out.append("## The Flux operator against one blocking call at a time\n")
    out.append(
        "`flux-perf`: every step sends the same gradients through `transform(comm.allReduce(SUM))` and, interleaved "
        "with it in the same run, as one blocking `allReduce` after another; float32, every gradient of every step "
        "checked on every rank; ranks as threads (`local`) or processes under `gradsync-run` (`shm`, `aeron-ipc`); "
        "`flux-perf --transport T` with its defaults but the steps (`-n 100 -w 300`, `-n 30 -w 30`, `-n 10 -w 5` for "
        "the three shapes). Median step time over %s rounds (min–max); the speed-up is one at a time ÷ the operator "
        "within each run (> 1: the operator faster).\n" % rounds)
    out.append("| transport, N | gradients | operator ms | one at a time ms | speed-up |")
    out.append("|---|---|---:|---:|---:|")
    order = {"local": 0, "shm": 1, "aeron-ipc": 2}
    for key in sorted(cells, key=lambda k: (order.get(k[0], 9), k[1], SHAPES.index(k[2]) if k[2] in SHAPES else 9)):
        c = cells[key]
        out.append("| %s, %d | %s | %s | %s | **%s** |" % (key[0], key[1], key[2], spread(c["flux"], "%.2f"),
                                                           spread(c["one"], "%.2f"), spread(c["speed-up"], "%.2f×")))
    out.append("")


def kernels(root, out):
    runs = defaultdict(list)  # (jdk, size, kernel) -> [µs]
    for path in sorted(glob.glob(os.path.join(root, "kernels", "jdk*-*.csv"))):
        jdk = re.match(r"jdk(\d+)-", os.path.basename(path)).group(1)
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                method = row["Benchmark"].rsplit(".", 1)[1]
                if method not in ("copy", "reduce", "reduceIntoHeap"):
                    continue
                kernel = "copy" if method == "copy" else "%s %s" % (row["Param: op"], row["Param: type"])
                if method == "reduceIntoHeap":
                    kernel += " into heap, mixed"
                runs[(int(jdk), int(row["Param: bytes"]), kernel)].append(float(row["Score"]))
    if not runs:
        return
    jdks = sorted({k[0] for k in runs})
    sizes = sorted({k[1] for k in runs})
    out.append("## Reduction kernels against a copy\n")
    env = read_env(os.path.join(root, "kernels", "env.txt"))
    if env:
        out.append("Measured %s on %s; sync-core's jar: %s.\n" % (env.get("date", "?"), env.get("host", "?"),
                                                                env.get("jar", "?")))
    out.append(
        "JMH `KernelBenchmark` (`examples/bin/kernel-bench`, which runs the JVM as the examples' launchers do, with "
        "`jdk.incubator.vector` for the 16-bit kernels): `reduce` is dst = a + b over off-heap buffers of the size "
        "given, `copy` copies one such buffer; *into heap, mixed* is a training step's a += b, `a` a heap array of the "
        "type and `b` off-heap, in a JVM that has first reduced heap arrays of other types, direct buffers and a mapped "
        "file (`reduceIntoHeap` with `mixed=true`), as a job's JVM does. µs per call, median over %d rounds (min–max); "
        "*of copy* is the copy's "
        "median time ÷ the kernel's: its elements per second against a copy's of the same bytes (a reduction moves "
        "3 bytes for every 2 a copy moves, so 67 %% is the memory-bound ceiling).\n" % max(len(v) for v in runs.values()))
    header = ["size", "kernel"] + ["JDK %d µs" % j for j in jdks] + ["of copy, JDK %d" % j for j in jdks]
    out.append("| " + " | ".join(header) + " |")
    out.append("|---|---|" + "---:|" * (2 * len(jdks)))
    kernels_seen = sorted({k[2] for k in runs}, key=lambda k: (k != "copy", k))
    for size in sizes:
        for kernel in kernels_seen:
            if not any((j, size, kernel) in runs for j in jdks):
                continue
            cells = [human(size), kernel]
            for j in jdks:
                got = runs.get((j, size, kernel))
                cells.append(spread(got, "%.3f" if size < 1 << 20 else "%.0f") if got else "–")
            for j in jdks:
                got, copy = runs.get((j, size, kernel)), runs.get((j, size, "copy"))
                cells.append("–" if kernel == "copy" or not got or not copy
                             else "%.0f %%" % (100 * statistics.median(copy) / statistics.median(got)))
            out.append("| " + " | ".join(cells) + " |")
    out.append("")


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "docs/results/performance"
    rates = copy_rates(root)
    env = read_env(os.path.join(root, "limits", "env.txt"))
    out = ["# Performance", ""]
    out.append(
        "gradsync's AllReduce next to Open MPI and Gloo on one machine, at the defaults a user gets: "
        "`gradsync-run -n N -- allreduce-perf` with no tuning flag (the cost model picks the algorithm, the launcher "
        "binds ranks as `mpirun` does: each to a core at N ≤ 2, unbound above), `mpirun` with its defaults, Gloo from "
        "Debian's PyTorch. float32 SUM; busbw as nccl-tests (algbw × 2(N − 1)/N), time = the slowest rank's mean over "
        "a block of back-to-back calls; each cell is the median over interleaved repeats (every implementation once per "
        "repeat, order rotated), with min–max; ratios are of medians (> 1: gradsync faster). Everything here comes "
        "from one script; the raw outputs are under [results/performance](results/performance):\n")
    out.append("```bash\nexamples/compare/setup-baselines.sh && mvn -B -q -DskipTests package\n"
               "%s    # limits shm udp operator kernels; REPEATS=5 by default; writes this file\n```\n" % SUITE)
    out.append("**Machine**: %s; %s. A shared VM whose speed changes from session to session (the same build has run "
               "2 ranks' 64 MiB AllReduce at 2–3 GB/s in some and 8–11 GB/s in others, and this page's copy limit moves "
               "with it), so compare the ratios within a table, measured in one interleaved session, rather than "
               "absolute numbers across sessions. The lab notebook behind these numbers, with every experiment, is "
               "[benchmarks.md](benchmarks.md).\n" % (env.get("host", "?"), env.get("java", "?")))
    limits(root, rates, out)
    for stage in ("shm", "udp"):
        comparison(root, stage, rates, out)
    operator(root, out)
    kernels(root, out)
    print("\n".join(out).rstrip() + "\n")


if __name__ == "__main__":
    main()
