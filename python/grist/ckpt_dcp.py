"""torch.distributed.checkpoint (DCP) storage on grist: grist.ckpt.StorageWriter / StorageReader.

    import torch.distributed.checkpoint as dcp
    dcp.save(state, storage_writer=grist.ckpt.StorageWriter("ckpt/step-100"))
    dcp.async_save(state, storage_writer=grist.ckpt.StorageWriter("ckpt/step-200"))
    dcp.load(state, storage_reader=grist.ckpt.StorageReader("ckpt/step-200"))

DCP's planners decide what each rank writes (its own shards, replicas deduplicated) and, on load,
which saved chunks each rank's tensors need (its resharding); grist does the I/O: one safetensors
file per rank written through grist's io_uring writer (staging, O_DIRECT, per-block checksums,
fsync), and manifest.json written last by the coordinator once every rank's file is durable
(DCP gathers the write results before finish()). The manifest's tensor index *is* DCP's metadata:
no pickle is written or read, and the checkpoint is an ordinary grist checkpoint (grist.ckpt.load,
`grist ckpt verify`, export work on it). Non-tensor values (DCP's BytesIO items, torch.save
bytes) are stored as U8 tensors and read back with torch.load(weights_only=True).
"""

import ctypes as _c
import dataclasses
import io
import json
import os
import threading
import uuid

from grist._torch import require as _require_torch

torch = _require_torch()  # noqa: E402  (the version check comes before torch's own imports)
from torch.distributed.checkpoint.metadata import (BytesStorageMetadata, ChunkStorageMetadata,
                                                   Metadata, MetadataIndex, StorageMeta,
                                                   TensorProperties, TensorStorageMetadata)
from torch.distributed.checkpoint.planner import LoadItemType, WriteItemType
from torch.distributed.checkpoint.storage import StorageReader as _DcpReader
from torch.distributed.checkpoint.storage import StorageWriter as _DcpWriter
from torch.distributed.checkpoint.storage import WriteResult
from torch.futures import Future

from grist import _ckpt_reshard as _reshard
from grist import _ckpt_shard as _shard
from grist import ckpt as _ck
from grist._native import GristError, check, lib

__all__ = ["StorageWriter", "StorageReader"]

_FILE_KEY = "__grist_file__"  # a WriteResult carrying a rank's file record (not a state dict key)


def _done(value):
    f = Future()
    f.set_result(value)
    return f


