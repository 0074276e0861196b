#!/bin/bash
# bfloat16 and float16 SUM end to end: allreduce-perf over shm (auto) on one host, N = 2 and 4 processes launched
# by gradsync-run, with the Vector API kernels (the launchers' default) and without them (GRADSYNC_VECTOR_API=0),
# interleaved, 3 rounds; every result checked (-c 1).
# Usage: run.sh [OUTPUT_DIR]; writes one allreduce-perf output per round, N, type and kernels.
cd "$(dirname "$0")/../../.."
out=${1:-docs/results/allreduce-16bit}
mkdir -p "$out"
for round in 1 2 3; do
  for n in 2 4; do
    for type in bfloat16 half; do
      for vector in 1 0; do
        name=$([ $vector = 1 ] && echo vector || echo scalar)
        GRADSYNC_VECTOR_API=$vector examples/bin/gradsync-run -n $n -- examples/bin/allreduce-perf --transport auto \
            -d $type -b 64K -e 64M -f 4 -n 20 -w 5 -c 1 > "$out/n$n-$type-$name-$round.txt" 2>&1
      done
    done
  done
done
