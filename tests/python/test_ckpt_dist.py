"""Multi-process tests of grist.ckpt's sharded state (torch.multiprocessing, gloo, CPU).

The reference every loaded value is compared with is computed on one process without any
distribution: a small transformer (odd sizes, so FSDP2's shards are uneven) + AdamW trained for 3
steps from seed 0. At world 4 that state is put into an FSDP2 (fully_shard) model and saved with
grist.ckpt.save and through DCP with grist's StorageWriter; a model parallelized with tensor
parallelism (parallelize_module, ColwiseParallel/RowwiseParallel on a 2x2 dp x tp mesh, FSDP2 on
dp) is given its own single-process reference and saved; Replicate() DTensors and an 8 MiB
Shard(0) tensor are saved. Then: loads at world 4 on a 2x2 mesh with Shard(0)/Shard(1)/2-d
placements, at world 8 (FSDP2; the byte ranges each rank reads checked exactly against the shard
geometry), at world 2 (FSDP2, from the FSDP2 and the TP checkpoints; DCP's Stateful handling of a
grist.Loader through grist's storage) and at world 1 (plain models, full unsharded loads, dcp.load
without a process group, export). Also: hostile manifests are rejected with a clear error.
Failing and killed ranks: test_ckpt_dist_fail.py.

Time: about 140 s on the loaded 2-core development VM (world 4 36 s, world 8 51 s, world 2 18 s:
most of it spawning processes that import torch).
"""

import contextlib
import json
import os
import sys
import tempfile
import time
import traceback
import unittest

import torch
import xxhash

from grist import ckpt

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grist_testkit as kit  # noqa: E402

VOCAB, DIM, HIDDEN = 61, 32, 50  # odd sizes: FSDP2's shards of them are uneven
GEO_ROWS, GEO_COLS = 2048, 1024  # the byte-range tensor: 8 MiB of float32, 2 MiB per world-4 rank


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(DIM)
        self.qkv = torch.nn.Linear(DIM, 3 * DIM)
        self.proj = torch.nn.Linear(DIM, DIM)
        self.up = torch.nn.Linear(DIM, HIDDEN)
        self.down = torch.nn.Linear(HIDDEN, DIM)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(self.norm(x)).view(b, t, 3, 2, DIM // 2).permute(2, 0, 3, 1, 4)
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, DIM))
        return x + self.down(torch.nn.functional.gelu(self.up(x)))


class TinyTransformer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(VOCAB, DIM)
        self.blocks = torch.nn.ModuleList([Block(), Block()])
        self.head = torch.nn.Linear(DIM, VOCAB)

    def forward(self, ids):
        x = self.emb(ids)
        for blk in self.blocks:
            x = blk(x)
        return self.head(x)


