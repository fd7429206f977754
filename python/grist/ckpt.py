"""grist.ckpt: fast, crash-safe checkpoints for PyTorch (io_uring, O_DIRECT, safetensors files).

    import grist
    h = grist.ckpt.save({"model": model.state_dict(), "optim": opt.state_dict(),
                         "loader": loader.state_dict(), "step": step},
                        f"ckpt/step-{step:08d}", keep_last=3)      # returns once snapshotted
    ...train on...
    h.wait()                                                        # durable and published
    state = grist.ckpt.load(grist.ckpt.latest("ckpt"), device="cuda")

Layout: a checkpoint is a folder with one safetensors file per rank (`rank-00000.safetensors`) and
`manifest.json`, written last (docs/formats/checkpoint.md). Any safetensors reader loads the files.

Names: nested dicts, lists and tuples are flattened; a tensor's name is its path of keys joined by
"." (`model.layer.0.weight`, `optim.state.3.exp_avg`). Everything else (ints, floats, strings,
bools, None, and the containers' shape, including int dict keys) is stored as JSON in the file's
`__metadata__["structure"]`, so `load` returns the same nested structure with the same key types.

Snapshot rule: `save` returns once every tensor has been copied into grist's staging memory
(device-to-host for GPU tensors; host tensors by the writer's pool of copy threads), so the caller
may update its tensors immediately; the file is written in the background.

No-snapshot rule (`snapshot=False`, and `blocking=True`, where it is invisible): host tensors are
written straight from their own memory where the O_DIRECT alignment allows (the rest is staged),
so `save` returns at once; the caller must not modify the tensors until `wait()` returns.

Durability: `handle.wait()` returns once the checkpoint is published: every rank file fsynced,
then `manifest.json` written under a temporary name, fsynced, renamed, its folder and the parent
fsynced. A crash before that leaves the previous checkpoints untouched; `latest()` never returns a
torn checkpoint. With one process, publishing happens in the background even if nobody waits;
with torch.distributed (world_size > 1), `wait()` is collective (all ranks call it) and rank 0
publishes once every rank's file is durable.
"""

import atexit
import ctypes
import json
import os
import threading

from grist import _ckpt_shard as _shard
from grist import _capi
from grist import _torch as _torch_version
from grist._capi import CkptWriterOptions, Status
from grist._native import GristError, check, lib

__all__ = ["save", "prepare", "load", "latest", "list_checkpoints", "verify", "read_manifest", "export",
           "SaveHandle", "StorageWriter", "StorageReader", "GristError"]


def __getattr__(name):
    # DCP's storage classes load torch.distributed.checkpoint: only when asked for.
    if name in ("StorageWriter", "StorageReader"):
        from grist import ckpt_dcp
        return getattr(ckpt_dcp, name)
    raise AttributeError(f"module 'grist.ckpt' has no attribute {name!r}")

# The safetensors names of the dtype codes, in code order (grist_capi.h, grist_ckpt_dtype).
_DTYPE_NAMES = _capi.dtype_names(lib)

# Declarations: grist._capi (the mirror of grist_capi.h, checked by tests/python/test_capi_header.py).
_c = ctypes
_P = _c.c_void_p
_S = _c.c_char_p

_PIECE = 64 << 20  # bytes per device-to-host piece: writes start as soon as the first lands


def _torch():
    return _torch_version.require()


def _dtype_tables():
    torch = _torch()
    pairs = [("BOOL", "bool"), ("U8", "uint8"), ("I8", "int8"), ("F8_E5M2", "float8_e5m2"),
             ("F8_E4M3", "float8_e4m3fn"), ("I16", "int16"), ("U16", "uint16"), ("F16", "float16"),
             ("BF16", "bfloat16"), ("I32", "int32"), ("U32", "uint32"), ("F32", "float32"),
             ("I64", "int64"), ("U64", "uint64"), ("F64", "float64")]
    to_code, from_code = {}, {}
    for name, tname in pairs:
        t = getattr(torch, tname, None)
        if t is not None:
            to_code[t] = _DTYPE_NAMES.index(name)
            from_code[_DTYPE_NAMES.index(name)] = t
    return to_code, from_code


