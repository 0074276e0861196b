#!/bin/bash
# The Flux operator against one blocking call at a time with two sync-core jars, BEFORE (every collective admitted
# up to gradsync.inflight) and AFTER (beyond the first, only while the payloads in flight fit gradsync.inflight.bytes),
# swapped into the examples' lib in turn: flux-perf over shm (processes under gradsync-run) at N = 4 and 2 and over
# local (threads) at N = 4, its defaults but the steps, interleaved, ROUNDS rounds, every gradient checked; then a
# training step, overlap-mlp (60 layers of 256, 15.1 MiB of gradients in 2 MiB buckets reduced during backward) at
# N = 4 and 2 over auto, the same way.
# Usage: BEFORE=jar AFTER=jar [ROUNDS=2] run.sh [OUTPUT_DIR]   (after `mvn -DskipTests package`)
set -euo pipefail
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
out=${1:-docs/results/inflight-bytes}
lib=$(ls examples/target/lib/gradsync-core-*.jar)
keep=$(mktemp)
cp "$lib" "$keep"
trap 'cp "$keep" "$lib"; rm -f "$keep"' EXIT
mkdir -p "$out"
steps() { case $1 in 200x16K) echo "-n 100 -w 300" ;; 50x1M) echo "-n 30 -w 30" ;; 4x64M) echo "-n 10 -w 5" ;; esac; }
for round in $(seq 1 "${ROUNDS:-2}"); do
  for tree in before after; do
    jar=${tree^^}
    cp "${!jar}" "$lib"
    for shape in 50x1M 4x64M 200x16K; do
      for n in 4 2; do
        # shellcheck disable=SC2046
        examples/bin/gradsync-run -n $n -- examples/bin/flux-perf --transport shm $(steps $shape) $shape \
          > "$out/shm-n$n-$shape-$tree-$round.txt" 2>&1
      done
    done
    examples/bin/flux-perf --transport local --ranks 4 $(steps 50x1M) 50x1M > "$out/local-n4-50x1M-$tree-$round.txt" 2>&1
  done
done
for round in $(seq 1 "${ROUNDS:-2}"); do
  for tree in before after; do
    jar=${tree^^}
    cp "${!jar}" "$lib"
    for n in 4 2; do
      examples/bin/gradsync-run -n $n -- examples/bin/overlap-mlp --mode bucket --bucket-mb 2 --steps 15 --warmup 2 \
        > "$out/overlap-mlp-n$n-$tree-$round.txt" 2>&1
    done
  done
done
sed -i "s|$PWD/||g" "$out"/*.txt
