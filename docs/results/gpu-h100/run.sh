#!/usr/bin/env bash
# How the files here were made. On the build machine: scripts/gpu-check (the bundle), then each line below as one
# call of a lent GPU machine (one NVIDIA H100 80GB HBM3, driver 580.159.04, CUDA 13.0), from the repository root,
# $OUT being where the machine's files come back from:
#   gpu-check-bundle/run                      -> environment.txt, 1-smoke.log .. 5-processes.log (kept here as .txt:
#                                                git ignores *.log), summary.txt
#   python3 scripts/gpu-gloo.py > $OUT/gloo.txt             (another start of the same kind of machine)
#   python3 scripts/gpu-baseline.py > $OUT/torch-baseline.txt (a third)
set -euo pipefail
cd "$(dirname "$0")/../../.."
case "${1:-check}" in
  check) gpu-check-bundle/run ;;
  gloo) python3 scripts/gpu-gloo.py ;;
  baseline) python3 scripts/gpu-baseline.py ;;
  *) echo "usage: run.sh [check|gloo|baseline]" >&2; exit 64 ;;
esac