class MlpBlock(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(DIM)
        self.up = torch.nn.Linear(DIM, HIDDEN)
        self.down = torch.nn.Linear(HIDDEN, DIM)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


class TpNet(torch.nn.Module):
    """A model written for tensor parallelism: MLP blocks (up column-parallel, down row-parallel),
    a row-parallel embedding and a column-parallel head."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(VOCAB, DIM)
        self.blocks = torch.nn.ModuleList([MlpBlock(), MlpBlock()])
        self.head = torch.nn.Linear(DIM, VOCAB)

    def forward(self, ids):
        x = self.emb(ids)
        for blk in self.blocks:
            x = blk(x)
        return self.head(x)


def batch(step):
    g = torch.Generator().manual_seed(100 * step)
    return torch.randint(0, VOCAB, (2, 8), generator=g)


def train(model, opt, steps):
    for s in range(steps):
        ids = batch(s)
        loss = torch.nn.functional.cross_entropy(model(ids[:, :-1]).reshape(-1, VOCAB),
                                                 ids[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad()


@contextlib.contextmanager
def single_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)


def plain_state(model, opt):
    """{"model", "optim"} of a single-process model, the optimizer state keyed by parameter name
    (the layout get_state_dict gives a distributed model's)."""
    names = [n for n, _ in model.named_parameters()]
    osd = opt.state_dict()
    state = {names[i]: {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in st.items()}
             for i, st in osd["state"].items()}
    groups = [dict(g, params=[names[i] for i in g["params"]]) for g in osd["param_groups"]]
    return {"model": {k: v.detach().clone() for k, v in model.state_dict().items()},
            "optim": {"state": state, "param_groups": groups}}


def reference(cls=TinyTransformer, steps=3):
    """The independent reference: `cls` from seed 0 + AdamW after `steps` steps, one process, one
    thread, no torch.distributed."""
    with single_thread():
        torch.manual_seed(0)
        model = cls()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        train(model, opt, steps)
        return plain_state(model, opt), model


def geo_tensor():
    return torch.arange(GEO_ROWS * GEO_COLS, dtype=torch.float32).reshape(GEO_ROWS, GEO_COLS)


def replicated_tensors():
    return {"rep2d": torch.arange(6 * 10, dtype=torch.float64).reshape(6, 10) / 7,
            "half": torch.arange(9 * 4, dtype=torch.int32).reshape(9, 4) * 3,
            "rep1d": torch.arange(17, dtype=torch.bfloat16)}


def zeros_like_state(ref):
    """ref's structure with every tensor zeroed (plain values kept): a target to load into."""
    if isinstance(ref, torch.Tensor):
        return torch.zeros_like(ref)
    if isinstance(ref, dict):
        return {k: zeros_like_state(v) for k, v in ref.items()}
    if isinstance(ref, list):
        return [zeros_like_state(v) for v in ref]
    return ref


def fsdp_model(world, seed, cls=TinyTransformer, mesh=None):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    torch.manual_seed(seed)
    model = cls()
    mesh = mesh if mesh is not None else init_device_mesh("cpu", (world,))
    for blk in model.blocks:
        fully_shard(blk, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-2)


def tp_model(mesh, state):
    """TpNet holding `state` (a plain state dict), parallelized with parallelize_module on
    mesh["tp"], then FSDP2 on mesh["dp"]."""
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import Replicate
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                   parallelize_module)
    model = TpNet()
    model.load_state_dict(state)
    plan = {"emb": RowwiseParallel(input_layouts=Replicate()),
            "head": ColwiseParallel(output_layouts=Replicate())}
    for i in range(len(model.blocks)):
        plan[f"blocks.{i}.up"] = ColwiseParallel()
        plan[f"blocks.{i}.down"] = RowwiseParallel()
    parallelize_module(model, mesh["tp"], plan)
    for blk in model.blocks:
        fully_shard(blk, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model, torch.optim.AdamW(model.parameters(), lr=1e-2)


def clone_state(ref):
    if isinstance(ref, torch.Tensor):
        return ref.clone()
    if isinstance(ref, dict):
        return {k: clone_state(v) for k, v in ref.items()}
    if isinstance(ref, list):
        return [clone_state(v) for v in ref]
    return ref


def set_full(model, opt, ref):
    """Puts the single-process state `ref` into a distributed model and optimizer (a copy: DCP's
    set_state_dict replaces the values of the dicts it is given)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_state_dict
    ref = clone_state(ref)
    set_state_dict(model, opt, model_state_dict=ref["model"], optim_state_dict=ref["optim"],
                   options=StateDictOptions(full_state_dict=True))


def tp_with_state(mesh, ref):
    """tp_model holding `ref` (a single-process TpNet state): the values are loaded into the plain
    module before it is parallelized (DCP's set_state_dict cannot distribute a full state onto
    FSDP2's strided shards of uneven TP shards: distribute_tensor asserts). The optimizer state is
    placed through the parameters' own layout: a model built the same way from the global index
    of every element tells which elements each local shard holds (torch's geometry, not
    grist's), and exp_avg/exp_avg_sq's local shards are taken from those indices of `ref`."""
    from torch.distributed.tensor import DTensor
    index_model, _ = tp_model(mesh, {k: torch.arange(v.numel(), dtype=v.dtype).reshape(v.shape)
                                     for k, v in ref["model"].items()})
    where = {n: p.to_local().detach().long().clone() for n, p in index_model.named_parameters()}
    model, opt = tp_model(mesh, ref["model"])
    for n, p in model.named_parameters():
        st = ref["optim"]["state"][n]

        def local(t):
            return DTensor.from_local(t.reshape(-1)[where[n]], p.device_mesh, p.placements,
                                      run_check=False, shape=p.shape, stride=p.stride())
        opt.state[p] = {"step": st["step"].clone(), "exp_avg": local(st["exp_avg"]),
                        "exp_avg_sq": local(st["exp_avg_sq"])}
    return model, opt


def full_state(model, opt):
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict
    # full_state_dict without cpu_offload: every rank gets the whole state (with it, rank 0 only).
    msd, osd = get_state_dict(model, opt, options=StateDictOptions(full_state_dict=True))
    return {"model": msd, "optim": osd}


def diff(a, b, path=""):
    """Where nested states a and b differ (None when every value is exactly equal)."""
    if hasattr(a, "full_tensor"):
        a = a.full_tensor()
    if hasattr(b, "full_tensor"):
        b = b.full_tensor()
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            return f"{path}: tensor vs {type(b).__name__}"
        if a.dtype != b.dtype or a.shape != b.shape or not torch.equal(a, b):
            return f"{path}: tensors differ"
        return None
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return f"{path}: keys {sorted(map(str, set(a) ^ set(b)))[:4]} differ"
        for k in a:
            d = diff(a[k], b[k], f"{path}.{k}")
            if d:
                return d
        return None
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return f"{path}: lengths differ"
        for i, (x, y) in enumerate(zip(a, b)):
            d = diff(x, y, f"{path}.{i}")
            if d:
                return d
        return None
    return None if a == b else f"{path}: {a!r} != {b!r}"


def placements_2d(name, t):
    """A dp x tp layout: column-parallel linears Shard(0) on tp, row-parallel ones Shard(1) on tp
    and Shard(0) on dp (2-d sharded), everything else replicated."""
    from torch.distributed.tensor import Replicate, Shard
    if t.dim() == 2 and any(k in name for k in ("qkv", "up", "head")):
        return [Replicate(), Shard(0)]
    if t.dim() == 2 and any(k in name for k in ("proj", "down")):
        return [Shard(0), Shard(1)]
    if t.dim() == 2:  # the embedding
        return [Shard(1), Replicate()]
    if t.dim() == 1 and any(k in name for k in ("qkv", "up", "head")):
        return [Replicate(), Shard(0)]
    return [Replicate(), Replicate()]


def tp_targets(ref, mesh, path=""):
    """ref's structure with every tensor of >= 1 dimension replaced by a zero DTensor."""
    from torch.distributed.tensor import distribute_tensor
    if isinstance(ref, torch.Tensor):
        if ref.dim() == 0:
            return torch.zeros_like(ref)
        return distribute_tensor(torch.zeros_like(ref), mesh, placements_2d(path, ref))
    if isinstance(ref, dict):
        return {k: tp_targets(v, mesh, f"{path}.{k}") for k, v in ref.items()}
    if isinstance(ref, list):
        return [tp_targets(v, mesh, f"{path}.{i}") for i, v in enumerate(ref)]
    return ref


def _init(rank, world, init_file):
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=world)
    return dist


def _world4(rank, world, init_file, root, q):
    dist = _init(rank, world, init_file)
    try:
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_state_dict
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import Replicate, Shard, distribute_tensor
        out = {}
        ref, _ = reference()
        model, opt = fsdp_model(world, seed=1)
        set_full(model, opt, ref)
        out["set"] = diff(full_state(model, opt), ref)
        msd, osd = get_state_dict(model, opt)
        h = ckpt.save({"model": msd, "optim": osd, "step": 3}, f"{root}/g4/step-00000003")
        dcp.save({"model": msd, "optim": osd},
                 storage_writer=ckpt.StorageWriter(f"{root}/d4/step-00000003"))
        h.wait()

        # Tensor parallelism: TpNet parallelized on a 2x2 (dp x tp) mesh, FSDP2 on dp.
        mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
        tp_ref, tp_single = reference(TpNet)
        model, opt = tp_with_state(mesh, tp_ref)
        out["tp_set"] = diff(full_state(model, opt), tp_ref)
        ids = batch(7)
        with torch.no_grad():
            y = model(ids)
            got = y.full_tensor() if hasattr(y, "full_tensor") else y
            want = tp_single(ids)
        out["tp_forward"] = None if torch.allclose(got, want, rtol=1e-5, atol=1e-5) else \
            f"TP forward differs by {(got - want).abs().max().item()}"
        msd, osd = get_state_dict(model, opt)
        kinds = sorted({f"{type(p).__name__}@{t.device_mesh.ndim}d" for t in msd.values()
                        for p in t.placements})
        out["tp_placements"] = kinds
        ckpt.save({"model": msd, "optim": osd, "step": 3}, f"{root}/tp4/step-00000003",
                  blocking=True)

        # Replicate() DTensors (written once, by the member at coordinate 0 of the replicated
        # mesh dims) and the byte-range tensor, Shard(0) over the 4 ranks.
        mesh1 = init_device_mesh("cpu", (world,))
        r = replicated_tensors()
        ckpt.save({"rep2d": distribute_tensor(r["rep2d"], mesh, [Replicate(), Replicate()]),
                   "half": distribute_tensor(r["half"], mesh, [Shard(0), Replicate()]),
                   "rep1d": distribute_tensor(r["rep1d"], mesh1, [Replicate()])},
                  f"{root}/rep4/step-00000001", blocking=True)
        ckpt.save({"geo": distribute_tensor(geo_tensor(), mesh1, [Shard(0)])},
                  f"{root}/geo4/step-00000001", blocking=True)

        # The FSDP2 checkpoint loaded at world 4 into a 2x2 (dp x tp) mesh, grist and DCP.
        target = tp_targets(ref, mesh)
        back = ckpt.load(f"{root}/g4/step-00000003", {"model": target["model"],
                                                      "optim": target["optim"], "step": 0})
        out["grist_2x2"] = diff(target, ref) or (None if back["step"] == 3 else "step")
        target = tp_targets(ref, mesh)
        dcp.load(target, storage_reader=ckpt.StorageReader(f"{root}/d4/step-00000003"))
        out["dcp_2x2"] = diff(target, ref)
        q.put((rank, out))
    except Exception:
        q.put((rank, traceback.format_exc()))
    finally:
        dist.destroy_process_group()


def geo_expect(rank, world, placement):
    """(ranges, bytes_read) a world-`world` rank must read from the world-4 Shard(0) checkpoint of
    geo_tensor() (each rank file holds 512 rows from data offset 0; 1 MiB checksum blocks) to fill
    its `placement` shard: {file name: [[begin, end]]} and {file name: bytes of whole blocks}."""
    row = GEO_COLS * 4
    per_file = GEO_ROWS // 4
    ranges, read = {}, {}
    if placement == "Shard(0)":
        rows = GEO_ROWS // world
        lo, hi = rank * rows, (rank + 1) * rows
        for f in range(4):
            a, b = max(lo, f * per_file), min(hi, (f + 1) * per_file)
            if a < b:
                begin, end = (a - f * per_file) * row, (b - f * per_file) * row
                ranges[f] = [[begin, end]]
                read[f] = (end - 1) // (1 << 20) * (1 << 20) + (1 << 20) - begin // (1 << 20) * (1 << 20)
    else:  # Shard(1): columns [c0, c1) of every row: the span from row 0's c0 to the last row's c1
        cols = GEO_COLS // world
        c0, c1 = rank * cols, (rank + 1) * cols
        for f in range(4):
            begin, end = c0 * 4, (per_file - 1) * row + c1 * 4
            ranges[f] = [[begin, end]]
            read[f] = (end - 1) // (1 << 20) * (1 << 20) + (1 << 20) - begin // (1 << 20) * (1 << 20)
    return ({f"rank-{f:05d}.safetensors": v for f, v in ranges.items()},
            {f"rank-{f:05d}.safetensors": v for f, v in read.items()})


def _world8(rank, world, init_file, root, q):
    dist = _init(rank, world, init_file)
    try:
        from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import Shard, distribute_tensor
        out = {}
        ref, _ = reference()
        # The world-4 FSDP2 checkpoint into FSDP2 at world 8 (another init: every value changes).
        model, opt = fsdp_model(world, seed=2)
        msd, osd = get_state_dict(model, opt)
        back = ckpt.load(f"{root}/g4/step-00000003", {"model": msd, "optim": osd, "step": 0})
        set_state_dict(model, opt, model_state_dict=back["model"], optim_state_dict=back["optim"])
        out["fsdp2_world8"] = diff(full_state(model, opt), ref)
        # The byte ranges a rank reads, exactly: Shard(0) and Shard(1) targets of the 8 MiB tensor.
        mesh = init_device_mesh("cpu", (world,))
        for placement in ("Shard(0)", "Shard(1)"):
            t = distribute_tensor(torch.zeros(GEO_ROWS, GEO_COLS), mesh,
                                  [Shard(0) if placement == "Shard(0)" else Shard(1)])
            stats = {}
            ckpt.load(f"{root}/geo4/step-00000001", {"geo": t}, stats=stats)
            ranges, read = geo_expect(rank, world, placement)
            out[f"geo {placement}"] = diff(t, geo_tensor())
            out[f"ranges {placement}"] = (None if stats["ranges"] == ranges else
                                          f"read {stats['ranges']}, expected {ranges}")
            out[f"bytes {placement}"] = (None if stats["bytes_read"] == read else
                                         f"read {stats['bytes_read']}, expected {read}")
        # The Replicate() checkpoint, loaded sharded.
        r = replicated_tensors()
        target = {k: distribute_tensor(torch.zeros_like(v), mesh, [Shard(0)]) for k, v in r.items()}
        ckpt.load(f"{root}/rep4/step-00000001", target)
        out["replicated"] = diff(target, r)
        q.put((rank, out))
    except Exception:
        q.put((rank, traceback.format_exc()))
    finally:
        dist.destroy_process_group()


def _world2(rank, world, init_file, root, q):
    dist = _init(rank, world, init_file)
    try:
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
        ref, _ = reference()
        out = {}
        # grist.ckpt.load into an FSDP2 model at world 2 (another init: every value must change).
        model, opt = fsdp_model(world, seed=1)
        msd, osd = get_state_dict(model, opt)
        back = ckpt.load(f"{root}/g4/step-00000003", {"model": msd, "optim": osd, "step": 0})
        set_state_dict(model, opt, model_state_dict=back["model"], optim_state_dict=back["optim"])
        out["grist_fsdp2"] = diff(full_state(model, opt), ref)
        # ... and saved again at world 2 (the world-1 test loads it).
        msd, osd = get_state_dict(model, opt)
        ckpt.save({"model": msd, "optim": osd, "step": 3}, f"{root}/g2/step-00000003",
                  blocking=True)
        # The TP checkpoint (2x2 dp x tp) into FSDP2 at world 2.
        tp_ref, _ = reference(TpNet)
        model, opt = fsdp_model(world, seed=5, cls=TpNet)
        msd, osd = get_state_dict(model, opt)
        back = ckpt.load(f"{root}/tp4/step-00000003", {"model": msd, "optim": osd})
        set_state_dict(model, opt, model_state_dict=back["model"], optim_state_dict=back["optim"])
        out["tp_to_fsdp2"] = diff(full_state(model, opt), tp_ref)
        # DCP: the checkpoint written through grist's StorageWriter, read by its StorageReader.
        model, opt = fsdp_model(world, seed=2)
        msd, osd = get_state_dict(model, opt)
        sd = {"model": msd, "optim": osd}
        dcp.load(sd, storage_reader=ckpt.StorageReader(f"{root}/d4/step-00000003"))
        set_state_dict(model, opt, model_state_dict=sd["model"], optim_state_dict=sd["optim"])
        out["dcp_fsdp2"] = diff(full_state(model, opt), ref)
        # async_save through grist, loaded back by grist.ckpt.load at the same world size.
        fut = dcp.async_save(sd, storage_writer=ckpt.StorageWriter(f"{root}/a2/step-00000003"))
        fut.result()
        model, opt = fsdp_model(world, seed=3)
        msd, osd = get_state_dict(model, opt)
        back = ckpt.load(f"{root}/a2/step-00000003", {"model": msd, "optim": osd})
        set_state_dict(model, opt, model_state_dict=back["model"], optim_state_dict=back["optim"])
        out["dcp_async_then_grist"] = diff(full_state(model, opt), ref)
        # DCP's Stateful handling through grist's storage: a grist.Loader saved beside the model
        # and optimizer by dcp.save, restored by dcp.load (which calls its load_state_dict).
        import grist
        opts = dict(micro_batch_size=2, global_batch_size=4, epochs=0, seed=3)
        loader = grist.Loader(f"{root}/release", **opts)
        it = iter(loader)
        for _ in range(3):
            next(it)
        model, opt = fsdp_model(world, seed=1)
        set_full(model, opt, ref)
        msd, osd = get_state_dict(model, opt)
        saved_pos = loader.state_dict()
        dcp.save({"model": msd, "optim": osd, "loader": loader},
                 storage_writer=ckpt.StorageWriter(f"{root}/s2/step-00000003"))
        want = [next(it)["input_ids"].clone() for _ in range(2)]
        loader.close()
        loader = grist.Loader(f"{root}/release", **opts)
        model, opt = fsdp_model(world, seed=4)
        msd, osd = get_state_dict(model, opt)
        sd = {"model": msd, "optim": osd, "loader": loader}
        dcp.load(sd, storage_reader=ckpt.StorageReader(f"{root}/s2/step-00000003"))
        set_state_dict(model, opt, model_state_dict=sd["model"], optim_state_dict=sd["optim"])
        out["dcp_stateful_model"] = diff(full_state(model, opt), ref)
        out["dcp_stateful_loader_state"] = diff(loader.state_dict(), saved_pos)
        it = iter(loader)
        got = [next(it)["input_ids"] for _ in range(2)]
        out["dcp_stateful_loader_batches"] = diff(got, want)
        loader.close()
        q.put((rank, out))
    except Exception:
        q.put((rank, traceback.format_exc()))
    finally:
        dist.destroy_process_group()


def pp_stage(stage, stages=2, layers=4):
    """Pipeline stage `stage` of a 4-layer MLP (layers split evenly, as a pipeline schedule's stage
    modules hold them: each its own layers, under their full-model names) after one AdamW step on
    a fixed input: its model and optimizer state, plain tensors that differ per rank."""
    from torch.distributed.checkpoint.state_dict import get_state_dict
    per = layers // stages
    model = torch.nn.Module()
    model.layers = torch.nn.ModuleDict()
    for i in range(stage * per, (stage + 1) * per):
        torch.manual_seed(100 + i)
        model.layers[str(i)] = torch.nn.Linear(8, 8)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    x = torch.arange(16, dtype=torch.float32).reshape(2, 8) / 16
    for layer in model.layers.values():
        x = torch.tanh(layer(x))
    x.sum().backward()
    opt.step()
    msd, osd = get_state_dict(model, opt)
    return {"model": msd, "optim": osd}


def _stages2(rank, world, init_file, root, q):
    dist = _init(rank, world, init_file)
    try:
        import torch.distributed.checkpoint as dcp
        out = {}
        sd = pp_stage(rank)
        # grist.ckpt.save writes a plain tensor once, by a rank chosen by its name: per-stage state
        # is refused (on every rank), the message naming the DCP route.
        try:
            ckpt.save(sd, f"{root}/g/step-00000001", blocking=True)
            out["refused"] = "saved"
        except ckpt.GristError as e:
            out["refused"] = str(e)
        # That route: DCP's planner gathers every rank's keys; grist's storage writes them.
        dcp.save(sd, storage_writer=ckpt.StorageWriter(f"{root}/pp/step-00000001"))
        back = {"model": {k: torch.zeros_like(v) for k, v in sd["model"].items()},
                "optim": {"state": {k: {n: torch.zeros_like(t) if t.dim() else torch.tensor(0.0)
                                        for n, t in st.items()}
                                    for k, st in sd["optim"]["state"].items()},
                          "param_groups": sd["optim"]["param_groups"]}}
        dcp.load(back, storage_reader=ckpt.StorageReader(f"{root}/pp/step-00000001"))
        out["stage_back"] = diff(back, sd)
        q.put((rank, out))
    except Exception:
        q.put((rank, traceback.format_exc()))
    finally:
        dist.destroy_process_group()


run_ranks = kit.run_ranks


def rank_file_tensors(path, rank):
    from safetensors import safe_open
    with safe_open(os.path.join(path, f"rank-{rank:05d}.safetensors"), "pt") as f:
        return set(f.keys())


class ShardedCkptTest(unittest.TestCase):
    def test_world4_saves_reshard_to_8_2_1_and_2x2_grist_and_dcp(self):
        ref, _ = reference()
        tp_ref, _ = reference(TpNet)
        with tempfile.TemporaryDirectory() as root:
            t0 = time.monotonic()
            res = run_ranks(_world4, 4, root)
            self.assertEqual(len(res), 4, res)
            for rank, out in res:
                self.assertIsInstance(out, dict, out)
                placements = out.pop("tp_placements")
                # FSDP2 on dp over TP's Shard(0) gives a strided shard: what grist must handle.
                self.assertIn("Shard@2d", placements, rank)
                self.assertIn("Replicate@2d", placements, rank)
                self.assertEqual(out, {"set": None, "tp_set": None, "tp_forward": None,
                                       "grist_2x2": None, "dcp_2x2": None}, rank)
            t4 = time.monotonic() - t0
            m = ckpt.read_manifest(f"{root}/g4/step-00000003")
            self.assertEqual(m["version"], 2)
            self.assertEqual(m["world_size"], 4)
            by_name = {t["name"]: t for t in m["tensors"]}
            emb = by_name["model.emb.weight"]
            self.assertEqual(emb["shape"], [VOCAB, DIM])
            # FSDP2's uneven shards of 61 rows over 4 ranks, one per rank.
            self.assertEqual(sorted((s["offsets"][0], s["lengths"][0]) for s in emb["shards"]),
                             [(0, 16), (16, 16), (32, 16), (48, 13)])
            self.assertEqual(sorted(s["rank"] for s in emb["shards"]), [0, 1, 2, 3])
            # A replicated scalar (AdamW's step) is written once.
            steps = [t for n, t in by_name.items() if n.endswith(".step")]
            self.assertTrue(steps)
            self.assertTrue(all(len(t["shards"]) == 1 for t in steps))
            for path in ("g4", "d4", "tp4", "rep4", "geo4"):
                ckpt.verify(f"{root}/{path}/step-0000000{1 if path in ('rep4', 'geo4') else 3}")
            # Replicate(): written once, by the rank at coordinate 0 of every replicated mesh dim
            # (mesh [[0, 1], [2, 3]]: rep2d by rank 0, half (Shard(0) on dp) by ranks 0 and 2).
            rep = f"{root}/rep4/step-00000001"
            idx = {t["name"]: t for t in ckpt.read_manifest(rep)["tensors"]}
            self.assertEqual([(s["rank"], s["offsets"], s["lengths"]) for s in idx["rep2d"]["shards"]],
                             [(0, [0, 0], [6, 10])])
            self.assertEqual([(s["rank"], s["offsets"], s["lengths"]) for s in idx["rep1d"]["shards"]],
                             [(0, [0], [17])])
            self.assertEqual(sorted((s["rank"], s["offsets"], s["lengths"])
                                    for s in idx["half"]["shards"]),
                             [(0, [0, 0], [5, 4]), (2, [5, 0], [4, 4])])
            self.assertEqual([rank_file_tensors(rep, r) for r in range(4)],
                             [{"rep2d", "half", "rep1d"}, set(), {"half"}, set()])
            # The TP checkpoint: every 2-d-sharded weight is split over all 4 ranks.
            tp_idx = {t["name"]: t for t in ckpt.read_manifest(f"{root}/tp4/step-00000003")["tensors"]}
            self.assertEqual(sorted(s["rank"] for s in tp_idx["model.blocks.0.down.weight"]["shards"]),
                             [0, 1, 2, 3])
            self.assertEqual(tp_idx["model.blocks.0.down.weight"]["shape"], [DIM, HIDDEN])

            t0 = time.monotonic()
            res = run_ranks(_world8, 8, root)
            self.assertEqual(len(res), 8, res)
            for rank, out in res:
                self.assertIsInstance(out, dict, out)
                self.assertEqual(out, {k: None for k in (
                    "fsdp2_world8", "geo Shard(0)", "ranges Shard(0)", "bytes Shard(0)",
                    "geo Shard(1)", "ranges Shard(1)", "bytes Shard(1)", "replicated")}, rank)
            t8 = time.monotonic() - t0

            from grist.loader import write_synthetic_release
            write_synthetic_release(f"{root}/release", samples=256, seq_len=16, vocab_size=VOCAB,
                                    mean_document_tokens=10)
            t0 = time.monotonic()
            res = run_ranks(_world2, 2, root)
            self.assertEqual(len(res), 2, res)
            for rank, out in res:
                self.assertIsInstance(out, dict, out)
                self.assertEqual(out, {"grist_fsdp2": None, "tp_to_fsdp2": None, "dcp_fsdp2": None,
                                       "dcp_async_then_grist": None, "dcp_stateful_model": None,
                                       "dcp_stateful_loader_state": None,
                                       "dcp_stateful_loader_batches": None}, rank)
            t2 = time.monotonic() - t0

            # World 1: full unsharded loads, plain models' state dicts as targets.
            for path in ("g4", "g2"):
                full = ckpt.load(f"{root}/{path}/step-00000003")
                self.assertIsNone(diff({"model": full["model"], "optim": full["optim"]}, ref), path)
            sd = TinyTransformer().state_dict()
            ckpt.load(f"{root}/g2/step-00000003", {"model": sd})
            self.assertIsNone(diff(sd, ref["model"]))
            # The TP checkpoint into a plain single-process TpNet (and in full).
            sd = TpNet().state_dict()
            ckpt.load(f"{root}/tp4/step-00000003", {"model": sd})
            self.assertIsNone(diff(sd, tp_ref["model"]))
            full = ckpt.load(f"{root}/tp4/step-00000003")
            self.assertIsNone(diff({"model": full["model"], "optim": full["optim"]}, tp_ref))
            self.assertIsNone(diff(ckpt.load(rep), replicated_tensors()))
            self.assertTrue(torch.equal(ckpt.load(f"{root}/geo4/step-00000001")["geo"], geo_tensor()))
            # Export of the world-4 shards (grist's and DCP's) into HF-style safetensors.
            from safetensors.torch import load_file
            for path in ("g4", "d4"):
                ckpt.export(f"{root}/{path}/step-00000003", f"{root}/hf-{path}", prefix="model.")
                self.assertIsNone(diff(load_file(f"{root}/hf-{path}/model.safetensors"),
                                       ref["model"]), path)
            # dcp.load at world 1 (no process group) of the world-4 and world-2 DCP saves, into
            # a plain model's state and the optimizer state's layout.
            import torch.distributed.checkpoint as dcp
            for path in ("d4", "a2", "s2"):
                target = zeros_like_state(ref)
                dcp.load(target, storage_reader=ckpt.StorageReader(f"{root}/{path}/step-00000003"))
                self.assertIsNone(diff(target, ref), path)
            flat = ckpt.load(f"{root}/d4/step-00000003")  # DCP's flat names
            self.assertTrue(torch.equal(flat["model.emb.weight"], ref["model"]["emb.weight"]))
            print(f"\nworld 4: {t4:.1f} s, world 8: {t8:.1f} s, world 2: {t2:.1f} s")

    def test_geo_expectations_cover_what_each_rank_holds(self):
        # The expected ranges of geo_expect, checked against the geometry itself: every rank's
        # Shard(0) ranges tile the files exactly once; every Shard(1) range spans its columns.
        for world in (2, 4, 8):
            tiles = {}
            for r in range(world):
                ranges, read = geo_expect(r, world, "Shard(0)")
                for f, rs in ranges.items():
                    tiles.setdefault(f, []).extend(map(tuple, rs))
                    self.assertGreaterEqual(read[f], sum(e - b for b, e in rs))
            for f, rs in tiles.items():
                rs.sort()
                self.assertEqual(rs[0][0], 0)
                self.assertEqual(rs[-1][1], GEO_ROWS // 4 * GEO_COLS * 4)
                self.assertTrue(all(a[1] == b[0] for a, b in zip(rs, rs[1:])), rs)


class PipelineStagesTest(unittest.TestCase):
    def test_per_stage_state_saves_through_dcp_and_loads_whole(self):
        with tempfile.TemporaryDirectory() as root:
            res = run_ranks(_stages2, 2, root)
            self.assertEqual(len(res), 2, res)
            for rank, out in res:
                self.assertIsInstance(out, dict, out)
                self.assertIn("storage_writer=grist.ckpt.StorageWriter", out["refused"])
                self.assertIsNone(out["stage_back"], rank)
            self.assertFalse(os.path.exists(f"{root}/g/step-00000001/manifest.json"))
            # One process reads both stages back: the whole model and optimizer, as consolidating
            # a pipeline-parallel run for evaluation or export needs.
            stages = [pp_stage(s) for s in range(2)]
            whole = {"model": {**stages[0]["model"], **stages[1]["model"]},
                     "optim": {"state": {**stages[0]["optim"]["state"], **stages[1]["optim"]["state"]}}}
            import torch.distributed.checkpoint as dcp
            target = {"model": {k: torch.zeros_like(v) for k, v in whole["model"].items()},
                      "optim": {"state": {k: {n: torch.zeros_like(t) for n, t in st.items()}
                                          for k, st in whole["optim"]["state"].items()}}}
            dcp.load(target, storage_reader=ckpt.StorageReader(f"{root}/pp/step-00000001"))
            self.assertIsNone(diff(target, whole))
            flat = ckpt.load(f"{root}/pp/step-00000001")  # DCP's flat names
            for name, t in whole["model"].items():
                self.assertTrue(torch.equal(flat[f"model.{name}"], t), name)
            self.assertEqual(sum(1 for k in flat if k.startswith("model.")), 8)


def reseal(path, edit):
    """Rewrites path/manifest.json after edit(manifest dict), with a valid manifest checksum (so
    only the edited content can be what is rejected)."""
    mp_ = os.path.join(path, "manifest.json")
    with open(mp_) as f:
        m = json.load(f)
    edit(m)
    m.pop("manifest_xxh3")
    body = json.dumps(m, indent=2)[:-2] + ",\n  "
    text = body + '"manifest_xxh3": "%016x"\n}\n' % xxhash.xxh3_64_intdigest(body.encode())
    with open(mp_, "w") as f:
        f.write(text)


class HostileManifestTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.tmp.name, "step-1")
        ckpt.save({"a": torch.arange(64.0).reshape(8, 8), "b": torch.ones(16)}, self.path,
                  blocking=True)

    def tearDown(self):
        self.tmp.cleanup()

    def expect(self, edit, message):
        reseal(self.path, edit)
        with self.assertRaises(ckpt.GristError) as cm:
            ckpt.load(self.path)
        self.assertIn(message, str(cm.exception))
        with self.assertRaises(ckpt.GristError):
            ckpt.read_manifest(self.path)

    def test_resealed_unchanged_manifest_loads(self):
        reseal(self.path, lambda m: None)
        self.assertTrue(torch.equal(ckpt.load(self.path)["b"], torch.ones(16)))

    def split_a(self, m, second_offset, second_rows):
        a = m["tensors"][0]
        a["shards"] = [{"rank": 0, "offsets": [0, 0], "lengths": [4, 8], "begin": 0, "end": 128},
                       {"rank": 0, "offsets": [second_offset, 0], "lengths": [second_rows, 8],
                        "begin": 128, "end": 128 + 32 * second_rows}]

    def test_overlapping_shards(self):
        self.expect(lambda m: self.split_a(m, 3, 4), "overlap")

    def test_hole(self):
        self.expect(lambda m: self.split_a(m, 5, 3), "a hole")

    def test_range_beyond_the_file(self):
        def edit(m):
            b = m["tensors"][1]["shards"][0]
            b["begin"] += 1 << 20
            b["end"] += 1 << 20
        self.expect(edit, "beyond the data")

    def test_shard_outside_the_shape(self):
        self.expect(lambda m: m["tensors"][0]["shards"][0].update(offsets=[1, 0]),
                    "outside the shape")

    def test_two_shards_sharing_bytes(self):
        self.expect(lambda m: m["tensors"][1]["shards"][0].update(begin=0, end=64),
                    "share bytes")

    def test_file_outside_the_folder(self):
        for name in ("../step-0/rank-00000.safetensors", "/etc/passwd", ".."):
            with self.subTest(name=name):
                self.expect(lambda m: m["files"][0].update(name=name), "not a plain file name")

    def test_version1_checkpoint_still_loads(self):
        def edit(m):
            m["version"] = 1
            del m["tensors"], m["structure"]
        reseal(self.path, edit)
        back = ckpt.load(self.path)  # this rank's file, structure from its own metadata
        self.assertTrue(torch.equal(back["a"], torch.arange(64.0).reshape(8, 8)))
        with self.assertRaises(ckpt.GristError):
            ckpt.load(self.path, {"a": torch.zeros(8, 8)})  # no index: no resharding

    def test_newer_version(self):
        self.expect(lambda m: m.update(version=3), "upgrade grist")

    def test_bit_flip_in_a_read_block(self):
        f = os.path.join(self.path, "rank-00000.safetensors")
        with open(f, "r+b") as fh:
            fh.seek(os.path.getsize(f) - 3)
            fh.write(b"\x7f")
        with self.assertRaises(ckpt.GristError) as cm:
            ckpt.load(self.path)
        self.assertIn("checksum mismatch in block", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
