"""Sharded state for grist.ckpt: which part of each global tensor this rank holds, who writes a
replicated tensor, the byte spans a resharding load needs, and the cross-rank publish protocol.

Nothing here is public API; grist.ckpt and grist.ckpt_dcp use it.
"""

import json
import os
import sys
import threading
import time
import zlib

from grist import _torch as _torch_version
from grist._native import GristError

# Bounded waits of the publish protocol (seconds), counted from the moment this rank's own part is
# done: the other ranks write the same amount of data, so a rank missing after this is dead or hung.
DEFAULT_TIMEOUT = float(os.environ.get("GRIST_CKPT_TIMEOUT", "300"))


def _torch():
    return _torch_version.require()


def dtensor_class():
    # No DTensor can exist unless its module was imported: importing it here would cost the first
    # save of a plain-tensor script a second.
    mod = sys.modules.get("torch.distributed.tensor")
    return getattr(mod, "DTensor", None) if mod is not None else None


def is_stateful(obj):
    torch = _torch()
    return (not isinstance(obj, (dict, list, tuple, torch.Tensor)) and
            callable(getattr(obj, "state_dict", None)) and
            callable(getattr(obj, "load_state_dict", None)))


class Leaf:
    """One tensor of a state dict, as this rank sees it.

    name: the flattened path; shape/dtype: of the global tensor; local: this rank's part (a plain
    tensor, possibly empty); offsets: where `local` starts in the global tensor; owner: whether
    this rank writes it (False for a replica another rank writes)."""

    __slots__ = ("name", "shape", "dtype", "local", "offsets", "owner", "dtensor")

    def __init__(self, name, shape, dtype, local, offsets, owner, dtensor=None):
        self.name, self.shape, self.dtype, self.local = name, shape, dtype, local
        self.offsets, self.owner, self.dtensor = offsets, owner, dtensor

    @property
    def lengths(self):
        return [int(d) for d in self.local.shape]


