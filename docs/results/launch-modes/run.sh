#!/usr/bin/env bash
# Whether an N = 2 AllReduce launch runs fast or slow, by idle strategy; whether two in-cache copies on the two CPUs
# at once show the same two modes; and whether two plain Java processes handing 256 KiB back and forth through
# /dev/shm (PingPong.java, beside this script) do. ROUNDS rounds of each. Usage, from the repository root after mvn
# package: docs/results/launch-modes/run.sh [strategies] [copies] [pingpong]   (default: all three)
set -euo pipefail
out=$(cd "$(dirname "$0")" && pwd)
{ date -u +%FT%TZ; uname -srm; nproc; grep -m1 'model name' /proc/cpuinfo; java -version 2>&1 | head -n 1
  git rev-parse --short HEAD; } > "$out/env.txt"
stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(strategies copies pingpong)
has() { [[ " ${stages[*]} " == *" $1 "* ]]; }
has strategies && for round in $(seq 1 "${ROUNDS:-4}"); do
  for idle in backoff yield busy-spin; do
    GRADSYNC_EXTRA_JAVA_OPTS=-Dgradsync.idle.strategy=$idle examples/bin/gradsync-run -n 2 -- \
      examples/bin/allreduce-perf --transport auto -b 256K -e 1M -f 4 -n 200 -w 20 > "$out/$idle-$round.txt" 2>&1
  done
done
# two copies of 256 KiB in cache at once, one per CPU, four half-second readings each (GB/s)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/Copy.java" <<'JAVA'
import java.nio.ByteBuffer;
public class Copy {
    public static void main(String[] a) {
        int bytes = Integer.parseInt(a[0]);
        ByteBuffer src = ByteBuffer.allocateDirect(bytes), dst = ByteBuffer.allocateDirect(bytes);
        for (int i = 0; i < Integer.parseInt(a[1]); i++) {
            long t0 = System.nanoTime(), n = 0;
            while (System.nanoTime() - t0 < 500_000_000L) { dst.clear(); src.clear(); dst.put(src); n++; }
            System.out.printf("%.1f ", n * (double) bytes / (System.nanoTime() - t0));
        }
        System.out.println();
    }
}
JAVA
javac -d "$tmp" "$tmp/Copy.java" "$out/PingPong.java"
has copies && for round in $(seq 1 "${ROUNDS:-4}"); do
  taskset -c 0 java -cp "$tmp" Copy 262144 4 > "$tmp/a" & taskset -c 1 java -cp "$tmp" Copy 262144 4 > "$tmp/b"; wait
  echo "round $round: cpu 0: $(cat "$tmp/a")| cpu 1: $(cat "$tmp/b")"
done > "$out/copies.txt"
# 256 KiB handed back and forth 10 000 times per reading, five readings (GB/s each process copies)
has pingpong && for round in $(seq 1 "${ROUNDS:-4}"); do
  rm -f /dev/shm/gradsync-pingpong
  taskset -c 0 java -cp "$tmp" PingPong /dev/shm/gradsync-pingpong 262144 5 10000 0 > "$tmp/a" &
  taskset -c 1 java -cp "$tmp" PingPong /dev/shm/gradsync-pingpong 262144 5 10000 1 > "$tmp/b"; wait
  echo "round $round: process 0: $(cat "$tmp/a")| process 1: $(cat "$tmp/b")"
done > "$out/pingpong.txt"
rm -f /dev/shm/gradsync-pingpong
