#!/usr/bin/env bash
# Builds gradsync and runs allreduce-perf: 4 ranks (threads) over the in-JVM transport, 4 B to 64 MiB,
# every rank checked after every iteration. Extra arguments go to allreduce-perf (try --help).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
mvn -B -q -DskipTests package
if [ $# -eq 0 ]; then
  set -- --ranks 4 -b 4 -e 64M -f 4 -n 10 -w 2
fi
exec examples/bin/allreduce-perf "$@"
