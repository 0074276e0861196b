#!/usr/bin/env bash
# In the soft-RoCE guest on trixie-backports' kernel, from the project root, in one boot: two namespaces with an rxe
# device each (scripts/netns-hosts --rxe), then 3 interleaved rounds of
#   ib_write_bw between the namespaces' devices, and over rxe0 alone (both ends on one device, as before);
#   64 MiB float32 SUM over rdma, 2 processes, the ring, -c 0: one rank per namespace, and both on rxe0.
#   rdma-transport/softroce/run-in-guest --kernel trixie-backports --timeout 2400 --mem 3G -- docs/results/rdma-softroce/netns/bench.sh
set -u
out=docs/results/rdma-softroce/netns
uname -r > $out/env.txt
scripts/netns-hosts up 2 --prefix gsr --rxe
rdma link >> $out/env.txt
gid_of() {  # device, IPv4 address: the index of its RoCE v2 GID for that address
  local want g
  want=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' ${2//./ })
  for g in /sys/class/infiniband/$1/ports/1/gids/*; do
    [ "$(cat "$g")" = "$want" ] && [ "$(cat /sys/class/infiniband/$1/ports/1/gid_attrs/types/${g##*/} 2>/dev/null)" = "RoCE v2" ] \
      && { echo "${g##*/}"; return; }
  done
}
ibw() {  # name, server prefix, server device, client prefix, client device, server address
  local gs gc
  gs=$(gid_of "$3" "$6"); gc=$(gid_of "$5" "$(if [ "$3" = "$5" ]; then echo "$6"; else echo 10.231.0.2; fi)")
  $2 ib_write_bw -d "$3" -x "$gs" -s 262144 -n 1000 --report_gbits > $out/$1-server.txt 2>&1 &
  sleep 3
  $4 ib_write_bw -d "$5" -x "$gc" -s 262144 -n 1000 --report_gbits "$6" > $out/$1.txt 2>&1
  wait
  echo "$1: $(grep -E '^ *262144' $out/$1.txt)"
}
base="-Xmx256m -XX:MaxDirectMemorySize=700m -XX:+UseSerialGC -Dgradsync.rdma.connect.timeout.ms=300000 -Dgradsync.rendezvous.timeout.ms=300000 -Dgradsync.rendezvous.handshake.timeout.ms=300000"
allreduce() {  # name, gradsync-run options
  local t0=$(date +%s) name=$1; shift
  GRADSYNC_JAVA_OPTS="$base" timeout 400 examples/bin/gradsync-run --deadline 380 -n 2 "$@" -- \
    examples/bin/allreduce-perf -a 3 --jit_warmup 0 --algo ring --transport rdma -b 64M -e 64M -n 3 -w 1 -c 0 --timeout 300 \
    > $out/$name.txt 2>&1
  echo "status $? in $(( $(date +%s) - t0 )) s" >> $out/$name.txt
  echo "$name: $(grep -E '^\[0\] +67108864' $out/$name.txt)"
}
for round in 1 2 3; do
  ibw ibw-netns-$round "ip netns exec gsr0" gsrrxe0 "ip netns exec gsr1" gsrrxe1 10.231.0.1
  (unset GRADSYNC_RDMA_ADDR GRADSYNC_RDMA_DEVICE
   allreduce gradsync-netns-$round --nnodes 2 --node-prefix "ip netns exec gsr{node}" --master-addr 10.231.0.1 --master-port 29620)
  ibw ibw-rxe0-$round "" rxe0 "" rxe0 10.232.0.1
  allreduce gradsync-rxe0-$round
done
scripts/netns-hosts down 2 --prefix gsr
