#!/usr/bin/env bash
# allreduce-perf before and after its JIT warm-up ran checked calls (inputs, barrier, call, check) at the start of
# each burst, in turn, ROUNDS rounds (3), N = 2 and 4, at the defaults (-c 1: every iteration checked). BEFORE_JAR and
# AFTER_JAR are examples jars built from the two commits; each launch puts one in examples/target, and the last puts
# AFTER_JAR back. From the repository root.
set -euo pipefail
out=$(dirname "$0")
before=${BEFORE_JAR:?examples jar built from the earlier commit}
after=${AFTER_JAR:?examples jar built from the later commit}
jar=$(ls examples/target/gradsync-examples-*.jar | grep -v -e -javadoc.jar -e -sources.jar)
export GRADSYNC_JOB_SECRET=${GRADSYNC_JOB_SECRET:-$(openssl rand -hex 32)}
{ date -u +%FT%TZ; uname -srm; nproc; grep -m1 'model name' /proc/cpuinfo; java -version 2>&1 | head -n 1
  git rev-parse --short HEAD; } >> "$out/env.txt"
trap 'cp "$after" "$jar"' EXIT
for round in $(seq 1 "${ROUNDS:-3}"); do
  for n in 2 4; do
    for build in before after; do
      if [ "$build" = before ]; then cp "$before" "$jar"; else cp "$after" "$jar"; fi
      examples/bin/gradsync-run -n "$n" -- examples/bin/allreduce-perf --transport auto -b 4K -e 256K -f 4 -n 50 -w 10 \
        > "$out/n$n-$build-$round.txt" 2>&1
    done
  done
done
# the first size, 4 KiB, is the first timed row: its time per call, out of place / in place, each launch
for f in "$out"/n*-*.txt; do
  printf '%s %s\n' "$(basename "$f" .txt)" "$(grep -E '^\[0\] +4096 ' "$f" | awk '{print $7 " / " $11 " us"}')"
done | sort > "$out/first-row.txt"
