#!/usr/bin/env bash
# How the files here were made. On the build machine: scripts/gpu-check --build-only (the bundle), then calls of a lent
# GPU machine (one NVIDIA H200, driver 580.159.04, CUDA 13.0), from the repository root, $OUT being where the
# machine's files come back from:
#   gpu-check-bundle/run
#     -> environment.txt, summary.txt, 1-smoke.txt .. 5-processes.txt (git ignores *.log): the code with the caller's
#        stream, the loop allocating a new buffer every step, and the 16-bit one pass accumulating in float32
#   gpu-check-bundle/run --stages correctness,benchmark
#     -> again-summary.txt, again-2-correctness.txt, again-3-benchmark.txt: another start, after the 16-bit one pass
#        narrowed two results with one conversion (the kernels as committed)
#   gpu-check-bundle/run --stages processes
#     -> windows-summary.txt, windows-5-processes.txt: a third start, after device buffers that CUDA does not export
#        (under 2 MiB) went through windows of the device's memory, and the check forced direct at every size
set -euo pipefail
cd "$(dirname "$0")/../../../.."
gpu-check-bundle/run "$@"
