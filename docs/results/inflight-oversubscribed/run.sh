#!/bin/bash
# The Flux operator's collectives in flight when ranks outnumber the cores: flux-perf at 200 x 16 KiB (the cell the
# limit moves; larger gradients run one after another by gradsync.inflight.bytes anyway) with --inflight 8 and 2 in
# turn, 4 ranks over shm and aeron-ipc (processes under gradsync-run) and over local (threads), and 2 ranks over shm
# (not oversubscribed on 2 cores), ROUNDS interleaved rounds, every gradient checked.
# Usage: [ROUNDS=2] run.sh [OUTPUT_DIR]   (after `mvn -DskipTests package`)
set -euo pipefail
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
out=${1:-docs/results/inflight-oversubscribed}
mkdir -p "$out"
steps="-n 100 -w 300"
for round in $(seq 1 "${ROUNDS:-2}"); do
  for m in 8 2; do
    for transport in shm aeron-ipc; do
      # shellcheck disable=SC2086
      examples/bin/gradsync-run -n 4 -- examples/bin/flux-perf --transport $transport --inflight $m $steps 200x16K \
        > "$out/$transport-n4-inflight$m-$round.txt" 2>&1
    done
    # shellcheck disable=SC2086
    examples/bin/flux-perf --transport local --ranks 4 --inflight $m $steps 200x16K > "$out/local-n4-inflight$m-$round.txt" 2>&1
    # shellcheck disable=SC2086
    examples/bin/gradsync-run -n 2 -- examples/bin/flux-perf --transport shm --inflight $m $steps 200x16K \
      > "$out/shm-n2-inflight$m-$round.txt" 2>&1
  done
done
sed -i "s|$PWD/||g" "$out"/*.txt
