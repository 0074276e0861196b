#!/usr/bin/env bash
# Regenerates the JNI headers in this folder from the DiSNI jar's class files (not from DiSNI's sources, which
# are not needed): javap lists the native methods of NativeDispatcher and NativeAffinity, a stub class with the
# same declarations is written, and `javac -h` emits the prototypes. The C sources include these headers, so a
# native whose Java signature changes no longer compiles.
# Usage: regen-headers.sh path/to/disni-2.1.jar
set -euo pipefail
jar=${1:?usage: $0 disni.jar}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
stub() { # class-name, package
  local cls=$1 pkg=${1%.*} simple=${1##*.}
  mkdir -p "$work/src/${pkg//.//}"
  {
    echo "package $pkg; public class $simple {"
    javap -p -cp "$jar" "$cls" | grep ' native ' | sed -E 's/ throws [a-zA-Z0-9_.]+//' |
      awk '{ match($0, /\(([^)]*)\)/); args = substr($0, RSTART + 1, RLENGTH - 2); n = split(args, a, /, */); out = "";
             for (i = 1; i <= n; i++) if (a[i] != "") out = out (i > 1 ? ", " : "") a[i] " a" i;
             sub(/\([^)]*\)/, "(" out ")"); print }'
    echo "}"
  } > "$work/src/${pkg//.//}/$simple.java"
}
stub com.ibm.disni.verbs.impl.NativeDispatcher
stub com.ibm.disni.util.NativeAffinity
javac -h "$here" -d "$work/classes" $(find "$work/src" -name '*.java')
echo "regenerated: $(ls "$here"/*.h | xargs -n1 basename | tr '\n' ' ')"
