#!/usr/bin/env python3
"""The first grist.ckpt.save of a process: time the caller is blocked with its staging memory
prepared (grist.ckpt.prepare(state, wait=True) first) and without, against a memcpy of the same
bytes with the writer's copy threads measured in the same process (the snapshot floor; target:
<= 1.2x). Each repetition runs both cases in fresh processes, interleaved, so drift hits both.

    PYTHONPATH=build/python python3 bench/python/bench_ckpt_first_save.py --dir /tmp/fs --mib 128

Prints, per case, the blocked seconds and the ratio to the memcpy as median [min, max] over the
repetitions, the writer's own count of staging bytes the save touched for the first time (0 when
prepared), and with --json the per-repetition figures as the last line.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys

_CHILD = r"""
import json, os, sys, time
import torch
from grist import ckpt
from grist._native import lib
root, prepare, mib = sys.argv[1], sys.argv[2] == "1", int(sys.argv[3])
torch.manual_seed(0)
n = (mib << 20) // 4 // 8
state = {"model": {f"layers.{i}.weight": torch.randn(n) for i in range(8)}, "step": 3}
nbytes = sum(t.numel() * t.element_size() for t in state["model"].values())
threads = lib.grist_ckpt_default_copy_threads()
if prepare:
    ckpt.prepare(state, wait=True)
src = torch.cat([t for t in state["model"].values()])
dst = torch.empty_like(src)
dst.fill_(0)  # warm: the peer copies into resident memory
memcpys = []
def memcpy():
    t0 = time.perf_counter()
    lib.grist_ckpt_memcpy(dst.data_ptr(), src.data_ptr(), nbytes, threads)
    memcpys.append(time.perf_counter() - t0)
for _ in range(3):
    memcpy()
h = ckpt.save(state, os.path.join(root, "step-3"))
blocked = h.blocked_seconds
h.wait()
for _ in range(2):
    memcpy()
print(json.dumps({"blocked": blocked, "memcpy": sorted(memcpys)[2], "threads": threads,
                  "fresh": h.file_info["staging_fresh_bytes"], "bytes": nbytes}))
"""


def stats(xs):
    s = sorted(xs)
    return s[len(s) // 2], s[0], s[-1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--mib", type=int, default=128, help="state size (MiB, float32, 8 tensors)")
    ap.add_argument("--repetitions", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    runs = {"prepared": [], "unprepared": []}
    for rep in range(args.repetitions):
        for case in ("prepared", "unprepared"):
            d = os.path.join(args.dir, f"{case}-{rep}")
            shutil.rmtree(d, ignore_errors=True)
            os.makedirs(d)
            out = subprocess.run([sys.executable, "-c", _CHILD, d,
                                  "1" if case == "prepared" else "0", str(args.mib)],
                                 capture_output=True, text=True, timeout=600)
            shutil.rmtree(d, ignore_errors=True)
            if out.returncode != 0:
                sys.exit(f"child failed:\n{out.stdout}\n{out.stderr}")
            runs[case].append(json.loads(out.stdout.strip().splitlines()[-1]))
    if args.json:
        print(json.dumps(runs))
        return
    r0 = runs["prepared"][0]
    print(f"first save of {r0['bytes'] / 2**20:.0f} MiB (8 float32 tensors), {r0['threads']} copy "
          f"threads, {args.repetitions} repetitions, fresh processes; median [min, max]")
    for case, rs in runs.items():
        b = stats([r["blocked"] for r in rs])
        m = stats([r["memcpy"] for r in rs])
        x = stats([r["blocked"] / r["memcpy"] for r in rs])
        fresh = sorted({r["fresh"] for r in rs})
        print(f"{case:11s} blocked {b[0]:.4f} s [{b[1]:.4f}, {b[2]:.4f}]  memcpy {m[0]:.4f} s "
              f"[{m[1]:.4f}, {m[2]:.4f}]  ratio {x[0]:.2f}x [{x[1]:.2f}, {x[2]:.2f}]  "
              f"staging touched on the caller's time: {fresh} bytes")
    print("target: prepared blocked <= 1.2x memcpy")


if __name__ == "__main__":
    main()
