#!/bin/bash
# JMH of the 16-bit kernels, scalar (a JVM without the Vector API module) against vector (the same JVM given
# --add-modules jdk.incubator.vector), on JDK 17 and JDK 25, against a copy and float32 SUM; interleaved, 2 rounds.
# JMH's forks inherit the launcher's JVM options: GRADSYNC_VECTOR_API=0 keeps run-example's module out of them, and
# the vector runs add it themselves.
# Usage: run.sh [OUTPUT_DIR]; writes one JMH text and CSV per round and configuration.
cd "$(dirname "$0")/../../.."
out=${1:-docs/results/kernels-vector}
export GRADSYNC_VECTOR_API=0
mkdir -p "$out"
jdk17=/usr/lib/jvm/java-17-openjdk-amd64
jdk25=$(ls -d /usr/lib/jvm/temurin-25* | head -1)
args=(-p type=BFLOAT16,FLOAT16,FLOAT32 -p op=SUM -p bytes=4096,67108864 -p mixed=false -wi 3 -w 1 -i 5 -r 1 -f 1 -rf csv)
vector=(-jvmArgsAppend "--add-modules jdk.incubator.vector")
for round in 1 2; do
  for jdk in 17 25; do
    home=jdk$jdk
    PATH=${!home}/bin:$PATH examples/bin/kernel-bench "${args[@]}" -rff "$out/jdk$jdk-scalar-$round.csv" \
        'KernelBenchmark.(copy|reduce)$' > "$out/jdk$jdk-scalar-$round.txt" 2>&1
    PATH=${!home}/bin:$PATH examples/bin/kernel-bench "${args[@]}" "${vector[@]}" -rff "$out/jdk$jdk-vector-$round.csv" \
        'KernelBenchmark.(copy|reduce)$' > "$out/jdk$jdk-vector-$round.txt" 2>&1
  done
done
