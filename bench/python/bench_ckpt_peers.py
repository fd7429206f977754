#!/usr/bin/env python3
"""Multi-process checkpoint bench: grist.ckpt beside DCP's FileSystemWriter, torch.save and
safetensors, on the same sharded state (a DTensor per "layer", Shard(0) over all ranks). The
Python peers of `grist bench ckpt` (bench/bench_ckpt.cc runs it with --json).

    PYTHONPATH=build/python python3 bench/python/bench_ckpt_peers.py --world 2 --mib 256 --dir /tmp/b
    python3 bench/python/bench_ckpt_peers.py --world 8 --mib 4096 --device cuda --dir /mnt/nvme/b

Per method, the slowest rank's seconds: `blocked` (the call returned: training may go on) and
`durable` (every file fsynced and, for checkpoints, published). Then a load at the same placements
against a resharding load (Shard(1) instead of Shard(0): every rank reads pieces of every saved
shard; the two alternate which goes first), and their ratio per repetition. Figures on a shared
machine are noisy: each is printed as the median [min, max] over the repetitions.
grist's staging memory is prepared (grist.ckpt.prepare) before the first save, as a training
script would right after building its state. --json prints, as the last line, every method's
per-repetition figures (the slowest rank of each repetition) instead of the table.
"""

import argparse
import json
import os
import shutil
import time
import sys

# grist's Python package: $GRIST_PYTHON_PATH (set by `grist bench ckpt` to its build tree's
# python/), else whatever PYTHONPATH gives. Spawned ranks import this module again and get it too.
if os.environ.get("GRIST_PYTHON_PATH"):
    sys.path.insert(0, os.environ["GRIST_PYTHON_PATH"])


