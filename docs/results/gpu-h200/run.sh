#!/usr/bin/env bash
# How the files here were made. On the build machine: scripts/gpu-check --build-only (the bundle), then, as one call
# of a lent GPU machine (one NVIDIA H200, driver 580.159.04, CUDA 13.0), from the repository root, $OUT being where
# the machine's files come back from:
#   gpu-check-bundle/run; s=$?; (python3 scripts/gpu-gloo.py; python3 scripts/gpu-baseline.py) > $OUT/python.txt 2>&1; exit $s
# -> environment.txt, 1-smoke.log .. 5-processes.log (kept here as .txt: git ignores *.log), summary.txt, and
#    python.txt: torch.distributed's Gloo AllReduce of CUDA tensors, then PyTorch's copy and add, on the same card.
# other-start-4-allreduce.txt: stage 4 of gpu-check-bundle/run on another start of the same kind of machine, the
#    same day, with the pairwise direct AllReduce the default (the code before DirectAllReduce's one pass).
set -euo pipefail
cd "$(dirname "$0")/../../.."
status=0
gpu-check-bundle/run || status=$?
out=${OUT:-gpu-check-out}
(python3 scripts/gpu-gloo.py; python3 scripts/gpu-baseline.py) > "$out/python.txt" 2>&1
exit $status
