#!/bin/bash
# With the class-dispatching MemoryAccess (MemoryAccess-class-dispatch.java.txt, foreign mode): the heap-gradient
# step after mixed kernels, with 40 s of warm-up, then with C2's profiled loop predicates off.
cd "$(dirname "$0")/../../../.."
out=${1:-/tmp/jmh5}
mkdir -p "$out"
export PATH=$(ls -d /usr/lib/jvm/temurin-25* | head -1)/bin:$PATH
GRADSYNC_JAVA_OPTS="-Dgradsync.memory=foreign" examples/bin/kernel-bench -p type=FLOAT32 -p op=SUM -p bytes=4096 -p mixed=true \
  -wi 40 -w 1 -i 5 -r 1 -f 1 'KernelBenchmark.reduceIntoHeap$' > "$out/long-warmup.txt" 2>&1
GRADSYNC_JAVA_OPTS="-Dgradsync.memory=foreign -Xlog:deoptimization=debug" examples/bin/kernel-bench -p type=FLOAT32 -p op=SUM \
  -p bytes=4096 -p mixed=true -wi 3 -w 1 -i 5 -r 1 -f 1 'KernelBenchmark.reduceIntoHeap$' > "$out/deoptimization.txt" 2>&1
GRADSYNC_JAVA_OPTS="-Dgradsync.memory=foreign" examples/bin/kernel-bench -p type=FLOAT32 -p op=SUM -p bytes=4096,262144 -p mixed=true \
  -wi 3 -w 1 -i 5 -r 1 -f 1 -jvmArgsAppend -XX:-UseProfiledLoopPredicate 'KernelBenchmark.reduceIntoHeap$' > "$out/no-profiled-loop-predicate.txt" 2>&1
echo DONE > "$out/done"
