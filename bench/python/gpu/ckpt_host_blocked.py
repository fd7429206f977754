"""Caller blocked time of grist.ckpt.save(blocking=False) on host (CPU) tensors, against a parallel
memcpy of the same bytes with the writer's copy thread count (the snapshot floor), interleaved
repetition by repetition; also the no-snapshot mode (snapshot=False) and blocking=True in place vs
staged. Prints one Markdown table. Usage: ckpt_host_blocked.py --dir D [--gib 4] [--reps 5]."""

import argparse
import ctypes
import os
import shutil
import statistics
import time

import torch

from grist import ckpt
from grist._native import lib


def page_aligned(nbytes):
    """A float32 tensor of nbytes whose data starts on a page (so it can be written in place)."""
    raw = torch.empty(nbytes // 4 + 1024, dtype=torch.float32)
    skip = (-raw.data_ptr() % 4096) // 4
    return raw[skip:skip + nbytes // 4]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--gib", type=float, default=4)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--tensors", type=int, default=16)
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    total = int(a.gib * (1 << 30)) // a.tensors // 4096 * 4096 * a.tensors
    per = total // a.tensors
    state = {f"layers.{i}.weight": page_aligned(per) for i in range(a.tensors)}
    for t in state.values():
        t.uniform_()  # first touch outside the measurement
    src = torch.empty(total // 4, dtype=torch.float32)
    dst = torch.empty(total // 4, dtype=torch.float32)
    src.uniform_()
    dst.zero_()
    threads = lib.grist_ckpt_default_copy_threads()
    blocked, mc, lazy, inplace, staged = [], [], [], [], []
    for r in range(a.reps + 1):
        path = os.path.join(a.dir, f"hb-{r:04d}")
        h = ckpt.save(state, path)  # blocking=False, snapshot
        h.wait()
        t0 = time.perf_counter()
        lib.grist_ckpt_memcpy(dst.data_ptr(), src.data_ptr(), total, threads)
        m = time.perf_counter() - t0
        h2 = ckpt.save(state, path + "-lazy", snapshot=False)
        h2.wait()
        t0 = time.perf_counter()
        ckpt.save(state, path + "-inplace", blocking=True)
        ip = time.perf_counter() - t0
        t0 = time.perf_counter()
        ckpt.save(state, path + "-staged", blocking=False).wait()
        st = time.perf_counter() - t0
        for p in (path, path + "-lazy", path + "-inplace", path + "-staged"):
            shutil.rmtree(p, ignore_errors=True)
        if r == 0:
            continue  # warm-up
        blocked.append(h.blocked_seconds)
        mc.append(m)
        lazy.append(h2.blocked_seconds)
        inplace.append(total / ip / 1e9)
        staged.append(total / st / 1e9)
    med = statistics.median
    gib = total / (1 << 30)
    print(f"host tensors: {gib:.2f} GiB in {a.tensors} tensors, {a.reps} repetitions (medians), "
          f"copy threads {threads}, {os.cpu_count()} CPUs")
    print("| figure | grist | peer | peer value | ratio | target |")
    print("|---|---|---|---|---|---|")
    print(f"| caller blocked, save(blocking=False) | {med(blocked):.4f} s | memcpy, {threads} threads |"
          f" {med(mc):.4f} s | {med(blocked) / med(mc):.2f}x | <= 1.2x |")
    print(f"| caller blocked, save(snapshot=False) | {med(lazy):.4f} s | memcpy, {threads} threads |"
          f" {med(mc):.4f} s | {med(lazy) / med(mc):.3f}x | - |")
    print(f"| save(blocking=True), in place | {med(inplace):.3f} GB/s | staged save + wait |"
          f" {med(staged):.3f} GB/s | {med(inplace) / med(staged):.2f}x | - |")


if __name__ == "__main__":
    main()
