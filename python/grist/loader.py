"""grist.Loader: the deterministic, resumable, prefetching data loader for PyTorch training.

    loader = grist.Loader("release/", micro_batch_size=8, global_batch_size=64, device="cuda")
    for batch in loader:            # dict of torch tensors
        loss = model(batch["input_ids"], batch["labels"], ...)
        ...
        ckpt = {"model": ..., "loader": loader.state_dict()}
    loader.load_state_dict(ckpt["loader"])   # the next batch is the one that came after the save

Batches: input_ids, labels, position_ids [micro_batch_size, seq_len] (int64, or int32 with
int32=True), loss_mask [micro_batch_size, seq_len] float32, cu_seqlens [k] int32 (cumulative
segment lengths over the flattened micro batch, for variable-length attention) and sample_index
[micro_batch_size] int64. The tensors view the loader's own (pinned) buffers, zero-copy; a buffer is
reused only after every tensor of its batch has been freed, so keeping a batch is always safe. On
CUDA the current stream (at the time of next()) waits on the copy's event before any use, and the
buffer's reuse waits for the work that stream queued before the batch was freed.

The order is decided by the seed alone (default: the release's seed): one global stream of samples,
epoch after epoch each a fresh permutation; step t is stream positions [t*G, (t+1)*G) and data-parallel
rank r takes its contiguous slice of G/dp_size samples as G/(dp_size*micro_batch_size) micro
batches. See docs/loader.md.
"""

import ctypes
import json
import warnings

from grist._native import GristError, check, lib

_OUT_OF_RANGE = 11

_c = ctypes
lib.grist_loader_open.restype = _c.c_int
lib.grist_loader_open.argtypes = [
    _c.c_char_p, _c.c_char_p, _c.c_int64, _c.c_int64, _c.c_int64, _c.c_int64, _c.c_int,
    _c.c_uint64, _c.c_int64, _c.c_int, _c.c_int, _c.c_int, _c.c_int, _c.c_int, _c.c_char_p,
    _c.c_int, _c.POINTER(_c.c_void_p)]
lib.grist_loader_close.restype = None
lib.grist_loader_close.argtypes = [_c.c_void_p]
lib.grist_loader_next.restype = _c.c_int
lib.grist_loader_next.argtypes = [_c.c_void_p, _c.POINTER(_c.c_void_p)]
lib.grist_loader_state.restype = _c.c_char_p
lib.grist_loader_state.argtypes = [_c.c_void_p]
lib.grist_loader_load_state.restype = _c.c_int
lib.grist_loader_load_state.argtypes = [_c.c_void_p, _c.c_char_p]
lib.grist_loader_info.restype = _c.c_int
lib.grist_loader_info.argtypes = [_c.c_void_p, _c.POINTER(_c.c_int64), _c.c_int]
lib.grist_loader_text.restype = _c.c_char_p
lib.grist_loader_text.argtypes = [_c.c_void_p, _c.c_int]
lib.grist_batch_free.restype = None
lib.grist_batch_free.argtypes = [_c.c_void_p]
lib.grist_batch_num_tensors.restype = _c.c_int
lib.grist_batch_num_tensors.argtypes = [_c.c_void_p]
lib.grist_batch_tensor_name.restype = _c.c_char_p
lib.grist_batch_tensor_name.argtypes = [_c.c_void_p, _c.c_int]
lib.grist_batch_wait.restype = _c.c_int
lib.grist_batch_wait.argtypes = [_c.c_void_p, _c.c_size_t]
lib.grist_batch_dlpack.restype = _c.c_int
lib.grist_batch_dlpack.argtypes = [_c.c_void_p, _c.c_int, _c.POINTER(_c.c_void_p)]
lib.grist_batch_dlpack_all.restype = _c.c_int
lib.grist_batch_dlpack_all.argtypes = [_c.c_void_p, _c.POINTER(_c.c_void_p), _c.c_int]
lib.grist_dlpack_free.restype = None
lib.grist_dlpack_free.argtypes = [_c.c_void_p]
lib.grist_write_synthetic_release.restype = _c.c_int
lib.grist_write_synthetic_release.argtypes = [
    _c.c_char_p, _c.c_uint64, _c.c_uint64, _c.c_uint32, _c.c_uint64, _c.c_uint32, _c.c_uint32,
    _c.c_uint64]

