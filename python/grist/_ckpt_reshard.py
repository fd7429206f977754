"""The resharding load of grist.ckpt: a published checkpoint's shards read into whatever layout
the caller now holds (any world size, mesh or placements), each rank reading only the byte ranges
that overlap its own shards, and the loaded values merged into the caller's nested state.

Nothing here is public API; grist.ckpt.load and grist.ckpt_dcp.StorageReader use it.
"""

import ctypes as _c
import json
import os

from grist import _ckpt_shard as _shard
from grist import ckpt as _ck
from grist._native import GristError, check, lib

_P = _c.c_void_p

class Reads:
    """Byte ranges to read, grouped by file; run() reads each file's in one RangeRead."""

    def __init__(self, path, manifest, verify, direct):
        self.path, self.m, self.verify, self.direct = path, manifest, verify, direct
        self.by_rank = {}
        self.bytes_read = {}  # file name -> data bytes read (whole checksum blocks), after run()

    def add(self, rank, begin, end, deliver):
        """deliver(address) runs once the bytes [begin, end) of rank's data region are verified."""
        self.by_rank.setdefault(rank, []).append((begin, end, deliver))

    def run(self, threads):
        import concurrent.futures as cf
        items = sorted(self.by_rank.items())
        if not items:
            return 0
        with cf.ThreadPoolExecutor(max(1, min(threads, len(items)))) as ex:
            return sum(ex.map(lambda kv: self._read_file(*kv), items))

    def _read_file(self, rank, reqs):
        rec = self.m["files"][rank]
        n = len(reqs)
        begins = (_c.c_uint64 * n)(*[r[0] for r in reqs])
        ends = (_c.c_uint64 * n)(*[r[1] for r in reqs])
        addrs = (_c.c_uint64 * n)()
        h = _P()
        check(lib.grist_ckpt_read_ranges(
            _ck._bytes(os.path.join(self.path, rec["name"])), _ck._bytes(json.dumps(rec)), n, begins, ends,
            int(bool(self.verify)), int(bool(self.direct)), _c.byref(h), addrs))
        try:
            got = _c.c_uint64()
            check(lib.grist_ckpt_ranges_bytes_read(h, _c.byref(got)))
            self.bytes_read[rec["name"]] = got.value
            for (b, e, deliver), a in zip(reqs, addrs):
                deliver(a)
        finally:
            lib.grist_ckpt_ranges_free(h)
        return sum(e - b for b, e, _ in reqs)

    def report(self, stats):
        """Fills `stats` (a dict) with what run() read: "ranges", {file name: [[begin, end], ...]}
        (the data-region byte ranges asked for, in the order planned), and "bytes_read", {file name:
        bytes of the whole checksum blocks read to verify them}."""
        if stats is None:
            return
        stats["ranges"] = {self.m["files"][r]["name"]: [[b, e] for b, e, _ in reqs]
                           for r, reqs in sorted(self.by_rank.items())}
        stats["bytes_read"] = dict(sorted(self.bytes_read.items()))


def plan_box(torch, reads, entry, from_code, lo_t, len_t, target, where):
    """Schedules reads filling `target` (the box [lo_t, lo_t + len_t) of tensor `entry`)."""
    dt = from_code[_ck._DTYPE_NAMES.index(entry["dtype"])]
    itemsize = torch.empty((), dtype=dt).element_size()
    if any(l == 0 for l in len_t):
        return
    for sh in entry["shards"]:
        inter = _shard.intersect(lo_t, len_t, sh["offsets"], sh["lengths"])
        if inter is None:
            continue
        lo, hi = inter
        first, last = _shard.span(sh["offsets"], sh["lengths"], lo, hi, itemsize)

        def deliver(addr, sh=sh, lo=lo, hi=hi, nbytes=last - first):
            buf = (_c.c_uint8 * nbytes).from_address(addr)
            flat = torch.frombuffer(buf, dtype=dt)
            src = _shard.box_view(torch, flat, sh["lengths"], lo, hi)
            _shard.narrow(target, lo, hi, lo_t).copy_(src)
        reads.add(sh["rank"], sh["begin"] + first, sh["begin"] + last, deliver)


