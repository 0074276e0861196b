#!/usr/bin/env bash
# Builds gradsync and runs the whole test suite: unit, operator, failure and correctness-matrix tests,
# multi-process, network-namespace and launcher tests (mpirun, torchrun, srun: scripts/setup.sh installs them)
# (mvn verify), then the RDMA tests, which need an RDMA device,
# inside a throw-away soft-RoCE VM (rdma-transport/softroce/run-tests; see rdma-transport/softroce/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh test
# -Dgradsync.native.required=true: here a libdisni that cannot be built is an error, not a warning
mvn -B -Dgradsync.native.required=true verify "$@"
exec rdma-transport/softroce/run-tests --no-build
