#!/usr/bin/env bash
# FSDP2 on the GPU with grist.Loader + grist.ckpt (examples/train_fsdp.py, NCCL): train at every GPU
# of the machine, resume from its step-6 checkpoint at half the GPUs and at all of them again.
# What to look for: "resumed from ... saved by N rank(s), now M" and, for steps 7..12, the same
# losses in all three logs (bit for bit at the same world size; within ~1e-4 relative at half).
# Then the sharded round trips of tests/python/test_ckpt_dist.py (CPU/gloo ranks on this host).
#   scripts/gpu/ckpt_fsdp.sh            (PYTHONPATH must hold the build's python/ folder)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${GRIST_GPU_OUT:-gpu-out}
mkdir -p "$out"
n=$(nvidia-smi -L | wc -l)
half=$(( n > 1 ? n / 2 : 1 ))
tmp=$(mktemp -d)
run() {  # world dir
  python3 -m torch.distributed.run --standalone --nproc-per-node "$1" examples/train_fsdp.py \
    --device cuda --ckpt-dir "$2" --steps 12 --ckpt-every 6 --global-batch 16 --micro-batch 2 \
    --dim 256 --loss-log "$2.log"
}
run "$n" "$tmp/a"
for w in "$half" "$n"; do
  mkdir -p "$tmp/b$w"
  cp -r "$tmp/a/step-00000006" "$tmp/a/release" "$tmp/b$w/"
  run "$w" "$tmp/b$w"
done
for f in "$tmp"/*.log; do echo "== $f"; cat "$f"; done | tee "$out/ckpt_fsdp.txt"
python3 -m unittest -v tests/python/test_ckpt_dist.py tests/python/test_ckpt_export.py 2>&1 | tail -8 \
  | tee -a "$out/ckpt_fsdp.txt"
rm -rf "$tmp"
