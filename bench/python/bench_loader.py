#!/usr/bin/env python3
"""Benchmark grist.Loader against torch.utils.data.DataLoader and torchdata's StatefulDataLoader
over numpy memmaps of the same .bin files, and LitData's StreamingDataLoader over the same samples
converted once (before timing) into LitData's token chunks (litdata.optimize + TokensLoader); same
batch shape (micro batch x seq_len, int64 input_ids and labels), shuffle, pin_memory when CUDA is
present, every num_workers configuration, in one run; and a blend of 3 releases against one.
MosaicML Streaming is not a peer: it cannot be installed beside the pinned environment (see
MOSAIC_NOT_INSTALLABLE).

Figures per configuration: tokens/s and GB/s delivered with a consumer that does nothing; the
share of time a consumer with a simulated compute step (default 50 ms) waits for data; and the CPU
time the loader costs per billion tokens delivered, measured during the 50 ms-step run (the
consumer sleeps, so what the process and its worker processes spend is the loader's: the cores it
takes from the trainer). With --device cuda the delivered batches are on the GPU and the pinned
host-to-device copy ceiling (torch pinned tensor .to('cuda', non_blocking=True)) is measured beside
them, plus start-up time versus dataset size.

    PYTHONPATH=build/python python bench/python/bench_loader.py [--quick] [--json out.json]

With --peers-only the grist configurations are skipped and the last line of standard output is one
flat JSON object, "<peer> w=<num_workers> <noop|step> <tokens_per_s|wait_share|cpu_s_per_btok>"
keys plus "peers" and "versions" (what `grist bench loader` reads, bench/bench_loader.cc).
"""

import argparse
import json
import os
import resource
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

grist = None  # imported in main(): --peers-only over a given release does not need it


def write_synthetic_release(*args, **kw):
    from grist.loader import write_synthetic_release as write
    return write(*args, **kw)


MOSAIC_NOT_INSTALLABLE = (
    "MosaicML Streaming is not a peer: mosaicml-streaming 0.13.0 (the newest; 0.11-0.13 alike) "
    "requires numpy<2.2.0, and 0.4.1-0.10.0 require transformers<5, while requirements.txt pins "
    "numpy 2.4.6 and transformers 5.24.0 (and 0.13.0 also xxhash<4 against the pinned 4.1.0), so "
    "pip's resolver finds no version that installs beside torch 2.13.0 and the pinned packages")

# Samples per LitData chunk: chunks hold whole samples (TokensLoader cuts blocks within a chunk).
LITDATA_CHUNK_SAMPLES = 1024


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


def _litdata_samples(job):
    """litdata.optimize's fn: the samples of one shard, in order, as uint16/int32 arrays."""
    path, dtype, st, count = job
    tokens = np.memmap(path, dtype=dtype, mode="r")
    for j in range(count):
        yield np.array(tokens[j * st:(j + 1) * st])


def _litdata_collate(items):
    """The DataLoader peers' batch: int64 input_ids/labels, made in the worker like theirs."""
    x = torch.from_numpy(np.stack(items).astype(np.int64))
    return {"input_ids": x[:, :-1], "labels": x[:, 1:]}


def to_litdata(ds, out):
    """Writes the split's samples of MemmapDataset `ds`, in order, as LitData token chunks in `out`
    (once, outside the timed part) and checks that every sample reads back equal. Returns seconds."""
    from litdata import StreamingDataset, TokensLoader, optimize
    t0 = time.perf_counter()
    jobs = [(p, ds.dtype, ds.st, count) for _, count, p in ds.shards]
    optimize(fn=_litdata_samples, inputs=jobs, output_dir=out, chunk_size=ds.st * LITDATA_CHUNK_SAMPLES,
             item_loader=TokensLoader(), num_workers=1, mode="overwrite", verbose=False,
             reorder_files=False)
    seconds = time.perf_counter() - t0
    check = StreamingDataset(out, item_loader=TokensLoader(block_size=ds.st), shuffle=False)
    if len(check) != len(ds):
        raise RuntimeError(f"LitData conversion: {len(check)} samples, the release has {len(ds)}")
    for i in range(len(ds)):
        want = ds[i]["input_ids"].numpy()
        got = np.asarray(check[i])
        if not (np.array_equal(got[:-1], want) and got[-1] == ds[i]["labels"][-1].item()):
            raise RuntimeError(f"LitData conversion: sample {i} differs from the release")
    return seconds


