"""grist.Loader blends of releases, its Stateful state (torch.distributed.checkpoint, grist.ckpt)
and its IterableDataset view (torch DataLoader, torchdata StatefulDataLoader)."""

import os
import shutil
import tempfile
import unittest
from collections import Counter

import torch

import grist
import grist.data
from grist.loader import GristError, write_synthetic_release

SEQ = 16


def rows(loader, n):
    """(release, sample) per row of the next n micro batches."""
    out = []
    it = iter(loader)
    for _ in range(n):
        b = next(it)
        rel = b["release_index"].tolist() if "release_index" in b else [0] * len(b["sample_index"])
        out.extend(zip(rel, b["sample_index"].tolist()))
    return out


def per_release(rs):
    out = {}
    for k, s in rs:
        out.setdefault(k, []).append(s)
    return out


class BlendTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="grist_loader_blend_")
        cls.rels = []
        for i, n in enumerate((60, 25, 13)):
            p = os.path.join(cls.tmp, f"r{i}")
            write_synthetic_release(p, samples=n, seq_len=SEQ, samples_per_shard=16,
                                    vocab_size=3000, mean_document_tokens=6, seed=20 + i)
            cls.rels.append(p)
        cls.other_seq = os.path.join(cls.tmp, "seq32")
        write_synthetic_release(cls.other_seq, samples=40, seq_len=32, vocab_size=3000, seed=3)
        cls.other_vocab = os.path.join(cls.tmp, "vocab")
        write_synthetic_release(cls.other_vocab, samples=40, seq_len=SEQ, vocab_size=4000, seed=3)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def blend(self, weights=(0.6, 0.3, 0.1), g=20, **kw):
        kw.setdefault("epochs", 0)
        return grist.Loader(list(zip(weights, self.rels)), 2, g, dp_rank=kw.pop("dp_rank", 0),
                            dp_size=kw.pop("dp_size", 1), **kw)

    def test_every_global_batch_holds_the_weights_within_one_over_g(self):
        lo = self.blend()
        self.assertEqual(lo.draws_per_step(), [12, 6, 2])
        self.assertEqual(lo.weights, [0.6, 0.3, 0.1])
        b = next(iter(lo))
        self.assertEqual(sorted(b), sorted(["input_ids", "labels", "position_ids", "cu_seqlens",
                                            "loss_mask", "sample_index", "release_index"]))
        rs = rows(lo, 10 * 20 // 2 - 1)
        rs = [(int(k), int(s)) for k, s in zip(b["release_index"], b["sample_index"])] + rs
        for t in range(10):
            c = Counter(k for k, _ in rs[t * 20:(t + 1) * 20])
            for k, w in enumerate((0.6, 0.3, 0.1)):
                self.assertLess(abs(c[k] / 20 - w), 1 / 20, f"step {t} release {k}")
        # Each release on its own: every sample once per epoch of that release.
        pr = per_release(rs)
        for k, n in enumerate((60, 25, 13)):
            seq = pr[k]
            for e in range(len(seq) // n):
                self.assertEqual(sorted(seq[e * n:(e + 1) * n]), list(range(n)), f"release {k}")
        # The rows are the releases' own tokens.
        import numpy as np
        lo = self.blend(fields=["input_ids", "sample_index", "release_index"])
        b = next(iter(lo))
        import json
        for r in range(2):
            k, s = int(b["release_index"][r]), int(b["sample_index"][r])
            with open(os.path.join(self.rels[k], "manifest.json")) as f:
                m = json.load(f)
            shard = next(x for x in m["splits"]["train"]["shards"]
                         if x["first_sample"] <= s < x["first_sample"] + x["samples"])
            toks = np.memmap(os.path.join(self.rels[k], shard["bin"]["path"]), dtype=np.uint16,
                             mode="r")
            j = s - shard["first_sample"]
            self.assertEqual(b["input_ids"][r].tolist(),
                             toks[j * (SEQ + 1):j * (SEQ + 1) + SEQ].astype(int).tolist())

    def test_resume_elastic_and_weight_changes_neither_repeat_nor_skip(self):
        ref = per_release(rows(self.blend(weights=(1, 1, 1), g=24), 12 * 30))
        lo = self.blend()
        got = rows(lo, 10 * 3 + 4)  # mid-step
        st = lo.state_dict()
        self.assertEqual([c["consumed"] for c in st["blend"]], [36, 18, 6])
        again = self.blend()
        again.load_state_dict(st)
        more = rows(again, 6)
        self.assertEqual(more, rows(lo, 6))
        got += more
        lo.set_weights([0.1, 0.1, 0.8])  # now at a step boundary (10 micro batches a step)
        got += rows(lo, 20)
        st = lo.state_dict()
        self.assertEqual([c["weight"] for c in st["blend"]], [0.1, 0.1, 0.8])
        # Restart with other weights on 2 ranks (elastic).
        two = [self.blend(weights=(0.3, 0.5, 0.2), dp_rank=r, dp_size=2) for r in range(2)]
        for x in two:
            x.load_state_dict(st)
        for _ in range(4):
            for x in two:
                got += rows(x, 5)
        for k, seq in per_release(got).items():
            self.assertEqual(seq, ref[k][:len(seq)], f"release {k}")
        with self.assertRaisesRegex(GristError, "step boundary"):
            rows(lo, 1)
            lo.set_weights([1, 1, 1])

    def test_mismatches_name_the_releases_and_fields(self):
        with self.assertRaisesRegex(GristError, f"release {self.rels[0]} has seq_len 16 but "
                                    f"release {self.other_seq} has seq_len 32"):
            grist.Loader([(0.5, self.rels[0]), (0.5, self.other_seq)], 2, 8)
        with self.assertRaisesRegex(GristError, f"release {self.rels[0]} has tokenizer .* but "
                                    f"release {self.other_vocab} has tokenizer"):
            grist.Loader([(0.5, self.rels[0]), (0.5, self.other_vocab)], 2, 8)
        lo = self.blend()
        st = lo.state_dict()
        other = grist.Loader([(0.6, self.rels[0]), (0.3, self.rels[2]), (0.1, self.rels[1])], 2, 20)
        with self.assertRaisesRegex(GristError, r"blend\[1\]\.release_id"):
            other.load_state_dict(st)
        with self.assertRaisesRegex(GristError, "seed 5"):
            self.blend(seed=5).load_state_dict(st)
        strict = self.blend(g=40, elastic=False)
        with self.assertRaisesRegex(GristError, "global_batch_size 20.*not elastic"):
            strict.load_state_dict(st)
        self.blend(g=40).load_state_dict(st)  # elastic by default
        single = grist.Loader(self.rels[0], 2, 20)
        with self.assertRaisesRegex(GristError, "field \"blend\""):
            single.load_state_dict(st)
        with self.assertRaisesRegex(ValueError, "not a blend"):
            single.set_weights([1])
        # A dict blend and a one-entry blend.
        self.assertEqual(grist.Loader({self.rels[0]: 3, self.rels[1]: 1}, 2, 8).draws_per_step(),
                         [6, 2])
        one = grist.Loader([(1.0, self.rels[0])], 2, 8)
        self.assertEqual(one.state_dict(), grist.Loader(self.rels[0], 2, 8).state_dict())

    def test_blend_from_a_toml_config(self):
        cfg = os.path.join(self.tmp, "train.toml")
        with open(cfg, "w") as f:
            f.write("[loader]\nmicro_batch_size = 2\nglobal_batch_size = 20\nepochs = 0\n"
                    "blend = [{weight = 0.6, path = \"r0\"}, {weight = 0.3, path = \"r1\"},\n"
                    "         {weight = 0.1, path = \"r2\"}]\n")
        lo = grist.Loader.from_config(cfg)
        self.assertEqual(lo.path, self.rels)
        self.assertEqual(rows(lo, 30), rows(self.blend(), 30))
        one = grist.Loader.from_config({"loader": {"release": self.rels[1], "micro_batch_size": 2,
                                                   "global_batch_size": 8}}, seed=9)
        self.assertEqual((one.path, one.seed), (self.rels[1], 9))
        with self.assertRaisesRegex(ValueError, r"unknown keys \['batch'\]"):
            grist.Loader.from_config({"loader": {"release": "x", "batch": 1}})
        with self.assertRaisesRegex(ValueError, r"blend\[0\] must have exactly"):
            grist.Loader.from_config({"loader": {"blend": [{"w": 1, "path": "x"}],
                                                 "micro_batch_size": 2, "global_batch_size": 8}})

    def test_epochs_per_release_and_the_end(self):
        lo = self.blend(epochs=1)  # n = 12, 6, 2: r0 60/12 = 5, r1 25/6 = 4, r2 13/2 = 6 steps
        self.assertEqual(len(lo), 4 * 10)
        rows(lo, 40)
        st = lo.state_dict()
        self.assertEqual([c["epoch"] for c in st["blend"]], [0, 0, 0])
        self.assertEqual([c["consumed"] for c in st["blend"]], [48, 24, 8])
        with self.assertRaises(StopIteration):
            next(lo)
        lo = self.blend(epochs=0)
        rows(lo, 10 * 11)
        self.assertEqual([c["epoch"] for c in lo.state_dict()["blend"]], [2, 2, 1])


class StatefulTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="grist_loader_state_")
        cls.rels = []
        for i, n in enumerate((50, 30)):
            p = os.path.join(cls.tmp, f"r{i}")
            write_synthetic_release(p, samples=n, seq_len=SEQ, vocab_size=3000, seed=40 + i)
            cls.rels.append(p)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def loaders(self):
        return (lambda: grist.Loader(self.rels[0], 2, 8, epochs=0),
                lambda: grist.Loader([(0.7, self.rels[0]), (0.3, self.rels[1])], 2, 8, epochs=0))

    def test_dcp_save_and_load_round_trip(self):
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.stateful import Stateful
        for i, make in enumerate(self.loaders()):
            lo = make()
            self.assertIsInstance(lo, Stateful)
            rows(lo, 7)
            path = os.path.join(self.tmp, f"dcp{i}")
            dcp.save({"loader": lo, "step": torch.tensor(7)}, checkpoint_id=path)
            expect = rows(lo, 9)
            fresh = make()
            state = {"loader": fresh, "step": torch.tensor(0)}
            dcp.load(state, checkpoint_id=path)
            self.assertEqual(int(state["step"]), 7)
            self.assertEqual(rows(fresh, 9), expect)

    def test_grist_ckpt_carries_the_state(self):
        for i, make in enumerate(self.loaders()):
            lo = make()
            rows(lo, 5)
            path = os.path.join(self.tmp, f"ckpt{i}", "step-00000005")
            grist.ckpt.save({"loader": lo.state_dict()}, path, blocking=True)
            expect = rows(lo, 6)
            fresh = make()
            fresh.load_state_dict(grist.ckpt.load(path)["loader"])
            self.assertEqual(rows(fresh, 6), expect)

    def test_dataset_view_in_a_dataloader_same_order_and_resume(self):
        for make in self.loaders():
            ref = rows(make(), 12)
            ds = make().as_dataset()
            self.assertIsInstance(ds, torch.utils.data.IterableDataset)
            dl = torch.utils.data.DataLoader(ds, batch_size=None)
            got, it = [], iter(dl)
            for _ in range(5):
                b = next(it)
                got.extend(zip(b.get("release_index", torch.zeros(2, dtype=torch.long)).tolist(),
                               b["sample_index"].tolist()))
            st = ds.state_dict()
            ds2 = grist.data.Dataset(make())
            ds2.load_state_dict(st)
            for b in torch.utils.data.DataLoader(ds2, batch_size=None):
                got.extend(zip(b.get("release_index", torch.zeros(2, dtype=torch.long)).tolist(),
                               b["sample_index"].tolist()))
                if len(got) == len(ref):
                    break
            self.assertEqual(got, ref)

    def test_dataset_view_refuses_worker_processes(self):
        # Nothing forks while the loader's threads run. A spawned (or forkserver) worker needs the
        # dataset pickled, which the view refuses in the main process before any child starts; a
        # forked worker's __iter__ refuses too, checked here in this process with a stand-in
        # worker info.
        from unittest import mock
        ds = grist.Loader(self.rels[0], 2, 8).as_dataset()
        dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=1,
                                         multiprocessing_context="spawn")
        with self.assertRaisesRegex(RuntimeError, "runs in the main process"):
            next(iter(dl))
        with mock.patch("torch.utils.data.get_worker_info", return_value=object()):
            with self.assertRaisesRegex(RuntimeError, "runs in the main process"):
                iter(ds)
        self.assertEqual(len(rows(ds.loader, 2)), 4)  # the view still works in this process

    def test_torchdata_stateful_dataloader_resume(self):
        try:
            from torchdata.stateful_dataloader import StatefulDataLoader
        except ImportError:
            self.skipTest("torchdata is not installed")
        make = self.loaders()[1]
        ref = rows(make(), 10)
        dl = StatefulDataLoader(make().as_dataset(), batch_size=None)
        got, it = [], iter(dl)
        for _ in range(4):
            b = next(it)
            got.extend(zip(b["release_index"].tolist(), b["sample_index"].tolist()))
        st = dl.state_dict()
        dl2 = StatefulDataLoader(make().as_dataset(), batch_size=None)
        dl2.load_state_dict(st)
        for b in dl2:
            got.extend(zip(b["release_index"].tolist(), b["sample_index"].tolist()))
            if len(got) == len(ref):
                break
        self.assertEqual(got, ref)


if __name__ == "__main__":
    unittest.main()
