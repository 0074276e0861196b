#!/usr/bin/env bash
# The AllReduce on JDK 25 at the defaults (gradsync-run, transport auto: shm on one host) before and after the Vector
# API loops were given native segments only, in turn, ROUNDS rounds, N = 2 and 4. BEFORE is a copy of examples/
# (bin/ and target/) built from the earlier commit; the tree's examples/ is the later one. From the repository root.
set -euo pipefail
out=$(dirname "$0")
jdk25=${JDK25_HOME:-$(ls -d /usr/lib/jvm/temurin-25* 2>/dev/null | sort | tail -n 1)}
before=${BEFORE:?copy of examples/ built from the earlier commit}
{ date -u +%FT%TZ; uname -srm; nproc; grep -m1 'model name' /proc/cpuinfo; "$jdk25/bin/java" -version 2>&1 | head -n 1
  git rev-parse --short HEAD; } > "$out/env.txt"
for round in $(seq 1 "${ROUNDS:-2}"); do
  for n in 2 4; do
    for build in before after; do
      bin=examples/bin
      [ "$build" = before ] && bin=$before/bin
      JAVA_HOME=$jdk25 PATH=$jdk25/bin:$PATH \
        "$bin/gradsync-run" -n "$n" -- "$bin/allreduce-perf" --transport auto -b 64K -e 16M -f 4 -n 50 -w 10 \
        --csv "$out/n$n-$build-$round.csv" > "$out/n$n-$build-$round.txt" 2>&1
    done
  done
done
