#!/usr/bin/env bash
# JMH of float32 and bfloat16 SUM and a copy, 64 KiB and 64 MiB, with two builds: BEFORE and AFTER are copies of a
# built tree's examples/bin and examples/target (mvn -DskipTests package; the sync-core jar under target/lib is the
# one measured). Interleaved: ROUNDS rounds of JDK 17 then 25, each BEFORE then AFTER; one line per result, prefixed
# "rROUND jdkJ before|after". Usage: BEFORE=dir AFTER=dir [ROUNDS=3] run.sh > jmh.txt; summarise.py jmh.txt.
set -u
jdk25=$(ls -d /usr/lib/jvm/temurin-25* | head -1)
for round in $(seq 1 "${ROUNDS:-3}"); do
  for jdk in 17 25; do
    for tree in before after; do
      dir=${tree^^}
      path=$PATH
      [ "$jdk" = 25 ] && path=$jdk25/bin:$PATH
      PATH=$path "${!dir}/bin/kernel-bench" 'KernelBenchmark\.(copy|reduce)$' -p bytes=65536,67108864 \
          -p type=FLOAT32,BFLOAT16 -p op=SUM -wi 3 -i 5 -w 1 -r 1 -f 1 -bm avgt -tu us 2>&1 \
        | grep -E "^KernelBenchmark\." | sed "s/^/r$round jdk$jdk $tree /"
    done
  done
done
