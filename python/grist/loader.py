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

A blend draws every global batch from several releases by weight, each in its own order:

    loader = grist.Loader([(0.7, "web/v1.0"), (0.3, "code/v1.0")], micro_batch_size=8,
                          global_batch_size=64)

Data-parallel coordinates, in this order: dp_rank/dp_size; dp_group (a ProcessGroup) or
device_mesh + dp_dim; the default process group; RANK/WORLD_SIZE (torchrun) or
SLURM_PROCID/SLURM_NTASKS (srun). A multi-process environment with none of these is an error.
"""

import ctypes
import json
import os
import warnings

from grist._capi import (Device, LoaderInfo, LoaderOptions, Status, SyntheticReleaseOptions,
                         new_options)
from grist._native import GristError, check, lib
from grist._torch import require as _require_torch

_END = -Status.OUT_OF_RANGE  # grist_loader_next at the end of the data

_PyCapsule_New = ctypes.pythonapi.PyCapsule_New
_PyCapsule_New.restype = ctypes.py_object
_PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]

_next = lib.grist_loader_next
_dlpack_all = lib.grist_batch_dlpack_all
_batch_free = lib.grist_batch_free

_ALL_FIELDS = ("input_ids", "labels", "position_ids", "cu_seqlens", "loss_mask", "sample_index",
               "release_index")


def write_synthetic_release(path, samples=1024, seq_len=128, validation_samples=0,
                            samples_per_shard=256, vocab_size=32000, mean_document_tokens=100,
                            seed=1234):
    """Writes a deterministic synthetic release (for tests, benchmarks and examples) to `path`."""
    o = new_options(lib, SyntheticReleaseOptions, "grist_synthetic_release_options_init")
    o.samples, o.validation_samples, o.seq_len = samples, validation_samples, seq_len
    o.samples_per_shard, o.vocab_size, o.mean_document_tokens = (samples_per_shard, vocab_size,
                                                                 mean_document_tokens)
    o.seed = seed
    check(lib.grist_write_synthetic_release(str(path).encode(), ctypes.byref(o)))


def _resolve_device(device):
    torch = _require_torch()
    dev = torch.device(device) if not isinstance(device, torch.device) else device
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"grist.Loader: device must be 'cpu' or 'cuda', got {device!r}")
    return dev


def _env_int(name):
    v = os.environ.get(name)
    if v is None or v.strip() == "":
        return None
    try:
        return int(v)
    except ValueError:
        raise ValueError(f"grist.Loader: environment variable {name}={v!r} is not an integer")


# Launchers whose variables say "several processes" without a rank grist may use.
_MULTI_PROCESS_HINTS = (("WORLD_SIZE", "torchrun"), ("LOCAL_WORLD_SIZE", "torchrun"),
                        ("SLURM_NTASKS", "srun"), ("OMPI_COMM_WORLD_SIZE", "mpirun (Open MPI)"),
                        ("PMI_SIZE", "an MPI launcher"), ("PMIX_SIZE", "a PMIx launcher"))


def _mesh_dim(device_mesh, dp_dim):
    names = getattr(device_mesh, "mesh_dim_names", None)
    if dp_dim is None:
        if device_mesh.ndim == 1:
            return 0
        for cand in ("dp", "data", "data_parallel", "dp_replicate", "dp_shard"):
            if names and cand in names:
                return names.index(cand)
        raise ValueError(
            f"grist.Loader: device_mesh has {device_mesh.ndim} dimensions {names}; pass dp_dim= "
            "(the name or index of the data-parallel dimension)")
    if isinstance(dp_dim, str):
        if not names or dp_dim not in names:
            raise ValueError(f"grist.Loader: device_mesh has no dimension {dp_dim!r} "
                             f"(its dimensions: {names})")
        return names.index(dp_dim)
    dim = int(dp_dim)
    if not 0 <= dim < device_mesh.ndim:
        raise ValueError(f"grist.Loader: dp_dim {dim} is out of range for a "
                         f"{device_mesh.ndim}-dimensional device_mesh")
    return dim


def resolve_dp(dp_rank=None, dp_size=None, dp_group=None, device_mesh=None, dp_dim=None):
    """This process's (dp_rank, dp_size, source): explicit values first; then dp_group or
    device_mesh + dp_dim; then torch.distributed's default group; then RANK/WORLD_SIZE
    (torchrun) or SLURM_PROCID/SLURM_NTASKS (srun). Raises ValueError when the environment says
    there are several processes but none of these gives this one's rank."""
    if dp_group is not None and device_mesh is not None:
        raise ValueError("grist.Loader: pass dp_group or device_mesh, not both")
    source = None
    rank = size = None
    if dp_rank is not None and dp_size is not None:
        return int(dp_rank), int(dp_size), "explicit"
    if dp_group is not None or device_mesh is not None:
        import torch.distributed as dist
        if device_mesh is not None:
            dim = _mesh_dim(device_mesh, dp_dim)
            rank, size = device_mesh.get_local_rank(dim), device_mesh.size(dim)
            source = "device_mesh"
        else:
            rank, size = dist.get_rank(dp_group), dist.get_world_size(dp_group)
            if rank < 0:
                raise ValueError("grist.Loader: this process is not a member of dp_group")
            source = "dp_group"
    else:
        try:
            import torch.distributed as dist
            if dist.is_available() and dist.is_initialized():
                rank, size, source = dist.get_rank(), dist.get_world_size(), "default process group"
        except ImportError:
            pass
    if source is None:
        for rank_var, size_var, who in (("RANK", "WORLD_SIZE", "torchrun"),
                                        ("SLURM_PROCID", "SLURM_NTASKS", "srun")):
            r, n = _env_int(rank_var), _env_int(size_var)
            if r is not None and n is not None:
                if not 0 <= r < n:
                    raise ValueError(f"grist.Loader: {rank_var}={r} is out of range for "
                                     f"{size_var}={n} ({who})")
                rank, size, source = r, n, f"{rank_var}/{size_var}"
                break
    if source is None:
        for var, who in _MULTI_PROCESS_HINTS:
            n = _env_int(var)
            if n is not None and n > 1 and (dp_rank is None or dp_size is None):
                raise ValueError(
                    f"grist.Loader: {var}={n} says this is one of {n} processes ({who}), but "
                    "nothing gives this process's data-parallel rank: pass dp_rank= and dp_size=, "
                    "a dp_group= or device_mesh=, call torch.distributed.init_process_group() "
                    "first, or launch with torchrun (RANK/WORLD_SIZE) or srun "
                    "(SLURM_PROCID/SLURM_NTASKS). Refusing to take rank 0, which would give every "
                    "process the same batches.")
        rank, size, source = 0, 1, "single process"
    return (int(dp_rank) if dp_rank is not None else int(rank),
            int(dp_size) if dp_size is not None else int(size), source)


