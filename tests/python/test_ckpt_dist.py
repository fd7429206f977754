"""Multi-process tests of grist.ckpt's sharded state (torch.multiprocessing, gloo, CPU).

FSDP2 (fully_shard) of a small transformer + AdamW after a few steps is saved at world 4 with
grist.ckpt.save and through DCP with grist's StorageWriter, then loaded at world 2 (FSDP2), at 1
(plain model, and a full unsharded load), and at world 4 on a 2x2 (dp x tp) mesh with Shard(0) /
Shard(1) placements; every value must equal the full state gathered from the world-4 run. Also:
a rank SIGKILLed during a save (the survivors get an error naming it, the previous checkpoint
stays the newest), and hostile manifests (rejected with a clear error).
"""

import json
import os
import signal
import tempfile
import time
import traceback
import unittest

import torch
import torch.multiprocessing as mp
import xxhash

from grist import ckpt

VOCAB, DIM, HIDDEN = 61, 32, 50  # odd sizes: FSDP2's shards of them are uneven


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


def fsdp_model(world, seed):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    torch.manual_seed(seed)
    model = TinyTransformer()
    mesh = init_device_mesh("cpu", (world,))
    for blk in model.blocks:
        fully_shard(blk, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-2)


def train(model, opt, rank, steps):
    for s in range(steps):
        g = torch.Generator().manual_seed(100 * s + rank)
        ids = torch.randint(0, VOCAB, (2, 8), generator=g)
        loss = torch.nn.functional.cross_entropy(model(ids[:, :-1]).reshape(-1, VOCAB),
                                                 ids[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad()


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
        model, opt = fsdp_model(world, seed=0)
        train(model, opt, rank, steps=3)
        msd, osd = get_state_dict(model, opt)
        h = ckpt.save({"model": msd, "optim": osd, "step": 3}, f"{root}/g4/step-00000003")
        dcp.save({"model": msd, "optim": osd},
                 storage_writer=ckpt.StorageWriter(f"{root}/d4/step-00000003"))
        h.wait()
        ref = full_state(model, opt)
        if rank == 0:
            torch.save(ref, f"{root}/ref.pt")
        # Load both at world 4 into a 2x2 (dp x tp) mesh.
        mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
        out = {}
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


def _world2(rank, world, init_file, root, q):
    dist = _init(rank, world, init_file)
    try:
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
        ref = torch.load(f"{root}/ref.pt", weights_only=False)
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
        q.put((rank, out))
    except Exception:
        q.put((rank, traceback.format_exc()))
    finally:
        dist.destroy_process_group()


def _killed_save(rank, world, init_file, root, q):
    dist = _init(rank, world, init_file)
    try:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import Shard, distribute_tensor
        mesh = init_device_mesh("cpu", (world,))
        w = distribute_tensor(torch.arange(3 << 18, dtype=torch.float32).reshape(-1, 256), mesh,
                              [Shard(0)])
        ckpt.save({"w": w, "step": 1}, f"{root}/step-00000001", blocking=True, timeout=20)
        if rank == 1:
            # Dies while its file is being written: before it is durable and reported (killing
            # after save() returns could come too late for a file this small).
            def die(*args):
                os.kill(os.getpid(), signal.SIGKILL)
            ckpt.lib.grist_ckpt_pending_wait = die
        h = ckpt.save({"w": w, "step": 2}, f"{root}/step-00000002", timeout=8)
        if rank == 1:
            time.sleep(60)
        t0 = time.monotonic()
        try:
            h.wait()
            q.put((rank, "no error", time.monotonic() - t0))
        except Exception as e:
            q.put((rank, str(e), time.monotonic() - t0))
    except Exception:
        q.put((rank, traceback.format_exc(), 0))
    finally:
        q.close()
        q.join_thread()  # flushed before exiting without the queue's atexit
        os._exit(0)  # the process group lost a member: do not tear it down


def run_ranks(fn, world, root, timeout=300):
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    init_file = os.path.join(root, f"init-{fn.__name__}")
    procs = [ctx.Process(target=fn, args=(r, world, init_file, root, q)) for r in range(world)]
    for p in procs:
        p.start()
    out = []
    try:
        deadline = time.monotonic() + timeout
        alive = world
        while len(out) < alive and time.monotonic() < deadline:
            try:
                out.append(q.get(timeout=1))
            except Exception:
                alive = world - sum(1 for p in procs if p.exitcode not in (None, 0))
    finally:
        for p in procs:
            p.join(30)
            if p.is_alive():
                p.kill()
    return sorted(out, key=lambda r: r[0])


class ShardedCkptTest(unittest.TestCase):
    def test_fsdp2_world4_reshards_to_2_1_and_2x2_grist_and_dcp(self):
        with tempfile.TemporaryDirectory() as root:
            res = run_ranks(_world4, 4, root)
            self.assertEqual(len(res), 4, res)
            for rank, out in res:
                self.assertIsInstance(out, dict, out)
                self.assertEqual(out, {"grist_2x2": None, "dcp_2x2": None}, rank)
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
            ckpt.verify(f"{root}/g4/step-00000003")
            ckpt.verify(f"{root}/d4/step-00000003")

            res = run_ranks(_world2, 2, root)
            self.assertEqual(len(res), 2, res)
            for rank, out in res:
                self.assertIsInstance(out, dict, out)
                self.assertEqual(out, {"grist_fsdp2": None, "dcp_fsdp2": None,
                                       "dcp_async_then_grist": None}, rank)

            # World 1: a full unsharded load, and a plain model's state dict as the target.
            ref = torch.load(f"{root}/ref.pt", weights_only=False)
            for path in ("g4", "g2"):
                full = ckpt.load(f"{root}/{path}/step-00000003")
                self.assertIsNone(diff({"model": full["model"], "optim": full["optim"]}, ref), path)
            model = TinyTransformer()
            sd = model.state_dict()
            ckpt.load(f"{root}/g2/step-00000003", {"model": sd})
            self.assertIsNone(diff(sd, ref["model"]))
            # Export of the world-4 shards (grist's and DCP's) into HF-style safetensors.
            from safetensors.torch import load_file
            for path in ("g4", "d4"):
                ckpt.export(f"{root}/{path}/step-00000003", f"{root}/hf-{path}", prefix="model.")
                self.assertIsNone(diff(load_file(f"{root}/hf-{path}/model.safetensors"),
                                       ref["model"]), path)
            flat = ckpt.load(f"{root}/d4/step-00000003")  # DCP's flat names
            self.assertTrue(torch.equal(flat["model.emb.weight"], ref["model"]["emb.weight"]))

    def test_sigkilled_rank_fails_every_survivor_and_keeps_the_previous_checkpoint(self):
        with tempfile.TemporaryDirectory() as root:
            res = run_ranks(_killed_save, 3, root, timeout=120)
            self.assertEqual([r[0] for r in res], [0, 2], res)
            for rank, msg, waited in res:
                self.assertIn("rank 1 did not report", msg, rank)
                self.assertLess(waited, 60, rank)  # bounded, not a hang
            self.assertEqual(ckpt.latest(root), f"{root}/step-00000001")
            self.assertFalse(os.path.exists(f"{root}/step-00000002/manifest.json"))
            back = ckpt.load(f"{root}/step-00000001")
            self.assertTrue(torch.equal(back["w"], torch.arange(3 << 18, dtype=torch.float32)
                                        .reshape(-1, 256)))


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
