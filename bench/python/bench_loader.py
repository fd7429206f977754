#!/usr/bin/env python3
"""Benchmark grist.Loader against torch.utils.data.DataLoader over numpy memmaps of the same .bin
files (same batch shape, shuffle, pin_memory=True), every num_workers configuration, in one run.

Figures per configuration: tokens/s and GB/s delivered with a consumer that does nothing, and the
share of time a consumer with a simulated compute step (default 50 ms) waits for data. With
--device cuda the delivered batches are on the GPU and the pinned host-to-device copy ceiling
(torch pinned tensor .to('cuda', non_blocking=True)) is measured beside them, plus start-up time
versus dataset size.

    PYTHONPATH=build/python /usr/bin/python3 bench/python/bench_loader.py [--json out.json]
"""

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time

import torch

try:
    import numpy as np
except ImportError:  # the DataLoader baseline needs numpy; grist's figures do not
    np = None

import grist
from grist.loader import write_synthetic_release


class MemmapDataset(torch.utils.data.Dataset):
    """Sample i of the split: tokens from the shard's .bin memmap, as int64 input_ids/labels."""

    def __init__(self, release, split="train"):
        with open(os.path.join(release, "manifest.json")) as f:
            m = json.load(f)
        self.st = m["sample_tokens"]
        self.dtype = np.uint16 if m["token_dtype"] == "uint16" else np.int32
        self.shards = [(s["first_sample"], s["samples"], os.path.join(release, s["bin"]["path"]))
                       for s in m["splits"][split]["shards"]]
        self.n = m["splits"][split]["samples"]
        self.maps = None

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.maps is None:  # opened lazily so that worker processes map their own
            self.maps = [np.memmap(p, dtype=self.dtype, mode="r") for _, _, p in self.shards]
        for k, (first, count, _) in enumerate(self.shards):
            if first <= i < first + count:
                j = i - first
                x = torch.from_numpy(self.maps[k][j * self.st:(j + 1) * self.st].astype(np.int64))
                return {"input_ids": x[:-1], "labels": x[1:]}
        raise IndexError(i)


def batch_bytes(b):
    return sum(t.numel() * t.element_size() for t in b.values())


def run(make_iter, batches, step_s, device, warmup=2, seconds=1.0):
    """Returns (tokens/s, GB/s, mean wait per step in s, wait share) over `batches` batches, or
    with batches=None for `seconds` (at least 10 batches)."""
    it = make_iter()
    for _ in range(warmup):
        next(it)
    tokens = nbytes = 0
    wait = 0.0
    t0 = time.perf_counter()
    n = 0
    while (n < batches) if batches else (n < 10 or time.perf_counter() - t0 < seconds):
        n += 1
        w0 = time.perf_counter()
        b = next(it)
        if device == "cuda":
            b = {k: v.to("cuda", non_blocking=True) for k, v in b.items()} \
                if b["input_ids"].device.type == "cpu" else b
            torch.cuda.current_stream().synchronize()
        wait += time.perf_counter() - w0
        tokens += b["input_ids"].numel()
        nbytes += batch_bytes(b)
        if step_s:
            time.sleep(step_s)
    total = time.perf_counter() - t0
    return tokens / total, nbytes / total / 1e9, wait / n, wait / total


def loop_forever(make_loader):
    while True:
        for b in make_loader():
            yield b


def h2d_ceiling(nbytes, reps=50):
    src = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    dst = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    for _ in range(5):
        dst.copy_(src, non_blocking=True)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        dst.copy_(src, non_blocking=True)
    torch.cuda.synchronize()
    return nbytes * reps / (time.perf_counter() - t0) / 1e9


