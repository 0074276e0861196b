#!/usr/bin/env bash
# The direct allreduce (buffers from Communicator.allocate, allreduce-perf -R 1) against Open MPI's vader and
# gradsync's own auto with plain buffers, one interleaved session per table (docs/benchmarks.md, "Shared buffers").
set -euo pipefail
cd "$(dirname "$0")/../../.."
here=docs/results/shm-direct
# Large messages: the issue's goal sizes, 64 KiB to 256 MiB.
GRADSYNC_SHM_ALGO=auto examples/bin/compare-allreduce --ranks "2 4" -b 64K -e 256M -f 4 -n 20 -w 5 --repeats 3 \
    --only "mpi-shm gradsync-auto gradsync-direct" --out "$here/large"
# Small and medium messages, where direct's three rounds of messages meet the model's one: the threshold
# (the recorded session ran while gradsync.direct.min.bytes defaulted to 16 KiB; the default is 64 KiB since).
GRADSYNC_SHM_ALGO=auto examples/bin/compare-allreduce --ranks "2 4" -b 4K -e 1M -f 4 -n 500 -w 50 --repeats 3 \
    --only "mpi-shm gradsync-auto gradsync-direct" --out "$here/small"
