#!/usr/bin/env bash
# Installs everything grist needs: Debian 12's packages, then the Python environment (.venv, or
# GRIST_VENV) with every Python dependency pinned in requirements.txt. Idempotent: packages already
# present are skipped, apt-get runs only when something is missing, and pip runs only when
# requirements.txt changed since the environment was last made. Run as root (or with sudo) for apt.
set -euo pipefail

PACKAGES=(
  # toolchain
  build-essential g++ clang libclang-rt-14-dev cmake ninja-build pkg-config git ca-certificates
  # libraries
  libabsl-dev libxxhash-dev libzstd-dev zstd zlib1g-dev liburing-dev libsimdjson-dev
  libutf8proc-dev libtomlplusplus-dev libcli11-dev libhwy-dev libsentencepiece-dev sentencepiece
  libgtest-dev libgmock-dev libbenchmark-dev pybind11-dev
  # Python side: Debian's python3 makes the virtual environment; fio is the disk's ceiling
  python3 python3-dev python3-venv fio
  # the embedded default corpus is assembled from these public-domain texts
  fortunes fortunes-de fortunes-es fortunes-it bible-kjv bible-kjv-text dict-gcide
)
# Tools installed beside PACKAGES but kept out of that list, whose packages' copyright files make
# the demo corpus (scripts/make_demo_corpus.sh --packages): a new one there changes its release id.
# ccache: the test command's builds share their objects through it, see scripts/test.sh.
TOOLS=(ccache)
PACKAGES+=("${TOOLS[@]}")
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
else
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
  echo "setup: packages done"
fi

# The Python environment. GRIST_SKIP_VENV=1 skips it (a C++-only build).
if [[ "${GRIST_SKIP_VENV:-0}" == 1 ]]; then exit 0; fi
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV=${GRIST_VENV:-$ROOT/.venv}
REQ=$ROOT/requirements.txt
STAMP=$VENV/.grist-requirements
want=$(sha256sum "$REQ" | cut -d' ' -f1)
if [[ -x "$VENV/bin/python" && -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]]; then
  echo "setup: Python environment $VENV up to date"
  exit 0
fi
if [[ ! -x "$VENV/bin/python" ]]; then
  echo "setup: creating the Python environment $VENV"
  /usr/bin/python3 -m venv "$VENV"
fi
echo "setup: installing requirements.txt into $VENV (torch and the benchmark peers; a few minutes)"
"$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null
# requirements.txt pins every package the environment holds (a complete lock), so it is installed
# as it is, without resolving dependencies again (which would add LitData's torchvision), and
# whatever an earlier lock installed that this one does not list is removed.
"$VENV/bin/python" -m pip install -q --no-deps -r "$REQ"
extra=$(comm -23 <("$VENV/bin/python" -m pip freeze --exclude-editable | sed 's/[=@ ].*//' | tr 'A-Z_' 'a-z-' | sort) \
                 <(sed -n 's/^\([A-Za-z0-9_.-]*\)==.*/\1/p' "$REQ" | tr 'A-Z_' 'a-z-' | sort))
if [[ -n "$extra" ]]; then
  echo "setup: removing packages requirements.txt no longer lists: $(echo $extra)"
  "$VENV/bin/python" -m pip uninstall -q -y $extra
fi
echo "$want" >"$STAMP"
echo "setup: Python environment done"
