#!/bin/bash
# JMH of the 16-bit vector kernels with two sync-core jars, BEFORE and AFTER (e.g. the jars of two built trees:
# sync-core/target/gradsync-core-*-SNAPSHOT.jar), swapped into the examples' lib in turn: interleaved, ROUNDS rounds,
# JDK 17 and 25, a copy and bfloat16/float16 SUM at 4 KiB and 64 MiB.
# Usage: BEFORE=jar AFTER=jar [ROUNDS=3] run.sh [OUTPUT_DIR]; then ../kernels-vector/summarise.py OUTPUT_DIR after before.
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=${1:-docs/results/kernels-block}
rounds=${ROUNDS:-3}
lib=$(ls examples/target/lib/gradsync-core-*.jar)
keep=$(mktemp)
cp "$lib" "$keep"
trap 'cp "$keep" "$lib"; rm -f "$keep"' EXIT
export GRADSYNC_VECTOR_API=0   # the forks get the module from -jvmArgsAppend, as in kernels-vector/run.sh
mkdir -p "$out"
jdk17=/usr/lib/jvm/java-17-openjdk-amd64
jdk25=$(ls -d /usr/lib/jvm/temurin-25* | head -1)
args=(-p type=BFLOAT16,FLOAT16 -p op=SUM -p bytes=4096,67108864 -p mixed=false -wi 2 -w 1 -i 3 -r 1 -f 1 -rf csv
      -jvmArgsAppend "--add-modules jdk.incubator.vector")
for round in $(seq 1 "$rounds"); do
  for jdk in 17 25; do
    for tree in before after; do
      jar=${tree^^}
      cp "${!jar}" "$lib"
      home=jdk$jdk
      PATH=${!home}/bin:$PATH examples/bin/kernel-bench "${args[@]}" -rff "$out/jdk$jdk-$tree-$round.csv" \
          'KernelBenchmark.(copy|reduce|reduceIntoHeap)$' > "$out/jdk$jdk-$tree-$round.txt" 2>&1
    done
  done
done
