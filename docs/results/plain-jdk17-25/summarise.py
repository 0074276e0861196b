"""Medians over the launches of run.sh: gradsync-auto on JDK 17 and 25 against mpi-shm, per rank count and size."""
import csv
import glob
import statistics
import sys
from collections import defaultdict

out = sys.argv[1]
times = defaultdict(list)
for path in sorted(glob.glob(f"{out}/jdk*-r*/all.csv")):
    jdk = path.split("/")[-2].split("-")[0]
    for row in csv.DictReader(open(path)):
        if row["placement"] not in ("out-of-place", ""):
            continue
        impl = row["impl"] if row["impl"] == "mpi-shm" else f"{row['impl']}-{jdk}"
        times[(impl, int(row["ranks"]), int(row["size_bytes"]))].append(float(row["time_us"]))

impls = ["gradsync-auto-jdk17", "gradsync-auto-jdk25", "mpi-shm"]
print("# Plain buffers, gradsync-auto on JDK 17 and 25, against vader\n")
print("Median time in µs over 3 launches (min–max); busbw ratio = vader's median time over gradsync's.\n")
for n in sorted({k[1] for k in times}):
    print(f"## {n} ranks\n")
    print("| size | JDK 17 | JDK 25 | vader | JDK 17 / vader | JDK 25 / vader |")
    print("|---:|---:|---:|---:|---:|---:|")
    for size in sorted({k[2] for k in times if k[1] == n}):
        cells, medians = [], {}
        for impl in impls:
            t = times.get((impl, n, size), [])
            medians[impl] = statistics.median(t) if t else None
            cells.append(f"{medians[impl]:.1f} ({min(t):.1f}–{max(t):.1f})" if t else "–")
        ratios = [f"{medians['mpi-shm'] / medians[i]:.2f}×" if medians[i] and medians["mpi-shm"] else "–" for i in impls[:2]]
        label = f"{size // 1048576} MiB" if size >= 1048576 else f"{size // 1024} KiB"
        print(f"| {label} | " + " | ".join(cells + ratios) + " |")
    print()
