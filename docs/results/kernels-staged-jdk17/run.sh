#!/usr/bin/env bash
# The 32/64-bit kernels on JDK 17 before and after staging through arrays (StagedKernels), interleaved: ROUNDS rounds
# of copy, reduce and reduceIntoHeap at 4 KiB, 64 KiB and 64 MiB (float32, float64), three rounds of reduce alone at
# 64 MiB, then two of int32.
# BEFORE: a copy of a tree built at the commit before (its examples/bin and examples/target); after: this tree.
# Usage (from the repository root): BEFORE=/path/to/before docs/results/kernels-staged-jdk17/run.sh [ROUNDS]
set -euo pipefail
out=$(cd "$(dirname "$0")" && pwd)
rounds=${1:-2}
{ date -u +%FT%TZ; uname -srm; nproc; grep -m1 'model name' /proc/cpuinfo; java -version 2>&1 | head -n 1
  git rev-parse --short HEAD; } > "$out/env.txt"
bench=('KernelBenchmark\.(copy|reduce|reduceIntoHeap)$' -p bytes=4096,65536,67108864 -p type=FLOAT32,FLOAT64
       -p op=SUM -p mixed=true -f 1 -wi 3 -w 1 -i 5 -r 1)
large=('KernelBenchmark\.reduce$' -p bytes=67108864 -p type=FLOAT64,FLOAT32 -p op=SUM -p mixed=true -f 1 -wi 2 -w 1 -i 5 -r 1)
for round in $(seq 1 "$rounds"); do
  "$BEFORE"/examples/bin/kernel-bench "${bench[@]}" > "$out/before-$round.txt" 2>&1
  examples/bin/kernel-bench "${bench[@]}" > "$out/after-$round.txt" 2>&1
done
for round in 1 2 3; do
  "$BEFORE"/examples/bin/kernel-bench "${large[@]}" > "$out/large-before-$round.txt" 2>&1
  examples/bin/kernel-bench "${large[@]}" > "$out/large-after-$round.txt" 2>&1
done
int32=('KernelBenchmark\.reduce$' -p bytes=65536,67108864 -p type=INT32 -p op=SUM,PROD -p mixed=true -f 1 -wi 2 -w 1 -i 5 -r 1)
for round in 1 2; do
  "$BEFORE"/examples/bin/kernel-bench "${int32[@]}" > "$out/int32-before-$round.txt" 2>&1
  examples/bin/kernel-bench "${int32[@]}" > "$out/int32-after-$round.txt" 2>&1
done
