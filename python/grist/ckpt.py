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

from grist._native import GristError, check, lib

__all__ = ["save", "load", "latest", "list_checkpoints", "verify", "SaveHandle", "GristError"]

# DType codes of ckptio/safetensors.h, in order.
_DTYPE_NAMES = ["BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "I16", "U16", "F16", "BF16", "I32", "U32",
                "F32", "I64", "U64", "F64"]

_c = ctypes
_P = _c.c_void_p
_S = _c.c_char_p
lib.grist_ckpt_writer_new.argtypes = [_c.c_int, _c.c_int, _c.c_uint64, _c.c_int, _c.c_int,
                                      _c.POINTER(_P)]
lib.grist_ckpt_writer_free.argtypes = [_P]
lib.grist_ckpt_writer_free.restype = None
lib.grist_ckpt_cuda_available.argtypes = []
lib.grist_ckpt_default_copy_threads.argtypes = []
lib.grist_ckpt_memcpy.argtypes = [_c.c_uint64, _c.c_uint64, _c.c_uint64, _c.c_int]
lib.grist_ckpt_memcpy.restype = None
lib.grist_ckpt_prepare_dir.argtypes = [_S]
lib.grist_ckpt_begin.argtypes = [_P, _S, _c.c_int, _c.POINTER(_S), _c.POINTER(_c.c_int),
                                 _c.POINTER(_c.c_int), _c.POINTER(_c.c_int64), _c.c_int,
                                 _c.POINTER(_S), _c.POINTER(_S), _c.POINTER(_P)]
lib.grist_ckpt_pending_layout.argtypes = [_P, _c.POINTER(_c.c_uint64), _c.POINTER(_c.c_uint64),
                                          _c.c_int]
lib.grist_ckpt_save_in_place.argtypes = [_P, _S, _c.c_int, _c.POINTER(_S), _c.POINTER(_c.c_int),
                                         _c.POINTER(_c.c_int), _c.POINTER(_c.c_int64),
                                         _c.POINTER(_c.c_uint64), _c.c_int, _c.POINTER(_S),
                                         _c.POINTER(_S), _c.POINTER(_P)]
lib.grist_ckpt_pending_copy.argtypes = [_P, _c.c_int, _c.POINTER(_c.c_uint64),
                                        _c.POINTER(_c.c_uint64), _c.POINTER(_c.c_uint64), _c.c_int]
lib.grist_ckpt_pending_copy.restype = None
lib.grist_ckpt_pending_mark_ready.argtypes = [_P, _c.c_uint64]
lib.grist_ckpt_pending_mark_ready.restype = None
lib.grist_ckpt_pending_abort.argtypes = [_P, _S]
lib.grist_ckpt_pending_abort.restype = None
lib.grist_ckpt_pending_done.argtypes = [_P]
lib.grist_ckpt_pending_wait.argtypes = [_P, _c.c_int, _c.POINTER(_S)]
lib.grist_ckpt_pending_free.argtypes = [_P]
lib.grist_ckpt_pending_free.restype = None
lib.grist_ckpt_publish.argtypes = [_S, _c.c_int64, _c.c_int, _c.c_int, _c.POINTER(_S), _c.c_int,
                                   _c.POINTER(_S), _c.POINTER(_S), _c.c_int]
lib.grist_ckpt_latest.argtypes = [_S, _c.c_int, _c.POINTER(_S)]
lib.grist_ckpt_list.argtypes = [_S, _c.POINTER(_S)]
lib.grist_ckpt_verify.argtypes = [_S]
lib.grist_ckpt_step_from_name.argtypes = [_S, _c.POINTER(_c.c_int64)]
lib.grist_ckpt_load.argtypes = [_S, _c.c_int, _c.c_int, _c.c_int, _c.POINTER(_P), _c.POINTER(_S)]
lib.grist_ckpt_load_wait_data.argtypes = [_P, _c.c_uint64]
lib.grist_ckpt_load_finish.argtypes = [_P, _c.POINTER(_c.c_int)]
lib.grist_ckpt_load_free.argtypes = [_P]
lib.grist_ckpt_load_free.restype = None

_PIECE = 64 << 20  # bytes per device-to-host piece: writes start as soon as the first lands


def _torch():
    import torch
    return torch


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


# ---- flattening nested state ----

