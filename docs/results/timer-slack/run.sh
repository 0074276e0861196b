#!/usr/bin/env bash
# Whether the ranks' Linux timer slack (how late a timed park may end: 50 us by default) moves gradsync: its
# default against SLACK ns, interleaved, ROUNDS rounds of each stage. The slack is written by the shell that then
# becomes the command (/proc/$$/timerslack_ns: a process may set its own), and every process and thread started
# from it inherits it: gradsync-run, its ranks, their threads.
#   parks:     Park.java, how long a park of each backoff length really takes;
#   allreduce: N in NS ("2 4"), the README's launch (gradsync-run ... allreduce-perf --transport auto), whose
#              header prints the rank's slack;
#   training:  overlap-mlp at N = 4 (ranks computing while others wait: what a shorter sleep could cost them).
# Usage: run.sh [OUT_DIR [STAGE...]] (default: beside this script, every stage); ROUNDS, SLACK, NS from the
# environment.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
out=${1:-$here}
rounds=${ROUNDS:-3}
slack=${SLACK:-1000}
ns=${NS:-2 4}
export GRADSYNC_JOB_SECRET=${GRADSYNC_JOB_SECRET:-$(openssl rand -hex 32)}
stages=("${@:2}")
[ ${#stages[@]} -gt 0 ] || stages=(parks allreduce training)
mkdir -p "$out"

# with_slack SETTING FILE COMMAND...: runs COMMAND with that timer slack ('default': as inherited), output to FILE
with_slack() {
    local setting=$1 file=$2
    shift 2
    bash -c '[ "$1" = default ] || echo "$1" > /proc/$$/timerslack_ns; shift; exec "$@"' _ "$setting" "$@" > "$file" 2>&1
}

for stage in "${stages[@]}"; do
    for round in $(seq 1 "$rounds"); do
        for setting in default "$slack"; do
            echo "== $stage, round $round, timer slack $setting" >&2
            case $stage in
            allreduce)
                for n in $ns; do
                    with_slack "$setting" "$out/n$n-slack-$setting-round$round.txt" "$repo/examples/bin/gradsync-run" -n "$n" -- \
                        "$repo/examples/bin/allreduce-perf" --transport auto -b 4K -e 16M -f 4 -n 50 -w 10
                done ;;
            training)
                with_slack "$setting" "$out/overlap-mlp-slack-$setting-round$round.txt" "$repo/examples/bin/gradsync-run" -n 4 -- \
                    "$repo/examples/bin/overlap-mlp" --mode bucket,after --bucket-mb 2 --steps 15 --warmup 2 ;;
            parks)
                with_slack "$setting" "$out/parks-slack-$setting-round$round.txt" java "$here/Park.java" ;;
            *) echo "unknown stage $stage (parks, allreduce, training)" >&2; exit 2 ;;
            esac
        done
    done
done
