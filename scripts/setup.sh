#!/usr/bin/env bash
# Installs everything grist needs from Debian 12's packages. Idempotent: packages already present
# are skipped, and apt-get runs only when something is missing. Run as root (or with sudo).
set -euo pipefail

PACKAGES=(
  # toolchain
  build-essential g++ clang libclang-rt-14-dev cmake ninja-build pkg-config git ca-certificates
  # libraries
  libabsl-dev libxxhash-dev libzstd-dev zstd zlib1g-dev liburing-dev libsimdjson-dev
  libutf8proc-dev libtomlplusplus-dev libcli11-dev libhwy-dev libsentencepiece-dev sentencepiece
  libgtest-dev libgmock-dev libbenchmark-dev pybind11-dev
  # Python side (Debian's python3, not a pyenv one) and peers for the benchmarks
  python3 python3-dev python3-numpy python3-torch python3-sentencepiece fio
  # the embedded default corpus is assembled from these public-domain texts
  fortunes fortunes-de fortunes-es fortunes-it bible-kjv bible-kjv-text dict-gcide
)
if [[ -n "${GRIST_EXTRA_PACKAGES:-}" ]]; then
  read -r -a extra <<<"$GRIST_EXTRA_PACKAGES"
  PACKAGES+=("${extra[@]}")
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null; then SUDO="sudo"; else
    echo "setup: need root to install: ${missing[*]}" >&2
    exit 1
  fi
fi
echo "setup: installing ${#missing[@]} packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