def _bytes(s):
    return s.encode("utf-8") if isinstance(s, str) else s


def _strings(items):
    arr = (_S * max(1, len(items)))()
    for i, s in enumerate(items):
        arr[i] = _bytes(s)
    return arr


# ---- nested state ----

def _unflatten(node, tensors):
    if isinstance(node, dict):
        if "__tensor__" in node:
            return tensors[node["__tensor__"]]
        if "__dict__" in node:
            return {k: _unflatten(v, tensors) for k, v in node["__dict__"]}
        if "__list__" in node:
            return [_unflatten(v, tensors) for v in node["__list__"]]
        if "__tuple__" in node:
            return tuple(_unflatten(v, tensors) for v in node["__tuple__"])
        raise GristError("grist.ckpt: malformed structure metadata")
    return node


# ---- writers (one per process and I/O configuration; each holds a staging arena) ----

_writers = {}
_writers_lock = threading.Lock()
_last_handle = None


class _Writer:
    def __init__(self, direct, queue_depth, block_size, overlap, copy_threads):
        o = _capi.new_options(lib, CkptWriterOptions, "grist_ckpt_writer_options_init")
        o.direct, o.queue_depth, o.block_size = int(direct), int(queue_depth), int(block_size)
        o.overlap = -1 if overlap is None else int(bool(overlap))
        o.copy_threads = int(copy_threads or 0)
        p = _P()
        check(lib.grist_ckpt_writer_new(_c.byref(o), _c.byref(p)))
        self.ptr = p

    def __del__(self):
        if getattr(self, "ptr", None):
            lib.grist_ckpt_writer_free(self.ptr)
            self.ptr = None


def _writer(direct, queue_depth, block_size, overlap, copy_threads):
    key = (bool(direct), int(queue_depth), int(block_size), overlap, int(copy_threads or 0))
    with _writers_lock:
        if key not in _writers:
            _writers[key] = _Writer(*key)
        return _writers[key]


def _dist():
    try:
        import torch.distributed as dist
        if dist.is_available() and dist.is_initialized():
            return dist
    except ImportError:
        pass
    return None


class SaveHandle:
    """A checkpoint being written. `wait()` returns the folder once it is published; `done()`
    tells whether that has happened (without blocking). Publishing runs on a background thread on
    every rank (with several ranks, over torch.distributed's store, no collectives), so nobody
    has to call wait() for the checkpoint to be published."""

    def __init__(self, path, pending, rank, world_size, step, metadata, keep_last, blocked_s,
                 keep=None, shards=None, globals_=None, coord=None, structure=None):
        self.path = path
        self.rank = rank
        self.world_size = world_size
        self.blocked_seconds = blocked_s  # time save() held the caller
        self.file_info = None
        self._pending = pending
        self._keep = keep            # tensors written in place: alive until durable
        self._step = step
        self._metadata = metadata
        self._keep_last = keep_last
        self._shards = shards or []  # [name, offsets, lengths, begin, end] of this rank's file
        self._globals = globals_ or []  # [name, dtype, shape] of every tensor (rank 0 publishes)
        self._coord = coord
        self._structure = structure  # rank 0's, published in the manifest
        self._error = None
        self._published = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._finish, daemon=True)
        self._thread.start()

    def _wait_file(self):
        out = _S()
        rc = lib.grist_ckpt_pending_wait(self._pending, self.rank, _c.byref(out))
        if rc != 0:
            check(rc)
        self.file_info = json.loads(out.value.decode())
        return self.file_info["record"]

    def _publish(self, parts):
        index = _build_index(self._globals, parts)
        _publish(self.path, self._step, self.world_size, [p["record"] for p in parts],
                 self._metadata, index, self._keep_last, self._structure)

    def _finish(self):
        try:
            try:
                record = self._wait_file()
            except BaseException as e:
                if self._coord is None:
                    raise
                self._coord.fail(str(e))  # the others raise it naming this rank; so does this one
                raise GristError(f"rank {self.rank}: {e}") from e
            finally:
                self._release()
            part = {"record": record, "shards": self._shards}
            if self._coord is None:
                self._publish([part])
            else:
                self._coord.finish(part, self._publish)
        except BaseException as e:  # reported by wait()
            self._error = e if isinstance(e, GristError) else GristError(str(e))
        finally:
            self._published.set()

    def _release(self):
        with self._lock:
            if self._pending:
                lib.grist_ckpt_pending_free(self._pending)
                self._pending = None
            self._keep = None

    def wait(self):
        """Blocks until the checkpoint is published; returns its folder. Raises GristError when
        the save failed on any rank (naming it; the previous checkpoints are intact)."""
        self._thread.join()
        if self._error is not None:
            raise GristError(f"checkpoint {self.path}: {self._error}")
        return self.path

    def done(self):
        """True once the checkpoint is published (or failed: wait() raises the error)."""
        return self._published.is_set()


