#!/bin/sh
# two namespaces, a veth pair, an rxe device on each end; can rdma_cm connect across them?
set -x
uname -r
ip netns add a; ip netns add b
ip link add va type veth peer name vb
ip link set va netns a; ip link set vb netns b
ip netns exec a ip addr add 10.9.0.1/24 dev va; ip netns exec a ip link set va up; ip netns exec a ip link set lo up
ip netns exec b ip addr add 10.9.0.2/24 dev vb; ip netns exec b ip link set vb up; ip netns exec b ip link set lo up
rdma system show
ip netns exec a rdma link add rxea type rxe netdev va
ip netns exec b rdma link add rxeb type rxe netdev vb
rdma link show
ip netns exec a rdma link show
ip netns exec b ping -c 2 10.9.0.1
sleep 2
ip netns exec a timeout 40 rping -s -a 10.9.0.1 -v -C 3 &
sleep 3
ip netns exec b timeout 30 rping -c -a 10.9.0.1 -v -C 3; echo "rping client exit $?"
wait
echo done
