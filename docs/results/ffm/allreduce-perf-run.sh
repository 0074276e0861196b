#!/bin/bash
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"  # the checkout this script lies in
export PATH=/usr/lib/jvm/temurin-25-jdk-amd64/bin:$PATH
for rep in 4 5 6 7; do
  for cfg in unsafe ffm; do
    opts="-Xms1g -Xmx2g -XX:MaxDirectMemorySize=18g"
    [ $cfg = unsafe ] && opts="$opts -Djdk.util.jar.enableMultiRelease=false"
    GRADSYNC_JAVA_OPTS="$opts" timeout 600 examples/bin/gradsync-run --bind-to core -n 2 -- examples/bin/allreduce-perf --algo auto --transport shm -b 4M -e 64M -f 4 -n 50 -w 5 -c 0 > /tmp/e2e/$cfg-$rep.txt 2>&1
  done
done
echo DONE > /tmp/e2e/done
