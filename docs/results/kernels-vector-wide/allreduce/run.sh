#!/usr/bin/env bash
# The AllReduce on JDK 25 at the defaults (gradsync-run, transport auto: shm on one host) with the vector kernels
# (default) and with -Dgradsync.kernels=scalar, in turn, ROUNDS rounds, N = 2 and 4. From the repository root.
set -euo pipefail
out=$(dirname "$0")
jdk25=${JDK25_HOME:-$(ls -d /usr/lib/jvm/temurin-25* 2>/dev/null | sort | tail -n 1)}
{ date -u +%FT%TZ; uname -srm; nproc; grep -m1 'model name' /proc/cpuinfo; "$jdk25/bin/java" -version 2>&1 | head -n 1
  git rev-parse --short HEAD; } > "$out/env.txt"
for round in $(seq 1 "${ROUNDS:-3}"); do
  for n in 2 4; do
    for kernels in vector scalar; do
      JAVA_HOME=$jdk25 PATH=$jdk25/bin:$PATH GRADSYNC_EXTRA_JAVA_OPTS="-Dgradsync.kernels=$kernels" \
        examples/bin/gradsync-run -n "$n" -- examples/bin/allreduce-perf --transport auto -b 64K -e 16M -f 4 -n 50 -w 10 \
        --csv "$out/n$n-$kernels-$round.csv" > "$out/n$n-$kernels-$round.txt" 2>&1
    done
  done
done