def fsync_dir(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def worker(rank, world, args, q):
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    cuda = args.device == "cuda"
    if cuda:
        torch.cuda.set_device(rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if cuda else "gloo",
                            init_method=f"file://{args.dir}/init", rank=rank, world_size=world)
    import grist
    dev = torch.device("cuda", rank) if cuda else torch.device("cpu")
    mesh = init_device_mesh(dev.type, (world,))
    layers = 8
    rows = max(world, (args.mib << 20) // (layers * 4096 * 2))
    rows -= rows % world
    state = {f"layer{i}": distribute_tensor(torch.randn(rows, 4096, dtype=torch.bfloat16,
                                                        device=dev), mesh, [Shard(0)])
             for i in range(layers)}
    total = sum(t.numel() * 2 for t in state.values())
    res = {}
    grist.ckpt.prepare(state, wait=True)

    def timed(name, fn):
        dist.barrier()
        t0 = time.perf_counter()
        blocked, wait = fn()
        t1 = time.perf_counter()
        if wait is not None:
            wait()
        t2 = time.perf_counter()
        dist.barrier()
        res[name] = (t1 - t0 if blocked else t2 - t0, t2 - t0)

    for rep in range(args.warmup + args.repetitions):
        d = os.path.join(args.dir, f"r{rep}")
        if rank == 0:
            shutil.rmtree(d, ignore_errors=True)
            os.makedirs(d)
        dist.barrier()

        def g_save():
            h = grist.ckpt.save(state, f"{d}/grist")
            return True, h.wait
        timed("grist.ckpt.save", g_save)
        timed("dcp.save(grist StorageWriter)", lambda: (False, dcp.save(
            state, storage_writer=grist.ckpt.StorageWriter(f"{d}/dcp-grist"))) and (False, None))
        timed("dcp.save(FileSystemWriter)", lambda: (False, dcp.save(
            state, storage_writer=dcp.FileSystemWriter(f"{d}/dcp-fs"))) and (False, None))

        def async_fs():
            fut = dcp.async_save(state, storage_writer=dcp.FileSystemWriter(f"{d}/dcp-async"))
            return True, fut.result
        timed("dcp.async_save(FileSystemWriter)", async_fs)

        def torch_save():
            p = f"{d}/torch-{rank}.pt"
            with open(p, "wb") as f:
                torch.save({k: v.to_local().cpu() for k, v in state.items()}, f)
                f.flush()
                os.fsync(f.fileno())
            fsync_dir(d)
            return False, None
        timed("torch.save+fsync", torch_save)

        def st_save():
            from safetensors.torch import save_file
            p = f"{d}/st-{rank}.safetensors"
            save_file({k: v.to_local().cpu().contiguous() for k, v in state.items()}, p)
            fd = os.open(p, os.O_RDONLY)
            os.fsync(fd)
            os.close(fd)
            fsync_dir(d)
            return False, None
        timed("safetensors save_file+fsync", st_save)

        def g_load(placements):
            target = {k: distribute_tensor(torch.zeros_like(v.full_tensor()), mesh, placements)
                      for k, v in state.items()}
            dist.barrier()
            t0 = time.perf_counter()
            grist.ckpt.load(f"{d}/grist", target)
            if cuda:
                torch.cuda.synchronize()
            t = time.perf_counter() - t0
            dist.barrier()
            return t
        # Both loads read the device (O_DIRECT); their order alternates between repetitions.
        loads = [("grist.ckpt.load same placements", [Shard(0)]),
                 ("grist.ckpt.load resharded (Shard(1))", [Shard(1)])]
        for name, placements in (loads if rep % 2 == 0 else loads[::-1]):
            res[name] = (None, g_load(placements))
        if rep >= args.warmup:
            q.put((rank, rep, total, res.copy()))
        dist.barrier()
        if rank == 0:  # every method's files of this repetition: several times the state
            shutil.rmtree(d, ignore_errors=True)
    dist.destroy_process_group()


def main():
    import torch.multiprocessing as mp
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--mib", type=int, default=256, help="total state size (MiB, bf16)")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--repetitions", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=0, help="unmeasured repetitions first")
    ap.add_argument("--json", action="store_true", help="per-repetition figures as JSON")
    args = ap.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    if os.path.exists(f"{args.dir}/init"):
        os.remove(f"{args.dir}/init")
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, args.world, args, q)) for r in range(args.world)]
    for p in procs:
        p.start()
    got = [q.get(timeout=3600) for _ in range(args.world * args.repetitions)]
    for p in procs:
        p.join()
    total = got[0][2]
    best = {}
    by_rep = {}  # slowest rank per repetition; then the best repetition
    for rank, rep, _, res in got:
        for k, (b, d) in res.items():
            cur = by_rep.setdefault((rep, k), [0, 0])
            cur[0] = max(cur[0], b or 0)
            cur[1] = max(cur[1], d)
    for (rep, k), (b, d) in by_rep.items():
        if k not in best or d < best[k][1]:
            best[k] = (b, d)
    if args.json:
        methods = {}
        for (rep, k), (b, d) in sorted(by_rep.items()):
            m = methods.setdefault(k, {"blocked": [], "durable": []})
            m["blocked"].append(b)
            m["durable"].append(d)
        print(json.dumps({"world": args.world, "bytes": total, "device": args.device,
                          "repetitions": args.repetitions, "methods": methods}))
        return
    def mmm(xs):
        xs = sorted(xs)
        return f"{xs[len(xs) // 2]:.3f} [{xs[0]:.3f}, {xs[-1]:.3f}]"
    print(f"world {args.world}, {total / 2**20:.0f} MiB of bf16 on {args.device}, {args.dir}; "
          f"slowest rank per repetition, median [min, max] of {args.repetitions}")
    print(f"{'method':40s} {'blocked s':>22s} {'durable s':>22s} {'GB/s':>7s}")
    for k in best:
        bs = [by_rep[(r, k)][0] for r in range(args.warmup, args.warmup + args.repetitions)]
        ds = [by_rep[(r, k)][1] for r in range(args.warmup, args.warmup + args.repetitions)]
        med = sorted(ds)[len(ds) // 2]
        print(f"{k:40s} {mmm(bs):>22s} {mmm(ds):>22s} {total / med / 1e9:7.2f}")
    ratios = [by_rep[(r, "grist.ckpt.load same placements")][1] /
              by_rep[(r, "grist.ckpt.load resharded (Shard(1))")][1]
              for r in range(args.warmup, args.warmup + args.repetitions)]
    print(f"resharding load / same-topology load throughput, per repetition: {mmm(ratios)}x "
          "(target >= 0.8)")


if __name__ == "__main__":
    main()
