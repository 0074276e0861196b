#!/bin/bash
# JMH of the kernels with one hidden copy of the segment loops per combination of segment classes (KernelCopies):
# JDK 17 (Unsafe), JDK 25 with -Dgradsync.memory=unsafe and JDK 25 with -Dgradsync.memory=foreign (the default),
# interleaved, 2 rounds. mixed=true first runs every kernel over heap byte/float/long arrays and a mapped file;
# reduceIntoHeap is a training step: a heap array of the type += an off-heap slot, into the array.
cd "$(dirname "$0")/../../../.."
out=${1:-/tmp/jmh6}
mkdir -p "$out"
jdk25=$(ls -d /usr/lib/jvm/temurin-25* | head -1)
args="-p type=FLOAT32,BFLOAT16 -p op=SUM -p bytes=4096,262144 -p mixed=false,true -wi 3 -w 1 -i 5 -r 1 -f 1 -rf csv KernelBenchmark"
for round in 1 2; do
  PATH=/usr/lib/jvm/java-17-openjdk-amd64/bin:$PATH examples/bin/kernel-bench $args -rff $out/jdk17-unsafe-$round.csv > $out/jdk17-unsafe-$round.txt 2>&1
  PATH=$jdk25/bin:$PATH GRADSYNC_JAVA_OPTS="-Dgradsync.memory=unsafe" examples/bin/kernel-bench $args -rff $out/jdk25-unsafe-$round.csv > $out/jdk25-unsafe-$round.txt 2>&1
  PATH=$jdk25/bin:$PATH GRADSYNC_JAVA_OPTS="-Dgradsync.memory=foreign" examples/bin/kernel-bench $args -rff $out/jdk25-foreign-$round.csv > $out/jdk25-foreign-$round.txt 2>&1
done
echo DONE > $out/done
