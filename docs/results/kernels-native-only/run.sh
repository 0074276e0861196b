#!/usr/bin/env bash
# The JDK 22+ kernels before and after the Vector API loops were given native segments only (heap operands staged
# through the thread's blocks) and float16 plain segment loops: JMH on JDK 25, off-heap (reduce) and a heap array +=
# an off-heap buffer (reduceIntoHeap), each in a fresh JVM (mixed=false) and in one that first reduced heap arrays of
# other types, direct buffers and a mapped file (mixed=true). BEFORE is a copy of examples/ (bin/ and target/) built
# from the earlier commit; the tree's own examples/ is the later one. Run from the repository root after
# `mvn -B -q -DskipTests -Dgradsync.jdk22=<JDK 25> install`.
set -euo pipefail
out=$(dirname "$0")
jdk25=${JDK25_HOME:-$(ls -d /usr/lib/jvm/temurin-25* 2>/dev/null | sort | tail -n 1)}
for kernels in "${BEFORE:?copy of examples/ built from the earlier commit}" examples; do
  echo "== $kernels"
  JAVA_HOME=$jdk25 PATH=$jdk25/bin:$PATH "$kernels/bin/kernel-bench" 'KernelBenchmark\.(reduce|reduceIntoHeap)$' \
    -p bytes=65536 -p mixed=true,false -p type=FLOAT32,BFLOAT16,FLOAT16 -p op=SUM -f 1 -wi 3 -w 1 -i 3 -r 1 2>&1 \
    | grep -E '^KernelBenchmark'
done