def _publish(path, step, world_size, records, metadata, index, keep_last, structure=None):
    keys = list(metadata.keys())
    vals = [metadata[k] for k in keys]
    recs = [json.dumps(r) for r in records]
    check(lib.grist_ckpt_publish(_bytes(path), int(step), world_size, len(recs), _strings(recs),
                                 len(keys), _strings(keys), _strings(vals),
                                 _bytes(json.dumps(index, separators=(",", ":"))),
                                 _bytes(structure) if structure else None, int(keep_last)))


def _build_index(globals_, parts):
    """The manifest's tensor index: every tensor of `globals_` ([name, dtype code, shape]) with
    the shards the ranks' `parts` hold. A box that several ranks wrote (a DTensor on a sub-mesh,
    e.g. FSDP2's dp mesh under tensor parallelism, is replicated on the sibling sub-meshes, which
    no rank can see) is indexed once, from the lowest rank; the other copies stay unreferenced in
    their files."""
    shards, seen = {}, set()
    for rank, p in enumerate(parts):
        for name, offs, lens, b, e in p["shards"]:
            box = (name, tuple(offs), tuple(lens))
            if box in seen:
                continue
            seen.add(box)
            shards.setdefault(name, []).append({"rank": rank, "offsets": offs, "lengths": lens,
                                                "begin": b, "end": e})
    index = []
    unwritten = []
    for name, code, shape in globals_:
        index.append({"name": name, "dtype": _DTYPE_NAMES[code], "shape": shape,
                      "shards": shards.pop(name, [])})
        if not index[-1]["shards"] and all(n > 0 for n in shape):
            unwritten.append(name)  # its chosen writer (a rank that lacks it) wrote nothing
    if shards or unwritten:
        what = (f"ranks hold tensors rank 0 does not ({sorted(shards)[:3]})" if shards else
                f"rank 0 holds tensors that not every rank holds ({unwritten[:3]})")
        raise GristError(
            f"grist.ckpt: {what}: every rank must save the same state dict keys (a plain tensor is "
            "written by one rank, chosen by its name). For state that differs per rank, such as "
            "pipeline stages' parameters, save through DCP with grist's storage, "
            "dcp.save(sd, storage_writer=grist.ckpt.StorageWriter(path)), whose planner gathers "
            "every rank's keys; or make the keys per rank")
    return index


