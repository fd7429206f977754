"""Tests of grist.Loader (python/grist/loader.py) over synthetic releases written by shard/'s writer,
and (BuiltReleaseResumeTest) over a release made by `grist build`.

Run: PYTHONPATH=build/python /usr/bin/python3 -m unittest discover -s tests/python
CUDA tests run only where torch sees a GPU (skipped with the reason otherwise).
"""

import io
import os
import shutil
import tempfile
import unittest

import torch

import grist
from grist.loader import GristError, write_synthetic_release

SEQ = 24


def collect(loader, n=None):
    out = []
    if n == 0:
        return out
    for b in loader:
        out.append({k: v.cpu().clone() for k, v in b.items()})
        if n is not None and len(out) == n:
            break
    return out


def assert_batches_equal(tc, a, b):
    tc.assertEqual(len(a), len(b))
    for i, (x, y) in enumerate(zip(a, b)):
        tc.assertEqual(sorted(x), sorted(y))
        for k in x:
            tc.assertTrue(torch.equal(x[k], y[k]), f"batch {i} field {k} differs")


class LoaderTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="grist_loader_py_")
        cls.rel = os.path.join(cls.tmp, "rel")
        write_synthetic_release(cls.rel, samples=96, seq_len=SEQ, validation_samples=8,
                                samples_per_shard=40, vocab_size=5000, mean_document_tokens=7,
                                seed=77)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_batch_fields_dtypes_and_shapes(self):
        loader = grist.Loader(self.rel, micro_batch_size=3, global_batch_size=6)
        self.assertEqual(len(loader), 32)
        self.assertEqual(loader.seed, 77)  # the release's seed by default
        b = next(iter(loader))
        self.assertEqual(set(b), {"input_ids", "labels", "position_ids", "cu_seqlens", "loss_mask",
                                  "sample_index"})
        for k in ("input_ids", "labels", "position_ids"):
            self.assertEqual(b[k].dtype, torch.int64)
            self.assertEqual(tuple(b[k].shape), (3, SEQ))
        self.assertEqual(b["loss_mask"].dtype, torch.float32)
        self.assertEqual(b["cu_seqlens"].dtype, torch.int32)
        self.assertEqual(int(b["cu_seqlens"][0]), 0)
        self.assertEqual(int(b["cu_seqlens"][-1]), 3 * SEQ)
        self.assertTrue(torch.equal(b["input_ids"][:, 1:], b["labels"][:, :-1]))
        small = grist.Loader(self.rel, 3, 6, int32=True, fields=["input_ids", "labels"])
        b32 = next(iter(small))
        self.assertEqual(set(b32), {"input_ids", "labels"})
        self.assertEqual(b32["input_ids"].dtype, torch.int32)
        self.assertTrue(torch.equal(b32["labels"].long(), b["labels"]))

    def test_tokens_match_the_shard_files_and_positions_match_cu_seqlens(self):
        try:
            import numpy as np
        except ImportError:
            self.skipTest("numpy is not installed")
        bins = [np.memmap(os.path.join(self.rel, "shards", f"train-{i:05d}.bin"), dtype=np.uint16,
                          mode="r") for i in range(3)]
        loader = grist.Loader(self.rel, micro_batch_size=4, global_batch_size=4)
        for b in loader:
            flat_pos = b["position_ids"].reshape(-1)
            cu = b["cu_seqlens"].tolist()
            for s, e in zip(cu[:-1], cu[1:]):
                self.assertTrue(torch.equal(flat_pos[s:e], torch.arange(e - s)))
            for r, idx in enumerate(b["sample_index"].tolist()):
                shard, k = divmod(idx, 40)
                tok = torch.from_numpy(
                    bins[shard][k * (SEQ + 1):(k + 1) * (SEQ + 1)].astype(np.int64))
                self.assertTrue(torch.equal(b["input_ids"][r], tok[:-1]))
                self.assertTrue(torch.equal(b["labels"][r], tok[1:]))
                # padding holds pad id 0 in the synthetic release; its labels are masked
                pad = (tok[1:] == 0)
                self.assertTrue(torch.equal(b["loss_mask"][r] == 0, pad))

    def test_every_sample_once_per_epoch_across_ranks(self):
        seen = []
        for rank in range(4):
            loader = grist.Loader(self.rel, micro_batch_size=2, global_batch_size=16,
                                  dp_rank=rank, dp_size=4, epochs=2)
            for b in loader:
                seen.extend(b["sample_index"].tolist())
        self.assertEqual(len(seen), 192)
        self.assertEqual(sorted(seen), sorted(list(range(96)) * 2))

    def test_order_does_not_depend_on_workers_or_prefetch(self):
        a = collect(grist.Loader(self.rel, 2, 8, num_workers=1, prefetch=1))
        b = collect(grist.Loader(self.rel, 2, 8, num_workers=3, prefetch=9))
        assert_batches_equal(self, a, b)
        c = collect(grist.Loader(self.rel, 2, 8, seed=1))
        self.assertFalse(torch.equal(a[0]["sample_index"], c[0]["sample_index"]))

    def test_resume_is_bit_identical(self):
        full = collect(grist.Loader(self.rel, 2, 8, epochs=2))
        for k in (0, 3, 4, 41):
            first = grist.Loader(self.rel, 2, 8, epochs=2)
            collect(first, k)
            buf = io.BytesIO()
            torch.save({"loader": first.state_dict()}, buf)
            buf.seek(0)
            state = torch.load(buf)["loader"]
            second = grist.Loader(self.rel, 2, 8, epochs=2)
            second.load_state_dict(state)
            self.assertEqual(second.remaining(), len(full) - k)
            assert_batches_equal(self, collect(second), full[k:])

    def test_elastic_resume_with_another_dp_size(self):
        # Reference: one rank, global batch 8 (one micro batch of 8 per step).
        ref = [b["sample_index"] for b in collect(grist.Loader(self.rel, 8, 8))]
        # 3 steps on 2 ranks (micro 4), then continue on 4 ranks (micro 2).
        ranks = [grist.Loader(self.rel, 4, 8, dp_rank=r, dp_size=2) for r in range(2)]
        order = []
        for _ in range(3):
            for lo in ranks:
                order.append(next(lo)["sample_index"])
        state = ranks[0].state_dict()
        self.assertEqual(state["consumed_samples"], 24)
        new = [grist.Loader(self.rel, 2, 8, dp_rank=r, dp_size=4) for r in range(4)]
        for lo in new:
            lo.load_state_dict(state)
        for _ in range(len(ref) - 3):
            for lo in new:
                order.append(next(lo)["sample_index"])
        self.assertTrue(torch.equal(torch.cat(order), torch.cat(ref)))

    def test_bad_input_is_a_clear_error(self):
        with self.assertRaisesRegex(GristError, "not divisible by micro_batch_size"):
            grist.Loader(self.rel, 3, 8)
        with self.assertRaisesRegex(GristError, "dp_rank 2 is out of range"):
            grist.Loader(self.rel, 2, 8, dp_rank=2, dp_size=2)
        with self.assertRaisesRegex(GristError, "not a release"):
            grist.Loader(self.tmp, 2, 8)
        with self.assertRaisesRegex(ValueError, "unknown fields"):
            grist.Loader(self.rel, 2, 8, fields=["tokens"])
        other = os.path.join(self.tmp, "other")
        write_synthetic_release(other, samples=50, seq_len=SEQ, vocab_size=5000, seed=77)
        state = grist.Loader(other, 2, 8).state_dict()
        loader = grist.Loader(self.rel, 2, 8)
        with self.assertRaisesRegex(GristError, "belongs to release"):
            loader.load_state_dict(state)
        with self.assertRaisesRegex(GristError, "field \"consumed_samples\" is missing"):
            loader.load_state_dict({k: v for k, v in loader.state_dict().items()
                                    if k != "consumed_samples"})

    def test_missing_and_truncated_shards(self):
        for name, action, pattern in (("missing", "rm", "shard file is missing"),
                                      ("truncated", "trunc", "truncated or replaced")):
            d = os.path.join(self.tmp, name)
            shutil.copytree(self.rel, d)
            path = os.path.join(d, "shards", "train-00001.bin")
            if action == "rm":
                os.remove(path)
            else:
                os.truncate(path, 100)
            with self.assertRaisesRegex(GristError, pattern):
                grist.Loader(d, 2, 8)

    def test_batches_outlive_the_loader_and_may_all_be_kept(self):
        loader = grist.Loader(self.rel, 2, 2, prefetch=2)
        kept = list(loader)
        self.assertEqual(len(kept), 48)
        loader.close()
        with self.assertRaisesRegex(ValueError, "closed"):
            loader.state_dict()
        del loader
        idx = torch.cat([b["sample_index"] for b in kept])
        self.assertEqual(sorted(idx.tolist()), list(range(96)))

    def test_end_len_and_reiteration(self):
        loader = grist.Loader(self.rel, 4, 8, split="validation")
        self.assertEqual(len(loader), 2)
        first = collect(loader)
        self.assertEqual(len(first), 2)
        with self.assertRaises(StopIteration):
            next(loader)
        assert_batches_equal(self, collect(loader), first)  # a new iteration starts over
        with self.assertRaises(TypeError):
            len(grist.Loader(self.rel, 4, 8, epochs=0))

    def test_rank_from_torch_distributed(self):
        import torch.distributed as dist
        if not dist.is_available():
            self.skipTest("torch.distributed is not available")
        from unittest import mock
        store = os.path.join(self.tmp, "dist_store")
        dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
        try:
            # The environment says otherwise (rank 1 of 2): only the default group gives (0, 1).
            with mock.patch.dict(os.environ, {"RANK": "1", "WORLD_SIZE": "2"}):
                loader = grist.Loader(self.rel, 2, 8)
            self.assertEqual((loader.dp_rank, loader.dp_size), (0, 1))
            self.assertEqual(loader.rank_source, "default process group")
        finally:
            dist.destroy_process_group()
        with mock.patch.dict(os.environ, {"RANK": "1", "WORLD_SIZE": "2"}):
            loader = grist.Loader(self.rel, 2, 8)
        self.assertEqual((loader.dp_rank, loader.dp_size, loader.rank_source),
                         (1, 2, "RANK/WORLD_SIZE"))

    def test_cuda_fallback_or_cuda_batches(self):
        if not torch.cuda.is_available():
            import warnings
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                loader = grist.Loader(self.rel, 2, 8, device="cuda")
            self.assertEqual(loader.device.type, "cpu")
            self.assertTrue(any("CPU" in str(x.message) for x in w))
            assert_batches_equal(self, collect(loader), collect(grist.Loader(self.rel, 2, 8)))
            return
        loader = grist.Loader(self.rel, 2, 8, device="cuda", epochs=2)
        gpu = []
        for b in loader:
            self.assertEqual(b["input_ids"].device.type, "cuda")
            gpu.append({k: v.cpu() for k, v in b.items()})
        assert_batches_equal(self, gpu, collect(grist.Loader(self.rel, 2, 8, epochs=2)))


