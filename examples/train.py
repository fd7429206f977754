#!/usr/bin/env python3
"""A short PyTorch training loop that uses grist for both data and checkpoints.

Trains a tiny causal language model over a grist release with grist.Loader, and every
--ckpt-every steps saves the model, the optimizer and the loader's position with grist.ckpt
(asynchronously: training continues while the checkpoint is written; only the newest --keep
published checkpoints are kept). Started again with the same --ckpt-dir, it resumes from the newest
published checkpoint: the loader continues with exactly the batches an uninterrupted run would
have seen, so the losses continue without a jump, bit for bit.

    PYTHONPATH=build/python /usr/bin/python3 examples/train.py --ckpt-dir /tmp/ckpt --steps 40
    # kill it at any moment (even with SIGKILL, mid-checkpoint), run the same command again:
    # it resumes from the newest published checkpoint and prints the same losses.

Each finished step is printed and, with --log FILE, appended to FILE as "step loss_hex" (the loss's
exact float, for comparing runs bit for bit).
"""

import argparse
import os
import sys
import tempfile

import torch
import torch.nn.functional as F

import grist
from grist.loader import write_synthetic_release

VOCAB = 512  # the tiny model folds token ids into a small vocabulary


class TinyLM(torch.nn.Module):
    """A tiny causal LM (also used by loader_resume.py)."""

    def __init__(self, vocab, dim=64):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, dim)
        self.pos = torch.nn.Embedding(4096, dim)
        self.mix = torch.nn.Linear(dim, dim)
        self.out = torch.nn.Linear(dim, vocab)

    def forward(self, input_ids, position_ids):
        h = self.emb(input_ids) + self.pos(position_ids)
        return self.out(torch.tanh(self.mix(h)))


def masked_loss(model, batch, vocab):
    """Mean next-token cross entropy over the positions the batch's loss_mask keeps."""
    logits = model(batch["input_ids"] % vocab, batch["position_ids"])
    loss = F.cross_entropy(logits.reshape(-1, vocab), (batch["labels"] % vocab).reshape(-1),
                           reduction="none")
    return (loss * batch["loss_mask"].reshape(-1)).sum() / batch["loss_mask"].sum().clamp(min=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--release", help="release folder (default: a synthetic one under --ckpt-dir)")
    ap.add_argument("--ckpt-dir", required=True, help="folder of checkpoints (resumed from if present)")
    ap.add_argument("--steps", type=int, default=40, help="optimizer steps in total")
    ap.add_argument("--ckpt-every", type=int, default=5)
    ap.add_argument("--keep", type=int, default=2, help="published checkpoints to keep")
    ap.add_argument("--micro-batch", type=int, default=4)
    ap.add_argument("--global-batch", type=int, default=8)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--log", help="append 'step loss_hex' lines here")
    args = ap.parse_args()

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("no GPU visible to torch: running on cpu")
        args.device = "cpu"
    # Deterministic settings, so that a resumed run can equal an uninterrupted one bit for bit.
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True, warn_only=True)
    if args.device.startswith("cuda"):
        torch.backends.cudnn.deterministic = True
        torch.backends.cuda.matmul.allow_tf32 = False

    os.makedirs(args.ckpt_dir, exist_ok=True)
    if not args.release:
        args.release = os.path.join(args.ckpt_dir, "release")
        if not os.path.exists(os.path.join(args.release, "manifest.json")):
            write_synthetic_release(args.release, samples=512, seq_len=64, vocab_size=VOCAB,
                                    mean_document_tokens=20)

    torch.manual_seed(0)
    model = TinyLM(VOCAB, args.dim).to(args.device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    loader = grist.Loader(args.release, micro_batch_size=args.micro_batch,
                          global_batch_size=args.global_batch, device=args.device, epochs=0,
                          seed=args.seed)

    step = 0
    latest = grist.ckpt.latest(args.ckpt_dir)
    if latest is not None:
        state = grist.ckpt.load(latest, device=args.device)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optim"])
        loader.load_state_dict(state["loader"])
        step = int(state["step"])
        print(f"resumed from {latest} (step {step}, "
              f"{state['loader']['consumed_samples']} samples consumed)", flush=True)

    log = open(args.log, "a") if args.log else None
    it = iter(loader)
    handle = first = None
    prepared = False
    while step < args.steps:
        opt.zero_grad(set_to_none=True)
        total = 0.0
        for _ in range(loader.micro_batches_per_step):
            loss = masked_loss(model, next(it), VOCAB)
            (loss / loader.micro_batches_per_step).backward()
            total += loss.item() / loader.micro_batches_per_step
        opt.step()
        step += 1
        if not prepared:
            # The whole state exists from here on (AdamW creates its moments at its first step):
            # prepare the checkpoints' staging memory now, in the background while training goes
            # on, so that not even the first save touches fresh memory on the loop's time.
            grist.ckpt.prepare({"model": model.state_dict(), "optim": opt.state_dict(),
                                "loader": loader.state_dict(), "step": step})
            prepared = True
        print(f"step {step:4d}  loss {total:.6f}", flush=True)
        if log:
            log.write(f"{step} {float(total).hex()}\n")
            log.flush()
        if step % args.ckpt_every == 0:
            # Returns once the state is snapshotted; the write goes on in the background.
            handle = grist.ckpt.save({"model": model.state_dict(), "optim": opt.state_dict(),
                                      "loader": loader.state_dict(), "step": step},
                                     os.path.join(args.ckpt_dir, f"step-{step:08d}"),
                                     keep_last=args.keep)
            first = first or handle
    if handle is not None:
        handle.wait()
    if first is not None:
        print(f"first save blocked {first.blocked_seconds:.4f} s, "
              f"{first.file_info['staging_fresh_bytes']} bytes of staging memory touched on the "
              "caller's time", flush=True)
    loader.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
