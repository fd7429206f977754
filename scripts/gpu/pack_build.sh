#!/usr/bin/env bash
# Copies an existing CUDA-enabled build (default build/) into .devcarry/ for the GPU machine: the
# grist binary, the Python package, the loader and ckptio test binaries, and the non-system shared
# libraries they load. Faster than scripts/gpu/carry.sh when build/ is already current.
set -euo pipefail
cd "$(dirname "$0")/../.."
SRC=${1:-build}
# run_all.sh runs the crash-point tests, which need the test hooks (scripts/test.sh builds with them).
if ! grep -q '^GRIST_TEST_HOOKS:BOOL=ON$' "$SRC/CMakeCache.txt"; then
  echo "pack_build.sh: $SRC was configured without -DGRIST_TEST_HOOKS=ON (the GPU run's crash-point" \
       "tests need it); reconfigure it so, or use scripts/gpu/carry.sh" >&2
  exit 1
fi
rm -rf .devcarry && mkdir -p .devcarry/build/tests/loader .devcarry/build/tests/ckptio .devcarry/lib
cp "$SRC/grist" .devcarry/build/
cp -r "$SRC/python" .devcarry/build/
cp "$SRC/tests/loader/loader_test" .devcarry/build/tests/loader/
cp "$SRC/tests/ckptio/ckptio_test" .devcarry/build/tests/ckptio/
for b in .devcarry/build/grist .devcarry/build/python/grist/libgrist_capi.so .devcarry/build/tests/*/*_test; do
  ldd "$b" | awk '/=> \//{print $3}'
done | sort -u | grep -vE '/(libc|libm|libstdc\+\+|libgcc_s|ld-linux-x86-64|libpthread|libdl|librt|libcuda)\.so' \
  | while read -r lib; do cp -L "$lib" .devcarry/lib/; done
du -sh .devcarry
