#!/bin/sh
# rdma system set netns exclusive: can an rxe device be moved into the namespace of its netdev? (it cannot)
uname -r
set -x
rdma system set netns exclusive
rdma system show
ip netns add a; ip netns add b; ip netns add c
ip link add va type veth peer name vb
ip link set va netns a; ip link set vb netns b
ip netns exec a ip addr add 10.9.0.1/24 dev va; ip netns exec a ip link set va up; ip netns exec a ip link set lo up
ip netns exec b ip addr add 10.9.0.2/24 dev vb; ip netns exec b ip link set vb up; ip netns exec b ip link set lo up
ip netns exec a rdma link add rxea type rxe netdev va
ip netns exec b rdma link add rxeb type rxe netdev vb
rdma dev set rxea netns a; echo "set-a exit $?"
rdma dev set rxeb netns b; echo "set-b exit $?"
rdma link show
ip netns exec a rdma link show
ip netns exec b rdma link show
ip netns exec c rdma link show
ls /sys/class/infiniband; ip netns exec a ls /sys/class/infiniband; ip netns exec b ls /sys/class/infiniband; ip netns exec c ls /sys/class/infiniband
ip netns exec a cat /sys/class/infiniband/rxea/ports/1/state
ip netns exec a timeout 40 rping -s -a 10.9.0.1 -v -C 3 &
sleep 3
ip netns exec b timeout 30 rping -c -a 10.9.0.1 -v -C 3; echo "rping client exit $?"
wait
ip netns exec b rdma link delete rxeb; echo "delete exit $?"
ip netns exec b ls /sys/class/infiniband
ip netns del a; ip netns del b
sleep 1
rdma link show
echo done
