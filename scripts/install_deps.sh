#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# scripts/install_deps.sh — installs the Debian packages MoonEP needs to
# build and test, and only those that are missing. As root it runs apt-get;
# otherwise it prints the missing packages and the command to install them,
# and fails. MOONEP_SKIP_DEPS=1 skips the check (e.g. a Spack environment).
set -euo pipefail

packages=(
  cmake ninja-build g++
  libtrilinos-kokkos-dev libtrilinos-kokkos-kernels-dev
  catch2 nlohmann-json3-dev
  libopenmpi-dev openmpi-bin
  python3-cffi-backend  # spack/test_spack.sh: Spack's concretizer (clingo)
)

if [[ "${MOONEP_SKIP_DEPS:-0}" == 1 ]]; then
  echo "install_deps.sh: MOONEP_SKIP_DEPS=1, not checking packages"
  exit 0
fi
if ! command -v dpkg >/dev/null 2>&1; then
  echo "install_deps.sh: not a Debian system; make sure the equivalents of these are installed: ${packages[*]}" >&2
  exit 0
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg -s "$p" 2>/dev/null | grep -q '^Status: install ok installed'; then
    missing+=("$p")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install_deps.sh: all needed Debian packages are installed"
  exit 0
fi

if [[ "$(id -u)" -ne 0 ]]; then
  echo "install_deps.sh: missing Debian packages: ${missing[*]}" >&2
  echo "install_deps.sh: install them with:" >&2
  echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi

echo "install_deps.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y "${missing[@]}"