def _flatten(obj, prefix, tensors):
    torch = _torch()
    if isinstance(obj, torch.Tensor):
        if not prefix:
            raise ValueError("grist.ckpt: a bare tensor needs a name; save a dict")
        tensors.append((prefix, obj))
        return {"__tensor__": prefix}
    if isinstance(obj, dict):
        items = []
        for k, v in obj.items():
            if not isinstance(k, (str, int)) or isinstance(k, bool):
                raise TypeError(f"grist.ckpt: dict key {k!r} at '{prefix}' is not a str or int")
            child = f"{prefix}.{k}" if prefix else str(k)
            items.append([k, _flatten(v, child, tensors)])
        return {"__dict__": items}
    if isinstance(obj, (list, tuple)):
        kind = "__tuple__" if isinstance(obj, tuple) else "__list__"
        return {kind: [_flatten(v, f"{prefix}.{i}" if prefix else str(i), tensors)
                       for i, v in enumerate(obj)]}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    raise TypeError(f"grist.ckpt: cannot store {type(obj).__name__} at '{prefix}': only tensors, "
                    "dicts, lists, tuples, str, int, float, bool and None")


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
        p = _P()
        check(lib.grist_ckpt_writer_new(int(direct), int(queue_depth), int(block_size),
                                        -1 if overlap is None else int(bool(overlap)),
                                        int(copy_threads or 0), _c.byref(p)))
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
    tells whether that has happened (without blocking)."""

    def __init__(self, path, pending, rank, world_size, step, metadata, keep_last, blocked_s,
                 keep=None):
        self.path = path
        self.rank = rank
        self.world_size = world_size
        self.blocked_seconds = blocked_s  # time save() held the caller
        self.file_info = None
        self._pending = pending
        self._keep = keep  # tensors written in place: alive until the file is written
        self._step = step
        self._metadata = metadata
        self._keep_last = keep_last
        self._error = None
        self._published = threading.Event()
        self._lock = threading.Lock()
        self._thread = None
        if world_size == 1:
            self._thread = threading.Thread(target=self._finish_local, daemon=True)
            self._thread.start()

    def _wait_file(self):
        out = _S()
        rc = lib.grist_ckpt_pending_wait(self._pending, self.rank, _c.byref(out))
        if rc != 0:
            check(rc)
        self.file_info = json.loads(out.value.decode())
        return self.file_info["record"]

    def _publish(self, records):
        keys = list(self._metadata.keys())
        vals = [self._metadata[k] for k in keys]
        recs = [json.dumps(r) for r in records]
        check(lib.grist_ckpt_publish(_bytes(self.path), self._step, self.world_size, len(recs),
                                     _strings(recs), len(keys), _strings(keys), _strings(vals),
                                     self._keep_last))

    def _finish_local(self):
        try:
            self._publish([self._wait_file()])
        except BaseException as e:  # reported by wait()
            self._error = e
        finally:
            self._release()
            self._published.set()

    def _release(self):
        with self._lock:
            if self._pending:
                lib.grist_ckpt_pending_free(self._pending)
                self._pending = None
            self._keep = None

    def wait(self):
        """Blocks until the checkpoint is published; returns its folder. Raises GristError when
        the save failed (the previous checkpoints are intact). Collective when world_size > 1."""
        if self._thread is not None:
            self._thread.join()
        elif not self._published.is_set():
            try:
                rec = self._wait_file()
                err = None
            except GristError as e:
                rec, err = None, str(e)
            finally:
                self._release()
            dist = _dist()
            gathered = [None] * self.world_size
            dist.all_gather_object(gathered, {"record": rec, "error": err})
            errors = [g["error"] for g in gathered if g["error"]]
            if not errors and self.rank == 0:
                try:
                    self._publish([g["record"] for g in gathered])
                except GristError as e:
                    errors.append(str(e))
            status = [errors[0] if errors else None]
            dist.broadcast_object_list(status, src=0)
            if status[0]:
                self._error = GristError(f"checkpoint {self.path}: {status[0]}")
            self._published.set()
        if self._error is not None:
            raise self._error
        return self.path

    def done(self):
        """True once the checkpoint is published (or failed: wait() raises the error)."""
        if self.world_size == 1:
            return self._published.is_set()
        return self._published.is_set() or (
            self._pending is not None and bool(lib.grist_ckpt_pending_done(self._pending)))


def save(state_dict, path, *, blocking=False, step=None, keep_last=0, metadata=None,
         rank=None, world_size=None, direct=True, queue_depth=16, block_size=4 << 20,
         overlap=None, snapshot=True, copy_threads=None):
    """Saves `state_dict` (nested dicts/lists of tensors and plain values) as checkpoint folder
    `path`. Returns a SaveHandle; with blocking=True waits for it first.

    step: recorded in the manifest (default: the trailing digits of the folder name, else 0).
    keep_last: after publishing, keep only the newest K published checkpoints beside `path`.
    metadata: a str -> str dict stored in manifest.json.
    rank/world_size: default from torch.distributed when initialized, else 0 / 1.
    direct/queue_depth/block_size: the I/O settings (O_DIRECT falls back where refused).
    overlap: write pieces while later ones are still being copied (True), only after the whole
        snapshot (False: shortest blocked time on machines with few cores), or None: True with
        at least 8 CPUs.
    snapshot: True copies the state before returning (the caller may then modify it). False (host
        tensors only; GPU tensors are always copied): returns at once and writes aligned tensors
        from their own memory; the caller must not modify them until wait() returns.
        blocking=True always writes host tensors in place (nothing can modify them meanwhile).
    copy_threads: threads of the writer's snapshot copy (None: the CPUs this process may use,
        divided by LOCAL_WORLD_SIZE, at most 16).
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
    path = os.fspath(path)
    if step is None:
        s = _c.c_int64()
        lib.grist_ckpt_step_from_name(_bytes(path), _c.byref(s))
        step = max(0, s.value)
    metadata = {str(k): str(v) for k, v in (metadata or {}).items()}

    tensors = []
    structure = _flatten(state_dict, "", tensors)
    to_code, _ = _dtype_tables()
    names = [n for n, _ in tensors]
    if len(set(names)) != len(names):
        raise ValueError("grist.ckpt: two tensors flatten to the same name (a key contains '.')")
    dtypes, ndims, dims = [], [], []
    for n, t in tensors:
        if t.dtype not in to_code:
            raise TypeError(f"grist.ckpt: tensor '{n}' has dtype {t.dtype}, which safetensors lacks")
        dtypes.append(to_code[t.dtype])
        ndims.append(t.dim())
        dims.extend(int(d) for d in t.shape)
    file_meta = {"format": "pt", "structure": json.dumps(structure, separators=(",", ":"))}

    if rank == 0 or (dist is None):
        check(lib.grist_ckpt_prepare_dir(_bytes(path)))
    if dist is not None and world_size > 1:
        dist.barrier()
    w = _writer(direct, queue_depth, block_size, overlap, copy_threads)
    pending = _P()
    n = len(tensors)
    keys = list(file_meta.keys())
    in_place = (blocking or not snapshot) and not any(t.is_cuda for _, t in tensors)
    if in_place:
        keep = [t.detach() if t.is_contiguous() else t.detach().contiguous() for _, t in tensors]
        srcs = (_c.c_uint64 * max(1, n))(*[t.data_ptr() for t in keep])
        check(lib.grist_ckpt_save_in_place(
            w.ptr, _bytes(os.path.join(path, f"rank-{rank:05d}.safetensors")), n, _strings(names),
            (_c.c_int * max(1, n))(*dtypes), (_c.c_int * max(1, n))(*ndims),
            (_c.c_int64 * max(1, len(dims)))(*dims), srcs, len(keys), _strings(keys),
            _strings([file_meta[k] for k in keys]), _c.byref(pending)))
        h = SaveHandle(path, pending, rank, world_size, int(step), metadata, int(keep_last),
                       time.perf_counter() - t0, keep=keep)
        _last_handle = h
        if blocking:
            h.wait()
        return h
    check(lib.grist_ckpt_begin(
        w.ptr, _bytes(os.path.join(path, f"rank-{rank:05d}.safetensors")), n, _strings(names),
        (_c.c_int * max(1, n))(*dtypes), (_c.c_int * max(1, n))(*ndims),
        (_c.c_int64 * max(1, len(dims)))(*dims), len(keys), _strings(keys),
        _strings([file_meta[k] for k in keys]), _c.byref(pending)))
    try:
        data = _c.c_uint64()
        begins = (_c.c_uint64 * max(1, n))()
        check(lib.grist_ckpt_pending_layout(pending, _c.byref(data), begins, n))
        _fill(torch, tensors, data.value, begins, pending)
    except BaseException:
        lib.grist_ckpt_pending_abort(pending, b"save interrupted while snapshotting")
        out = _S()
        lib.grist_ckpt_pending_wait(pending, rank, _c.byref(out))
        lib.grist_ckpt_pending_free(pending)
        raise
    h = SaveHandle(path, pending, rank, world_size, int(step), metadata, int(keep_last),
                   time.perf_counter() - t0)
    _last_handle = h
    if blocking:
        h.wait()
    return h