def _resolve_ranks(dp_rank, dp_size):
    rank, size, _ = resolve_dp(dp_rank, dp_size)
    return rank, size


def _parse_blend(path):
    """[(weight, path), ...] from a path, a list of (weight, path) pairs or a {path: weight}
    dict. One entry is one release."""
    if isinstance(path, (str, bytes, os.PathLike)):
        return [(1.0, os.fsdecode(path))]
    items = list(path.items()) if isinstance(path, dict) else list(path)
    if isinstance(path, dict):
        items = [(w, p) for p, w in items]
    if not items:
        raise ValueError("grist.Loader: an empty blend")
    out = []
    for item in items:
        try:
            w, p = item
        except (TypeError, ValueError):
            raise ValueError(f"grist.Loader: a blend entry must be (weight, path), got {item!r}")
        if isinstance(w, (str, os.PathLike)) and not isinstance(p, (str, os.PathLike)):
            w, p = p, w
        out.append((float(w), os.fsdecode(p)))
    return out


class Loader:
    """An iterable of dicts of torch tensors over one split of a grist release.

    Args:
      path: the release folder (holding manifest.json), or a blend: a list of (weight, folder)
        pairs (or a {folder: weight} dict) of releases with the same seq_len and tokenizer.
      micro_batch_size: samples per yielded batch.
      global_batch_size: samples per optimizer step over all data-parallel ranks; must be a
        multiple of micro_batch_size * dp_size (the rest is gradient accumulation).
      dp_rank, dp_size: this rank's data-parallel coordinates. Default, in this order: dp_group's
        rank and size; device_mesh's coordinate and size along dp_dim; torch.distributed's default
        group; RANK/WORLD_SIZE (torchrun) or SLURM_PROCID/SLURM_NTASKS (srun); else 0 and 1, unless
        the environment says there are several processes (then ValueError). Tensor/pipeline-
        parallel peers of one data-parallel rank must resolve to the same dp_rank: pass dp_group
        or device_mesh under TP/PP (the default group's rank is the global rank).
      dp_group: the data-parallel ProcessGroup.
      device_mesh, dp_dim: a DeviceMesh and the name or index of its data-parallel dimension
        (default: its only dimension, or the one named "dp"/"data"/"dp_replicate"/"dp_shard").
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
      elastic: a state saved (at a step boundary) with another global_batch_size continues the
        global order (True) or is refused naming global_batch_size (False).

    State follows torch.distributed.checkpoint's Stateful protocol (state_dict/load_state_dict),
    so dcp.save({"loader": loader}, ...) and dcp.load carry it; as_dataset() gives an
    IterableDataset view for torch.utils.data.DataLoader, Lightning and the HF Trainer.
    """

    def __init__(self, path, micro_batch_size, global_batch_size, dp_rank=None, dp_size=None,
                 seed=None, device="cpu", prefetch=4, epochs=1, num_workers=0, split="train",
                 int32=False, fields=None, verify_checksums=False, *, dp_group=None,
                 device_mesh=None, dp_dim=None, elastic=True):
        torch = _require_torch()
        self._torch = torch
        from torch.utils import dlpack as _dlpack
        self._from_dlpack = _dlpack.from_dlpack
        self._handle = None
        dev = _resolve_device(device)
        rank, size, self.rank_source = resolve_dp(dp_rank, dp_size, dp_group, device_mesh, dp_dim)
        blend = _parse_blend(path)
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
        n = len(blend)
        paths = (ctypes.c_char_p * n)(*[p.encode() for _, p in blend])
        weights = (ctypes.c_double * n)(*[w for w, _ in blend])
        o = new_options(lib, LoaderOptions, "grist_loader_options_init")
        o.num_releases, o.paths, o.weights = n, paths, weights
        o.split = split.encode()
        o.micro_batch_size, o.global_batch_size = int(micro_batch_size), int(global_batch_size)
        o.dp_rank, o.dp_size = rank, size
        o.has_seed, o.seed = (0, 0) if seed is None else (1, int(seed))
        o.epochs, o.prefetch, o.num_workers = int(epochs), int(prefetch), int(num_workers)
        o.device, o.cuda_device = (Device.CUDA if want_cuda else Device.CPU), cuda_index
        o.int32_ids = 1 if int32 else 0
        o.fields = ",".join(fields).encode() if fields else None
        o.verify_checksums, o.elastic = int(bool(verify_checksums)), int(bool(elastic))
        check(lib.grist_loader_open(ctypes.byref(o), ctypes.byref(handle)))
        self._handle = handle
        info = self._info()
        self._on_cuda = bool(info.on_cuda)
        if want_cuda and not self._on_cuda:
            warnings.warn("grist.Loader: " + self._text(lib.grist_loader_device_note))
        self.device = torch.device("cuda", cuda_index) if self._on_cuda else torch.device("cpu")
        self.path = blend[0][1] if n == 1 else [p for _, p in blend]
        self.blend = blend if n > 1 else None
        self.elastic = bool(elastic)
        self.split = split
        self.micro_batch_size = int(micro_batch_size)
        self.global_batch_size = int(global_batch_size)
        self.dp_rank, self.dp_size = rank, size
        self.seed = int(info.seed)
        self.num_samples = int(info.num_samples)
        self.seq_len = int(info.seq_len)
        self.batch_bytes = int(info.batch_bytes)
        self.num_workers = int(info.num_workers)
        self.micro_batches_per_step = int(info.micro_batches_per_step)
        self.epochs = int(epochs)
        self.release_id = self._text(lib.grist_loader_release_id)
        self._names = None  # tensor names, in the order the C side lists them (fixed per loader)
        self._ptrs = None
        self._batch_slot = ctypes.c_void_p()
        self._batch_ref = ctypes.byref(self._batch_slot)

    _CONFIG_KEYS = ("micro_batch_size", "global_batch_size", "dp_rank", "dp_size", "seed",
                    "device", "prefetch", "epochs", "num_workers", "split", "int32", "fields",
                    "verify_checksums", "dp_dim", "elastic")

    @classmethod
    def from_config(cls, config, section="loader", **overrides):
        """A Loader from the `section` table of a TOML file (or of a dict already parsed):

            [loader]
            micro_batch_size = 8
            global_batch_size = 256
            release = "web/v1.0"                # one release, or a blend:
            blend = [{weight = 0.7, path = "web/v1.0"}, {weight = 0.3, path = "code/v1.0"}]
            # any other keyword of grist.Loader: seed, epochs, split, device, fields, ...

        Relative paths are taken from the config file's folder. `overrides` (e.g. dp_group=,
        device_mesh=, or any key above) replace the file's values. ValueError names an unknown
        key or a malformed blend entry."""
        base = ""
        if isinstance(config, dict):
            doc = config
        else:
            try:
                import tomllib
            except ImportError:  # Python < 3.11
                import tomli as tomllib
            with open(config, "rb") as f:
                doc = tomllib.load(f)
            base = os.path.dirname(os.path.abspath(os.fspath(config)))
        table = doc.get(section) if section else doc
        if not isinstance(table, dict):
            raise ValueError(f"grist.Loader.from_config: no [{section}] table")
        table = dict(table)

        def where(p):
            p = os.fspath(p)
            return p if os.path.isabs(p) or not base else os.path.join(base, p)
        if "blend" in table and "release" in table:
            raise ValueError("grist.Loader.from_config: give release or blend, not both")
        if "blend" in table:
            entries = table.pop("blend")
            if not isinstance(entries, list) or not entries:
                raise ValueError("grist.Loader.from_config: blend must be a non-empty array of "
                                 "{weight, path} tables")
            path = []
            for i, e in enumerate(entries):
                if not isinstance(e, dict) or set(e) != {"weight", "path"}:
                    raise ValueError(f"grist.Loader.from_config: blend[{i}] must have exactly "
                                     f"the keys weight and path, got {e!r}")
                path.append((float(e["weight"]), where(e["path"])))
        elif "release" in table:
            path = where(table.pop("release"))
        else:
            path = None
        unknown = sorted(k for k in table if k not in cls._CONFIG_KEYS)
        if unknown:
            raise ValueError(f"grist.Loader.from_config: unknown keys {unknown} in [{section}] "
                             f"(known: release, blend, {', '.join(cls._CONFIG_KEYS)})")
        table.update(overrides)
        path = table.pop("path", path)
        if path is None:
            raise ValueError(f"grist.Loader.from_config: [{section}] has neither release nor blend")
        for key in ("micro_batch_size", "global_batch_size"):
            if key not in table:
                raise ValueError(f"grist.Loader.from_config: [{section}] needs {key}")
        return cls(path, **table)

    def _h(self):
        if self._handle is None:
            raise ValueError("grist.Loader is closed")
        return self._handle

    def _info(self):
        info = LoaderInfo(struct_size=ctypes.sizeof(LoaderInfo))
        check(lib.grist_loader_get_info(self._h(), ctypes.byref(info)))
        return info

    def _text(self, fn):
        out = ctypes.c_char_p()
        check(fn(self._h(), ctypes.byref(out)))
        return out.value.decode()

    def __len__(self):
        """Micro batches this rank yields over the whole run (all epochs)."""
        n = self._info().size
        if n < 0:
            raise TypeError("grist.Loader with epochs=0 (unlimited) has no length")
        return n

    def remaining(self):
        """Micro batches left from the current position (-1: unlimited)."""
        return self._info().remaining

    def __iter__(self):
        # Continues from the current position (e.g. a loaded state); once exhausted, a new
        # iteration starts the run over from the beginning.
        if self._info().remaining == 0:
            st = dict(self.state_dict(), consumed_samples=0, micro_index=0)
            if "blend" in st:
                st["blend"] = [dict(c, consumed=0) for c in st["blend"]]
            self.load_state_dict(st)
        return self

    def __next__(self):
        if self._handle is None:
            raise StopIteration
        b = self._batch_slot
        rc = _next(self._handle, self._batch_ref)
        if rc == _END:
            raise StopIteration
        check(rc)
        try:
            if self._on_cuda:
                stream = self._torch.cuda.current_stream(self.device).cuda_stream
                check(lib.grist_batch_wait(b, stream))
            names = self._names
            if names is None:
                count, name = ctypes.c_int(), ctypes.c_char_p()
                check(lib.grist_batch_num_tensors(b, ctypes.byref(count)))
                names = []
                for i in range(count.value):
                    check(lib.grist_batch_tensor_name(b, i, ctypes.byref(name)))
                    names.append(name.value.decode())
                self._names = names
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

    @property
    def weights(self):
        """A blend's current weights (None for one release)."""
        return None if self.blend is None else [w for w, _ in self.blend]

    def draws_per_step(self):
        """Samples each release contributes to every global batch (a list; [G] for one release)."""
        n = ctypes.c_int()
        check(lib.grist_loader_blend_draws(self._h(), None, 0, ctypes.byref(n)))
        arr = (ctypes.c_int64 * max(1, n.value))()
        check(lib.grist_loader_blend_draws(self._h(), arr, n.value, ctypes.byref(n)))
        return [int(arr[i]) for i in range(n.value)]

    def set_weights(self, weights):
        """New blend weights from here on; the loader must stand at a step boundary (between
        optimizer steps). No release repeats or skips a sample."""
        if self.blend is None:
            raise ValueError("grist.Loader.set_weights: this loader reads one release, not a blend")
        weights = [float(w) for w in weights]
        if len(weights) != len(self.blend):
            raise ValueError(f"grist.Loader.set_weights: {len(weights)} weights for a blend of "
                             f"{len(self.blend)} releases")
        arr = (ctypes.c_double * len(weights))(*weights)
        check(lib.grist_loader_set_weights(self._h(), arr, len(weights)))
        self.blend = [(w, p) for w, (_, p) in zip(weights, self.blend)]

    def as_dataset(self, hf=False):
        """An IterableDataset over this loader (grist.data.Dataset): same order, same state; with
        hf=True its items are a transformers causal LM's arguments (grist.data.hf_batch)."""
        from grist.data import Dataset
        return Dataset(self, hf=hf)

    def state_dict(self):
        """The position of the next batch, as a small dict of str/int (torch.save-able; a blend's
        also lists each release's draws, weight and epoch under "blend")."""
        return json.loads(self._text(lib.grist_loader_state))

    def load_state_dict(self, state):
        """Continues from `state` (from state_dict()). A state saved at a step boundary may be
        loaded with another dp_size or micro batch size (and, if elastic, global batch size); one
        saved mid-step needs the same global/micro batch sizes and dp_size. A blend's state may
        hold other weights (at a step boundary): this loader's weights apply from there on.
        Raises GristError naming the field for another release, split or seed."""
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
        src = self.path if self.blend is None else self.blend
        return (f"grist.Loader({src!r}, split={self.split!r}, "
                f"micro_batch_size={self.micro_batch_size}, "
                f"global_batch_size={self.global_batch_size}, dp_rank={self.dp_rank}, "
                f"dp_size={self.dp_size}, seed={self.seed}, device={str(self.device)!r})")


__all__ = ["Loader", "GristError", "resolve_dp", "write_synthetic_release"]
