"""Tests of grist.ckpt (run with /usr/bin/python3 and Debian's python3-torch; PYTHONPATH=build/python)."""

import json
import os
import random
import re
import signal
import struct
import sys
import tempfile
import time
import unittest

import torch

import grist
from grist import ckpt

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grist_testkit as kit  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# An independent safetensors reader, written from the format's specification: 8-byte little-endian
# header length N, N bytes of JSON (may end in spaces), then the data; each tensor's data_offsets
# are relative to the end of the header; the data has no holes.
_SPEC_DTYPES = {"BOOL": (torch.bool, 1), "U8": (torch.uint8, 1), "I8": (torch.int8, 1),
                "I16": (torch.int16, 2), "F16": (torch.float16, 2), "BF16": (torch.bfloat16, 2),
                "I32": (torch.int32, 4), "F32": (torch.float32, 4), "I64": (torch.int64, 8),
                "F64": (torch.float64, 8)}


def spec_read(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    assert 8 + n <= len(raw), "header runs past the file"
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    data = raw[8 + n:]
    out, spans = {}, []
    for name, info in header.items():
        dt, size = _SPEC_DTYPES[info["dtype"]]
        b, e = info["data_offsets"]
        count = 1
        for d in info["shape"]:
            count *= d
        assert e - b == count * size, name
        spans.append((b, e))
        chunk = bytearray(data[b:e])
        t = torch.frombuffer(chunk, dtype=dt) if chunk else torch.empty(0, dtype=dt)
        out[name] = t.reshape(info["shape"])
    spans.sort()
    pos = 0
    for b, e in spans:
        assert b == pos, "hole or overlap"
        pos = e
    assert pos == len(data), "data does not end at the end of the file"
    return out, meta, 8 + n


def raw_bytes(t):
    return t.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


class CkptTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def test_every_dtype_and_shape_round_trips_and_reads_with_spec_reader(self):
        g = torch.Generator().manual_seed(0)
        sd = {}
        shapes = [(), (0,), (3, 0, 2), (5,), (7, 3), (2, 3, 4)]
        for dt in [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
                   torch.float16, torch.bfloat16, torch.float32, torch.float64]:
            for i, shape in enumerate(shapes):
                x = torch.randint(0, 100, shape, generator=g).to(dt) if not dt.is_floating_point \
                    else torch.randn(shape, generator=g).to(dt)
                sd[f"{str(dt).split('.')[1]}_{i}"] = x
        sd["noncontig"] = torch.arange(24, dtype=torch.float32).reshape(4, 6).t()
        path = os.path.join(self.root, "step-3")
        ckpt.save(sd, path, blocking=True)
        back = ckpt.load(path)
        self.assertEqual(set(back), set(sd))
        for k, v in sd.items():
            self.assertEqual(back[k].dtype, v.dtype, k)
            self.assertEqual(tuple(back[k].shape), tuple(v.shape), k)
            self.assertEqual(raw_bytes(back[k]), raw_bytes(v), k)
        tensors, meta, data_start = spec_read(os.path.join(path, "rank-00000.safetensors"))
        self.assertEqual(data_start % 4096, 0)
        self.assertEqual(meta["format"], "pt")
        for k, v in sd.items():
            self.assertEqual(raw_bytes(tensors[k]), raw_bytes(v), k)
        m = ckpt.manifest(path)
        self.assertEqual(m["step"], 3)
        self.assertEqual(m["files"][0]["name"], "rank-00000.safetensors")
        self.assertEqual(m["files"][0]["size"],
                         os.path.getsize(os.path.join(path, "rank-00000.safetensors")))

    def test_nested_model_optimizer_and_loader_state_resume_exactly(self):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        x, y = torch.randn(32, 8), torch.randn(32, 1)

        def step(m, o):
            o.zero_grad()
            loss = torch.nn.functional.mse_loss(m(x), y)
            loss.backward()
            o.step()
            return loss.item()

        for _ in range(3):
            step(model, opt)
        loader_state = {"epoch": 1, "position": 96, "seed": 1234, "name": "v1.0"}
        path = os.path.join(self.root, "step-00000003")
        ckpt.save({"model": model.state_dict(), "optim": opt.state_dict(), "loader": loader_state,
                   "step": 3}, path, keep_last=2, metadata={"run": "test"}).wait()
        expected = [step(model, opt) for _ in range(3)]

        model2 = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
        opt2 = torch.optim.AdamW(model2.parameters(), lr=1e-2)
        state = ckpt.load(ckpt.latest(self.root))
        self.assertEqual(state["loader"], loader_state)
        self.assertEqual(state["step"], 3)
        self.assertIsInstance(next(iter(state["optim"]["state"])), int)
        self.assertTrue(any(n.startswith("optim.state.0.") for n in spec_read(
            os.path.join(path, "rank-00000.safetensors"))[0]))
        model2.load_state_dict(state["model"])
        opt2.load_state_dict(state["optim"])
        resumed = [step(model2, opt2) for _ in range(3)]
        self.assertEqual(resumed, expected)  # bit for bit
        self.assertEqual(ckpt.manifest(path)["metadata"], {"run": "test"})

    def test_async_save_snapshots_before_returning(self):
        big = torch.randn(4 << 20)  # 16 MiB
        original = big.clone()
        h = ckpt.save({"w": big}, os.path.join(self.root, "s-1"))
        big.mul_(0).add_(7)  # training continues and modifies the tensor
        self.assertEqual(h.wait(), os.path.join(self.root, "s-1"))
        self.assertTrue(h.done())
        self.assertTrue(torch.equal(ckpt.load(h.path)["w"], original))
        # The caller is blocked for the snapshot copy, not for the write: compare a second save's
        # blocked time (the staging arena is allocated and faulted in by the first) with a memcpy
        # of the same bytes measured here (best of 3), with a generous factor and a floor for the
        # folder setup on a loaded CI machine. Measured on the 2-core dev VM under load: memcpy
        # 4.9 ms, blocked 2.6-7.6 ms.
        h2 = ckpt.save({"w": original}, os.path.join(self.root, "s-2"))
        h2.wait()
        dst = torch.empty_like(original)
        memcpy = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            dst.copy_(original)
            memcpy = min(memcpy, time.perf_counter() - t0)
        self.assertGreater(h2.blocked_seconds, 0)
        self.assertLess(h2.blocked_seconds, 5 * memcpy + 0.01,
                        f"blocked {h2.blocked_seconds:.4f} s for a {memcpy:.4f} s memcpy")

    def test_in_place_and_staged_saves_write_identical_files(self):
        g = torch.Generator().manual_seed(3)
        base = torch.randn(3 << 20, generator=g)  # 12 MiB of float32
        # "a" is the first tensor (its file offset is 4096-aligned): give it a page-aligned address.
        page = torch.empty((1 << 20) + 1024)
        skip = (-page.data_ptr() % 4096) // 4
        page[skip:skip + (1 << 20)] = base[: 1 << 20]
        sd = {"model": {"a": page[skip:skip + (1 << 20)],        # aligned view
                        "b": base[(1 << 20) + 3: (2 << 20) + 5],  # misaligned view, odd length
                        "empty": torch.empty(0, 4),
                        "scalar": torch.tensor(5, dtype=torch.int64),
                        "t": torch.randn(300, 301, generator=g).t(),  # not contiguous
                        "h": torch.randn(70001, generator=g).to(torch.bfloat16)},
              "step": 9}
        staged = ckpt.save(sd, os.path.join(self.root, "staged-9"))  # snapshot (pool copy)
        staged.wait()
        blocking = ckpt.save(sd, os.path.join(self.root, "blocking-9"), blocking=True)
        lazy = ckpt.save(sd, os.path.join(self.root, "lazy-9"), snapshot=False)
        lazy.wait()
        files = []
        for h in (staged, blocking, lazy):
            with open(os.path.join(h.path, "rank-00000.safetensors"), "rb") as f:
                files.append(f.read())
        self.assertEqual(files[0], files[1])
        self.assertEqual(files[0], files[2])
        direct = staged.file_info["direct"]
        if direct:  # aligned host tensors came from their own memory
            self.assertGreater(blocking.file_info["in_place_bytes"], 0)
            self.assertGreater(lazy.file_info["in_place_bytes"], 0)
        self.assertEqual(staged.file_info["in_place_bytes"], 0)
        out = ckpt.load(lazy.path)
        for k in ("a", "b", "empty", "scalar", "t", "h"):
            self.assertTrue(torch.equal(out["model"][k], sd["model"][k]), k)
        self.assertEqual(out["step"], 9)

    def test_latest_retention_and_torn_folders(self):
        self.assertIsNone(ckpt.latest(self.root))
        for s in (1, 2, 3, 4):
            ckpt.save({"w": torch.full((10,), float(s))}, os.path.join(self.root, f"step-{s}"),
                      keep_last=2)
        ckpt.save({"w": torch.zeros(1)}, os.path.join(self.root, "step-5"), keep_last=2).wait()
        self.assertEqual([s for s, _ in ckpt.list_checkpoints(self.root)], [4, 5])
        os.makedirs(os.path.join(self.root, "step-9"))  # a torn save: no manifest
        self.assertEqual(ckpt.latest(self.root), os.path.join(self.root, "step-5"))
        with self.assertRaises(grist.GristError):
            ckpt.save({"w": torch.zeros(1)}, os.path.join(self.root, "step-5"), blocking=True)

    def test_bit_flip_and_hostile_files_are_rejected(self):
        path = os.path.join(self.root, "step-1")
        ckpt.save({"w": torch.randn(100000)}, path, blocking=True)
        f = os.path.join(path, "rank-00000.safetensors")
        with open(f, "r+b") as fh:
            fh.seek(5000)
            b = fh.read(1)
            fh.seek(5000)
            fh.write(bytes([b[0] ^ 1]))
        with self.assertRaisesRegex(grist.GristError, "checksum mismatch"):
            ckpt.load(path)
        with self.assertRaises(grist.GristError):
            ckpt.verify(path)
        self.assertIsNone(ckpt.latest(self.root, verify=True))
        hostile = os.path.join(self.root, "h.safetensors")
        with open(hostile, "wb") as fh:
            fh.write(struct.pack("<Q", 1 << 40) + b"{}")
        with self.assertRaisesRegex(grist.GristError, "100 MB"):
            ckpt.load(hostile)

    def test_foreign_safetensors_file_loads_flat(self):
        hdr = json.dumps({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
        p = os.path.join(self.root, "f.safetensors")
        with open(p, "wb") as fh:
            fh.write(struct.pack("<Q", len(hdr)) + hdr + struct.pack("<2f", 1.5, -2.0))
        self.assertEqual(ckpt.load(p)["a"].tolist(), [1.5, -2.0])

    # The named crash points of a save (ckptio/internal/crash_points.h, in the order one save
    # reaches them), each with what a SIGKILL there leaves: whether manifest.json was renamed into
    # place (the save is published), whether retention unpublished the oldest checkpoint, and
    # whether that one is left on disk under its hidden ".deleting." name.
    KILL_POINTS = {
        "ckptio.file.after_data_writes": (False, False, False),
        "ckptio.file.after_fsync": (False, False, False),
        "ckptio.publish.before_rename": (False, False, False),
        "ckptio.publish.after_rename": (True, False, False),
        "ckptio.publish.before_parent_fsync": (True, False, False),
        "ckptio.retention.after_hide": (True, True, True),
        "ckptio.retention.during_remove": (True, True, True),
        "ckptio.retention.before_fsync": (True, True, False),
    }

    def _saver(self, root, start, count, env=None):
        """A process of `count` saves from step `start` (forked from a server that imported
        torch and grist once, so each costs no interpreter start-up)."""
        import multiprocessing as mp
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(["torch", "grist.ckpt"])
        p = ctx.Process(target=_save_steps, args=(root, start, count, env or {}))
        p.start()
        return p

    def _published(self, root):
        return [s for s, _ in ckpt.list_checkpoints(root)]

    def _expect_whole_latest(self, root, step):
        """latest(), with and without verification, is step's folder and holds step's state."""
        latest = ckpt.latest(root)
        self.assertEqual(latest, os.path.join(root, f"step-{step:06d}"))
        self.assertEqual(ckpt.latest(root, verify=True), latest)
        state = ckpt.load(latest)
        self.assertEqual(state["step"], step)
        self.assertTrue(torch.equal(state["w"], torch.full((1 << 18,), float(step))))

    def test_sigkill_at_each_crash_point_keeps_the_newest_published(self):
        kit.require_test_hooks(self)
        with open(os.path.join(ROOT, "ckptio", "internal", "crash_points.h")) as f:
            header = re.findall(r'std::string_view kCrash\w+ = "([^"]+)"', f.read())
        self.assertEqual(header, list(self.KILL_POINTS))
        # Steps 0, 1, 2 with keep_last=2, tracing the points reached: the first two saves reach
        # the file and publish points, the third (one checkpoint to remove) every point, in order.
        root, trace = os.path.join(self.root, "c"), os.path.join(self.root, "trace")
        p = self._saver(root, 0, 3, {"GRIST_CRASH_TRACE": trace})
        p.join(120)
        self.assertEqual(p.exitcode, 0)
        self.assertTrue(os.path.exists(trace))
        with open(trace) as f:
            publish = header[:5]
            self.assertEqual(f.read().split(), publish + publish + header)
        self.assertEqual(self._published(root), [1, 2])

        # Each run saves `step` (published, retention removes step-1) and is then killed by
        # SIGKILL at one crash point of its second save, step + 1. The next run resumes after
        # latest(), as training does.
        step = 3
        for point, (renamed, retention, hidden) in self.KILL_POINTS.items():
            with self.subTest(point=point):
                p = self._saver(root, step, 3, {"GRIST_CRASH_POINT": f"{point}@2"})
                p.join(120)
                self.assertEqual(p.exitcode, -signal.SIGKILL, f"not killed at {point}")
                # Exactly what is published, and what is hidden on disk.
                want = [step - 1, step] + ([step + 1] if renamed else [])
                if retention:
                    want = want[1:]
                self.assertEqual(self._published(root), want)
                self.assertEqual([n for n in os.listdir(root) if n.startswith(".")],
                                 [f".deleting.step-{step - 1:06d}"] if hidden else [])
                if not renamed:  # the killed save's folder: torn, never listed
                    self.assertFalse(os.path.exists(
                        os.path.join(root, f"step-{step + 1:06d}", "manifest.json")))
                self._expect_whole_latest(root, want[-1])
                # latest() swept what the killed retention left; the published set is unchanged.
                self.assertEqual([n for n in os.listdir(root) if n.startswith(".")], [])
                self.assertEqual(self._published(root), want)
                step = want[-1] + 1

        # Resumed to the end: exactly the last two, byte for byte those of an uninterrupted run.
        p = self._saver(root, step, 2)
        p.join(120)
        self.assertEqual(p.exitcode, 0)
        self.assertEqual(sorted(os.listdir(root)), [f"step-{step:06d}", f"step-{step + 1:06d}"])
        ref = os.path.join(self.root, "ref")
        p = self._saver(ref, step - 1, 3)
        p.join(120)
        self.assertEqual(p.exitcode, 0)
        for name in (f"step-{step + 1:06d}/manifest.json", f"step-{step + 1:06d}/rank-00000.safetensors"):
            with open(os.path.join(root, name), "rb") as a, open(os.path.join(ref, name), "rb") as b:
                self.assertTrue(a.read() == b.read(), f"{name} differs from the uninterrupted run")

    def test_sigkill_at_a_random_moment_keeps_the_newest_published(self):
        # A supplement to the crash points above: killed from outside, wherever the save is.
        rng = random.Random(5)
        root = os.path.join(self.root, "c")
        step = 0
        for _ in range(2):
            p = self._saver(root, step, 1000)
            first = os.path.join(root, f"step-{step:06d}", "manifest.json")
            deadline = time.time() + 120
            while not os.path.exists(first) and p.is_alive() and time.time() < deadline:
                time.sleep(0.002)
            time.sleep(rng.random() * 0.05)
            self.assertTrue(p.is_alive(), "the saver ended before it was killed")
            p.kill()
            p.join(60)
            self.assertEqual(p.exitcode, -signal.SIGKILL)
            # Consecutive steps, at least this run's first; a third one only when the kill came
            # between the newest's rename and the retention that follows it.
            published = self._published(root)
            self.assertGreaterEqual(published[-1], step)
            self.assertEqual(published, list(range(published[0], published[-1] + 1)))
            self.assertLessEqual(len(published), 3)
            self._expect_whole_latest(root, published[-1])
            step = published[-1] + 1


def _save_steps(root, start, count, env):
    """What the kill tests' child processes do: steps start..start+count-1, each published before
    the next, keep_last=2, with `env` set first (GRIST_CRASH_POINT is read at the first point)."""
    os.environ.update(env)
    for s in range(start, start + count):
        ckpt.save({"w": torch.full((1 << 18,), float(s)), "step": s},
                  os.path.join(root, f"step-{s:06d}"), keep_last=2, blocking=True)


def _ddp_worker(rank, world, init_file, root, q):
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        # DDP state: plain tensors equal on every rank, written once (by one rank).
        shard = {"model": {"w": torch.arange(1000.0), "b": torch.ones(7)}, "step": 10}
        h = ckpt.save(shard, os.path.join(root, "step-00000010"))
        h.wait()
        back = ckpt.load(ckpt.latest(root))
        q.put((rank, back["step"], torch.equal(back["model"]["w"], shard["model"]["w"]) and
               torch.equal(back["model"]["b"], shard["model"]["b"])))
    except Exception as e:  # reported to the parent
        q.put((rank, repr(e), False))
    finally:
        dist.destroy_process_group()


class DistributedCkptTest(unittest.TestCase):
    def test_two_ranks_write_their_files_and_rank0_publishes(self):
        import torch.multiprocessing as mp
        with tempfile.TemporaryDirectory() as root:
            ctx = mp.get_context("spawn")
            q = ctx.Queue()
            init_file = os.path.join(root, "init")
            procs = [ctx.Process(target=_ddp_worker, args=(r, 2, init_file, os.path.join(root, "c"), q))
                     for r in range(2)]
            for p in procs:
                p.start()
            results = sorted(q.get(timeout=120) for _ in procs)
            for p in procs:
                p.join(60)
            self.assertEqual(results, [(0, 10, True), (1, 10, True)])
            m = ckpt.manifest(os.path.join(root, "c", "step-00000010"))
            self.assertEqual(m["world_size"], 2)
            # Each replicated tensor is written by exactly one rank.
            self.assertEqual({t["name"]: len(t["shards"]) for t in m["tensors"]},
                             {"model.w": 1, "model.b": 1})
            self.assertEqual(sum(f["tensors"] for f in m["files"]), 2)
            self.assertEqual([f["name"] for f in m["files"]],
                             ["rank-00000.safetensors", "rank-00001.safetensors"])
            ckpt.verify(os.path.join(root, "c", "step-00000010"))


if __name__ == "__main__":
    unittest.main()
