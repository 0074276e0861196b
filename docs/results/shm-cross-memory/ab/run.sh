#!/usr/bin/env bash
# The interleaved A/B of 2026-11-25 (commit b6dbb54, Temurin 25): the direct AllReduce over shm, 2 ranks bound to
# cores, plain buffers read across processes (true) or staged (false), alternating, three launches each.
out=$(cd "$(dirname "$0")" && pwd)
cd "$(dirname "$0")/../../../.."
export PATH=${GRADSYNC_JDK25:-/usr/lib/jvm/temurin-25-jdk-amd64}/bin:$PATH
for r in 1 2 3; do
 for mode in true false; do
  GRADSYNC_JAVA_OPTS="-Xms256m -Xmx2g -XX:+AlwaysPreTouch -Dgradsync.shm.cross.memory=$mode" examples/bin/gradsync-run --bind-to core -n 2 -- examples/bin/allreduce-perf --algo direct --transport shm -b 256K -e 4M -f 4 -n 100 -w 20 -c 0 -a 3 > "$out/$mode-$r.log" 2>&1
 done
done
