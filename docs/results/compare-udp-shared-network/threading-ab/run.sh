#!/usr/bin/env bash
# Aeron driver threading A/B: shared against shared-network, launched alternately, three pairs per rank count.
set -u
cd "$(dirname "$0")/../../../.."
out=docs/results/compare-udp-shared-network/threading-ab
for pair in 1 2 3; do
  for n in 2 4; do
    for mode in shared shared-network; do
      GRADSYNC_JAVA_OPTS="-Xms256m -Xmx2g -XX:+AlwaysPreTouch -XX:MaxDirectMemorySize=18g -Dgradsync.aeron.driver.threading=$mode" \
        examples/bin/gradsync-run -n $n -- examples/bin/allreduce-perf --transport aeron-udp --algo ring \
        -b 1M -e 16M -f 16 -n 20 -w 5 -c 0 -a 3 > $out/N$n-$mode-pair$pair.txt 2>&1
    done
  done
done
