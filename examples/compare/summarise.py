#!/usr/bin/env python3
"""Summarises a compare-allreduce run (standard library only; any python3 >= 3.6).

    python3 examples/compare/summarise.py OUTDIR

Reads OUTDIR/all.csv (impl,ranks,repeat,placement,size_bytes,count,time_us,algbw_gbs,busbw_gbs,wrong) and writes
  summary.csv        per (impl, ranks, size): runs, min / median / max busbw, median time, total #wrong;
  summary.md         per rank count, rows = size: every implementation's median busbw and, for gradsync, its ratio
                     to each baseline (> 1: gradsync faster); with repeats, each one's min – max busbw; then
                     the median time;
  busbw-N<r>.png     busbw against size (log2 x axis), one line per implementation, min-max bars (needs gnuplot).
Any #wrong > 0 is flagged at the top of summary.md, on stderr and by exit status 3.
"""
import csv
import os
import shutil
import statistics
import subprocess
import sys
from collections import defaultdict

ORDER = ["gradsync-shm", "gradsync-shm-handoff", "gradsync-auto", "gradsync-auto-cma", "gradsync-auto-unstaged", "gradsync-auto-yield", "gradsync-direct", "gradsync-udp", "gradsync-udp-whole", "gradsync-ipc", "gloo", "mpi-tcp", "mpi-shm"]
GRADSYNC = ["gradsync-shm", "gradsync-shm-handoff", "gradsync-auto", "gradsync-auto-cma", "gradsync-auto-unstaged", "gradsync-auto-yield", "gradsync-direct", "gradsync-udp", "gradsync-udp-whole", "gradsync-ipc"]
BASELINES = ["gloo", "mpi-tcp", "mpi-shm"]
DESCRIPTION = {
    "gloo": "PyTorch torch.distributed, Gloo backend, TCP (in-place)",
    "mpi-tcp": "Open MPI MPI_Allreduce, ob1 + tcp BTL",
    "mpi-shm": "Open MPI MPI_Allreduce, ob1 + vader shared-memory BTL",
    "gradsync-udp": "gradsync allreduce-perf, Aeron UDP transport (out-of-place columns)",
    "gradsync-udp-whole": "the same with -Dgradsync.aeron.udp.segment=off: datagrams larger than the path MTU "
                          "fragmented by IP, not cut into segments sent as one (out-of-place columns)",
    "gradsync-ipc": "gradsync allreduce-perf, Aeron IPC transport (out-of-place columns)",
    "gradsync-shm": "gradsync allreduce-perf, shared-memory transport shm (out-of-place columns)",
    "gradsync-shm-handoff": "gradsync allreduce-perf over shm with -Dgradsync.caller.runs=false: each blocking call "
                            "handed to the progress thread, as before caller-runs (out-of-place columns)",
    "gradsync-auto": "gradsync allreduce-perf, auto transport: shm on one host (out-of-place columns)",
    "gradsync-auto-cma": "the same with -Dgradsync.shm.cross.memory=true: plain buffers read across processes "
                         "(process_vm_readv, JDK 22+), not staged (out-of-place columns)",
    "gradsync-auto-unstaged": "the same with -Dgradsync.direct.staging=false: plain buffers never staged for the direct "
                              "allreduce (out-of-place columns)",
    "gradsync-auto-yield": "the same with -Dgradsync.idle.strategy=yield: a waiting rank yields its core on every idle "
                           "pass and never parks, as Open MPI's ranks do when oversubscribed (out-of-place columns)",
    "gradsync-direct": "gradsync allreduce-perf -R 1, auto transport: buffers from Communicator.allocate, which the "
                       "peers read in place (the direct allreduce from gradsync.direct.min.bytes; out-of-place columns)",
}


def impl_key(name):
    return (ORDER.index(name) if name in ORDER else len(ORDER), name)


