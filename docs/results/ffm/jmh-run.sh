#!/bin/bash
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"  # the checkout this script lies in
args="-p type=FLOAT32,FLOAT64,BFLOAT16 -p op=SUM,MAX -wi 3 -w 1 -i 5 -r 1 -f 1 -rf csv"
for round in 1 2; do
  PATH=/usr/lib/jvm/java-17-openjdk-amd64/bin:$PATH examples/bin/kernel-bench $args -rff /tmp/jmh/jdk17-unsafe-$round.csv > /tmp/jmh/jdk17-unsafe-$round.txt 2>&1
  PATH=/usr/lib/jvm/temurin-25-jdk-amd64/bin:$PATH GRADSYNC_JAVA_OPTS="-Djdk.util.jar.enableMultiRelease=false" examples/bin/kernel-bench $args -rff /tmp/jmh/jdk25-unsafe-$round.csv > /tmp/jmh/jdk25-unsafe-$round.txt 2>&1
  PATH=/usr/lib/jvm/temurin-25-jdk-amd64/bin:$PATH examples/bin/kernel-bench $args -rff /tmp/jmh/jdk25-ffm-$round.csv > /tmp/jmh/jdk25-ffm-$round.txt 2>&1
done
echo DONE > /tmp/jmh/done