class StorageWriter(_DcpWriter):
    """DCP StorageWriter writing a grist checkpoint folder at `path`.

    The folder must not be a published checkpoint (a torn one is cleared). keep_last: after
    publishing, keep the newest K checkpoints beside it. step: recorded in the manifest (default:
    the folder name's trailing digits). direct/queue_depth/block_size/copy_threads: as for
    grist.ckpt.save."""

    def __init__(self, path, *, keep_last=0, step=None, metadata=None, direct=True,
                 queue_depth=16, block_size=4 << 20, copy_threads=None):
        super().__init__()
        self.path = os.fspath(path)
        self.keep_last, self.step, self.metadata = keep_last, step, dict(metadata or {})
        self.io = dict(direct=direct, queue_depth=queue_depth, block_size=block_size,
                       overlap=None, copy_threads=copy_threads)
        self.rank, self.is_coordinator = 0, True
        self.save_id = uuid.uuid4().hex

    def reset(self, checkpoint_id=None):
        if checkpoint_id:
            self.path = os.fspath(checkpoint_id)
        self.save_id = uuid.uuid4().hex

    def set_up_storage_writer(self, is_coordinator, *args, **kwargs):
        self.is_coordinator = is_coordinator
        rank = kwargs.get("rank")
        if rank is None:
            dist = _ck._dist()
            rank = dist.get_rank() if dist else 0
        self.rank = rank

    def storage_meta(self):
        return StorageMeta(checkpoint_id=self.path, save_id=self.save_id)

    def prepare_local_plan(self, plan):
        return plan

    def prepare_global_plan(self, plans):
        # Runs on the coordinator after every rank planned, before any rank writes.
        check(lib.grist_ckpt_prepare_dir(_ck._bytes(self.path)))
        return [dataclasses.replace(p, storage_data={"rank": i}) for i, p in enumerate(plans)]

    def write_data(self, plan, planner):
        rank = plan.storage_data["rank"] if plan.storage_data else self.rank
        _ck._finish_previous()  # the staging arena holds one checkpoint at a time
        to_code, _ = _ck._dtype_tables()
        tensors, results_meta, seen = [], [], set()
        for item in plan.items:
            data = planner.resolve_data(item)
            if item.type == WriteItemType.BYTE_IO:
                raw = data.getvalue() if hasattr(data, "getvalue") else bytes(data)
                t = torch.frombuffer(bytearray(raw), dtype=torch.uint8) if raw else \
                    torch.empty(0, dtype=torch.uint8)
            else:
                t = data.detach()
            name = item.index.fqn
            if item.index.offset is not None and any(item.index.offset):
                name = f"{name}@{','.join(str(int(o)) for o in item.index.offset)}"
            if name in seen:
                raise GristError(f"grist StorageWriter: two write items named '{name}'")
            seen.add(name)
            if t.dtype not in to_code:
                raise GristError(f"grist StorageWriter: '{name}' has dtype {t.dtype}, which "
                                 "safetensors lacks")
            tensors.append((name, t))
            results_meta.append(item)
        fname = os.path.join(self.path, f"rank-{rank:05d}.safetensors")
        pending, begins = _begin_file(fname, tensors, self.io)
        try:
            _ck._fill(torch, tensors, pending[1], begins, pending[0])
            out = _c.c_char_p()
            check(lib.grist_ckpt_pending_wait(pending[0], rank, _c.byref(out)))
            record = json.loads(out.value.decode())["record"]
        finally:
            lib.grist_ckpt_pending_free(pending[0])
        results = []
        for i, ((name, t), item) in enumerate(zip(tensors, results_meta)):
            b = int(begins[i])
            e = b + t.numel() * t.element_size()
            results.append(WriteResult(index=item.index, size_in_bytes=e - b,
                                       storage_data={"rank": rank, "begin": b, "end": e}))
        results.append(WriteResult(index=MetadataIndex(f"{_FILE_KEY}{rank}"), size_in_bytes=0,
                                   storage_data={"rank": rank, "record": record}))
        return _done(results)

    def finish(self, metadata, results):
        records, where = {}, {}
        for per_rank in results:
            for wr in per_rank:
                if wr.index.fqn.startswith(_FILE_KEY):
                    records[wr.storage_data["rank"]] = wr.storage_data["record"]
                else:
                    where[wr.index] = wr.storage_data
        world = len(results)
        if sorted(records) != list(range(world)):
            raise GristError(f"grist StorageWriter: file records of ranks {sorted(records)} for "
                             f"{world} ranks")
        index = []
        for fqn, md in metadata.state_dict_metadata.items():
            if isinstance(md, BytesStorageMetadata):
                sd = where[MetadataIndex(fqn)]
                index.append({"name": fqn, "kind": "bytes",
                              "shards": [{"rank": sd["rank"], "begin": sd["begin"],
                                          "end": sd["end"]}]})
                continue
            code = _ck._dtype_tables()[0][md.properties.dtype]
            shards = []
            for ch in md.chunks:
                sd = where[MetadataIndex(fqn, ch.offsets)]
                shards.append({"rank": sd["rank"], "offsets": [int(o) for o in ch.offsets],
                               "lengths": [int(x) for x in ch.sizes], "begin": sd["begin"],
                               "end": sd["end"]})
            index.append({"name": fqn, "dtype": _ck._DTYPE_NAMES[code],
                          "shape": [int(d) for d in md.size], "shards": shards})
        meta = {str(k): str(v) for k, v in self.metadata.items()}
        try:
            meta["dcp.planner_data"] = json.dumps(metadata.planner_data)
        except (TypeError, ValueError):
            pass  # not JSON (a custom planner's): DCP's default load planner does not read it
        step = self.step
        if step is None:
            s = _c.c_int64()
            lib.grist_ckpt_step_from_name(_ck._bytes(self.path), _c.byref(s))
            step = max(0, s.value)
        _ck._publish(self.path, step, world, [records[r] for r in range(world)], meta, index,
                     self.keep_last)

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id):
        return isinstance(checkpoint_id, (str, os.PathLike))


def _begin_file(fname, tensors, io_opts):
    to_code, _ = _ck._dtype_tables()
    w = _ck._writer(**io_opts)
    n = len(tensors)
    dtypes = [to_code[t.dtype] for _, t in tensors]
    ndims = [t.dim() for _, t in tensors]
    dims = [int(d) for _, t in tensors for d in t.shape]
    keys = ["format"]
    pending = _c.c_void_p()
    check(lib.grist_ckpt_begin(
        w.ptr, _ck._bytes(fname), n, _ck._strings([nm for nm, _ in tensors]),
        (_c.c_int * max(1, n))(*dtypes), (_c.c_int * max(1, n))(*ndims),
        (_c.c_int64 * max(1, len(dims)))(*dims), 1, _ck._strings(keys), _ck._strings(["pt"]),
        _c.byref(pending)))
    data = _c.c_uint64()
    begins = (_c.c_uint64 * max(1, n))()
    try:
        check(lib.grist_ckpt_pending_layout(pending, _c.byref(data), begins, n))
    except BaseException:
        lib.grist_ckpt_pending_free(pending)
        raise
    return (pending, data.value), begins


