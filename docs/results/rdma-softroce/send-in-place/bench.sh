#!/usr/bin/env bash
# In the soft-RoCE guest, from the project root (run-in-guest shares it read-write):
#   rdma-transport/softroce/run-in-guest --timeout 1700 --mem 3G -- docs/results/rdma-softroce/send-in-place/bench.sh
# allreduce-perf over rdma, 2 processes, the ring, sending from registered buffers (in-place=true) or through
# staging copies (false), interleaved, 3 rounds; #wrong checked (-c 1).
set -u
out=docs/results/rdma-softroce/send-in-place
base="-Xmx256m -XX:MaxDirectMemorySize=700m -XX:+UseSerialGC -Dgradsync.rdma.connect.timeout.ms=300000 -Dgradsync.rendezvous.timeout.ms=300000 -Dgradsync.rendezvous.handshake.timeout.ms=300000"
for round in 1 2 3; do
  for v in true false; do
    t0=$(date +%s)
    GRADSYNC_JAVA_OPTS="$base -Dgradsync.rdma.send.in.place=$v" timeout 400 examples/bin/gradsync-run --deadline 380 -n 2 -- \
      examples/bin/allreduce-perf -a 3 --jit_warmup 0 --algo ring --transport rdma -b 1M -e 64M -f 8 -n 3 -w 1 -c 1 --timeout 300 \
      > $out/in-place-$v-$round.txt 2>&1
    echo "status $? in $(( $(date +%s) - t0 )) s" >> $out/in-place-$v-$round.txt
    echo "in-place=$v round $round: $(tail -1 $out/in-place-$v-$round.txt)"
  done
done
