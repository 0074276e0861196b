#!/bin/bash
# The DJL measurements in docs/training.md ("DJL: accuracy and cost"), remade by running this script from anywhere in
# the checkout after `mvn -DskipTests package` (examples/target must hold the jars); the outputs land beside it.
set -u
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"  # the checkout this script lies in
out=docs/results/djl
run() { local name=$1; shift; { echo "\$ $*"; /usr/bin/time -f "wall %e s" "$@"; } > "$out/$name.txt" 2>&1; }
# Accuracy: the EasyTrain program with DataParallel, 1 and 4 processes, 2 epochs at global batch 64.
run fit-n1 examples/bin/gradsync-run -n 1 -- examples/bin/fit-fashion-mnist --epochs 2 --global-batch 64
run fit-n4 examples/bin/gradsync-run -n 4 -- examples/bin/fit-fashion-mnist --epochs 2 --global-batch 64
# Cost: 2 processes, one epoch each, the EasyTrain program against the hand-written loop, alternating.
for rep in 1 2 3; do
  run overhead-fit-$rep examples/bin/gradsync-run -n 2 -- examples/bin/fit-fashion-mnist --epochs 1 --global-batch 64
  run overhead-loop-$rep examples/bin/gradsync-run -n 2 -- examples/bin/train-fashion-mnist --epochs 1 --global-batch 64 \
    --transport auto --check-every 0
done
# ResNet-20 (65 gradient tensors, batch normalisation after every convolution) in buckets of 256 KiB, 1 and 2 processes.
for n in 1 2; do
  run resnet-n$n examples/bin/gradsync-run -n $n -- examples/bin/fit-fashion-mnist --model resnet20 --epochs 1 \
    --train-samples 9600 --test-samples 2000 --global-batch 64 --bucket-kb 256
done
# The outputs name files by the checkout's path (DJL logs where it found its native library): made relative.
sed -i "s|$PWD/||g" "$out"/*.txt
