#!/bin/bash
# The overlap and trace measurements in docs/training.md ("Overlap with backward", "Trace on vs off"), remade by
# running this script from anywhere in the checkout after `mvn -DskipTests package` (examples/target must hold the
# jars); the outputs land beside it. Each job's traces go to a fresh private directory, read by TraceStats and deleted.
set -u
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"  # the checkout this script lies in
out=docs/results/overlap
# overlap N NAME MODES STEPS: one job of N ranks running MODES interleaved step by step, then the hidden fractions
overlap() {
  local n=$1 name=$2 modes=$3 steps=$4 trace traced
  trace=$(mktemp -d)
  traced=${modes//,/ }; traced=${traced//bucket-notrace/}  # the modes with a timeline
  {
    echo "\$ uptime"; uptime
    echo "\$ GRADSYNC_TRACE=\$T examples/bin/gradsync-run -n $n -- examples/bin/overlap-mlp --mode $modes --bucket-mb 2 --steps $steps --warmup 2"
    GRADSYNC_TRACE=$trace /usr/bin/time -f "wall %e s" examples/bin/gradsync-run -n "$n" -- examples/bin/overlap-mlp \
      --mode "$modes" --bucket-mb 2 --steps "$steps" --warmup 2
    echo "\$ examples/bin/run-example io.gradsync.examples.train.TraceStats \$T 2" $traced
    examples/bin/run-example io.gradsync.examples.train.TraceStats "$trace" 2 $traced
  } > "$out/$name.txt" 2>&1
  rm -rf "$trace"
}
overlap 2 modes-n2 bucket,per-gradient,after,bucket-notrace 15
overlap 4 modes-n4 bucket,per-gradient,after,bucket-notrace 15
overlap 2 trace-on-first bucket,bucket-notrace 40
overlap 2 trace-off-first bucket-notrace,bucket 40
sed -i "s|$PWD/||g" "$out"/*.txt
