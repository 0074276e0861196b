#!/usr/bin/env bash
# Builds gradsync and runs the whole test suite (unit, operator, failure and correctness-matrix tests).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
exec mvn -B verify "$@"
