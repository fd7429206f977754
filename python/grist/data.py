"""torch.utils.data views of a grist.Loader, for code that wants a DataLoader (Lightning, the HF
Trainer, torchdata's StatefulDataLoader).

    loader = grist.Loader("release/", micro_batch_size=8, global_batch_size=64)
    dl = torch.utils.data.DataLoader(loader.as_dataset(), batch_size=None)   # or grist.data.Dataset
    for batch in dl: ...                       # the same micro batches as `for batch in loader`
    state = dl.dataset.state_dict()            # resume: dataset.load_state_dict(state)

Each item is one micro batch (a dict of tensors), so the DataLoader must not batch again:
batch_size=None.

Hugging Face models (`hf=True`, or `trainer_dataloader(loader)` for the HF Trainer): the items carry
the keys a `transformers` causal LM takes, with its conventions. Such a model shifts `labels` by one
itself, while grist's `labels` are already the next tokens (`t[1..S]`); passed as they are, every
target would be one token off, silently. So the view passes the targets as `shift_labels` (the loss
of `transformers` then uses them as they are; a `transformers` whose causal-LM loss takes no
`shift_labels` is refused, since it would shift the targets again) and, for the Trainer's count of target tokens,
as `labels` too, with -100 where `loss_mask` is 0 (padding):

    items: input_ids [M, S], position_ids [M, S], labels [M, S], shift_labels [M, S]

    class GristTrainer(transformers.Trainer):          # the Trainer batches again otherwise
        def get_train_dataloader(self):
            return grist.data.trainer_dataloader(loader)

The view runs in the main process (num_workers=0, the default): grist.Loader
already prefetches in its own C++ threads, and a DataLoader worker process would only add a copy
of every batch through shared memory while breaking the state's meaning (the main process's
DataLoader prefetches from workers, so the loader's position would run ahead of what the trainer
consumed). Iterating it inside a DataLoader worker raises RuntimeError saying so, and so does
pickling it (what a spawn or forkserver worker needs), in the main process before any worker starts.
"""

from grist._torch import require as _require_torch

torch = _require_torch()

_MAIN_PROCESS_ONLY = (
    "grist.data.Dataset runs in the main process: use DataLoader(..., num_workers=0, "
    "batch_size=None). grist.Loader prefetches in its own threads; worker processes would only "
    "copy batches between processes and make the resume state run ahead of the batches the "
    "trainer consumed.")


class Dataset(torch.utils.data.IterableDataset):
    """An IterableDataset over a grist.Loader: iterating yields the loader's micro batches in its
    order; state_dict()/load_state_dict() are the loader's (also the Stateful protocol of
    torch.distributed.checkpoint and what torchdata's StatefulDataLoader calls)."""

    def __init__(self, loader, hf=False):
        super().__init__()
        if hf:
            _check_transformers_takes_shift_labels()
        self.loader = loader
        self.hf = hf

    def __iter__(self):
        if torch.utils.data.get_worker_info() is not None:
            raise RuntimeError(_MAIN_PROCESS_ONLY)
        return map(hf_batch, self.loader) if self.hf else iter(self.loader)

    def __reduce__(self):
        raise RuntimeError(_MAIN_PROCESS_ONLY)

    def __len__(self):
        return len(self.loader)

    def state_dict(self):
        return self.loader.state_dict()

    def load_state_dict(self, state):
        self.loader.load_state_dict(state)


def _check_transformers_takes_shift_labels():
    try:
        import inspect
        from transformers.loss.loss_utils import ForCausalLMLoss
    except ImportError:
        return  # no transformers (or one without that module): the caller's own model
    if "shift_labels" not in inspect.signature(ForCausalLMLoss).parameters:
        import transformers
        raise RuntimeError(
            f"transformers {transformers.__version__}: its causal-LM loss takes no shift_labels, so "
            "it would shift grist's next-token labels a second time; use a newer transformers")


def hf_batch(batch):
    """A grist micro batch as a `transformers` causal LM's keyword arguments: input_ids,
    position_ids, and grist's next-token targets (-100 at padding) as both `shift_labels` (used as
    they are by the model's loss) and `labels` (what the HF Trainer counts target tokens from).
    Needs the loader's fields input_ids, labels, position_ids and loss_mask."""
    missing = [k for k in ("input_ids", "labels", "position_ids", "loss_mask") if k not in batch]
    if missing:
        raise KeyError(f"grist.data.hf_batch needs the loader fields {missing}")
    targets = batch["labels"].masked_fill(batch["loss_mask"] == 0, -100)
    return {"input_ids": batch["input_ids"], "position_ids": batch["position_ids"],
            "labels": targets, "shift_labels": targets}


def trainer_dataloader(loader):
    """The DataLoader to return from a transformers.Trainer's get_train_dataloader(): the loader's
    micro batches in its order, as hf_batch() makes them, one per step of the Trainer's loop
    (set per_device_train_batch_size to the micro batch size and gradient_accumulation_steps to
    loader.micro_batches_per_step so that its logs count right; set max_steps, since the view
    has no epochs of its own). Not prepared by accelerate: grist already gives each data-parallel
    rank its own slice."""
    return torch.utils.data.DataLoader(Dataset(loader, hf=True), batch_size=None)


__all__ = ["Dataset", "hf_batch", "trainer_dataloader"]
