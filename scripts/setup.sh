#!/usr/bin/env bash
# Installs what a fresh Debian/Ubuntu machine lacks to build and test gradsync. Two levels:
#   source scripts/setup.sh demo   a JDK (17+) and Maven: all the demo (scripts/demo.sh) and a plain build need
#                                  (without gcc or rdma-core's headers the RDMA transport's native library is
#                                  skipped with a warning, rdma-transport/README.md)
#   source scripts/setup.sh        (or `test`) everything the test suite needs besides: the network tools the
#                                  multi-host tests use to simulate hosts in network namespaces (ip, nft, ping),
#                                  what rdma-transport's native library (libdisni) is compiled with: gcc, make and
#                                  rdma-core's headers (libibverbs-dev, librdmacm-dev, which bring the runtime
#                                  libraries libibverbs1, librdmacm1, ibverbs-providers), what the soft-RoCE guest of
#                                  the RDMA transport needs (QEMU, rdma-core, perftest; see below), and the real
#                                  launchers that LaunchersTest starts jobs with: Open MPI's mpirun, PyTorch's
#                                  torchrun and Slurm (see below).
# Sourced by the other scripts; safe to run again (installs nothing that is already there).
set -euo pipefail

_level=${1:-test}
case "$_level" in
  demo|test) ;;
  *) echo "scripts/setup.sh: unknown level '$_level' (demo or test)" >&2; return 2 2>/dev/null || exit 2 ;;
esac
need=()
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'ok installed'; }
command -v javac >/dev/null 2>&1 || need+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null 2>&1 || need+=(maven)
if [ "$_level" = test ]; then
  command -v ip >/dev/null 2>&1 || need+=(iproute2)
  command -v nft >/dev/null 2>&1 || need+=(nftables)
  command -v ping >/dev/null 2>&1 || need+=(iputils-ping)
  command -v gcc >/dev/null 2>&1 || need+=(gcc)
  command -v make >/dev/null 2>&1 || need+=(make)
  installed libc6-dev || need+=(libc6-dev)
  # The soft-RoCE guest (rdma-transport/softroce/run-in-guest): QEMU, busybox for its initramfs, rdma-core,
  # the verbs/rdma_cm tools and headers, and kmod/cpio to prepare Debian's kernel and the initramfs.
  for _pkg in qemu-system-x86 busybox-static rdma-core ibverbs-providers ibverbs-utils perftest rdmacm-utils \
           libibverbs-dev librdmacm-dev kmod cpio; do
    installed "$_pkg" || need+=("$_pkg")
  done
  # The launchers of aeron-transport's LaunchersTest (each skips, saying why, when its tool is missing).
  # Measured on this 2-core Debian 12 machine with an empty apt cache: openmpi-bin 5.8 s (5.6 MB download,
  # 19 MB installed); slurm-wlm and munge 5.2 s (3.6 MB, 13 MB); python3-torch 54 s (174 packages with its
  # dependencies, 150 MB download, 645 MB installed). torch is found in the system Python (/usr/bin/python3).
  for _pkg in openmpi-bin slurm-wlm munge python3-torch; do
    installed "$_pkg" || need+=("$_pkg")
  done
  # Fashion-MNIST (IDX files under /usr/share/datasets/fashion-mnist/) for examples' DJL training test and
  # examples/bin/train-fashion-mnist.
  installed dataset-fashion-mnist || need+=(dataset-fashion-mnist)
  # rdma-transport/load-in-chroot: loads libdisni in a chroot of an older Debian (the glibc baseline check).
  installed debootstrap || need+=(debootstrap)
  unset _pkg
fi
unset _level

if [ ${#need[@]} -gt 0 ]; then
  echo "gradsync setup: installing ${need[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -q
  $sudo apt-get install -y -q --no-install-recommends "${need[@]}"
fi
