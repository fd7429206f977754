#!/usr/bin/env bash
# ckptio figures on the GPU machine (H200): the host-path caller-blocked time (C++ bench and
# grist.ckpt.save(blocking=False), each against a memcpy with the writer's copy thread count, plus
# in place vs staged), GPU tensors of several GB saved and loaded through
# grist.ckpt beside torch.save/torch.load and the bare D2H copy, then `grist bench ckpt` (host
# path: fio ceiling when installed, buffered write+fsync, torch.save; write amplification; blocked
# time with --async). Run from the repository root with the build carried in build/.
# Environment: GRIST_BUILD_DIR (default build), CKPT_DIR (default /tmp/grist-ckpt-bench),
# CKPT_GIB (default 8), PYTHON (default python3).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${GRIST_BUILD_DIR:-build}
DIR=${CKPT_DIR:-/tmp/grist-ckpt-bench}
GIB=${CKPT_GIB:-8}
PY=${PYTHON:-python3}
mkdir -p "$DIR"
echo "== machine"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
df -hT "$DIR" | tail -1
echo "== GPU tensors: grist.ckpt vs torch.save/torch.load (${GIB} GiB)"
PYTHONPATH="$BUILD/python" "$PY" bench/python/gpu/ckpt_gpu.py --dir "$DIR" --gib "$GIB"
echo "== host path: caller blocked with blocking=False, 4 GiB (C++ writer; target <= 1.2x memcpy)"
"$BUILD/grist" bench ckpt --dir "$DIR" --size 4G --async --no-peers --repetitions 5 | grep -E "^\|( figure|---| caller blocked| checkpoint write in place)|copy threads"
echo "== host path: the same through Python, grist.ckpt.save(blocking=False) vs memcpy (4 GiB)"
PYTHONPATH="$BUILD/python" "$PY" bench/python/gpu/ckpt_host_blocked.py --dir "$DIR" --gib 4 --reps 5
echo "== host path: grist bench ckpt (${GIB} GiB, async)"
"$BUILD/grist" bench ckpt --dir "$DIR" --size "${GIB}G" --async --repetitions 3 --python "$PY"
echo "== host path: 4 GiB write amplification, synchronous"
"$BUILD/grist" bench ckpt --dir "$DIR" --size 4G --repetitions 3 --no-peers
echo "== lab sweep (1 GiB)"
"$BUILD/grist" bench ckpt --dir "$DIR" --size 1G --sweep queue_depth=1,4,16,64 --repetitions 2
"$BUILD/grist" bench ckpt --dir "$DIR" --size 1G --sweep block_size=1M,4M,16M --repetitions 2
rm -rf "$DIR"
