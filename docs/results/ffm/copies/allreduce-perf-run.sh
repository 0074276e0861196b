#!/bin/bash
# allreduce-perf, 2 processes bound to a core each, over shared memory on JDK 25: -Dgradsync.memory=foreign (the
# default, KernelCopies) against -Dgradsync.memory=unsafe, alternating, 3 repeats each.
cd "$(dirname "$0")/../../../.."
out=${1:-/tmp/e2e3}
mkdir -p "$out"
export PATH=$(ls -d /usr/lib/jvm/temurin-25* | head -1)/bin:$PATH
for rep in 1 2 3; do
  for cfg in unsafe foreign; do
    GRADSYNC_JAVA_OPTS="-Xms1g -Xmx2g -XX:MaxDirectMemorySize=8g -Dgradsync.memory=$cfg" timeout 600 \
      examples/bin/gradsync-run --bind-to core -n 2 -- examples/bin/allreduce-perf --algo auto --transport shm \
      -b 1K -e 16M -f 4 -n 200 -w 20 -c 0 > "$out/$cfg-$rep.txt" 2>&1
  done
done
echo DONE > "$out/done"