def save(state_dict, path, *, blocking=False, step=None, keep_last=0, metadata=None,
         rank=None, world_size=None, direct=True, queue_depth=16, block_size=4 << 20,
         overlap=None, snapshot=True, copy_threads=None, timeout=None):
    """Saves `state_dict` as checkpoint folder `path`. Returns a SaveHandle; with blocking=True
    waits for it first.

    The state holds nested dicts/lists/tuples of torch.Tensor, DTensor (Shard(d)/Replicate()
    placements on any DeviceMesh, uneven shards included), plain values (str, int, float, bool,
    None) and objects with state_dict()/load_state_dict() (saved as their state_dict()). Each rank
    writes only its own shards; a replicated tensor (a DTensor's Replicate() dims, or a plain
    tensor when several ranks save: assumed equal on every rank, as DDP keeps them) is written
    once, by one rank. Plain values are taken from rank 0.

    step: recorded in the manifest (default: the trailing digits of the folder name, else 0).
    keep_last: after publishing, keep only the newest K published checkpoints beside `path`.
    metadata: a str -> str dict stored in manifest.json.
    rank/world_size: default from torch.distributed when initialized, else 0 / 1.
    direct/queue_depth/block_size: the I/O settings (O_DIRECT falls back where refused).
    overlap: write pieces while later ones are still being copied (True, and None: the
        default), or only after the whole snapshot (False).
    snapshot: True copies the state before returning (the caller may then modify it). False (host
        tensors only; GPU tensors are always copied): returns at once and writes aligned tensors
        from their own memory; the caller must not modify them until wait() returns.
        blocking=True always writes host tensors in place (nothing can modify them meanwhile).
    copy_threads: threads of the writer's snapshot copy (None: the CPUs this process may use,
        divided by LOCAL_WORLD_SIZE, at most 16).
    timeout: with several ranks, seconds a rank waits for the others once its own part is done
        (default GRIST_CKPT_TIMEOUT or 300); a rank that fails or dies is then named in the
        error every rank raises.
    """
    global _last_handle
    import time
    torch = _torch()
    t0 = time.perf_counter()
    _finish_previous()  # the staging arena holds one checkpoint at a time
    dist = _dist()
    if rank is None:
        rank = dist.get_rank() if dist else 0
    if world_size is None:
        world_size = dist.get_world_size() if dist else 1
    if world_size > 1 and dist is None:
        raise ValueError("grist.ckpt.save: world_size > 1 needs torch.distributed initialized")
    path = os.fspath(path)
    if step is None:
        s = _c.c_int64()
        lib.grist_ckpt_step_from_name(_bytes(path), _c.byref(s))
        step = max(0, s.value)
    metadata = {str(k): str(v) for k, v in (metadata or {}).items()}

    coord = None
    if world_size > 1:
        coord = _shard.Coordinator(_shard.default_store(), _shard.next_seq(), rank, world_size,
                                   timeout)
    try:
        leaves = []
        structure = _shard.flatten(state_dict, "", leaves, rank, world_size)
        to_code, _ = _dtype_tables()
        names = [lf.name for lf in leaves]
        if len(set(names)) != len(names):
            raise ValueError("grist.ckpt: two tensors flatten to the same name (a key contains '.')")
        globals_ = []
        for lf in leaves:
            if lf.dtype not in to_code:
                raise TypeError(f"grist.ckpt: tensor '{lf.name}' has dtype {lf.dtype}, which "
                                "safetensors lacks")
            globals_.append([lf.name, to_code[lf.dtype], lf.shape])
        # Empty shards of a DTensor are left out; a plain tensor is always in its owner's file (so a
        # single-process checkpoint's file holds the whole state for any safetensors reader).
        mine = [lf for lf in leaves if lf.owner and (lf.local.numel() > 0 or lf.dtensor is None)]
        tensors = [(lf.name, lf.local) for lf in mine]
        dtypes, ndims, dims = [], [], []
        for lf in mine:
            dtypes.append(to_code[lf.dtype])
            ndims.append(lf.local.dim())
            dims.extend(int(d) for d in lf.local.shape)
        sjson = json.dumps(structure, separators=(",", ":"))
        file_meta = {"format": "pt", "structure": sjson}

        def prepare():
            check(lib.grist_ckpt_prepare_dir(_bytes(path)))
        if coord is None:
            prepare()
        else:
            coord.dir_ready(prepare)
        w = _writer(direct, queue_depth, block_size, overlap, copy_threads)
        pending = _P()
        n = len(tensors)
        keys = list(file_meta.keys())
        fname = _bytes(os.path.join(path, f"rank-{rank:05d}.safetensors"))
        in_place = (blocking or not snapshot) and not any(t.is_cuda for _, t in tensors)
        keep = None
        if in_place:
            keep = [t.detach() if t.is_contiguous() else t.detach().contiguous() for _, t in tensors]
            srcs = (_c.c_uint64 * max(1, n))(*[t.data_ptr() for t in keep])
            check(lib.grist_ckpt_save_in_place(
                w.ptr, fname, n, _strings(names_of(tensors)), (_c.c_int * max(1, n))(*dtypes),
                (_c.c_int * max(1, n))(*ndims), (_c.c_int64 * max(1, len(dims)))(*dims), srcs,
                len(keys), _strings(keys), _strings([file_meta[k] for k in keys]),
                _c.byref(pending)))
        else:
            check(lib.grist_ckpt_begin(
                w.ptr, fname, n, _strings(names_of(tensors)), (_c.c_int * max(1, n))(*dtypes),
                (_c.c_int * max(1, n))(*ndims), (_c.c_int64 * max(1, len(dims)))(*dims),
                len(keys), _strings(keys), _strings([file_meta[k] for k in keys]),
                _c.byref(pending)))
        data = _c.c_uint64()
        begins = (_c.c_uint64 * max(1, n))()
        check(lib.grist_ckpt_pending_layout(pending, _c.byref(data), begins, n))
        shards = [[lf.name, lf.offsets, lf.lengths, int(begins[i]),
                   int(begins[i]) + lf.local.numel() * lf.local.element_size()]
                  for i, lf in enumerate(mine)]
        if not in_place:
            try:
                _fill(torch, tensors, data.value, begins, pending)
            except BaseException:
                lib.grist_ckpt_pending_abort(pending, b"save interrupted while snapshotting")
                out = _S()
                lib.grist_ckpt_pending_wait(pending, rank, _c.byref(out))
                lib.grist_ckpt_pending_free(pending)
                raise
    except BaseException as e:
        if coord is not None:
            coord.fail(f"{type(e).__name__}: {e}")
        raise
    h = SaveHandle(path, pending, rank, world_size, int(step), metadata, int(keep_last),
                   time.perf_counter() - t0, keep=keep, shards=shards,
                   globals_=globals_ if rank == 0 else None, coord=coord,
                   structure=sjson if rank == 0 else None)
    _last_handle = h
    if blocking:
        h.wait()
    return h


