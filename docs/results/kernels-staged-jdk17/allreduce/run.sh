#!/usr/bin/env bash
# The AllReduce on JDK 17 at the defaults (gradsync-run, transport auto: shm on one host) before and after the 32/64-bit
# kernels were staged through arrays (StagedKernels), in turn, ROUNDS rounds, N = 2 and 4. BEFORE is a copy of a tree
# built from the earlier commit (its examples/bin and examples/target); this tree is the later one. FIRST: the first
# round's number (to add rounds). From the repository root.
set -euo pipefail
out=$(dirname "$0")
before=${BEFORE:?copy of a tree built from the earlier commit}
{ date -u +%FT%TZ; uname -srm; nproc; grep -m1 'model name' /proc/cpuinfo; java -version 2>&1 | head -n 1
  git rev-parse --short HEAD; } >> "$out/env.txt"
for round in $(seq "${FIRST:-1}" "${ROUNDS:-2}"); do
  for n in 2 4; do
    for build in before after; do
      bin=examples/bin
      [ "$build" = before ] && bin=$before/examples/bin
      "$bin/gradsync-run" -n "$n" -- "$bin/allreduce-perf" --transport auto -b 4K -e 16M -f 4 -n 50 -w 10 \
        --csv "$out/n$n-$build-$round.csv" > "$out/n$n-$build-$round.txt" 2>&1
    done
  done
done
