#!/bin/bash
# The elastic-training measurements in docs/training.md ("Elastic: a rank lost mid-epoch"), remade by running this
# script from anywhere in the checkout after `mvn -DskipTests package`; the outputs land beside it.
# LeNet-5 on Fashion-MNIST, 4 processes over auto (shared memory), 2 epochs of 937 steps at global batch 64, the
# elastic loop undisturbed, then with rank 2 and with rank 0 SIGKILLed at step 468 (the middle of epoch 1), and with
# rank 2 killed there and restarted by gradsync-run; twice each, alternating.
set -u
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"  # the checkout this script lies in
out=docs/results/elastic
run() { local name=$1; shift; { echo "\$ $*"; /usr/bin/time -f "wall %e s" "$@"; } > "$out/$name.txt" 2>&1; }
train=(examples/bin/train-fashion-mnist --epochs 2 --global-batch 64 --transport auto --check-every 100 --elastic)
for rep in 1 2; do
  run undisturbed-$rep examples/bin/gradsync-run -n 4 --min-ranks 3 -- "${train[@]}"
  run kill-rank2-$rep examples/bin/gradsync-run -n 4 --min-ranks 3 -- "${train[@]}" --kill-rank 2 --kill-at-step 468
  run kill-rank0-$rep examples/bin/gradsync-run -n 4 --min-ranks 3 -- "${train[@]}" --kill-rank 0 --kill-at-step 468
  run restart-rank2-$rep examples/bin/gradsync-run -n 4 --min-ranks 3 --max-restarts 1 -- "${train[@]}" --kill-rank 2 \
    --kill-at-step 468
done
# The outputs name files by the checkout's path (DJL logs where it found its native library): made relative.
sed -i "s|$PWD/||g" "$out"/*.txt
