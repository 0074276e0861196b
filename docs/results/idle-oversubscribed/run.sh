#!/bin/bash
# Whether ranks that outnumber the host's CPUs should wait by yielding (Open MPI's choice when mpirun oversubscribes)
# rather than by gradsync's default backoff (spin, yield, then park): the AllReduce benchmark against Open MPI's
# shared memory, and a training loop whose ranks compute while others wait. Run from anywhere in the checkout after
# examples/compare/setup-baselines.sh and `mvn -DskipTests package`; the outputs land beside this script.
set -u
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
out=docs/results/idle-oversubscribed
examples/bin/compare-allreduce --ranks "4" -b 4K -e 4M -f 4 -n 100 -w 20 --repeats 3 \
  --only "gradsync-auto gradsync-auto-yield mpi-shm" --out "$out/compare"
# overlap-mlp: 60 layers of 256, buckets of 2 MiB reduced during backward (bucket) and after it (after), 4 ranks
for round in 1 2; do
  for idle in backoff yield; do
    { echo "\$ GRADSYNC_JAVA_OPTS=-Dgradsync.idle.strategy=$idle examples/bin/gradsync-run -n 4 -- examples/bin/overlap-mlp --mode bucket,after --bucket-mb 2 --steps 15 --warmup 2"
      GRADSYNC_JAVA_OPTS="-Dgradsync.idle.strategy=$idle" /usr/bin/time -f "wall %e s" examples/bin/gradsync-run -n 4 -- \
        examples/bin/overlap-mlp --mode bucket,after --bucket-mb 2 --steps 15 --warmup 2
    } > "$out/overlap-mlp-$idle-$round.txt" 2>&1
  done
done
sed -i "s|$PWD/||g" "$out"/*.txt "$out"/compare/*.* "$out"/compare/raw/*
