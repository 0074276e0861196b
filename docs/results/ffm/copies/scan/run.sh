#!/bin/bash
# After KernelCopies looked segment classes up by a scan instead of a ClassValue: JDK 25 unsafe against foreign,
# interleaved, 2 rounds, 4 KiB.
cd "$(dirname "$0")/../../../../.."
out=${1:-/tmp/jmh7}
mkdir -p "$out"
export PATH=$(ls -d /usr/lib/jvm/temurin-25* | head -1)/bin:$PATH
for r in 1 2; do
  for c in unsafe foreign; do
    GRADSYNC_JAVA_OPTS="-Dgradsync.memory=$c" examples/bin/kernel-bench -p type=FLOAT32,BFLOAT16 -p op=SUM -p bytes=4096 \
      -p mixed=false,true -wi 3 -w 1 -i 5 -r 1 -f 1 -rf csv -rff $out/jdk25-$c-$r.csv 'KernelBenchmark.reduce' > $out/jdk25-$c-$r.txt 2>&1
  done
done