class BuiltReleaseResumeTest(unittest.TestCase):
    """Exact and elastic resume on a release made by `grist build` from generated text (clean,
    dedup, a trained tokenizer, best-fit packing, several shards), not only synthetic shards."""

    @classmethod
    def setUpClass(cls):
        import random
        import subprocess
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        build = os.environ.get("GRIST_BUILD_DIR", os.path.join(root, "build"))
        binary = os.path.join(build, "grist")
        if not os.path.exists(binary):
            raise unittest.SkipTest(f"{binary} not built (set GRIST_BUILD_DIR)")
        cls.tmp = tempfile.mkdtemp(prefix="grist_loader_built_")
        words = ("the data pipeline token shard release loader train model batch seed merge task "
                 "node cluster write read fast slow byte river stone green window quiet number "
                 "letter paper morning garden and of to with that have be").split()  # Gopher wants 2 distinct stop words
        rng = random.Random(21)
        corpus = os.path.join(cls.tmp, "corpus.jsonl")
        with open(corpus, "w") as f:
            for d in range(400):
                sents = []
                for _ in range(rng.randint(3, 10)):
                    ws = [rng.choice(words) for _ in range(rng.randint(6, 19))]
                    sents.append(" ".join(ws).capitalize() + ".")
                f.write('{"text": "%s", "n": %d}\n' % (" ".join(sents), d))
        config = os.path.join(cls.tmp, "c.toml")
        with open(config, "w") as f:
            f.write('seed = 3\n[release]\nversion = "built"\n[inputs]\npaths = ["%s"]\n'
                    '[dedup]\nmemory_limit_mb = 64\n'
                    '[tokenizer]\nmodel_type = "bpe"\nvocab_size = 400\ncharacter_coverage = 1.0\n'
                    'byte_fallback = true\nunk_id = 0\nbos_id = 1\neos_id = 2\npad_id = 3\n'
                    '[pack]\nseq_len = 64\nstrategy = "bestfit"\n'
                    '[split]\nvalidation_fraction = 0.1\n[shard]\nmax_bytes = 16384\n' % corpus)
        cls.rel = os.path.join(cls.tmp, "rel")
        r = subprocess.run([binary, "build", "--quiet", "--threads", "2", "--config", config,
                            "--output", cls.rel], capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            raise RuntimeError("grist build failed: " + r.stdout + r.stderr)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_release_is_a_real_build(self):
        shards = os.listdir(os.path.join(self.rel, "shards"))
        self.assertGreater(len([s for s in shards if s.endswith(".bin")]), 2)
        self.assertGreater(len(grist.Loader(self.rel, 8, 8)), 50)

    def test_resume_is_bit_identical(self):
        full = collect(grist.Loader(self.rel, 2, 8, epochs=2))
        for k in (0, 5, len(full) // 2 + 1, len(full) - 1):
            first = grist.Loader(self.rel, 2, 8, epochs=2)
            collect(first, k)
            buf = io.BytesIO()
            torch.save({"loader": first.state_dict()}, buf)
            buf.seek(0)
            second = grist.Loader(self.rel, 2, 8, epochs=2)
            second.load_state_dict(torch.load(buf)["loader"])
            self.assertEqual(second.remaining(), len(full) - k)
            assert_batches_equal(self, collect(second), full[k:])

    def test_elastic_resume_with_another_dp_size(self):
        ref = [b["sample_index"] for b in collect(grist.Loader(self.rel, 8, 8))]
        ranks = [grist.Loader(self.rel, 4, 8, dp_rank=r, dp_size=2) for r in range(2)]
        order = []
        for _ in range(7):
            for lo in ranks:
                order.append(next(lo)["sample_index"])
        state = ranks[0].state_dict()
        self.assertEqual(state["consumed_samples"], 56)
        new = [grist.Loader(self.rel, 2, 8, dp_rank=r, dp_size=4) for r in range(4)]
        for lo in new:
            lo.load_state_dict(state)
        for _ in range(len(ref) - 7):
            for lo in new:
                order.append(next(lo)["sample_index"])
        self.assertTrue(torch.equal(torch.cat(order), torch.cat(ref)))


class ExampleTest(unittest.TestCase):
    def test_resume_example_runs_and_matches(self):
        import subprocess
        import sys
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        r = subprocess.run([sys.executable, os.path.join(root, "examples", "loader_resume.py"),
                            "--steps", "6", "--stop-at", "3"],
                           capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("OK: the resumed run's losses are identical", r.stdout)


if __name__ == "__main__":
    unittest.main()
