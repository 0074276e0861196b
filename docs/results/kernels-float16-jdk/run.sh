#!/bin/bash
# JMH of float16 SUM and a copy on JDK 25 with two sync-core jars, BEFORE and AFTER (built with -Dgradsync.jdk22, so
# that JDK 25 runs their JDK 22+ classes), swapped into the examples' lib in turn: interleaved, ROUNDS rounds, 64 KiB
# and 64 MiB. Usage: BEFORE=jar AFTER=jar [ROUNDS=3] run.sh [OUTPUT_DIR]; then ../kernels-vector/summarise.py
# OUTPUT_DIR after before.
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=${1:-docs/results/kernels-float16-jdk}
lib=$(ls examples/target/lib/gradsync-core-*.jar)
keep=$(mktemp)
cp "$lib" "$keep"
trap 'cp "$keep" "$lib"; rm -f "$keep"' EXIT
mkdir -p "$out"
jdk25=$(ls -d /usr/lib/jvm/temurin-25* | head -1)
for round in $(seq 1 "${ROUNDS:-3}"); do
  for tree in before after; do
    jar=${tree^^}
    cp "${!jar}" "$lib"
    PATH=$jdk25/bin:$PATH examples/bin/kernel-bench 'KernelBenchmark.(copy|reduce)$' -p type=FLOAT16 -p op=SUM \
        -p bytes=65536,67108864 -p mixed=false -wi 3 -w 1 -i 5 -r 1 -f 1 -rf csv -rff "$out/jdk25-$tree-$round.csv" \
        > "$out/jdk25-$tree-$round.txt" 2>&1
  done
done
