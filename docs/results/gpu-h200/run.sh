#!/usr/bin/env bash
# How the files here were made. On the build machine: scripts/gpu-check --build-only (the bundle), then, as one call
# of a lent GPU machine (one NVIDIA H200, driver 580.159.04, CUDA 13.0), from the repository root, $OUT being where
# the machine's files come back from:
#   gpu-check-bundle/run; s=$?; (python3 scripts/gpu-gloo.py; python3 scripts/gpu-baseline.py) > $OUT/python.txt 2>&1; exit $s
# -> environment.txt, 1-smoke.log .. 5-processes.log (kept here as .txt: git ignores *.log), summary.txt, and
#    python.txt: torch.distributed's Gloo AllReduce of CUDA tensors, then PyTorch's copy and add, on the same card.
# other-start-4-allreduce.txt: stage 4 of gpu-check-bundle/run on another start of the same kind of machine, the
#    same day, with the pairwise direct AllReduce the default and one-wave grids (the code before the one pass).
# mps/: one call of another start, the same code but the check's smoke and correctness stages:
#   gpu-check-bundle/run --stages benchmark,allreduce,processes      (-> processes-without-mps.txt)
#   export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mpslog; mkdir -p /tmp/mps /tmp/mpslog
#   nvidia-cuda-mps-control -d; OUT=$OUT/mps gpu-check-bundle/run --stages processes; echo quit | nvidia-cuda-mps-control
#                                                                     (-> processes-with-mps.txt)
set -euo pipefail
cd "$(dirname "$0")/../../.."
status=0
gpu-check-bundle/run || status=$?
out=${OUT:-gpu-check-out}
(python3 scripts/gpu-gloo.py; python3 scripts/gpu-baseline.py) > "$out/python.txt" 2>&1
exit $status