# Background staging preparation (grist_ckpt_writer_prepare / _staging in grist_capi.h).


def prepare(state_or_nbytes, *, wait=False, rank=None, world_size=None, direct=True,
            queue_depth=16, block_size=4 << 20, overlap=None, copy_threads=None):
    """Prepares the staging memory of a coming save() in the background, so that the first save
    of the process blocks only for its copy: the memory is allocated, faulted in, pinned for CUDA
    when a GPU is present (on the current device) and registered with io_uring by the writer's
    I/O thread, while training goes on. Call it as soon as the state exists (after building the
    model and optimizer), with the state dict save() will get (this rank's shards are counted, as
    save() would write them) or its byte count, and the same I/O settings as save(). A save() that
    comes while the preparation still runs waits for it. Later saves reuse the memory (with some
    headroom for growth), so one call is enough.

    Bounded: at most GRIST_CKPT_PREPARE_MAX bytes (K/M/G/T suffixes; default half the physical
    memory divided by LOCAL_WORLD_SIZE; 0 turns preparation off) are prepared ahead; a larger state
    is not prepared (returns 0, and save() allocates its memory on the caller's time as without
    prepare()). Returns the staging bytes the writer holds (or will hold once prepared); with
    wait=True, returns once the memory is ready."""
    if isinstance(state_or_nbytes, int) and not isinstance(state_or_nbytes, bool):
        nbytes, ntensors, text = int(state_or_nbytes), 0, 0
    else:
        dist = _dist()
        if rank is None:
            rank = dist.get_rank() if dist else 0
        if world_size is None:
            world_size = dist.get_world_size() if dist else 1
        leaves = []
        structure = _shard.flatten(state_or_nbytes, "", leaves, rank, world_size)
        mine = [lf for lf in leaves if lf.owner and (lf.local.numel() > 0 or lf.dtensor is None)]
        nbytes = sum(lf.local.numel() * lf.local.element_size() for lf in mine)
        ntensors = len(mine)
        text = sum(len(lf.name.encode()) for lf in mine) + len(
            json.dumps(structure, separators=(",", ":")).encode()) + 64
    w = _writer(direct, queue_depth, block_size, overlap, copy_threads)
    out = _c.c_uint64()
    rc = lib.grist_ckpt_writer_prepare(w.ptr, nbytes, ntensors, text, int(bool(wait)),
                                       _c.byref(out))
    if rc == -8:  # RESOURCE_EXHAUSTED: above the prepare limit, nothing prepared
        return 0
    check(rc)
    return int(out.value)