def human(size):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return "%d %s" % (size // scale, unit)
    return "%d B" % size


def load(path):
    runs = defaultdict(list)
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            key = (row["impl"], int(row["ranks"]), int(row["size_bytes"]))
            runs[key].append({
                "repeat": int(row["repeat"]),
                "placement": row["placement"],
                "time_us": float(row["time_us"]),
                "busbw": float(row["busbw_gbs"]),
                "wrong": int(row["wrong"]),
            })
    return runs


def summarise(runs):
    stats = {}
    for key, rows in runs.items():
        bus = sorted(r["busbw"] for r in rows)
        stats[key] = {
            "runs": len(rows),
            "placement": rows[0]["placement"],
            "busbw_min": bus[0],
            "busbw_median": statistics.median(bus),
            "busbw_max": bus[-1],
            "time_us_median": statistics.median(r["time_us"] for r in rows),
            "wrong": sum(r["wrong"] for r in rows),
            "wrong_repeats": sorted(r["repeat"] for r in rows if r["wrong"] > 0),
        }
    return stats


def write_csv(path, stats):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["impl", "ranks", "size_bytes", "placement", "runs", "busbw_min_gbs", "busbw_median_gbs",
                    "busbw_max_gbs", "time_median_us", "wrong_total"])
        for (impl, ranks, size) in sorted(stats, key=lambda k: (k[1], impl_key(k[0]), k[2])):
            s = stats[(impl, ranks, size)]
            w.writerow([impl, ranks, size, s["placement"], s["runs"], "%.4f" % s["busbw_min"],
                        "%.4f" % s["busbw_median"], "%.4f" % s["busbw_max"], "%.3f" % s["time_us_median"], s["wrong"]])


def ratio(a, b):
    return "%.2f×" % (a / b) if a > 0 and b > 0 else "n/a"


def network_line(outdir):
    """What env.txt says the TCP and UDP rows went over (loopback, or veth links between namespaces)."""
    try:
        with open(os.path.join(outdir, "env.txt")) as f:
            for line in f:
                if line.startswith("network: "):
                    return line[len("network: "):].strip()
    except OSError:
        pass
    return None


def per_impl_table(stats, ranks, impls, sizes, cell):
    """Markdown table lines: a row per size, a column per implementation, cell(stats) where it ran."""
    lines = ["| " + " | ".join(["size"] + impls) + " |", "|" + "---:|" * (len(impls) + 1)]
    for size in sizes:
        cells = [human(size)] + ["–" if stats.get((impl, ranks, size)) is None else cell(stats[(impl, ranks, size)])
                                 for impl in impls]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def markdown(stats, outdir):
    lines = ["# AllReduce comparison: gradsync vs Gloo vs Open MPI", ""]
    wrong = [(k, s) for k, s in stats.items() if s["wrong"] > 0]
    if wrong:
        lines += ["> **⚠ WRONG RESULTS — the numbers below are not valid for these rows.**", ">"]
        for (impl, ranks, size), s in sorted(wrong, key=lambda x: (x[0][1], impl_key(x[0][0]), x[0][2])):
            lines.append("> - %s, %d ranks, %d B: %d wrong elements (repeats %s)"
                         % (impl, ranks, size, s["wrong"], ", ".join(map(str, s["wrong_repeats"]))))
        lines.append("")
    lines += ["float32 sum AllReduce. busbw = algbw × 2(n−1)/n, algbw = bytes / time (1 GB = 1e9 B); time = the "
              "slowest rank's mean over back-to-back iterations; cells are medians over the repeats "
              "(their min and max below and in summary.csv). Ratios are gradsync's median busbw over the baseline's: > 1 means "
              "gradsync is faster.", ""]
    network = network_line(outdir)
    if network:
        lines += ["Network: " + network + ".", ""]
    present = sorted({k[0] for k in stats}, key=impl_key)
    lines += ["| label | what |", "|---|---|"]
    lines += ["| %s | %s |" % (i, DESCRIPTION.get(i, "")) for i in present]
    lines.append("")
    for ranks in sorted({k[1] for k in stats}):
        impls = sorted({k[0] for k in stats if k[1] == ranks}, key=impl_key)
        sizes = sorted({k[2] for k in stats if k[1] == ranks})
        pairs = [(g, b) for g in impls if g in GRADSYNC for b in impls if b in BASELINES]
        repeats = max(s["runs"] for k, s in stats.items() if k[1] == ranks)
        lines += ["## %d ranks: median busbw (GB/s), %d repeat%s" % (ranks, repeats, "" if repeats == 1 else "s"), ""]
        head = ["size"] + impls + ["%s / %s" % (g.replace("gradsync-", "gs-"), b) for g, b in pairs]
        lines += ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
        for size in sizes:
            cells = [human(size)]
            for impl in impls:
                s = stats.get((impl, ranks, size))
                if s is None:
                    cells.append("–")
                else:
                    cells.append("%.3f%s" % (s["busbw_median"], " ⚠WRONG" if s["wrong"] else ""))
            for g, b in pairs:
                sg, sb = stats.get((g, ranks, size)), stats.get((b, ranks, size))
                cells.append(ratio(sg["busbw_median"], sb["busbw_median"]) if sg and sb else "–")
            lines.append("| " + " | ".join(cells) + " |")
        if repeats > 1:
            # the spread shows where one repeat differs from the next, as it often does on a shared machine
            lines += ["", "## %d ranks: busbw min – max over the repeats (GB/s)" % ranks, ""]
            lines += per_impl_table(stats, ranks, impls, sizes, lambda s: "%.3f – %.3f" % (s["busbw_min"], s["busbw_max"]))
        lines += ["", "## %d ranks: median time (µs)" % ranks, ""]
        lines += per_impl_table(stats, ranks, impls, sizes,
                                lambda s: "%.1f%s" % (s["time_us_median"], " ⚠WRONG" if s["wrong"] else ""))
        if os.path.exists(os.path.join(outdir, "busbw-N%d.png" % ranks)):
            lines += ["", "![busbw, %d ranks](busbw-N%d.png)" % (ranks, ranks)]
        lines.append("")
    skipped = os.path.join(outdir, "skipped.txt")
    if os.path.exists(skipped) and os.path.getsize(skipped) > 0:
        with open(skipped) as f:
            lines += ["## Skipped or flagged runs", ""] + ["- " + l.rstrip() for l in f if l.strip()] + [""]
    env = os.path.join(outdir, "env.txt")
    if os.path.exists(env):
        with open(env) as f:
            lines += ["## Environment", "", "```"] + [l.rstrip() for l in f] + ["```", ""]
    return "\n".join(lines)