_PyCapsule_New = ctypes.pythonapi.PyCapsule_New
_PyCapsule_New.restype = ctypes.py_object
_PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]

_next = lib.grist_loader_next
_dlpack_all = lib.grist_batch_dlpack_all
_batch_free = lib.grist_batch_free

_ALL_FIELDS = ("input_ids", "labels", "position_ids", "cu_seqlens", "loss_mask", "sample_index")


def write_synthetic_release(path, samples=1024, seq_len=128, validation_samples=0,
                            samples_per_shard=256, vocab_size=32000, mean_document_tokens=100,
                            seed=1234):
    """Writes a deterministic synthetic release (for tests, benchmarks and examples) to `path`."""
    check(lib.grist_write_synthetic_release(
        str(path).encode(), samples, validation_samples, seq_len, samples_per_shard, vocab_size,
        mean_document_tokens, seed))


def _resolve_device(device):
    import torch
    dev = torch.device(device) if not isinstance(device, torch.device) else device
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"grist.Loader: device must be 'cpu' or 'cuda', got {device!r}")
    return dev


def _resolve_ranks(dp_rank, dp_size):
    if dp_rank is not None and dp_size is not None:
        return int(dp_rank), int(dp_size)
    rank, size = 0, 1
    try:
        import torch.distributed as dist
        if dist.is_available() and dist.is_initialized():
            rank, size = dist.get_rank(), dist.get_world_size()
    except ImportError:
        pass
    return (int(dp_rank) if dp_rank is not None else rank,
            int(dp_size) if dp_size is not None else size)