class StorageReader(_DcpReader):
    """DCP StorageReader over a published grist checkpoint folder (written by StorageWriter or by
    grist.ckpt.save): every byte read is checked against its block checksum; each rank reads only
    the blocks holding the chunks its plan asks for."""

    def __init__(self, path, *, verify=True, direct=True, threads=4):
        super().__init__()
        self.path = os.fspath(path)
        self.verify, self.direct, self.threads = verify, direct, threads
        self.load_id = uuid.uuid4().hex
        self.manifest = None
        self.storage_data = {}

    def reset(self, checkpoint_id=None):
        if checkpoint_id:
            self.path = os.fspath(checkpoint_id)
        self.load_id = uuid.uuid4().hex
        self.manifest = None
        self.storage_data = {}

    def read_metadata(self, *args, **kwargs):
        m = _ck.read_manifest(self.path)
        if m["version"] < 2:
            raise GristError(f"{self.path}: a version-1 grist checkpoint has no tensor index; "
                             "load it with grist.ckpt.load")
        _, from_code = _ck._dtype_tables()
        sd_meta, storage = {}, {}
        for e in m["tensors"]:
            if e.get("kind") == "bytes":
                sd_meta[e["name"]] = BytesStorageMetadata()
                storage[MetadataIndex(e["name"])] = e["shards"][0]
                continue
            dt = from_code[_ck._DTYPE_NAMES.index(e["dtype"])]
            chunks = []
            for sh in e["shards"]:
                chunks.append(ChunkStorageMetadata(offsets=torch.Size(sh["offsets"]),
                                                   sizes=torch.Size(sh["lengths"])))
                storage[MetadataIndex(e["name"], sh["offsets"])] = dict(sh, dtype=e["dtype"])
            sd_meta[e["name"]] = TensorStorageMetadata(properties=TensorProperties(dtype=dt),
                                                       size=torch.Size(e["shape"]), chunks=chunks)
        planner_data = m["metadata"].get("dcp.planner_data")
        planner_data = json.loads(planner_data) if planner_data else None
        if isinstance(planner_data, dict):
            planner_data = {k: tuple(v) if isinstance(v, list) else v
                            for k, v in planner_data.items()}
        self.manifest = m
        self.storage_data = storage
        return Metadata(state_dict_metadata=sd_meta, planner_data=planner_data,
                        storage_data=storage,
                        storage_meta=StorageMeta(checkpoint_id=self.path, load_id=self.load_id))

    def set_up_storage_reader(self, metadata, is_coordinator, *args, **kwargs):
        self.storage_data = metadata.storage_data
        if self.manifest is None:
            self.manifest = _ck.read_manifest(self.path)

    def prepare_local_plan(self, plan):
        return plan

    def prepare_global_plan(self, plans):
        return plans

    def read_data(self, plan, planner):
        _, from_code = _ck._dtype_tables()
        reads = _reshard.Reads(self.path, self.manifest, self.verify, self.direct)
        lock = threading.Lock()
        later = []
        for req in plan.items:
            sh = self.storage_data[req.storage_index]
            if req.type == LoadItemType.BYTE_IO:
                out = bytearray(sh["end"] - sh["begin"])

                def deliver(addr, out=out):
                    _c.memmove((_c.c_char * len(out)).from_buffer(out), addr, len(out))
                reads.add(sh["rank"], sh["begin"], sh["end"], deliver)
                later.append((req, out))
                continue
            dt = from_code[_ck._DTYPE_NAMES.index(sh["dtype"])]
            itemsize = torch.empty((), dtype=dt).element_size()
            lo = [o + s for o, s in zip(sh["offsets"], req.storage_offsets)]
            hi = [l + n for l, n in zip(lo, req.lengths)]
            if any(n == 0 for n in req.lengths):
                later.append((req, None))
                continue
            first, last = _shard.span(sh["offsets"], sh["lengths"], lo, hi, itemsize)

            def deliver(addr, req=req, sh=sh, lo=lo, hi=hi, dt=dt, nbytes=last - first):
                buf = (_c.c_uint8 * nbytes).from_address(addr)
                src = _shard.box_view(torch, torch.frombuffer(buf, dtype=dt), sh["lengths"], lo, hi)
                with lock:  # the planner is not known to be thread-safe; copies run in parallel
                    target = planner.resolve_tensor(req).detach()
                if tuple(target.shape) != tuple(src.shape):
                    raise GristError(f"{self.path}: read item {req.storage_index} has shape "
                                     f"{tuple(src.shape)}, its target {tuple(target.shape)}")
                target.copy_(src)
                with lock:
                    planner.commit_tensor(req, target)
            reads.add(sh["rank"], sh["begin"] + first, sh["begin"] + last, deliver)
        # Tensors are committed on the reading threads (one per file, never two for one target).
        with torch.no_grad():
            reads.run(self.threads)
        for req, out in later:
            if out is None:
                target = planner.resolve_tensor(req).detach()
                planner.commit_tensor(req, target)
            else:
                planner.load_bytes(req, io.BytesIO(bytes(out)))
        return _done(None)

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id):
        return isinstance(checkpoint_id, (str, os.PathLike))