def startup_times(tmp, sizes, seq_len, device):
    out = []
    for n in sizes:
        d = os.path.join(tmp, f"startup-{n}")
        write_synthetic_release(d, samples=n, seq_len=seq_len, samples_per_shard=65536,
                                vocab_size=32000, mean_document_tokens=50)
        t0 = time.perf_counter()
        loader = grist.Loader(d, micro_batch_size=8, global_batch_size=8, device=device)
        next(iter(loader))
        if device == "cuda":
            torch.cuda.synchronize()
        out.append((n, time.perf_counter() - t0))
        loader.close()
        shutil.rmtree(d, ignore_errors=True)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--release", help="an existing release (default: a synthetic one)")
    ap.add_argument("--samples", type=int, default=4096)
    ap.add_argument("--seq-len", type=int, default=2048)
    ap.add_argument("--micro-batch", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=1.0,
                    help="measured seconds per no-op-consumer configuration")
    ap.add_argument("--step-ms", type=float, default=50.0)
    ap.add_argument("--step-batches", type=int, default=40, help="measured batches with a step")
    ap.add_argument("--workers", default="0,1,2,4", help="DataLoader num_workers to try")
    ap.add_argument("--grist-workers", type=int, default=0, help="grist fill threads (0: auto)")
    ap.add_argument("--prefetch", type=int, default=4)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--repetitions", type=int, default=3)
    ap.add_argument("--startup-sizes", default="", help="e.g. 10000,100000,1000000")
    ap.add_argument("--json")
    a = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="grist_bench_loader_")
    try:
        rel = a.release
        if not rel:
            rel = os.path.join(tmp, "rel")
            write_synthetic_release(rel, samples=a.samples, seq_len=a.seq_len,
                                    samples_per_shard=1024, vocab_size=32000,
                                    mean_document_tokens=500)
        ds = MemmapDataset(rel) if np is not None else None
        if ds is None:
            print("numpy is absent: the DataLoader memmap baseline is skipped")
        m, s = a.micro_batch, a.seq_len
        results = []

        def measure(name, make_iter, step_s, batches):
            reps = [run(make_iter, batches, step_s, a.device, seconds=a.seconds)
                    for _ in range(a.repetitions)]
            med = [statistics.median(r[i] for r in reps) for i in range(4)]
            results.append({"config": name, "step_ms": step_s * 1000, "tokens_per_s": med[0],
                            "gb_per_s": med[1], "wait_per_step_ms": med[2] * 1000,
                            "wait_share": med[3]})
            r = results[-1]
            print(f"{name:48s} step {r['step_ms']:4.0f} ms  {r['tokens_per_s'] / 1e6:9.1f} M tok/s "
                  f"{r['gb_per_s']:7.2f} GB/s  wait {r['wait_per_step_ms']:8.3f} ms/step "
                  f"({100 * r['wait_share']:6.2f}%)", flush=True)

        pin = torch.cuda.is_available()
        for step_s, batches in ((0.0, None), (a.step_ms / 1000, a.step_batches)):
            for w in [int(x) for x in a.workers.split(",") if x != "" and ds is not None]:
                def mk(w=w):
                    return loop_forever(lambda: torch.utils.data.DataLoader(
                        ds, batch_size=m, shuffle=True, num_workers=w, pin_memory=pin,
                        drop_last=True, persistent_workers=False,
                        generator=torch.Generator().manual_seed(0)))
                measure(f"DataLoader memmap num_workers={w} pin_memory={pin}", mk, step_s, batches)
            for fields, label in ((["input_ids", "labels"], "input_ids+labels"),
                                  (None, "all fields")):
                def mk(fields=fields):
                    return iter(grist.Loader(rel, m, m, device=a.device, epochs=0,
                                             prefetch=a.prefetch, num_workers=a.grist_workers,
                                             fields=fields))
                measure(f"grist.Loader {label} device={a.device}", mk, step_s, batches)

        base = [r for r in results if r["config"].startswith("DataLoader") and r["step_ms"] == 0]
        ours = [r for r in results if r["config"].startswith("grist") and r["step_ms"] == 0]
        summary = {}
        best = max(base, key=lambda r: r["tokens_per_s"]) if base else None
        if best:
            summary = {"baseline_best": best["config"],
                       "baseline_best_tokens_per_s": best["tokens_per_s"]}
        for r in ours if best else []:
            summary[f"ratio {r['config']}"] = r["tokens_per_s"] / best["tokens_per_s"]
            print(f"ratio {r['config']} / best baseline ({best['config']}): "
                  f"{r['tokens_per_s'] / best['tokens_per_s']:.2f}x")
        if a.device == "cuda":
            l = grist.Loader(rel, m, m, device="cuda")
            ceiling = h2d_ceiling(l.batch_bytes)
            l.close()
            gpu = [r for r in ours if r["config"].endswith("device=cuda")]
            summary["h2d_ceiling_gb_per_s"] = ceiling
            for r in gpu:
                print(f"{r['config']}: {r['gb_per_s']:.2f} GB/s vs pinned H2D ceiling "
                      f"{ceiling:.2f} GB/s = {r['gb_per_s'] / ceiling:.2f}x")
        if a.startup_sizes:
            st = startup_times(tmp, [int(x) for x in a.startup_sizes.split(",")], 16, a.device)
            summary["startup"] = st
            for n, t in st:
                print(f"start-up (open + first batch), {n} samples: {t * 1000:.1f} ms")
        env = {"host": platform.node(), "cpu": platform.processor(), "cpus": os.cpu_count(),
               "python": platform.python_version(), "torch": torch.__version__,
               "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
               "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
               "seq_len": s, "micro_batch": m}
        print(json.dumps(env))
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"env": env, "results": results, "summary": summary}, f, indent=2)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