def _finish_previous(local_only=False):
    """Publishes the previous save before the next one (collective with several ranks). Its error,
    if any, stays with its handle's wait()."""
    h = _last_handle
    if h is not None and not h._published.is_set() and not (local_only and h.world_size > 1):
        try:
            h.wait()
        except GristError:
            pass


# A single-process script that saves and exits still publishes (collectives are unsafe at exit).
atexit.register(_finish_previous, local_only=True)


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
        lib.grist_ckpt_pending_copy(pending, k, offs, srcs, lens, int(only_host))
    _drain(cuda_pieces, pending, block=True)
    lib.grist_ckpt_pending_mark_ready(pending, (1 << 64) - 1)


def _drain(pieces, pending, block):
    while pieces:
        ev, upto = pieces[0]
        if ev is not None:
            if not block and not ev.query():
                return
            ev.synchronize()
        lib.grist_ckpt_pending_mark_ready(pending, upto)
        pieces.pop(0)


def load(path, *, device="cpu", rank=None, verify=True, direct=True):
    """Loads a checkpoint folder (this rank's file) or a single .safetensors file, verifying every
    checksum. Returns the nested structure that was saved (a flat name -> tensor dict for files
    without grist's structure metadata). Tensors land on `device` ("cpu", "cuda", "cuda:1", ...).
    """
    torch = _torch()
    path = os.fspath(path)
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


def latest(root, *, verify=False):
    """The newest published checkpoint folder under `root` (by step), or None. With verify=True
    each candidate is read and checksummed, newest first, and the first good one returned."""
    out = _S()
    rc = lib.grist_ckpt_latest(_bytes(os.fspath(root)), int(bool(verify)), _c.byref(out))
    if rc == -5:  # NotFound
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
