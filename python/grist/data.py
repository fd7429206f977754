"""torch.utils.data views of a grist.Loader, for code that wants a DataLoader (Lightning, the HF
Trainer, torchdata's StatefulDataLoader).

    loader = grist.Loader("release/", micro_batch_size=8, global_batch_size=64)
    dl = torch.utils.data.DataLoader(loader.as_dataset(), batch_size=None)   # or grist.data.Dataset
    for batch in dl: ...                       # the same micro batches as `for batch in loader`
    state = dl.dataset.state_dict()            # resume: dataset.load_state_dict(state)

Each item is one micro batch (a dict of tensors), so the DataLoader must not batch again:
batch_size=None. The view runs in the main process (num_workers=0, the default): grist.Loader
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

    def __init__(self, loader):
        super().__init__()
        self.loader = loader

    def __iter__(self):
        if torch.utils.data.get_worker_info() is not None:
            raise RuntimeError(_MAIN_PROCESS_ONLY)
        return iter(self.loader)

    def __reduce__(self):
        raise RuntimeError(_MAIN_PROCESS_ONLY)

    def __len__(self):
        return len(self.loader)

    def state_dict(self):
        return self.loader.state_dict()

    def load_state_dict(self, state):
        self.loader.load_state_dict(state)


__all__ = ["Dataset"]
