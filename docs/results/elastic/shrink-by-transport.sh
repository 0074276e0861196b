#!/bin/bash
# How long the survivors' shrink() takes on each transport: from the failed collective's error to the new
# communicator (the rendezvous agreeing on the survivors, the old communicator closed, the new one's links opened),
# as each survivor of the multi-process shrink tests prints it. Run from anywhere in the checkout after
# `mvn -DskipTests install`; the output lands beside this script as shrink-by-transport.txt. RDMA=1 adds RDMA in the
# soft-RoCE guest (about 3 minutes more: rdma-transport/softroce/run-tests, with the class path that install wrote).
set -u
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"  # the checkout this script lies in
out=docs/results/elastic/shrink-by-transport.txt
tests() { mvn -B -o -q -pl "$1" -Dmaven.javadoc.skip -Dcheckstyle.skip -Dtest="$2" -Dsurefire.failIfNoSpecifiedTests=false \
  verify > /dev/null 2>&1 || echo "FAILED: $1 $2"; }
{
  echo "\$ shm (4 ranks, SIGKILL of rank 2, of rank 0, of ranks 1 and 2): ShmMultiProcessTest#theSurvivorsOfKilledRanksShrinkAndGoOnExact"
  tests sync-core 'ShmMultiProcessTest#theSurvivorsOfKilledRanksShrinkAndGoOnExact'
  grep -h "shrank to rank" sync-core/target/surefire-reports/io.gradsync.core.ShmMultiProcessTest-output.txt
  echo "\$ aeron-ipc and aeron-udp (3 ranks, SIGKILL of rank 0): MultiProcessTest#theSurvivorsOfAKilledRankShrinkAndGoOnExact"
  tests aeron-transport 'MultiProcessTest#theSurvivorsOfAKilledRankShrinkAndGoOnExact'
  grep -h "shrank to rank" aeron-transport/target/surefire-reports/io.gradsync.aeron.MultiProcessTest-output.txt
  if [ "${RDMA:-0}" = 1 ]; then
    echo "\$ rdma in the soft-RoCE guest (3 ranks, SIGKILL of rank 0): RdmaMultiProcessTest#theSurvivorsOfAKilledRankShrinkAndGoOnExact"
    rdma-transport/softroce/run-tests --no-build -- \
      --select-method io.gradsync.rdma.RdmaMultiProcessTest#theSurvivorsOfAKilledRankShrinkAndGoOnExact 2>&1 | grep "shrank to rank"
  fi
} > "$out" 2>&1
cat "$out"
