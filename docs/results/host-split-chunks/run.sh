#!/bin/bash
# The hierarchical AllReduce on 2 simulated hosts x 2 ranks (network namespaces: shared memory inside a host,
# Aeron UDP between), at the defaults a user gets (--transport auto, the algorithm chosen per size), with every
# phase's chunks cut to the whole call's smallest link (BEFORE: a checkout of the code before
# CollectiveContext.chunkBytes(group), built with `mvn -DskipTests package`) against this checkout's, where the
# phases inside a host send shared memory's slots. REPEATS interleaved pairs; root only (scripts/netns-hosts).
#   docs/results/host-split-chunks/run.sh BEFORE
set -euo pipefail
before=$(cd "${1:?usage: run.sh BEFORE_CHECKOUT}" && pwd)
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
out=docs/results/host-split-chunks
REPEATS=${REPEATS:-5}
export GRADSYNC_JOB_SECRET=${GRADSYNC_JOB_SECRET:-$(openssl rand -hex 32)}
scripts/netns-hosts up 2 --prefix ghs >/dev/null
trap 'scripts/netns-hosts down 2 --prefix ghs >/dev/null 2>&1 || true' EXIT
run() { # checkout label rep
  "$1"/examples/bin/gradsync-run -n 4 --nnodes 2 --node-prefix "ip netns exec ghs{node}" --master-addr 10.231.0.1 \
    --master-port 29430 --deadline 600 -- "$1"/examples/bin/allreduce-perf --transport auto -b 1M -e 64M -f 4 -n 10 -w 3 \
    --csv "$out/$2-$3.csv" > "$out/$2-$3.txt" 2>&1
}
rm -f "$out"/*.csv "$out"/*.txt
for rep in $(seq 1 "$REPEATS"); do
  run "$before" before "$rep"
  run . after "$rep"
done
sed -i "s|$before/||g; s|$PWD/||g" "$out"/*.txt
{ echo "before:"; python3 examples/bin/summarise-repeats.py "$out"/before-*.csv
  echo; echo "after:"; python3 examples/bin/summarise-repeats.py "$out"/after-*.csv; } | tee "$out/summary.md"
