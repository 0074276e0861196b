#!/usr/bin/env bash
# Plain buffers with `auto` (gradsync-auto: the direct AllReduce staged through shared windows from 64 KiB where
# the host's ranks have a CPU each) on JDK 17 (sun.misc.Unsafe kernels) and Temurin 25 (java.lang.foreign), beside
# Open MPI's vader: one compare-allreduce launch per JDK and repeat, the JDKs' order alternating, then medians.
set -euo pipefail
out=$(cd "$(dirname "$0")" && pwd)
cd "$(dirname "$0")/../../.."
jdk17=${GRADSYNC_JDK17:-$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")}
jdk25=${GRADSYNC_JDK25:-$(ls -d /usr/lib/jvm/temurin-25* | head -n 1)}
for rep in 1 2 3; do
  order="17 25"; [ $((rep % 2)) -eq 0 ] && order="25 17"
  for jdk in $order; do
    home=$jdk17; only="gradsync-auto"
    [ "$jdk" = 25 ] && home=$jdk25
    [ "$jdk" = 17 ] && only="mpi-shm gradsync-auto"
    PATH=$home/bin:$PATH GRADSYNC_SHM_ALGO=auto examples/bin/compare-allreduce --ranks "2 4" -b 64K -e 16M -f 4 -n 50 -w 10 \
      --repeats 1 --only "$only" --out "$out/jdk$jdk-r$rep"
  done
done
python3 "$out/summarise.py" "$out" > "$out/summary.md"
cat "$out/summary.md"