def load_sharded(torch, path, m, state_dict, device, verify, direct, threads, stats=None):
    _, from_code = _ck._dtype_tables()
    index = {e["name"]: e for e in m["tensors"]}
    for e in m["tensors"]:
        if e.get("kind") != "bytes" and _ck._DTYPE_NAMES.index(e["dtype"]) not in from_code:
            raise GristError(f"{path}: tensor '{e['name']}' has dtype {e['dtype']}, which this "
                             f"torch ({torch.__version__}) lacks")
    structure = m.get("structure")
    reads = Reads(path, m, verify, direct)
    bytes_items = {}

    def want_bytes(e):
        sh = e["shards"][0]
        out = bytearray(sh["end"] - sh["begin"])

        def deliver(addr):
            _c.memmove((_c.c_char * len(out)).from_buffer(out), addr, len(out))
        bytes_items[e["name"]] = out
        reads.add(sh["rank"], sh["begin"], sh["end"], deliver)

    if state_dict is None:
        tensors = {}
        for e in m["tensors"]:
            if e.get("kind") == "bytes":
                want_bytes(e)
                continue
            dt = from_code[_ck._DTYPE_NAMES.index(e["dtype"])]
            t = torch.empty(e["shape"], dtype=dt)
            tensors[e["name"]] = t
            plan_box(torch, reads, e, from_code, [0] * len(e["shape"]), e["shape"], t, e["name"])
        with torch.no_grad():
            reads.run(threads)
        reads.report(stats)
        for name, raw in bytes_items.items():
            tensors[name] = _load_bytes(torch, raw)
        if device.type != "cpu":
            tensors = {k: (v.to(device) if isinstance(v, torch.Tensor) else v)
                       for k, v in tensors.items()}
        if structure is None:
            return tensors
        return _ck._unflatten(structure, tensors)

    dist = _ck._dist()
    rank = dist.get_rank() if dist else 0
    world = dist.get_world_size() if dist else 1
    leaves, statefuls = [], {}
    _shard.flatten(state_dict, "", leaves, rank, world, statefuls)
    targets = {}
    staged = []  # (host buffer, device tensor) for targets not on the host
    for lf in leaves:
        e = index.get(lf.name)
        if e is None or e.get("kind") == "bytes":
            raise GristError(f"{path}: the checkpoint has no tensor '{lf.name}' (it holds "
                             f"{len(index)} tensors, e.g. {sorted(index)[:3]})")
        if list(e["shape"]) != list(lf.shape):
            raise GristError(f"{path}: tensor '{lf.name}' was saved with shape {e['shape']}, the "
                             f"target has {lf.shape}")
        targets[lf.name] = lf.dtensor if lf.dtensor is not None else lf.local
        dst = lf.local
        if dst.device.type != "cpu":
            host = torch.empty(dst.shape, dtype=dst.dtype)
            staged.append((host, dst))
            dst = host
        plan_box(torch, reads, e, from_code, lf.offsets, lf.lengths, dst, lf.name)
    if structure is None:  # a DCP checkpoint: a flat namespace, values stored as bytes
        for name, e in index.items():
            if e.get("kind") == "bytes":
                want_bytes(e)
    with torch.no_grad():
        reads.run(threads)
        for host, dst in staged:
            dst.copy_(host)
    reads.report(stats)
    if structure is None:
        values = dict(targets)
        for name, raw in bytes_items.items():
            values[name] = _load_bytes(torch, raw)
        return _merge_flat(state_dict, values, statefuls)
    return _merge(structure, state_dict, targets, statefuls, "")


def _load_bytes(torch, raw):
    import io
    return torch.load(io.BytesIO(bytes(raw)), weights_only=True)


_SKIP = object()  # a saved tensor the target does not hold


def _merge(node, target, tensors, statefuls, prefix):
    """The saved `node`'s value where `target` is what the caller holds: tensors filled in place,
    Stateful objects loaded, plain values from the checkpoint."""
    if prefix in statefuls and _shard.is_stateful(target):
        loaded = _merge(node, statefuls[prefix], tensors, statefuls, prefix)
        target.load_state_dict(loaded)
        return target
    if isinstance(node, dict) and "__tensor__" in node:
        return tensors.get(node["__tensor__"], _SKIP)
    if isinstance(node, dict) and "__dict__" in node:
        tgt = target if isinstance(target, dict) else {}
        out = {}
        for k, v in node["__dict__"]:
            child = f"{prefix}.{k}" if prefix else str(k)
            val = _merge(v, tgt.get(k), tensors, statefuls, child)
            if val is not _SKIP:
                out[k] = val
        for k, v in tgt.items():  # held by the caller only
            if k not in out:
                out[k] = v
        return out
    for kind, ctor in (("__list__", list), ("__tuple__", tuple)):
        if isinstance(node, dict) and kind in node:
            tgt = target if isinstance(target, (list, tuple)) else []
            vals = [_merge(v, tgt[i] if i < len(tgt) else None, tensors, statefuls,
                           f"{prefix}.{i}" if prefix else str(i)) for i, v in enumerate(node[kind])]
            return ctor(None if v is _SKIP else v for v in vals)
    return node


def _merge_flat(target, values, statefuls, prefix=""):
    """As _merge for a checkpoint with flat names (DCP's): `values` by dotted path."""
    if prefix in statefuls and _shard.is_stateful(target):
        target.load_state_dict(_merge_flat(statefuls[prefix], values, statefuls, prefix))
        return target
    if prefix in values:
        return values[prefix]
    if isinstance(target, dict):
        return {k: _merge_flat(v, values, statefuls, f"{prefix}.{k}" if prefix else str(k))
                for k, v in target.items()}
    if isinstance(target, (list, tuple)):
        return type(target)(_merge_flat(v, values, statefuls, f"{prefix}.{i}" if prefix else str(i))
                            for i, v in enumerate(target))
    return target
