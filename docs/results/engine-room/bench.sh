#!/usr/bin/env bash
# Interleaved before/after runs of allreduce-perf (local threads and shm processes, 2 ranks, 4 KiB .. 64 MiB) and
# flux-perf, for the engine room's restructuring (issue 36): two built trees (mvn -DskipTests package), given as
# BEFORE and AFTER, are run alternately, ROUNDS times, so the machine's noise hits both alike.
# Usage: BEFORE=dir AFTER=dir [ROUNDS=3] bench.sh OUTDIR
set -euo pipefail
out=${1:?usage: BEFORE=dir AFTER=dir bench.sh OUTDIR}
rounds=${ROUNDS:-3}
mkdir -p "$out"
for round in $(seq 1 "$rounds"); do
  for version in before after; do
    tree=$([ "$version" = before ] && echo "$BEFORE" || echo "$AFTER")
    "$tree/examples/bin/allreduce-perf" --transport local -t 2 -b 4K -e 64M -f 4 -n 20 -w 5 -c 0 \
      > "$out/local-$version-$round.txt" 2>&1
    "$tree/examples/bin/gradsync-run" -n 2 -- "$tree/examples/bin/allreduce-perf" --transport shm -b 4K -e 64M -f 4 \
      -n 20 -w 5 -c 0 > "$out/shm-$version-$round.txt" 2>&1
    "$tree/examples/bin/flux-perf" --ranks 2 -n 10 -w 3 -c 0 200x16K 50x1M 4x64M > "$out/flux-$version-$round.txt" 2>&1
  done
done
