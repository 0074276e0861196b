#!/bin/bash
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"  # the checkout this script lies in
export PATH=/usr/lib/jvm/temurin-25-jdk-amd64/bin:$PATH
args="-p type=FLOAT32,FLOAT64 -p op=SUM -p bytes=4096,262144 -p mixed=false,true -wi 3 -w 1 -i 5 -r 1 -f 1 -rf csv reduce"
for round in 1 2; do
  GRADSYNC_JAVA_OPTS="-Djdk.util.jar.enableMultiRelease=false" examples/bin/kernel-bench $args -rff /tmp/jmh2/jdk25-unsafe-$round.csv > /tmp/jmh2/jdk25-unsafe-$round.txt 2>&1
  examples/bin/kernel-bench $args -rff /tmp/jmh2/jdk25-ffm-$round.csv > /tmp/jmh2/jdk25-ffm-$round.txt 2>&1
done
echo DONE > /tmp/jmh2/done
