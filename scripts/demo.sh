#!/usr/bin/env bash
# Builds gradsync and runs allreduce-perf: 4 ranks (threads) over the in-JVM transport, 4 B to 64 MiB,
# every rank checked after every iteration. Extra arguments go to allreduce-perf (try --help).
# Needs only a JDK and Maven (scripts/setup.sh demo installs them when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh demo
echo "gradsync demo: building with Maven (the first build downloads the dependencies, a minute or more)" >&2
# One line per module as it builds, warnings such as a skipped native library, and errors; not Maven's whole log.
mvn -B -ntp -DskipTests -Dmaven.javadoc.skip -Dmaven.source.skip package -pl examples -am 2>&1 \
  | grep --line-buffered -E '^\[INFO\] Building |^\[WARNING\] (gradsync|Missing|The jar|Everything)|ERROR|BUILD|Total time' >&2
if [ $# -eq 0 ]; then
  set -- --ranks 4 -b 4 -e 64M -f 4 -n 10 -w 2
fi
exec examples/bin/allreduce-perf "$@"
