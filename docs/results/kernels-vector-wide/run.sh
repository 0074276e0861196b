#!/usr/bin/env bash
# The 32/64-bit reductions on JDK 22+ a vector at a time (SegmentVectorKernels) against the scalar loops they replace
# (-Dgradsync.kernels=scalar, which also turns off the 16-bit vector kernels, not measured here), JMH on JDK 25, the two
# in turn for ROUNDS rounds. Run from the repository root after `mvn -B -q -DskipTests -Dgradsync.jdk22=<JDK 25> install`.
set -euo pipefail
out=$(dirname "$0")
jdk25=${JDK25_HOME:-$(ls -d /usr/lib/jvm/temurin-25* 2>/dev/null | sort | tail -n 1)}
{ date -u +%FT%TZ; uname -srm; nproc; grep -m1 'model name' /proc/cpuinfo; "$jdk25/bin/java" -version 2>&1 | head -n 1
  git rev-parse --short HEAD; } > "$out/env.txt"
for round in $(seq 1 "${ROUNDS:-2}"); do
  for kernels in vector scalar; do
    JAVA_HOME=$jdk25 PATH=$jdk25/bin:$PATH examples/bin/kernel-bench 'KernelBenchmark\.(copy|reduce)$' \
      -p bytes=4096,65536,1048576,67108864 -p type=FLOAT32,FLOAT64,INT32 -p op=SUM -f 1 -wi 3 -w 1 -i 5 -r 1 \
      -jvmArgsAppend "-Dgradsync.kernels=$kernels" -rf csv -rff "$out/$kernels-$round.csv" > "$out/$kernels-$round.txt" 2>&1
  done
done