def _staging(direct=True, queue_depth=16, block_size=4 << 20, overlap=None, copy_threads=None):
    """What the writer save() uses with these settings holds: {"held": arena bytes, "limit": the
    prepare limit, "allocations": times its arena was allocated}."""
    w = _writer(direct, queue_depth, block_size, overlap, copy_threads)
    held, limit, allocs = _c.c_uint64(), _c.c_uint64(), _c.c_uint64()
    check(lib.grist_ckpt_writer_staging(w.ptr, _c.byref(held), _c.byref(limit)))
    check(lib.grist_ckpt_writer_arena_allocations(w.ptr, _c.byref(allocs)))
    return {"held": int(held.value), "limit": int(limit.value), "allocations": int(allocs.value)}


def names_of(tensors):
    return [n for n, _ in tensors]


def _finish_previous():
    """Waits for the previous save to be published before the next one. Its error, if any, stays
    with its handle's wait()."""
    h = _last_handle
    if h is not None and not h._published.is_set():
        try:
            h.wait()
        except GristError:
            pass


# A script that saves and exits still publishes (the protocol uses the store, no collectives; its
# waits are bounded).
atexit.register(_finish_previous)


def _arena_view(torch, addr, nbytes):
    buf = (_c.c_uint8 * nbytes).from_address(addr)
    return torch.frombuffer(buf, dtype=torch.uint8)


def _fill(torch, tensors, base, begins, pending):
    """Copies every tensor into the staging arena; marks pieces ready as they land. GPU tensors are
    queued first (device-to-host on a side stream); host tensors are copied meanwhile by the
    writer's copy pool, all its threads on consecutive chunks."""
    cuda_pieces = []  # (event or None for a host piece, data-region end), in file order
    host = []         # (offset, address, nbytes, source tensor kept alive)
    stream = None
    for i, (name, t) in enumerate(tensors):
        t = t.detach()
        nbytes = t.numel() * t.element_size()
        if nbytes == 0:
            continue
        if not t.is_contiguous():
            t = t.contiguous()
        if t.is_cuda:
            src = t.reshape(-1).view(torch.uint8) if t.dtype != torch.uint8 else t.reshape(-1)
            dst = _arena_view(torch, base + begins[i], nbytes)
            if stream is None:
                stream = torch.cuda.Stream(device=src.device)
                stream.wait_stream(torch.cuda.current_stream(src.device))
            with torch.cuda.stream(stream):
                for off in range(0, nbytes, _PIECE):
                    end = min(nbytes, off + _PIECE)
                    dst[off:end].copy_(src[off:end], non_blocking=True)
                    ev = torch.cuda.Event()
                    ev.record(stream)
                    cuda_pieces.append((ev, begins[i] + end))
            src.record_stream(stream)
        else:
            host.append((begins[i], t.data_ptr(), nbytes, t))
            cuda_pieces.append((None, begins[i] + nbytes))
    if host:
        k = len(host)
        offs = (_c.c_uint64 * k)(*[h[0] for h in host])
        srcs = (_c.c_uint64 * k)(*[h[1] for h in host])
        lens = (_c.c_uint64 * k)(*[h[2] for h in host])
        # Only host tensors: the pool marks the copied prefix ready itself (writes start early).
        only_host = stream is None
        check(lib.grist_ckpt_pending_copy(pending, k, offs, srcs, lens, int(only_host)))
    _drain(cuda_pieces, pending, block=True)
    check(lib.grist_ckpt_pending_mark_ready(pending, (1 << 64) - 1))


