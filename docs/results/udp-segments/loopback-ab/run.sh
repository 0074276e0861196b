#!/usr/bin/env bash
# Loopback, whose MTU takes whole datagrams, so nothing is cut either way: does capping frames at 62 KiB where
# cutting is allowed (the default) cost anything against 65504-byte frames (gradsync.aeron.udp.segment=off)?
# Two ranks bound to a core each, launched alternately, three pairs.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
out=docs/results/udp-segments/loopback-ab
for pair in 1 2 3; do
  for setting in auto off; do
    GRADSYNC_EXTRA_JAVA_OPTS="-Dgradsync.aeron.udp.segment=$setting" examples/bin/gradsync-run --bind-to core -n 2 -- \
      examples/bin/allreduce-perf --algo ring --transport aeron-udp -b 64K -e 64M -f 4 -n 50 -w 10 -c 0 -a 3 \
      --csv "$out/$setting-$pair.csv" > "$out/$setting-$pair.log" 2>&1
  done
done
