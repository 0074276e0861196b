#!/bin/sh
# Maven's entry to the native build (rdma-transport/pom.xml, compile phase):
#   build.sh <OUT dir> <JAVA_HOME> <required: true|false> <C compiler>
# Builds libdisni with make when gcc, make, a JDK's jni.h and rdma-core's headers are all here. When one is
# missing: with required=false (the default) prints a warning naming what is missing and writes
# <OUT>/libdisni.missing, which the jar carries and NativeLibrary.load() reports at run time; with
# required=true (scripts/test.sh, CI) fails the build.
set -u
out=$1 java_home=$2 required=${3:-false} cc=${4:-gcc}
here=$(cd "$(dirname "$0")" && pwd)
missing=""
add() { missing="${missing:+$missing; }$1"; }

command -v make >/dev/null 2>&1 || add "make (apt-get install make)"
if ! command -v "$cc" >/dev/null 2>&1; then
  add "a C compiler '$cc' (apt-get install gcc)"
else
  [ -f "$java_home/include/jni.h" ] || add "jni.h under $java_home/include (Maven runs on a JRE, not a JDK)"
  probe() { printf '#include <%s>\n' "$1" | "$cc" -E -x c - >/dev/null 2>&1; }
  probe infiniband/verbs.h || add "infiniband/verbs.h (apt-get install libibverbs-dev; RHEL: dnf install rdma-core-devel)"
  probe rdma/rdma_cma.h || add "rdma/rdma_cma.h (apt-get install librdmacm-dev; RHEL: dnf install rdma-core-devel)"
fi

mkdir -p "$out"
if [ -n "$missing" ]; then
  if [ "$required" = "true" ]; then
    echo "[ERROR] libdisni cannot be built (gradsync.native.required=true): missing $missing" >&2
    exit 1
  fi
  rm -f "$out/libdisni.so"
  printf '%s\n' "$missing" > "$out/libdisni.missing"
  cat >&2 <<MSG
[WARNING] ------------------------------------------------------------------------
[WARNING] gradsync-rdma-transport: libdisni (the RDMA transport's native library) is NOT built.
[WARNING] Missing: $missing
[WARNING] The jar is built without it; the 'rdma' transport will refuse to start and say so.
[WARNING] Everything else (core, aeron) is unaffected. -Dgradsync.native.required=true makes this an error.
[WARNING] ------------------------------------------------------------------------
MSG
  exit 0
fi
rm -f "$out/libdisni.missing"
exec make --no-print-directory -s -C "$here" OUT="$out" JAVA_HOME="$java_home" CC="$cc"
