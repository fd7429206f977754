"""GPU checkpoint figures for the README: GPU tensors of several GB saved with grist.ckpt (D2H on a
side stream into pinned staging, overlapped with O_DIRECT io_uring writes) and loaded back to the
GPU, beside the peers measured in the same run: the bare device-to-host copy into pinned memory (the
snapshot floor), torch.save (+fsync) and torch.load(map_location="cuda").

    PYTHONPATH=build/python python3 bench/python/gpu/ckpt_gpu.py --dir /tmp/ckpt-bench --gib 8
"""

import argparse
import os
import shutil
import statistics
import sys
import time

import torch

import grist
from grist import ckpt


def timed(fn):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t0, out


def fsync_path(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--gib", type=float, default=8.0, help="checkpoint size in GiB")
    ap.add_argument("--tensors", type=int, default=16)
    ap.add_argument("--repetitions", type=int, default=3)
    ap.add_argument("--queue-depth", type=int, default=16)
    ap.add_argument("--block-size", type=int, default=8 << 20)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("ckpt_gpu.py: no CUDA device; nothing to measure", file=sys.stderr)
        return 2
    os.makedirs(args.dir, exist_ok=True)
    dev = torch.device("cuda")
    total = int(args.gib * (1 << 30))
    per = total // args.tensors // 2  # bf16 elements per tensor
    g = torch.Generator(device=dev).manual_seed(0)
    state = {"model": {f"layers.{i}.weight": torch.randn(per, device=dev, dtype=torch.float32,
                                                          generator=g).to(torch.bfloat16)
                       for i in range(args.tensors)}}
    nbytes = per * 2 * args.tensors
    gb = nbytes / 1e9
    print(f"grist {grist.__version__}, torch {torch.__version__}, {torch.cuda.get_device_name()}, "
          f"native CUDA: {ckpt.cuda_available()}, {nbytes / (1 << 30):.2f} GiB in {args.tensors} "
          f"bf16 tensors, dir {args.dir}")

    pinned = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)

    def d2h():
        off = 0
        for t in state["model"].values():
            n = t.numel() * 2
            pinned[off:off + n].copy_(t.view(torch.uint8), non_blocking=True)
            off += n

    res = {k: [] for k in ["d2h", "blocked", "save", "torch_save", "load", "torch_load"]}
    for r in range(args.repetitions + 1):  # the first round warms up (staging arena, pinning)
        path = os.path.join(args.dir, f"step-{r}")
        shutil.rmtree(path, ignore_errors=True)
        t_d2h, _ = timed(d2h)
        t0 = time.perf_counter()
        h = ckpt.save(state, path, queue_depth=args.queue_depth, block_size=args.block_size)
        t_blocked = time.perf_counter() - t0
        h.wait()
        t_save = time.perf_counter() - t0
        t_load, back = timed(lambda: ckpt.load(path, device="cuda"))
        for k, v in state["model"].items():
            if not torch.equal(back["model"][k], v):
                print(f"MISMATCH in {k}", file=sys.stderr)
                return 1
        del back
        pt = os.path.join(args.dir, f"torch-{r}.pt")
        t0 = time.perf_counter()
        torch.save(state, pt)
        fsync_path(pt)
        t_tsave = time.perf_counter() - t0
        t_tload, back = timed(lambda: torch.load(pt, map_location="cuda"))
        del back
        os.unlink(pt)
        shutil.rmtree(path, ignore_errors=True)
        if r == 0:
            continue
        res["d2h"].append(t_d2h)
        res["blocked"].append(t_blocked)
        res["save"].append(gb / t_save)
        res["torch_save"].append(gb / t_tsave)
        res["load"].append(gb / t_load)
        res["torch_load"].append(gb / t_tload)
    med = {k: statistics.median(v) for k, v in res.items()}
    print()
    print("| figure | grist (median) | peer | peer (median) | ratio | target |")
    print("|---|---|---|---|---|---|")
    print(f"| save GPU tensors, published | {med['save']:.3f} GB/s | torch.save + fsync | "
          f"{med['torch_save']:.3f} GB/s | {med['save'] / med['torch_save']:.2f}x | >= 2x |")
    print(f"| caller blocked (blocking=False) | {med['blocked']:.3f} s | D2H into pinned memory | "
          f"{med['d2h']:.3f} s | {med['blocked'] / med['d2h']:.2f}x | <= 1.2x |")
    print(f"| load to GPU, verified | {med['load']:.3f} GB/s | torch.load(map_location=cuda) | "
          f"{med['torch_load']:.3f} GB/s | {med['load'] / med['torch_load']:.2f}x | - |")
    print(f"| D2H bandwidth (info) | {gb / med['d2h']:.1f} GB/s | | | | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
