#!/usr/bin/env python3
"""FSDP2 training with grist for data (grist.Loader) and checkpoints (grist.ckpt), under torchrun.

    torchrun --nproc-per-node 2 examples/train_fsdp.py --ckpt-dir /tmp/fsdp --steps 12
    # stop it at any time, then resume at ANOTHER world size, same global batch:
    torchrun --nproc-per-node 1 examples/train_fsdp.py --ckpt-dir /tmp/fsdp --steps 24

The model (examples/train.py's TinyLM) is sharded with fully_shard over every rank; every
--ckpt-every steps the sharded model and AdamW state (get_state_dict: DTensors), the loader (a
Stateful object) and the step are saved with grist.ckpt.save: each rank writes only its shards,
asynchronously (training continues while the files are written; rank 0 publishes once every
rank's file is durable). On start, the newest published checkpoint is loaded with
grist.ckpt.load(path, target): resharded into this run's layout, whatever world size saved it.

The loss is the mean over every loss-masked token of the global batch, and each rank scales its
part so that the data-parallel average of the gradients is that mean's gradient at every world
size: the loader gives each step the same samples whatever the world size, so a resumed run
continues the same loss curve. Bit for bit at the same world size; at another world size the
sums run in another order (float32 rounding, ~1e-7 relative per operation), so losses agree to
a relative 1e-4 over a few dozen steps. --device cuda uses NCCL (scripts/gpu/ckpt_fsdp.sh).

After the first step, when the whole state exists (AdamW creates its moments then), each rank
calls grist.ckpt.prepare with it: its staging memory is allocated and faulted in in the background,
so that not even the first save touches fresh memory on the training loop's time (each rank prints
how many bytes its first save did touch: 0).

Rank 0 prints each step's loss and, with --loss-log FILE, appends "step loss_hex".
"""

import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grist  # noqa: E402
from grist.loader import write_synthetic_release  # noqa: E402
from train import VOCAB, TinyLM  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ckpt-dir", required=True)
    ap.add_argument("--release", help="release folder (default: a synthetic one in --ckpt-dir)")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--ckpt-every", type=int, default=3)
    ap.add_argument("--keep", type=int, default=3)
    ap.add_argument("--micro-batch", type=int, default=2)
    ap.add_argument("--global-batch", type=int, default=8)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--loss-log", dest="log", help="rank 0 appends 'step loss_hex' lines here")
    args = ap.parse_args()

    cuda = args.device.startswith("cuda")
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.deterministic = True
    device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True, warn_only=True)

    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    if not args.release:
        args.release = os.path.join(args.ckpt_dir, "release")
        if rank == 0 and not os.path.exists(os.path.join(args.release, "manifest.json")):
            write_synthetic_release(args.release, samples=512, seq_len=64, vocab_size=VOCAB,
                                    mean_document_tokens=20)
        dist.barrier()

    torch.manual_seed(0)
    model = TinyLM(VOCAB, args.dim).to(device)
    mesh = init_device_mesh(device.type, (world,))
    for m in (model.mix, model.out):
        fully_shard(m, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    loader = grist.Loader(args.release, micro_batch_size=args.micro_batch,
                          global_batch_size=args.global_batch, device=str(device), epochs=0,
                          seed=args.seed)  # dp rank/size from torch.distributed

    step = 0
    latest = grist.ckpt.latest(args.ckpt_dir)
    if latest is not None:
        msd, osd = get_state_dict(model, opt)
        state = grist.ckpt.load(latest, {"model": msd, "optim": osd, "loader": loader, "step": 0})
        set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
        step = int(state["step"])
        if rank == 0:
            m = grist.ckpt.read_manifest(latest)
            print(f"resumed from {latest} (step {step}, saved by {m['world_size']} rank(s), "
                  f"now {world})", flush=True)

    log = open(args.log, "a") if (args.log and rank == 0) else None
    it = iter(loader)
    handle = first = None
    prepared = False
    while step < args.steps:
        batches = [next(it) for _ in range(loader.micro_batches_per_step)]
        tokens = torch.stack([b["loss_mask"].sum() for b in batches]).sum().to(torch.float64)
        dist.all_reduce(tokens)  # the global batch's loss-masked tokens
        total = torch.zeros((), dtype=torch.float64, device=device)
        for b in batches:
            logits = model(b["input_ids"] % VOCAB, b["position_ids"])
            tok = F.cross_entropy(logits.reshape(-1, VOCAB), (b["labels"] % VOCAB).reshape(-1),
                                  reduction="none")
            part = (tok * b["loss_mask"].reshape(-1)).sum()
            # FSDP averages gradients over ranks: times world, over all tokens = the global mean.
            (part * (world / tokens.to(part.dtype))).backward()
            total += part.detach().to(torch.float64)
        opt.step()
        opt.zero_grad(set_to_none=True)
        dist.all_reduce(total)
        loss = float(total / tokens)
        step += 1
        if not prepared:
            # The whole state exists from here on (AdamW creates its moments at its first step):
            # prepare this rank's checkpoint staging memory now, in the background while training
            # goes on, so that not even the first save touches fresh memory on the loop's time.
            msd, osd = get_state_dict(model, opt)
            grist.ckpt.prepare({"model": msd, "optim": osd, "loader": loader, "step": step})
            prepared = True
        if rank == 0:
            print(f"step {step:4d}  loss {loss:.6f}", flush=True)
            if log:
                log.write(f"{step} {loss.hex()}\n")
                log.flush()
        if step % args.ckpt_every == 0:
            msd, osd = get_state_dict(model, opt)
            handle = grist.ckpt.save({"model": msd, "optim": osd, "loader": loader, "step": step},
                                     os.path.join(args.ckpt_dir, f"step-{step:08d}"),
                                     keep_last=args.keep)
            first = first or handle
    if handle is not None:
        handle.wait()
    if first is not None:
        print(f"rank {rank}: first save blocked {first.blocked_seconds:.4f} s, "
              f"{first.file_info['staging_fresh_bytes']} bytes of staging memory touched on the "
              "caller's time", flush=True)
    loader.close()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