def _chunk(n, k, i):
    """(offset, length) of chunk i of n elements split into k, as DTensor's Shard splits a
    dimension (torch.chunk: chunks of ceil(n / k), the last ones shorter or empty)."""
    c = -(-n // k)
    lo = min(n, i * c)
    return lo, min(n, lo + c) - lo


def _strided_shard_class():
    mod = sys.modules.get("torch.distributed.tensor.placement_types")
    return getattr(mod, "_StridedShard", None) if mod is not None else None


def dtensor_box(name, shape, mesh_shape, coord, placements):
    """(offsets, lengths): the box of the global tensor (shape `shape`) that the member at
    mesh coordinate `coord` holds under `placements`. Shard(d) splits a dimension as torch.chunk
    does, in mesh-dimension order; _StridedShard(d, split_factor=f) (what FSDP2 puts on its mesh
    dimension over a tensor-parallel Shard(d)) splits the part the later Shard(d) placements left,
    so it is applied after them, and f must be their product (the case where every member's part
    is one box). Raises TypeError/ValueError naming the tensor for anything else."""
    from torch.distributed.tensor import Replicate, Shard
    strided = _strided_shard_class()
    per_dim = [[] for _ in shape]  # tensor dim -> [(mesh dim, strided split factor or 0)]
    for i, p in enumerate(placements):
        if strided is not None and isinstance(p, strided):
            per_dim[p.dim].append((i, int(p.split_factor)))
        elif type(p) is Shard:
            per_dim[p.dim].append((i, 0))
        elif not isinstance(p, Replicate):
            raise TypeError(f"grist.ckpt: DTensor '{name}' has placement {p!r}; grist saves "
                            "Shard(d) and Replicate() placements (redistribute Partial first)")
    offsets, lengths = [0] * len(shape), [int(d) for d in shape]
    for d, dims in enumerate(per_dim):
        stride_at = [k for k, (_, f) in enumerate(dims) if f]
        if len(stride_at) > 1:
            raise ValueError(f"grist.ckpt: DTensor '{name}' is strided-sharded twice on dim {d} "
                             f"({placements}); redistribute it to Shard/Replicate placements")
        order = dims
        if stride_at:
            k = stride_at[0]
            later = 1
            for i, _ in dims[k + 1:]:
                later *= mesh_shape[i]
            if dims[k][1] != later:
                raise ValueError(f"grist.ckpt: DTensor '{name}': _StridedShard(split_factor="
                                 f"{dims[k][1]}) on dim {d} over {later} later shards; its parts "
                                 "are not boxes of the tensor: redistribute it first")
            order = dims[:k] + dims[k + 1:] + [dims[k]]
        for i, _ in order:
            o, n = _chunk(lengths[d], mesh_shape[i], coord[i])
            offsets[d] += o
            lengths[d] = n
    return offsets, lengths


def describe(name, t, rank, world_size):
    """The Leaf of tensor or DTensor `t` named `name` on `rank`."""
    DTensor = dtensor_class()
    if DTensor is not None and isinstance(t, DTensor):
        from torch.distributed.tensor import Replicate
        mesh = t.device_mesh
        shape = [int(d) for d in t.shape]
        local = t.to_local()
        coord = mesh.get_coordinate()
        if coord is None:  # this rank is not in the mesh: holds nothing
            dtensor_box(name, shape, tuple(mesh.shape), [0] * mesh.ndim, t.placements)
            return Leaf(name, shape, t.dtype, local.new_empty([0] * t.dim()), [0] * t.dim(),
                        False, t)
        offs, lens = dtensor_box(name, shape, tuple(mesh.shape), list(coord), t.placements)
        if tuple(lens) != tuple(local.shape):
            raise ValueError(f"grist.ckpt: DTensor '{name}': local shard {tuple(local.shape)} but "
                             f"its placements {t.placements} give {tuple(lens)}")
        # A replica is written by the member whose coordinate is 0 along every replicated mesh dim.
        owner = all(coord[i] == 0 for i, p in enumerate(t.placements) if isinstance(p, Replicate))
        return Leaf(name, shape, t.dtype, local, offs, owner, t)
    # A plain tensor is the same on every rank (DDP, or a scalar like an optimizer's step): one
    # rank, chosen by the name so that the writing spreads over the ranks, writes it.
    owner = world_size == 1 or zlib.crc32(name.encode()) % world_size == rank
    return Leaf(name, [int(d) for d in t.shape], t.dtype, t, [0] * t.dim(), owner)


def flatten(obj, prefix, leaves, rank, world_size, statefuls=None):
    """Structure JSON of `obj`; appends a Leaf per tensor. Stateful objects are replaced by their
    state_dict() (recorded in `statefuls` by path when given)."""
    torch = _torch()
    if isinstance(obj, torch.Tensor):
        if not prefix:
            raise ValueError("grist.ckpt: a bare tensor needs a name; save a dict")
        leaves.append(describe(prefix, obj, rank, world_size))
        return {"__tensor__": prefix}
    if isinstance(obj, dict):
        items = []
        for k, v in obj.items():
            if not isinstance(k, (str, int)) or isinstance(k, bool):
                raise TypeError(f"grist.ckpt: dict key {k!r} at '{prefix}' is not a str or int")
            child = f"{prefix}.{k}" if prefix else str(k)
            items.append([k, flatten(v, child, leaves, rank, world_size, statefuls)])
        return {"__dict__": items}
    if isinstance(obj, (list, tuple)):
        kind = "__tuple__" if isinstance(obj, tuple) else "__list__"
        return {kind: [flatten(v, f"{prefix}.{i}" if prefix else str(i), leaves, rank, world_size,
                               statefuls) for i, v in enumerate(obj)]}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if is_stateful(obj):
        sd = obj.state_dict()
        if statefuls is not None:
            statefuls[prefix] = sd
        return flatten(sd, prefix, leaves, rank, world_size, statefuls)
    raise TypeError(f"grist.ckpt: cannot store {type(obj).__name__} at '{prefix}': only tensors, "
                    "DTensors, dicts, lists, tuples, str, int, float, bool, None and objects with "
                    "state_dict()/load_state_dict()")


# ---- the bytes a box of a shard occupies ----

def strides(lengths):
    s, acc = [], 1
    for d in reversed(lengths):
        s.append(acc)
        acc *= d
    return list(reversed(s))


def intersect(a_off, a_len, b_off, b_len):
    """The intersection box of two boxes, or None."""
    lo, hi = [], []
    for ao, al, bo, bl in zip(a_off, a_len, b_off, b_len):
        x, y = max(ao, bo), min(ao + al, bo + bl)
        if x >= y:
            return None
        lo.append(x)
        hi.append(y)
    return lo, hi


def span(shard_off, shard_len, lo, hi, itemsize):
    """Byte span [first, last) inside a row-major shard covering box [lo, hi) (global coords)."""
    st = strides(shard_len)
    first = sum((l - o) * s for l, o, s in zip(lo, shard_off, st))
    last = sum((h - 1 - o) * s for h, o, s in zip(hi, shard_off, st))
    return first * itemsize, (last + 1) * itemsize


def box_view(torch, flat, shard_len, lo, hi):
    """A view of box [lo, hi) of a shard, given `flat`: the shard's elements from the box's
    first element on (a 1-d tensor)."""
    return torch.as_strided(flat, [h - l for l, h in zip(lo, hi)], strides(shard_len),
                            flat.storage_offset())


def narrow(t, lo, hi, off):
    for d, (l, h, o) in enumerate(zip(lo, hi, off)):
        if l - o != 0 or h - l != t.shape[d]:
            t = t.narrow(d, l - o, h - l)
    return t


# ---- the cross-rank publish protocol, over torch.distributed's key-value store ----

_seq = 0
_seq_lock = threading.Lock()


def next_seq():
    global _seq
    with _seq_lock:
        _seq += 1
        return _seq


def default_store():
    from torch.distributed import distributed_c10d
    return distributed_c10d._get_default_store()


class Coordinator:
    """Every save's steps across ranks, with bounded waits: rank 0 prepares the folder; each rank
    posts its file record (or its error) once its file is durable; rank 0 publishes once every
    rank posted, and posts the outcome, which every rank waits for. A rank that fails posts its
    error at once, so the others fail fast naming it; one that dies is named once `timeout`
    seconds pass (counted from when this rank's own part is done; rank 0's publish gets `timeout`
    + 30 s more). Uses only the store (no collectives), so it runs on background threads."""

    def __init__(self, store, seq, rank, world_size, timeout):
        self.store, self.rank, self.world_size = store, rank, world_size
        self.timeout = DEFAULT_TIMEOUT if timeout is None else float(timeout)
        self.prefix = f"grist.ckpt/{seq}/"
        if rank == 0 and seq > 2:  # keys two saves back: every rank is past them
            for k in [f"grist.ckpt/{seq - 2}/{s}" for s in
                      ["dir", "result"] + [f"r{i}" for i in range(world_size)]]:
                try:
                    self.store.delete_key(k)
                except Exception:  # stores without delete_key keep them (a few bytes each)
                    pass

    def _post(self, key, value):
        self.store.set(self.prefix + key, json.dumps(value))

    def _get(self, key):
        return json.loads(self.store.get(self.prefix + key).decode())

    def _wait(self, keys, what):
        """Waits for `keys`; returns their values. Returns early when one holds an error."""
        deadline = time.monotonic() + self.timeout
        got = {}
        pause = 0.001
        while True:
            for k in keys:
                if k not in got and self.store.check([self.prefix + k]):
                    got[k] = self._get(k)
                    if got[k].get("error"):
                        return got
            if len(got) == len(keys):
                return got
            if time.monotonic() > deadline:
                missing = [k for k in keys if k not in got]
                raise GristError(f"{what}: {self._who(missing)} did not report within "
                                 f"{self.timeout:g} s (killed or hung?)")
            time.sleep(pause)
            pause = min(0.05, pause * 2)

    @staticmethod
    def _who(keys):
        ranks = [k[1:] if k.startswith("r") else "0" for k in keys]
        return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(ranks)

    def dir_ready(self, prepare):
        """Rank 0 runs prepare(); the others wait for its outcome."""
        if self.rank == 0:
            try:
                prepare()
            except BaseException as e:
                self._post("dir", {"error": f"rank 0: {e}"})
                raise
            self._post("dir", {"ok": True})
            return
        v = self._wait(["dir"], "preparing the checkpoint folder")["dir"]
        if v.get("error"):
            raise GristError(v["error"])

    def fail(self, message):
        """Posts this rank's failure (the others stop waiting for it)."""
        try:
            self._post(f"r{self.rank}", {"error": f"rank {self.rank}: {message}"})
        except Exception:
            pass

    def finish(self, part, publish):
        """Posts this rank's `part`; rank 0 gathers all parts, calls publish(parts) and posts the
        outcome. Raises GristError naming the failing rank(s) on every rank."""
        self._post(f"r{self.rank}", {"part": part})
        if self.rank == 0:
            try:
                got = self._wait([f"r{i}" for i in range(self.world_size)],
                                 "waiting for every rank's file")
                errors = [v["error"] for v in got.values() if v.get("error")]
                if errors:
                    raise GristError("; ".join(errors))
                publish([got[f"r{i}"]["part"] for i in range(self.world_size)])
            except BaseException as e:
                self._post("result", {"error": str(e)})
                raise
            self._post("result", {"ok": True})
            return
        # Rank 0's own part comes within `timeout` as everyone's does (a rank 0 that died is named
        # then); it then waits up to `timeout` for the others and publishes.
        v = self._wait(["r0"], "waiting for rank 0's file")["r0"]
        if v.get("error"):
            raise GristError(v["error"])
        saved, self.timeout = self.timeout, self.timeout + 30
        try:
            v = self._wait(["result"], "waiting for rank 0 to publish")["result"]
        finally:
            self.timeout = saved
        if v.get("error"):
            raise GristError(v["error"])
