#!/bin/bash
# bfloat16 and float16 SUM end to end with two sync-core jars, BEFORE and AFTER, swapped into the examples' lib in
# turn: allreduce-perf over shm (auto), N = 2 processes launched by gradsync-run, Vector API kernels (the launchers'
# default), interleaved, ROUNDS rounds; every result checked (-c 1).
# Usage: BEFORE=jar AFTER=jar [ROUNDS=3] [TYPES="bfloat16 half"] e2e.sh [OUTPUT_DIR]; then ../allreduce-16bit/summarise.py OUTPUT_DIR after before.
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=${1:-docs/results/kernels-block/e2e}
lib=$(ls examples/target/lib/gradsync-core-*.jar)
keep=$(mktemp)
cp "$lib" "$keep"
trap 'cp "$keep" "$lib"; rm -f "$keep"' EXIT
mkdir -p "$out"
for round in $(seq 1 "${ROUNDS:-3}"); do
  for type in ${TYPES:-bfloat16 half}; do
    for tree in before after; do
      jar=${tree^^}
      cp "${!jar}" "$lib"
      examples/bin/gradsync-run -n 2 -- examples/bin/allreduce-perf --transport auto -d $type -b 1M -e 64M -f 4 \
          -n 20 -w 5 -c 1 > "$out/n2-$type-$tree-$round.txt" 2>&1
    done
  done
done