def _drain(pieces, pending, block):
    while pieces:
        ev, upto = pieces[0]
        if ev is not None:
            if not block and not ev.query():
                return
            ev.synchronize()
        check(lib.grist_ckpt_pending_mark_ready(pending, upto))
        pieces.pop(0)


def read_manifest(path):
    """The manifest of published checkpoint `path`, parsed, after grist validated it (checksum,
    files, and the tensor index: shards inside the shapes, no overlaps or holes, byte ranges inside
    their files, file names inside the folder). Raises GristError otherwise."""
    out = _S()
    check(lib.grist_ckpt_read_manifest(_bytes(os.fspath(path)), _c.byref(out)))
    return json.loads(out.value.decode())


def load(path, state_dict=None, *, device="cpu", rank=None, verify=True, direct=True,
         threads=None, stats=None):
    """Loads checkpoint folder `path` (or a single .safetensors file), verifying every checksum
    of every byte it reads.

    Without `state_dict`: returns the whole saved structure with full (unsharded) tensors on
    `device`, whatever world size or placements saved it (a flat name -> tensor dict for
    checkpoints without grist's structure: DCP's, or a foreign .safetensors file).

    With `state_dict` (the state to resume into, as the model/optimizer/loader now hold it): the
    checkpoint is resharded into it in place: every tensor and DTensor of `state_dict` receives
    exactly its part of the saved global tensor, each rank reading only the byte ranges overlapping
    its shards; objects with load_state_dict() get theirs called with their loaded state. Returns
    the loaded structure (the same tensors; plain values from the checkpoint). Tensors of the
    checkpoint that `state_dict` does not hold are not read.

    threads: files read at once (default: 4).
    stats: a dict that a checkpoint with a tensor index (version 2) fills with what this call read:
        "ranges", {file name: [[begin, end], ...]} (the data-region byte ranges its tensors need)
        and "bytes_read", {file name: bytes read}, the whole checksum blocks covering them.
    """
    torch = _torch()
    path = os.fspath(path)
    if not path.endswith(".safetensors"):
        m = read_manifest(path)
        if m["version"] >= 2:
            from grist import _ckpt_reshard
            return _ckpt_reshard.load_sharded(torch, path, m, state_dict, torch.device(device),
                                              verify, direct, threads or 4, stats)
    if state_dict is not None:
        raise GristError(f"{path}: a version-1 checkpoint (or single file) loads without a target "
                         "state_dict (load(path) returns it)")
    if rank is None:
        dist = _dist()
        rank = dist.get_rank() if dist else 0
    handle = _P()
    out = _S()
    check(lib.grist_ckpt_load(_bytes(path), int(rank), int(bool(verify)), int(bool(direct)),
                              _c.byref(handle), _c.byref(out)))
    info = json.loads(out.value.decode())
    owner = _Loaded(handle)
    _, from_code = _dtype_tables()
    device = torch.device(device)
    on_host = device.type == "cpu"
    tensors = {}
    try:
        _load_tensors(torch, path, info, handle, owner, from_code, device, on_host, tensors)
        pinned = _c.c_int()
        check(lib.grist_ckpt_load_finish(handle, _c.byref(pinned)))  # verification
    finally:
        if device.type == "cuda":
            torch.cuda.synchronize(device)  # no copy may still read the buffer when it is freed
    structure = info["file_metadata"].get("structure")
    if structure is None:
        return tensors
    return _unflatten(json.loads(structure), tensors)


