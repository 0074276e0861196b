#!/usr/bin/env bash
# Installs the baselines that examples/bin/compare-allreduce measures gradsync against, from the Debian/Ubuntu
# archive: Open MPI (mpirun, mpicc), PyTorch with its Gloo backend (python3-torch, used through /usr/bin/python3)
# and gnuplot for the plots. Installs only what is missing; safe to run again.
set -euo pipefail

pkgs=(openmpi-bin libopenmpi-dev python3-torch gnuplot-nox)
need=()
for p in "${pkgs[@]}"; do
  if dpkg -s "$p" 2>/dev/null | grep -q '^Status: install ok installed'; then
    echo "setup-baselines: $p already installed"
  elif [ "$p" = gnuplot-nox ] && command -v gnuplot >/dev/null 2>&1; then
    # gnuplot-x11 / gnuplot-qt provide the same binary; any of them will do.
    echo "setup-baselines: gnuplot already on PATH ($(command -v gnuplot)), skipping gnuplot-nox"
  else
    need+=("$p")
  fi
done

if [ ${#need[@]} -eq 0 ]; then
  echo "setup-baselines: nothing to install"
  exit 0
fi

echo "setup-baselines: installing ${need[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}"
echo "setup-baselines: installed ${need[*]}"
