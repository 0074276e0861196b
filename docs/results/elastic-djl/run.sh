#!/bin/bash
# The measurements of DataParallel.elastic() in docs/training.md ("Elastic with DataParallel"), remade by running
# this script from anywhere in the checkout after `mvn -DskipTests package`; the outputs land beside it.
# LeNet-5 on Fashion-MNIST with DJL's EasyTrain.fit (fit-fashion-mnist), 4 processes over auto (shared memory),
# 2 epochs of 937 steps at global batch 64: plain DataParallel and elastic undisturbed, then elastic with rank 2 and
# with rank 0 SIGKILLed when it reaches step 468 (the middle of epoch 1); twice each, alternating; then plain
# DataParallel from three other seeds, each beside both kills from the same seed; last rank 2 killed and restarted
# (--max-restarts 1), twice.
set -u
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"  # the checkout this script lies in
out=docs/results/elastic-djl
run() { local name=$1; shift; { echo "\$ $*"; /usr/bin/time -f "wall %e s" "$@"; } > "$out/$name.txt" 2>&1; }
fit=(examples/bin/fit-fashion-mnist --epochs 2 --global-batch 64 --transport auto --check-every 100)
for rep in 1 2; do
  run plain-$rep examples/bin/gradsync-run -n 4 -- "${fit[@]}"
  run elastic-$rep examples/bin/gradsync-run -n 4 --min-ranks 3 -- "${fit[@]}" --elastic
  run kill-rank2-$rep examples/bin/gradsync-run -n 4 --min-ranks 3 -- "${fit[@]}" --elastic --kill-rank 2 --kill-at-step 468
  run kill-rank0-$rep examples/bin/gradsync-run -n 4 --min-ranks 3 -- "${fit[@]}" --elastic --kill-rank 0 --kill-at-step 468
done
# How much the final accuracy moves from one undisturbed trajectory to another: other seeds (shuffle, initialisation).
# And each killed run from those seeds, to set the killed runs' accuracy beside that spread seed by seed.
for seed in 43 44 45; do
  run plain-seed$seed examples/bin/gradsync-run -n 4 -- "${fit[@]}" --seed $seed
  for killed in 2 0; do
    run kill-rank$killed-seed$seed examples/bin/gradsync-run -n 4 --min-ranks 3 -- "${fit[@]}" --seed $seed --elastic \
      --kill-rank $killed --kill-at-step 468
  done
done
for rep in 1 2; do
  run restart-rank2-$rep examples/bin/gradsync-run -n 4 --min-ranks 3 --max-restarts 1 -- "${fit[@]}" --elastic \
    --kill-rank 2 --kill-at-step 468
done
# The outputs name files by the checkout's path (DJL logs where it found its native library): made relative.
sed -i "s|$PWD/||g" "$out"/*.txt
