#!/bin/bash
# flux-perf with two sync-core jars, BEFORE and AFTER, swapped into the examples' lib in turn: the Flux operator
# against one blocking call at a time, float32 SUM, every gradient of every step checked on every rank (-c 1); ranks
# as threads (local) and as processes launched by gradsync-run (shm, aeron-ipc); builds interleaved, ROUNDS rounds.
# Each shape runs alone, with a warm-up long enough for the JIT to compile both modes (docs/benchmarks.md, "The first
# timed block of a size"): with 3 untimed steps a 200 x 16 KiB row measures the JIT more than the operator.
# Usage: BEFORE=jar AFTER=jar [ROUNDS=3] run.sh [OUTPUT_DIR]; then summarise.py OUTPUT_DIR.
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=${1:-docs/results/flux-driven}
lib=$(ls examples/target/lib/gradsync-core-*.jar)
keep=$(mktemp)
cp "$lib" "$keep"
trap 'cp "$keep" "$lib"; rm -f "$keep"' EXIT
mkdir -p "$out"
shapes=("200x16K -n 100 -w 300" "50x1M -n 30 -w 30" "4x64M -n 10 -w 5")
cells=("local 2" "local 4" "shm 2" "shm 4" "aeron-ipc 2")
for round in $(seq 1 "${ROUNDS:-3}"); do
  for cell in "${cells[@]}"; do
    read -r transport n <<< "$cell"
    for shape in "${shapes[@]}"; do
      for tree in before after; do
        jar=${tree^^}
        cp "${!jar}" "$lib"
        file="$out/$transport-n$n-${shape%% *}-$tree-$round.txt"
        # shellcheck disable=SC2086 # the shape's options split on purpose
        if [ "$transport" = local ]; then
          examples/bin/flux-perf --ranks "$n" $shape > "$file" 2>&1
        else
          examples/bin/gradsync-run -n "$n" -- examples/bin/flux-perf --transport "$transport" $shape > "$file" 2>&1
        fi
      done
    done
  done
done