class Loader:
    """An iterable of dicts of torch tensors over one split of a grist release.

    Args:
      path: the release folder (holding manifest.json).
      micro_batch_size: samples per yielded batch.
      global_batch_size: samples per optimizer step over all data-parallel ranks; must be a
        multiple of micro_batch_size * dp_size (the rest is gradient accumulation).
      dp_rank, dp_size: this rank's data-parallel coordinates; default: torch.distributed's rank
        and world size when it is initialized, else 0 and 1. Tensor/pipeline-parallel peers of
        one data-parallel group pass the same dp_rank.
      seed: the order's seed (default: the release's seed).
      device: "cpu", "cuda" or "cuda:N"; without a usable GPU, CUDA falls back to CPU tensors
        (same order, same values) with a warning.
      prefetch: batches prepared ahead of the consumer.
      epochs: passes over the split (0: unlimited).
      num_workers: fill threads (0: min(4, CPUs)).
      split: "train" or "validation".
      int32: int32 instead of int64 ids and positions.
      fields: names of the tensors to produce (default: all).
      verify_checksums: hash every shard against the manifest when opening.
    """

    def __init__(self, path, micro_batch_size, global_batch_size, dp_rank=None, dp_size=None,
                 seed=None, device="cpu", prefetch=4, epochs=1, num_workers=0, split="train",
                 int32=False, fields=None, verify_checksums=False):
        import torch
        self._torch = torch
        from torch.utils import dlpack as _dlpack
        self._from_dlpack = _dlpack.from_dlpack
        self._handle = None
        dev = _resolve_device(device)
        rank, size = _resolve_ranks(dp_rank, dp_size)
        want_cuda = dev.type == "cuda"
        cuda_index = 0
        if want_cuda:
            if torch.cuda.is_available():
                cuda_index = dev.index if dev.index is not None else torch.cuda.current_device()
                torch.cuda.init()
            else:
                want_cuda = False
                warnings.warn("grist.Loader: device='cuda' but torch sees no GPU; "
                              "batches are CPU tensors (same order, same values)")
        if fields is not None:
            unknown = [f for f in fields if f not in _ALL_FIELDS]
            if unknown:
                raise ValueError(f"grist.Loader: unknown fields {unknown}; known: {_ALL_FIELDS}")
        handle = ctypes.c_void_p()
        check(lib.grist_loader_open(
            str(path).encode(), split.encode(), int(micro_batch_size), int(global_batch_size),
            rank, size, 0 if seed is None else 1, 0 if seed is None else int(seed), int(epochs),
            int(prefetch), int(num_workers), 1 if want_cuda else 0, cuda_index, 1 if int32 else 0,
            ",".join(fields).encode() if fields else None, 1 if verify_checksums else 0,
            ctypes.byref(handle)))
        self._handle = handle
        info = self._info()
        self._on_cuda = bool(info[2])
        if want_cuda and not self._on_cuda:
            warnings.warn("grist.Loader: " + lib.grist_loader_text(handle, 1).decode())
        self.device = torch.device("cuda", cuda_index) if self._on_cuda else torch.device("cpu")
        self.path = str(path)
        self.split = split
        self.micro_batch_size = int(micro_batch_size)
        self.global_batch_size = int(global_batch_size)
        self.dp_rank, self.dp_size = rank, size
        self.seed = int(info[3])
        self.num_samples = int(info[4])
        self.seq_len = int(info[5])
        self.batch_bytes = int(info[6])
        self.num_workers = int(info[7])
        self.micro_batches_per_step = int(info[8])
        self.epochs = int(epochs)
        self.release_id = lib.grist_loader_text(handle, 0).decode()
        self._names = None  # tensor names, in the order the C side lists them (fixed per loader)
        self._ptrs = None
        self._batch_slot = ctypes.c_void_p()
        self._batch_ref = ctypes.byref(self._batch_slot)

    def _h(self):
        if self._handle is None:
            raise ValueError("grist.Loader is closed")
        return self._handle

    def _info(self):
        arr = (ctypes.c_int64 * 9)()
        check(lib.grist_loader_info(self._h(), arr, 9))
        return list(arr)

    def __len__(self):
        """Micro batches this rank yields over the whole run (all epochs)."""
        n = self._info()[0]
        if n < 0:
            raise TypeError("grist.Loader with epochs=0 (unlimited) has no length")
        return n

    def remaining(self):
        """Micro batches left from the current position (-1: unlimited)."""
        return self._info()[1]

    def __iter__(self):
        # Continues from the current position (e.g. a loaded state); once exhausted, a new
        # iteration starts the run over from the beginning.
        if self._info()[1] == 0:
            self.load_state_dict(dict(self.state_dict(), consumed_samples=0, micro_index=0))
        return self

    def __next__(self):
        if self._handle is None:
            raise StopIteration
        b = self._batch_slot
        rc = _next(self._handle, self._batch_ref)
        if rc == -_OUT_OF_RANGE:
            raise StopIteration
        check(rc)
        try:
            if self._on_cuda:
                stream = self._torch.cuda.current_stream(self.device).cuda_stream
                check(lib.grist_batch_wait(b, stream))
            names = self._names
            if names is None:
                names = self._names = [
                    lib.grist_batch_tensor_name(b, i).decode()
                    for i in range(lib.grist_batch_num_tensors(b))]
                self._ptrs = (ctypes.c_void_p * len(names))()
            n = len(names)
            ptrs = self._ptrs
            check(_dlpack_all(b, ptrs, n))
            out = {}
            from_dlpack = self._from_dlpack
            for i in range(n):
                try:
                    out[names[i]] = from_dlpack(_PyCapsule_New(ptrs[i], b"dltensor", None))
                except BaseException:
                    for j in range(i, n):
                        lib.grist_dlpack_free(ptrs[j])
                    raise
            return out
        finally:
            _batch_free(b)

    def state_dict(self):
        """The position of the next batch, as a small dict of str/int (torch.save-able)."""
        return json.loads(lib.grist_loader_state(self._h()).decode())

    def load_state_dict(self, state):
        """Continues from `state` (from state_dict()). A state saved at a step boundary may be
        loaded with another dp_size or micro batch size; one saved mid-step needs the same
        global/micro batch sizes and dp_size. Raises GristError for another release or seed."""
        if not isinstance(state, dict):
            raise TypeError(f"grist.Loader.load_state_dict: expected a dict, got {type(state)}")
        check(lib.grist_loader_load_state(self._h(), json.dumps(state).encode()))

    def close(self):
        """Stops the workers. Batches already returned stay valid."""
        if self._handle is not None:
            lib.grist_loader_close(self._handle)
            self._handle = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        return (f"grist.Loader({self.path!r}, split={self.split!r}, "
                f"micro_batch_size={self.micro_batch_size}, "
                f"global_batch_size={self.global_batch_size}, dp_rank={self.dp_rank}, "
                f"dp_size={self.dp_size}, seed={self.seed}, device={str(self.device)!r})")


__all__ = ["Loader", "GristError", "write_synthetic_release"]
