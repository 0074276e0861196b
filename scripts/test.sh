#!/usr/bin/env bash
# Builds gradsync and runs the whole test suite: unit, operator, failure and correctness-matrix tests,
# multi-process, network-namespace and launcher tests (mpirun, torchrun, srun: scripts/setup.sh installs them)
# (mvn verify), then the RDMA tests, which need an RDMA device,
# inside a throw-away soft-RoCE VM (rdma-transport/softroce/run-tests; see rdma-transport/softroce/README.md).
# Between the two, scripts/check-consumer.sh builds and runs a user's project against the installed artifacts.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh test
# -Dgradsync.native.required=true: here a libdisni that cannot be built is an error, not a warning
mvn -B -Dgradsync.native.required=true verify "$@"
# A fresh Maven project imports gradsync-bom, depends on gradsync-core + gradsync-aeron-transport and runs a
# 2-rank AllReduce against the artifacts installed into a private local repository (about 30 s).
scripts/check-consumer.sh
exec rdma-transport/softroce/run-tests --no-build