def _load_tensors(torch, path, info, handle, owner, from_code, device, on_host, tensors):
    # Tensors arrive in file order; each is copied to the device as soon as its bytes are in, while
    # later ones are still being read. Nothing is returned before every checksum verified.
    for t in info["tensors"]:
        code = t["dtype"]
        if code not in from_code:
            raise GristError(f"{path}: tensor '{t['name']}' has dtype {_DTYPE_NAMES[code]}, "
                             f"which this torch ({torch.__version__}) lacks")
        dt = from_code[code]
        if t["nbytes"] == 0:
            x = torch.empty(t["shape"], dtype=dt)
        else:
            if not on_host:
                check(lib.grist_ckpt_load_wait_data(handle, t["offset"] + t["nbytes"]))
            buf = (_c.c_uint8 * t["nbytes"]).from_address(info["data"] + t["offset"])
            buf._grist_owner = owner  # keeps the native buffer alive while the tensor lives
            x = torch.frombuffer(buf, dtype=dt).reshape(t["shape"])
        if not on_host:
            x = x.to(device, non_blocking=bool(info["pinned"]))
        tensors[t["name"]] = x


class _Loaded:
    def __init__(self, handle):
        self.handle = handle

    def __del__(self):
        if self.handle:
            lib.grist_ckpt_load_free(self.handle)
            self.handle = None


def export(path, out_dir, *, prefix="", max_shard_bytes=5 << 30):
    """Consolidates checkpoint `path` (any world size / placements; grist.ckpt.save's or DCP's
    through grist.ckpt.StorageWriter) into Hugging Face-style safetensors in `out_dir`: the
    tensors whose names start with `prefix` (e.g. "model."), named without it, dtypes kept, each
    assembled whole. Writes `model.safetensors`, or above `max_shard_bytes`
    `model-0000k-of-0000n.safetensors` + `model.safetensors.index.json`. Returns a dict: files,
    tensors, total_bytes, index (whether the index file was written)."""
    out = _S()
    check(lib.grist_ckpt_export(_bytes(os.fspath(path)), _bytes(os.fspath(out_dir)),
                                _bytes(prefix), int(max_shard_bytes), _c.byref(out)))
    return json.loads(out.value.decode())


def latest(root, *, verify=False):
    """The newest published checkpoint folder under `root` (by step), or None. With verify=True
    each candidate is read and checksummed, newest first, and the first good one returned."""
    out = _S()
    rc = lib.grist_ckpt_latest(_bytes(os.fspath(root)), int(bool(verify)), _c.byref(out))
    if rc == -Status.NOT_FOUND:
        return None
    check(rc)
    return out.value.decode()


def list_checkpoints(root):
    """[(step, path)] of the published checkpoints under `root`, oldest first."""
    out = _S()
    check(lib.grist_ckpt_list(_bytes(os.fspath(root)), _c.byref(out)))
    return [(c["step"], c["path"]) for c in json.loads(out.value.decode())]


def verify(path):
    """Reads every file of a checkpoint and checks every checksum; raises GristError if any fails."""
    check(lib.grist_ckpt_verify(_bytes(os.fspath(path))))


def manifest(path):
    """The parsed manifest.json of a published checkpoint (after checking its checksum)."""
    with open(os.path.join(os.fspath(path), "manifest.json"), "rb") as f:
        return json.loads(f.read().decode())


def cuda_available():
    """Whether grist's native library was built with CUDA and sees a GPU."""
    return bool(lib.grist_ckpt_cuda_available())
