#!/usr/bin/env bash
# In the soft-RoCE guest: allreduce-perf over rdma, 2 processes, before/after interleaved, 3 rounds.
out=/tmp/ab/results; mkdir -p $out
base="-Xmx256m -XX:MaxDirectMemorySize=700m -XX:+UseSerialGC -Dgradsync.rdma.connect.timeout.ms=300000 -Dgradsync.rendezvous.timeout.ms=300000 -Dgradsync.rendezvous.handshake.timeout.ms=300000"
for round in 1 2 3; do
  for v in before after; do
    t0=$(date +%s)
    (cd /tmp/ab/$v && GRADSYNC_JAVA_OPTS="$base" timeout 400 examples/bin/gradsync-run --deadline 380 -n 2 -- \
      examples/bin/allreduce-perf -a 3 --transport rdma -b 1M -e 64M -f 8 -n 3 -w 1 -c 1 --timeout 300) > $out/$v-$round.txt 2>&1
    echo "status $? in $(( $(date +%s) - t0 )) s" >> $out/$v-$round.txt
    echo "$v $round done: $(tail -1 $out/$v-$round.txt)"
  done
done
