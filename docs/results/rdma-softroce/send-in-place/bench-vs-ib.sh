#!/usr/bin/env bash
# In the soft-RoCE guest, from the project root, in one boot: ib_write_bw (256 KiB messages, the ring's chunk),
# then 64 MiB float32 SUM over rdma, 2 processes, the ring, back to back (-c 0), sending in place (true) or
# through staging copies (false), interleaved, 3 rounds:
#   rdma-transport/softroce/run-in-guest --timeout 1700 --mem 3G -- docs/results/rdma-softroce/send-in-place/bench-vs-ib.sh
set -u
out=docs/results/rdma-softroce/send-in-place
rdma-transport/softroce/ib-baseline --size 262144 --iters 2000 > $out/ib-baseline.txt 2>&1
grep '^ib-baseline:' $out/ib-baseline.txt
base="-Xmx256m -XX:MaxDirectMemorySize=700m -XX:+UseSerialGC -Dgradsync.rdma.connect.timeout.ms=300000 -Dgradsync.rendezvous.timeout.ms=300000 -Dgradsync.rendezvous.handshake.timeout.ms=300000"
for round in 1 2 3; do
  for v in true false; do
    t0=$(date +%s)
    GRADSYNC_JAVA_OPTS="$base -Dgradsync.rdma.send.in.place=$v" timeout 400 examples/bin/gradsync-run --deadline 380 -n 2 -- \
      examples/bin/allreduce-perf -a 3 --jit_warmup 0 --algo ring --transport rdma -b 64M -e 64M -n 3 -w 1 -c 0 --timeout 300 \
      > $out/64m-in-place-$v-$round.txt 2>&1
    echo "status $? in $(( $(date +%s) - t0 )) s" >> $out/64m-in-place-$v-$round.txt
    echo "in-place=$v round $round: $(grep -E '^\[0\] +67108864' $out/64m-in-place-$v-$round.txt)"
  done
done
