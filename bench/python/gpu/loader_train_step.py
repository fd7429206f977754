#!/usr/bin/env python3
"""The loader's cost inside a real training step, on the GPU machine: a GPT-2-small-sized decoder
(12 layers, d_model 768, 12 heads, vocab 50304, ~124 M parameters) in bf16 (autocast, fused AdamW),
micro batch 4 x 4096 tokens, fed three ways in interleaved rounds:

  tensor      input_ids/labels already on the GPU (a ring of 8 distinct batches): the floor;
  grist       grist.Loader(device="cuda", fields=input_ids,labels), prefetching in its threads;
  dataloader  torch DataLoader over numpy memmaps of the same .bin files, pin_memory=True,
              num_workers=4, .to("cuda", non_blocking=True).

Each round times --steps steps after --warmup steps (torch.cuda.synchronize around the timed
span); the figure is the median step time per feed over --rounds rounds, and the overhead is
median(feed) / median(tensor) - 1. Target: grist <= 0.5 %.

    PYTHONPATH=build/python python3 bench/python/gpu/loader_train_step.py [--json out.json]
"""

import argparse
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import grist
from grist.loader import write_synthetic_release


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab=50304, d=768, layers=12, heads=12, seq=4096):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(seq, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight

    def forward(self, ids):
        x = self.tok(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln(x))


class Memmap(torch.utils.data.Dataset):
    def __init__(self, rel):
        import numpy as np
        self.np = np
        with open(os.path.join(rel, "manifest.json")) as f:
            m = json.load(f)
        self.st = m["sample_tokens"]
        self.dtype = np.uint16 if m["token_dtype"] == "uint16" else np.int32
        self.shards = [(s["first_sample"], s["samples"], os.path.join(rel, s["bin"]["path"]))
                       for s in m["splits"]["train"]["shards"]]
        self.n = m["splits"]["train"]["samples"]
        self.maps = None

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.maps is None:
            self.maps = [self.np.memmap(p, dtype=self.dtype, mode="r") for _, _, p in self.shards]
        for k, (first, count, _) in enumerate(self.shards):
            if first <= i < first + count:
                j = i - first
                x = torch.from_numpy(self.maps[k][j * self.st:(j + 1) * self.st].astype("int64"))
                return {"input_ids": x[:-1], "labels": x[1:]}
        raise IndexError(i)


def forever(make):
    while True:
        yield from make()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--micro-batch", type=int, default=4)
    ap.add_argument("--seq-len", type=int, default=4096)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=4, help="DataLoader num_workers")
    ap.add_argument("--feeds", default="tensor,grist,dataloader")
    ap.add_argument("--json")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("loader_train_step.py: no GPU; this measurement needs CUDA", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = True
    dev = torch.device("cuda")
    m, s = a.micro_batch, a.seq_len
    tmp = tempfile.mkdtemp(prefix="grist_train_step_")
    try:
        rel = os.path.join(tmp, "rel")
        samples = 4096
        write_synthetic_release(rel, samples=samples, seq_len=s, samples_per_shard=1024,
                                vocab_size=50257, mean_document_tokens=800)
        model = GPT(seq=s).to(dev)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
        nparams = sum(p.numel() for p in model.parameters())

        def step(ids, labels):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(ids)
                loss = F.cross_entropy(logits.view(-1, logits.shape[-1]).float(),
                                       labels.reshape(-1))
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        ring = [(torch.randint(0, 50257, (m, s), device=dev),
                 torch.randint(0, 50257, (m, s), device=dev)) for _ in range(8)]

        def feed(name):
            if name == "tensor":
                i = 0
                while True:
                    yield ring[i % len(ring)]
                    i += 1
            elif name == "grist":
                lo = grist.Loader(rel, m, m, device="cuda", epochs=0, prefetch=4,
                                  fields=["input_ids", "labels"])
                for b in lo:
                    yield b["input_ids"], b["labels"]
            else:
                ds = Memmap(rel)
                for b in forever(lambda: torch.utils.data.DataLoader(
                        ds, batch_size=m, shuffle=True, num_workers=a.workers, pin_memory=True,
                        drop_last=True, persistent_workers=True)):
                    yield (b["input_ids"].to(dev, non_blocking=True),
                           b["labels"].to(dev, non_blocking=True))

        feeds = a.feeds.split(",")
        times = {f: [] for f in feeds}
        for r in range(a.rounds):
            for f in feeds:
                it = feed(f)
                for _ in range(a.warmup):
                    step(*next(it))
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                for _ in range(a.steps):
                    step(*next(it))
                torch.cuda.synchronize()
                dt = (time.perf_counter() - t0) / a.steps
                times[f].append(dt)
                print(f"round {r} {f:10s} {dt * 1000:8.3f} ms/step", flush=True)
                del it
        med = {f: statistics.median(v) for f, v in times.items()}
        summary = {"params": nparams, "micro_batch": m, "seq_len": s,
                   "tokens_per_step": m * s, "median_step_ms": {f: v * 1000 for f, v in med.items()},
                   "rounds_ms": {f: [x * 1000 for x in v] for f, v in times.items()}}
        if "tensor" in med:
            for f in feeds:
                if f != "tensor":
                    ov = med[f] / med["tensor"] - 1
                    summary[f"overhead_{f}"] = ov
                    print(f"{f}: {100 * ov:+.3f} % over a tensor already on the GPU"
                          + ("  (target <= 0.5 %)" if f == "grist" else ""))
        summary["gpu"] = torch.cuda.get_device_name()
        summary["torch"] = torch.__version__
        summary["date"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
        print(json.dumps(summary))
        if a.json:
            with open(a.json, "w") as f:
                json.dump(summary, f, indent=2)
        return 0 if not math.isnan(summary.get("overhead_grist", 0.0)) else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
