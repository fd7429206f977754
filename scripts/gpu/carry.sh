#!/usr/bin/env bash
# Prepares what a GPU machine without Debian's -dev packages needs to run grist's CUDA paths: a
# Release build with CUDA (CUDA::cudart_static, so no CUDA runtime is needed there beyond the
# driver) and the shared libraries its binaries load, collected into .devcarry/ (git-ignored).
# On the GPU machine: scripts/gpu/run_all.sh, with .devcarry carried along.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=.devcarry/build
# With the test hooks: run_all.sh runs the crash-point tests there.
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGRIST_TEST_HOOKS=ON >/dev/null
cmake --build "$BUILD" -j "${GRIST_JOBS:-$(nproc)}"
mkdir -p .devcarry/lib
# Every non-system shared library the binaries and the Python C ABI library load.
bins=("$BUILD/grist" "$BUILD"/python/grist/libgrist_capi.so)
while IFS= read -r -d '' t; do bins+=("$t"); done < <(find "$BUILD/tests" -type f -perm -u+x -name '*_test' -print0)
for b in "${bins[@]}"; do
  ldd "$b" | awk '/=> \//{print $3}'
done | sort -u | grep -vE '/(libc|libm|libstdc\+\+|libgcc_s|ld-linux-x86-64|libpthread|libdl|librt|libcuda)\.so' \
  | while read -r lib; do cp -L "$lib" .devcarry/lib/; done
# Keep only what the GPU run needs from the build tree.
find "$BUILD" -name '*.o' -delete
find "$BUILD" -name '*.a' -delete
du -sh .devcarry