def _proc_cpu(pid):
    """utime + stime of a live process (all its threads), in seconds; 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def _children():
    out = set()
    try:
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/children") as f:
                out.update(int(x) for x in f.read().split())
    except OSError:
        pass
    return out


class CpuMeter:
    """CPU seconds of this process (every thread) and of its child processes (DataLoader workers,
    alive or already reaped) between start() and stop()."""

    def _now(self):
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        live = {p: _proc_cpu(p) for p in _children()}
        return time.process_time(), ru.ru_utime + ru.ru_stime, live

    def start(self):
        self.t0 = self._now()

    def stop(self):
        own1, reaped1, live1 = self._now()
        own0, reaped0, live0 = self.t0
        live = sum(v - live0.get(p, 0.0) for p, v in live1.items())
        # A child alive at start and reaped since is in reaped1 in full: subtract what it had.
        gone = sum(v for p, v in live0.items() if p not in live1)
        return (own1 - own0) + (reaped1 - reaped0 - gone) + live


def batch_bytes(b):
    return sum(t.numel() * t.element_size() for t in b.values())


def run(make_iter, batches, step_s, device, warmup=2, seconds=1.0):
    """Returns (tokens/s, GB/s, mean wait per step in s, wait share, CPU s per 1e9 tokens) over
    `batches` batches, or with batches=None for `seconds` (at least 10 batches)."""
    it = make_iter()
    for _ in range(warmup):
        next(it)
    tokens = nbytes = 0
    wait = 0.0
    cpu = CpuMeter()
    cpu.start()
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
    cpu_s = cpu.stop()
    del it
    return tokens / total, nbytes / total / 1e9, wait / n, wait / total, cpu_s / tokens * 1e9


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
    ap.add_argument("--peers", default="dataloader,stateful,litdata",
                    help="peers to run: dataloader (torch DataLoader), stateful (torchdata), "
                         "litdata (LitData StreamingDataLoader)")
    ap.add_argument("--peers-only", action="store_true",
                    help="measure the peers only; the last line is their flat JSON (see above)")
    ap.add_argument("--blend", type=int, default=3,
                    help="releases in the blend compared with one release (0: skip)")
    ap.add_argument("--quick", action="store_true",
                    help="a short run: 1024 samples of 512 tokens, 0.5 s, 1 repetition, 20 steps")
    ap.add_argument("--json")
    a = ap.parse_args()
    if not (a.peers_only and a.release):
        global grist
        import grist
    if a.quick:
        a.samples, a.seq_len, a.seconds, a.repetitions = 1024, 512, 0.5, 1
        a.step_batches = 20
        if a.workers == "0,1,2,4":
            a.workers = "0,2"

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
            med = [statistics.median(r[i] for r in reps) for i in range(5)]
            results.append({"config": name, "step_ms": step_s * 1000, "tokens_per_s": med[0],
                            "gb_per_s": med[1], "wait_per_step_ms": med[2] * 1000,
                            "wait_share": med[3], "cpu_s_per_btok": med[4]})
            r = results[-1]
            print(f"{name:56s} step {r['step_ms']:4.0f} ms  {r['tokens_per_s'] / 1e6:9.1f} M tok/s "
                  f"{r['gb_per_s']:7.2f} GB/s  wait {r['wait_per_step_ms']:8.3f} ms/step "
                  f"({100 * r['wait_share']:6.2f}%)  CPU {r['cpu_s_per_btok']:8.1f} s/Gtok",
                  flush=True)

        try:
            from torchdata.stateful_dataloader import StatefulDataLoader
        except ImportError:
            StatefulDataLoader = None
            print("torchdata is absent: the StatefulDataLoader peer is skipped")
        want = set(a.peers.split(","))
        versions = {"torch": torch.__version__}
        pin = torch.cuda.is_available()

        def memmap_peer(cls):
            return lambda w: loop_forever(lambda: cls(
                ds, batch_size=m, shuffle=True, num_workers=w, pin_memory=pin,
                drop_last=True, persistent_workers=False,
                generator=torch.Generator().manual_seed(0)))

        peers = [("DataLoader memmap", memmap_peer(torch.utils.data.DataLoader))] \
            if "dataloader" in want and ds is not None else []
        if StatefulDataLoader is not None and "stateful" in want and ds is not None:
            import torchdata
            versions["torchdata"] = getattr(torchdata, "__version__", "?")
            peers.append(("StatefulDataLoader memmap", memmap_peer(StatefulDataLoader)))
        if "litdata" in want and ds is not None:
            os.environ.setdefault("LITDATA_CACHE_DIR", os.path.join(tmp, "litdata-cache"))
            try:
                import litdata
            except ImportError as e:
                print(f"litdata is absent ({e}): the LitData peer is skipped")
            else:
                versions["litdata"] = litdata.__version__
                lit_dir = os.path.join(tmp, "litdata")
                secs = to_litdata(ds, lit_dir)
                print(f"LitData {litdata.__version__}: the release's {len(ds)} samples converted "
                      f"once to token chunks in {secs:.2f} s (not timed below), every sample "
                      f"read back equal", flush=True)

                def lit(w):
                    dl = litdata.StreamingDataLoader(
                        litdata.StreamingDataset(
                            lit_dir, item_loader=litdata.TokensLoader(block_size=ds.st),
                            shuffle=True, seed=0, drop_last=True),
                        batch_size=m, num_workers=w, pin_memory=pin, drop_last=True,
                        collate_fn=_litdata_collate)
                    return loop_forever(lambda: dl)
                peers.append(("LitData StreamingDataLoader", lit))
        try:
            import streaming  # noqa: F401  (MosaicML Streaming)
            print("MosaicML Streaming is importable here but has no peer in this benchmark")
        except ImportError:
            print(MOSAIC_NOT_INSTALLABLE)
        blend_rels = []
        if a.blend >= 2 and not a.peers_only:
            for k in range(a.blend):
                d = os.path.join(tmp, f"blend{k}")
                write_synthetic_release(d, samples=max(a.samples // a.blend, 64), seq_len=a.seq_len,
                                        samples_per_shard=1024, vocab_size=32000,
                                        mean_document_tokens=500, seed=100 + k)
                blend_rels.append(d)

        for step_s, batches in ((0.0, None), (a.step_ms / 1000, a.step_batches)):
            for peer, make in peers:
                for w in [int(x) for x in a.workers.split(",") if x != ""]:
                    measure(f"{peer} num_workers={w} pin_memory={pin}",
                            lambda w=w, make=make: make(w), step_s, batches)
            if a.peers_only:
                continue
            for fields, label in ((["input_ids", "labels"], "input_ids+labels"),
                                  (None, "all fields")):
                def mk(fields=fields):
                    return iter(grist.Loader(rel, m, m, device=a.device, epochs=0,
                                             prefetch=a.prefetch, num_workers=a.grist_workers,
                                             fields=fields))
                measure(f"grist.Loader {label} device={a.device}", mk, step_s, batches)
            if blend_rels:
                weights = [1.0 / len(blend_rels)] * len(blend_rels)

                def mk():
                    return iter(grist.Loader(list(zip(weights, blend_rels)), m, m,
                                             device=a.device, epochs=0, prefetch=a.prefetch,
                                             num_workers=a.grist_workers))
                measure(f"grist.Loader blend of {len(blend_rels)} all fields device={a.device}",
                        mk, step_s, batches)

        if a.peers_only:
            flat = {"peers": ",".join(p for p, _ in peers), "versions": versions}
            for r in results:
                peer, rest = r["config"].split(" num_workers=")
                key = f"{peer} w={rest.split()[0]} {'step' if r['step_ms'] > 0 else 'noop'}"
                for k in ("tokens_per_s", "wait_share", "cpu_s_per_btok"):
                    flat[f"{key} {k}"] = r[k]
            print(json.dumps(flat))
            return 0
        peer_names = [p for p, _ in peers]
        base = [r for r in results if any(r["config"].startswith(p + " ") for p in peer_names)
                and r["step_ms"] == 0]
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
        stepped = [r for r in results if r["step_ms"] > 0]
        for peer in peer_names:
            rs = [r for r in stepped if r["config"].startswith(peer + " ")]
            if rs:
                bw = min(rs, key=lambda r: r["wait_share"])
                summary[f"{peer} best wait at step"] = [bw["config"], bw["wait_share"],
                                                        bw["cpu_s_per_btok"]]
        for r in stepped:
            if r["config"].startswith("grist"):
                summary[f"{r['config']} wait at step / CPU s per Gtok"] = [
                    r["wait_share"], r["cpu_s_per_btok"]]
        one = [r for r in results if r["config"].startswith("grist.Loader all fields")]
        bl = [r for r in results if r["config"].startswith("grist.Loader blend")]
        for o, b in zip(one, bl):
            cost = o["tokens_per_s"] / b["tokens_per_s"]
            cpu = b["cpu_s_per_btok"] / o["cpu_s_per_btok"] if o["cpu_s_per_btok"] else float("nan")
            key = "no-op" if o["step_ms"] == 0 else f"{o['step_ms']:.0f} ms step"
            summary[f"blend cost ({key}): one/blend tokens/s, blend/one CPU"] = [cost, cpu]
            print(f"blend of {len(blend_rels)} vs one release ({key}): tokens/s cost {cost:.2f}x, "
                  f"CPU per token {cpu:.2f}x (target <= 1.1x)")
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
               "python": platform.python_version(), **versions,
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
