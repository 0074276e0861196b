#!/usr/bin/env bash
# Installs what a fresh Debian/Ubuntu machine lacks to build and test gradsync: a JDK (17+) and Maven,
# and the network tools the multi-host tests use to simulate hosts in network namespaces (ip, nft, ping).
# Sourced by the other scripts; safe to run again (installs nothing that is already there).
set -euo pipefail

need=()
command -v javac >/dev/null 2>&1 || need+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null 2>&1 || need+=(maven)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v nft >/dev/null 2>&1 || need+=(nftables)
command -v ping >/dev/null 2>&1 || need+=(iputils-ping)

if [ ${#need[@]} -gt 0 ]; then
  echo "gradsync setup: installing ${need[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -q
  $sudo apt-get install -y -q --no-install-recommends "${need[@]}"
fi
