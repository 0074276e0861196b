#!/usr/bin/env bash
# Builds gradsync and runs the whole test suite: unit, operator, failure and correctness-matrix tests,
# multi-process, network-namespace and launcher tests (mpirun, torchrun, srun: scripts/setup.sh installs them)
# (mvn verify), then the RDMA tests, which need an RDMA device, inside a throw-away soft-RoCE VM
# (rdma-transport/softroce/run-tests; see rdma-transport/softroce/README.md), once more on a newer kernel for
# RDMA between network namespaces, then sync-core's suite on JDK 25
# (when installed), and last scripts/check-consumer.sh, which builds and runs a user's project against the
# installed artifacts. The VM runs right after verify: it uses the class path file that build wrote, which the
# later steps' builds rewrite (the consumer check's points into a private repository it deletes).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh test
jdk25=${GRADSYNC_JDK25:-$(ls -d /usr/lib/jvm/temurin-25* /usr/lib/jvm/java-25* 2>/dev/null | head -n 1 || true)}
# With a JDK 22+ at hand, sync-core's jar gets its java.lang.foreign classes (META-INF/versions/22), which the
# JDK 25 steps below use; without one it holds the JDK 17 classes only (sync-core/pom.xml, profile ffm).
ffm=()
if [ -n "$jdk25" ] && [ -x "$jdk25/bin/javac" ]; then
  ffm=("-Dgradsync.jdk22=$jdk25")
  export GRADSYNC_JDK22=$jdk25
fi
# -Dgradsync.native.required=true: here a libdisni that cannot be built is an error, not a warning
mvn -B -Dgradsync.native.required=true "${ffm[@]}" verify "$@"
rdma-transport/softroce/run-tests --no-build
# RDMA between network namespaces, each with its own rxe device (RdmaNamespacesTest, skipped above): the guest on
# trixie-backports' kernel, whose rxe serves namespaces (Debian 12's 6.1 connects nothing across them).
rdma-transport/softroce/run-tests --no-build --kernel trixie-backports -- --select-class io.gradsync.rdma.RdmaNamespacesTest
# The jar's libdisni must load on an older distribution (Debian 11: glibc 2.31, rdma-core 33) than the one it was
# built on: rdma-transport/load-in-chroot. It fails the run when the library does not load there (exit 1); when
# the chroot cannot be made (no root, no Temurin 25, Debian's mirror unreachable: exit 2) it says so and goes on.
if [ -n "$jdk25" ]; then
  set +e
  rdma-transport/load-in-chroot --jdk "$jdk25"
  chroot_status=$?
  set -e
  [ "$chroot_status" -ne 1 ] || exit 1
  [ "$chroot_status" -eq 0 ] || echo "gradsync test: libdisni's older-distribution check skipped (see above)" >&2
fi
# sync-core's suite again on JDK 25 where one is installed (Temurin under /usr/lib/jvm on these machines; the
# whole suite on 25 would double the time): GRADSYNC_TEST_JDK25=0 skips it, GRADSYNC_JDK25=<dir> picks the JDK.
# The AllReduce matrices of in-JVM ranks (AllReduceCorrectnessTest, HostLayoutAllReduceTest: algorithms over the
# in-JVM transport, whose kernels KernelsTest checks on 25) are left out on 25 through an excludes file, which keeps
# each surefire execution's own includes (-Dtest would replace them: the Vector API execution would run the whole
# suite a second time), unless
# GRADSYNC_JDK25_TESTS names what to run (surefire's -Dtest).
if [ "${GRADSYNC_TEST_JDK25:-1}" != 0 ] && [ -n "$jdk25" ] && [ -x "$jdk25/bin/java" ]; then
  echo "gradsync test: sync-core on $("$jdk25/bin/java" -version 2>&1 | head -n 1)" >&2
  if [ -n "${GRADSYNC_JDK25_TESTS:-}" ]; then
    selection=("-Dtest=$GRADSYNC_JDK25_TESTS")
  else
    excludes=$PWD/sync-core/target/jdk25-excludes.txt
    printf '%s\n' '**/AllReduceCorrectnessTest.java' '**/HostLayoutAllReduceTest.java' > "$excludes"
    selection=("-Dsurefire.excludesFile=$excludes")
  fi
  JAVA_HOME=$jdk25 mvn -B -pl sync-core -Dmaven.javadoc.skip -Dmaven.source.skip "${selection[@]}" verify
else
  echo "gradsync test: no JDK 25 found (GRADSYNC_JDK25); sync-core not run on 25" >&2
fi
# A fresh Maven project imports gradsync-bom, depends on gradsync-core + gradsync-aeron-transport and runs a
# 2-rank AllReduce against the artifacts installed into a private local repository (about 30 s); with
# GRADSYNC_JDK22 set (above), again on that JDK over shared memory, where it must print no warning.
exec scripts/check-consumer.sh
