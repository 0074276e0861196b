#!/bin/bash
# The flight recorder's cost in docs/benchmarks.md ("The flight recorder's cost"), remade by running this script from
# anywhere in the checkout after `mvn -DskipTests package` (examples/target must hold the jars); the outputs land
# beside it. 2 processes over shm, float32 SUM of 16 KiB, blocking calls checked every iteration: the recorder at its
# default (2048 entries) against none (gradsync.flight.entries=0), interleaved, five rounds.
set -u
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"  # the checkout this script lies in
out=docs/results/flight
perf() {
  local name=$1 opts=$2
  {
    echo "\$ GRADSYNC_JAVA_OPTS='$opts' examples/bin/gradsync-run -n 2 -- examples/bin/allreduce-perf --transport shm -b 16K -e 16K -n 20000 -w 2000 -c 1"
    GRADSYNC_JAVA_OPTS=$opts examples/bin/gradsync-run -n 2 -- examples/bin/allreduce-perf --transport shm -b 16K -e 16K \
      -n 20000 -w 2000 -c 1
  } > "$out/$name.txt" 2>&1
}
for round in 1 2 3 4 5; do
  perf on-$round ""
  perf off-$round "-Dgradsync.flight.entries=0"
done
