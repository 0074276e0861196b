#!/bin/bash
# A training step with the two sync-core jars of run.sh: overlap-mlp (60 layers of 256, 15.1 MiB of gradients in
# 2 MiB buckets reduced during backward), 4 and 2 processes over auto under gradsync-run, interleaved, ROUNDS rounds.
# Usage: BEFORE=jar AFTER=jar [ROUNDS=2] overlap.sh [OUTPUT_DIR]   (after `mvn -DskipTests package`)
set -euo pipefail
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
out=${1:-docs/results/inflight-bytes}
lib=$(ls examples/target/lib/gradsync-core-*.jar)
keep=$(mktemp)
cp "$lib" "$keep"
trap 'cp "$keep" "$lib"; rm -f "$keep"' EXIT
mkdir -p "$out"
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
sed -i "s|$PWD/||g" "$out"/overlap-mlp-*.txt
