#!/usr/bin/env python3
"""A short PyTorch training loop over grist.Loader that shows the resume guarantee.

Trains a tiny causal language model for --steps optimizer steps (each step accumulates
global_batch_size / micro_batch_size micro batches), once without interruption and once stopped
after --stop-at steps, checkpointed (model, optimizer and loader.state_dict() in one torch.save),
rebuilt from scratch and resumed. The resumed run sees the same batches, so its losses continue
exactly where they left off: the script prints both loss curves and fails if they differ.

    PYTHONPATH=build/python /usr/bin/python3 examples/loader_resume.py            # CPU
    PYTHONPATH=build/python python3 examples/loader_resume.py --device cuda        # GPU
    ... --release path/to/release    # a real release instead of a synthetic one
"""

import argparse
import os
import sys
import tempfile

import torch

import grist
from grist.loader import write_synthetic_release

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train import TinyLM, masked_loss  # noqa: E402  (the same model and loss as train.py)


def make(args, vocab):
    torch.manual_seed(0)
    model = TinyLM(vocab).to(args.device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    loader = grist.Loader(args.release, micro_batch_size=args.micro_batch,
                          global_batch_size=args.global_batch, device=args.device, epochs=0,
                          seed=args.seed)
    return model, opt, loader


def train(model, opt, loader, steps, vocab):
    """Runs `steps` optimizer steps; returns the loss of each."""
    losses = []
    it = iter(loader)
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        total = 0.0
        for _ in range(loader.micro_batches_per_step):
            loss = masked_loss(model, next(it), vocab)
            (loss / loader.micro_batches_per_step).backward()
            total += loss.item() / loader.micro_batches_per_step
        opt.step()
        losses.append(total)
    return losses


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--release", help="release folder (default: a synthetic one)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--stop-at", type=int, default=5)
    ap.add_argument("--micro-batch", type=int, default=4)
    ap.add_argument("--global-batch", type=int, default=8)
    ap.add_argument("--seed", type=int, default=2024)
    args = ap.parse_args()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("no GPU visible to torch: running on cpu")
        args.device = "cpu"
    if args.device.startswith("cuda"):
        torch.backends.cudnn.deterministic = True
        torch.use_deterministic_algorithms(True, warn_only=True)

    vocab = 512  # the tiny model folds token ids into a small vocabulary
    with tempfile.TemporaryDirectory() as tmp:
        if not args.release:
            args.release = os.path.join(tmp, "release")
            write_synthetic_release(args.release, samples=256, seq_len=64, vocab_size=vocab,
                                    mean_document_tokens=20)

        model, opt, loader = make(args, vocab)
        reference = train(model, opt, loader, args.steps, vocab)

        model, opt, loader = make(args, vocab)
        before = train(model, opt, loader, args.stop_at, vocab)
        ckpt = os.path.join(tmp, "ckpt.pt")
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                    "loader": loader.state_dict()}, ckpt)
        del model, opt, loader  # "crash"

        model, opt, loader = make(args, vocab)
        state = torch.load(ckpt)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        loader.load_state_dict(state["loader"])
        print(f"resumed from {state['loader']['consumed_samples']} consumed samples "
              f"(epoch {state['loader']['epoch']}, release {state['loader']['release_id'][:12]}...)")
        after = train(model, opt, loader, args.steps - args.stop_at, vocab)

    resumed = before + after
    print(f"{'step':>4} {'uninterrupted':>14} {'resumed':>14}")
    for i, (a, b) in enumerate(zip(reference, resumed)):
        mark = "  <- resumed here" if i == args.stop_at else ""
        print(f"{i:4d} {a:14.6f} {b:14.6f}{mark}")
    if resumed != reference:
        worst = max(abs(a - b) for a, b in zip(reference, resumed))
        print(f"FAIL: the resumed run differs (max |diff| {worst:.3g})")
        return 1
    print("OK: the resumed run's losses are identical to the uninterrupted run's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
