#!/bin/bash
# gradsync-run --bind-to none against core (the default at N <= 2 since this comparison), 2 ranks, alternating
# launches, three of each: shm small and large sizes (auto transport, every rank checked in the small sweep) and
# aeron-udp. Usage: run.sh [OUTPUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/../../../.."
out=${1:-docs/results/performance/binding}
mkdir -p "$out"
for i in 1 2 3; do
  for b in none core; do
    examples/bin/gradsync-run --bind-to $b -n 2 -- examples/bin/allreduce-perf --transport auto -b 4K -e 16M -f 16 -n 100 -w 20 \
      > "$out/shm-small-n2-$b-$i.txt" 2>&1
  done
done
for i in 1 2 3; do
  for b in none core; do
    examples/bin/gradsync-run --bind-to $b -n 2 -- examples/bin/allreduce-perf --transport auto -b 1M -e 64M -f 8 -n 20 -w 5 -c 0 \
      > "$out/shm-large-n2-$b-$i.txt" 2>&1
  done
done
for i in 1 2 3; do
  for b in none core; do
    examples/bin/gradsync-run --bind-to $b -n 2 -- examples/bin/allreduce-perf --transport aeron-udp -b 64K -e 16M -f 4 -n 50 -w 10 \
      -c 0 -a 3 > "$out/udp-n2-$b-$i.txt" 2>&1
  done
done
