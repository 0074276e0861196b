#!/usr/bin/env bash
# Proves that gradsync can be depended on from a fresh Maven project: installs gradsync (-DskipTests) into a
# private local repository, builds scripts/consumer (imports gradsync-bom, depends on gradsync-core and
# gradsync-aeron-transport without versions) against it, and runs a 2-rank AllReduce over Aeron as two
# processes with a torchrun-style environment. Exit status 0 when both ranks report a correct result.
#
# The private repository ($work/m2) keeps the machine's ~/.m2 untouched (no gradsync snapshot is installed
# there). Third-party artifacts come from the user's local repository (~/.m2/repository, or GRADSYNC_USER_REPO,
# used as a file:// repository ahead of Maven Central, so this runs offline once the build has run).
#   scripts/check-consumer.sh [work dir, default: a temporary directory removed at exit]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=${1:-}
if [ -z "$work" ]; then
  work=$(mktemp -d "${TMPDIR:-/tmp}/gradsync-consumer.XXXXXX")
  trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$work"
repo="$work/m2"
user_repo=${GRADSYNC_USER_REPO:-$HOME/.m2/repository}
settings="$work/settings.xml"
# The user's local repository as a repository consulted before Maven Central (so this runs offline once the
# build has run; what is missing there, such as the install plugin on a machine that never ran install, comes
# from Central).
cat > "$settings" <<XML
<settings>
  <profiles>
    <profile>
      <id>user-local</id>
      <repositories>
        <repository><id>user-local</id><url>file://$user_repo</url></repository>
      </repositories>
      <pluginRepositories>
        <pluginRepository><id>user-local</id><url>file://$user_repo</url></pluginRepository>
      </pluginRepositories>
    </profile>
  </profiles>
  <activeProfiles><activeProfile>user-local</activeProfile></activeProfiles>
</settings>
XML
mvn=(mvn -B -ntp -s "$settings" -Dmaven.repo.local="$repo")

echo "check-consumer: installing gradsync into $repo" >&2
"${mvn[@]}" -DskipTests -Dmaven.javadoc.skip -Dmaven.source.skip ${GRADSYNC_JDK22:+"-Dgradsync.jdk22=$GRADSYNC_JDK22"} install >"$work/install.log" 2>&1 \
  || { tail -40 "$work/install.log" >&2; echo "check-consumer: FAILED to install gradsync" >&2; exit 1; }
grep -E '^\[INFO\] (Installing|BUILD)' "$work/install.log" | grep -E 'gradsync-(bom|core|aeron)[^/]*\.(pom|jar)$|BUILD' >&2 || true
# sync-core's sources jar carries the JDK 22+ sources of its multi-release jar beside the others.
core_sources=$(ls "$repo"/io/gradsync/gradsync-core/*/gradsync-core-*-sources.jar 2>/dev/null | head -n 1)
if [ -z "$core_sources" ] || ! jar tf "$core_sources" | grep -qx 'META-INF/versions/22/io/gradsync/core/memory/MemoryAccess.java'; then
  echo "check-consumer: FAILED: gradsync-core's sources jar (${core_sources:-not installed}) lacks the JDK 22+ sources" >&2
  exit 1
fi

echo "check-consumer: building the consumer project" >&2
rm -rf "$work/consumer" && cp -r scripts/consumer "$work/consumer"
(cd "$work/consumer" && "${mvn[@]}" -q package dependency:build-classpath -Dmdep.outputFile=cp.txt -Dmdep.includeScope=runtime) \
  || { echo "check-consumer: FAILED to build the consumer project" >&2; exit 1; }
if grep -q 'aeron-all\|slf4j-jdk14\|log4j' "$work/consumer/cp.txt"; then
  echo "check-consumer: FAILED: the consumer's class path has aeron-all, an SLF4J binding or log4j: $(cat "$work/consumer/cp.txt")" >&2
  exit 1
fi

# A rendezvous port below the kernel's ephemeral range, so no other process's outgoing connection holds it by chance.
rendezvous_port() {
  local low=32768
  [ -r /proc/sys/net/ipv4/ip_local_port_range ] && read -r low _ < /proc/sys/net/ipv4/ip_local_port_range
  echo $(( 10000 + RANDOM % (low - 10000) ))
}

# Two ranks of the consumer: run_ranks NAME JAVA TRANSPORT [JVM flags...]; each rank's output in $work/NAME.rankR.log.
# A port another process listens on is not the consumer's failure: that run is tried again on another port (3 tries).
run_ranks() {
  local name=$1 java=$2 transport=$3
  shift 3
  local try port pids r ok
  for try in 1 2 3; do
    port=$(rendezvous_port) pids=() ok=0
    for r in 0 1; do
      RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 120 "$java" "$@" -cp "$cp" \
        example.TwoRankAllReduce "$transport" >"$work/$name.rank$r.log" 2>&1 &
      pids+=($!)
    done
    for r in 0 1; do
      wait "${pids[$r]}" || ok=1
      sed "s/^/[$name rank $r] /" "$work/$name.rank$r.log" >&2
      grep -q "allreduce OK" "$work/$name.rank$r.log" || ok=1
    done
    if [ $ok -ne 0 ] && grep -q "cannot serve the rendezvous.*Address already in use" "$work/$name".rank*.log; then
      echo "check-consumer: port $port is taken by another process; trying another" >&2
      continue
    fi
    return $ok
  done
  return 1
}

cp="$work/consumer/target/classes:$(cat "$work/consumer/cp.txt")"
export GRADSYNC_JOB_SECRET
GRADSYNC_JOB_SECRET=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
status=0
echo "check-consumer: running 2 ranks over aeron" >&2
run_ranks aeron java aeron --add-opens java.base/jdk.internal.misc=ALL-UNNAMED || status=1
# On JDK 22+ sync-core reaches memory through java.lang.foreign by default: shared memory then needs no flag
# and prints no warning (Aeron's Agrona still uses sun.misc.Unsafe, so that run is not held to this).
if [ -n "${GRADSYNC_JDK22:-}" ] && [ -x "$GRADSYNC_JDK22/bin/java" ]; then
  echo "check-consumer: running 2 ranks over shm on $("$GRADSYNC_JDK22/bin/java" -version 2>&1 | head -n 1), no flags" >&2
  run_ranks shm-jdk22 "$GRADSYNC_JDK22/bin/java" shm || status=1
  if grep -h "WARNING" "$work"/shm-jdk22.rank*.log >&2; then
    echo "check-consumer: FAILED: a JVM warning (above) on $GRADSYNC_JDK22 over shm" >&2
    status=1
  fi
fi
if [ $status -eq 0 ]; then
  echo "check-consumer: OK (gradsync-bom + gradsync-core + gradsync-aeron-transport from a fresh project, 2 ranks)" >&2
else
  echo "check-consumer: FAILED" >&2
fi
exit $status