def plot(stats, outdir):
    gnuplot = shutil.which("gnuplot")
    if gnuplot is None:
        print("summarise: gnuplot not found, no PNG (examples/compare/setup-baselines.sh installs it)", file=sys.stderr)
        return
    datadir = os.path.join(outdir, "plot")
    os.makedirs(datadir, exist_ok=True)
    for ranks in sorted({k[1] for k in stats}):
        impls = sorted({k[0] for k in stats if k[1] == ranks}, key=impl_key)
        series = []
        for impl in impls:
            points = sorted((k[2], s) for k, s in stats.items() if k[0] == impl and k[1] == ranks and k[2] > 0)
            if not points:
                continue
            dat = os.path.join(datadir, "busbw-N%d-%s.dat" % (ranks, impl))
            with open(dat, "w") as f:
                f.write("# size_bytes busbw_median busbw_min busbw_max wrong\n")
                for size, s in points:
                    f.write("%d %.6f %.6f %.6f %d\n" % (size, s["busbw_median"], s["busbw_min"], s["busbw_max"],
                                                        s["wrong"]))
            title = impl + (" (WRONG RESULTS)" if any(s["wrong"] for _, s in points) else "")
            series.append('"%s" using 1:2:3:4 with yerrorlines lw 2 title "%s"' % (dat, title))
        if not series:
            continue
        png = os.path.join(outdir, "busbw-N%d.png" % ranks)
        repeats = max(s["runs"] for k, s in stats.items() if k[1] == ranks)
        script = "\n".join([
            'set output "%s"' % png,
            "set logscale x 2",
            'set format x "%.0b%B"',
            'set xlabel "message size (bytes)"',
            'set ylabel "busbw (GB/s): median, bars min-max"',
            'set title "float32 sum AllReduce, %d ranks, %d repeat(s), %d cores"' % (ranks, repeats, os.cpu_count() or 0),
            "set key left top",
            "set grid",
            "plot " + ", \\\n     ".join(series),
            "",
        ])
        for terminal in ("pngcairo size 960,540 noenhanced", "png size 960,540 noenhanced"):
            done = subprocess.run([gnuplot], input="set terminal %s\n%s" % (terminal, script),
                                  universal_newlines=True, stderr=subprocess.PIPE)
            if done.returncode == 0:
                break
        else:
            print("summarise: gnuplot failed for %s:\n%s" % (png, done.stderr), file=sys.stderr)


def main(argv):
    if len(argv) != 1:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    outdir = argv[0]
    stats = summarise(load(os.path.join(outdir, "all.csv")))
    if not stats:
        print("summarise: %s has no rows" % os.path.join(outdir, "all.csv"), file=sys.stderr)
        return 1
    write_csv(os.path.join(outdir, "summary.csv"), stats)
    plot(stats, outdir)
    md = markdown(stats, outdir)
    with open(os.path.join(outdir, "summary.md"), "w") as f:
        f.write(md)
    print(md)
    wrong = sum(s["wrong"] for s in stats.values())
    if wrong:
        print("\n!!! WRONG RESULTS: %d wrong elements in total; see the top of %s !!!"
              % (wrong, os.path.join(outdir, "summary.md")), file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
