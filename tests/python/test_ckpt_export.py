"""Tests of grist.ckpt.export / `grist ckpt export`: HF-style safetensors that
safetensors.torch.load_file and transformers' from_pretrained load (CPU, tiny config)."""

import json
import os
import subprocess
import tempfile
import unittest

import torch
from safetensors.torch import load_file

from grist import ckpt


class ExportTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def test_prefix_dtypes_and_sharded_index(self):
        sd = {"model": {"a": torch.arange(12, dtype=torch.bfloat16).reshape(3, 4),
                        "b": torch.arange(5, dtype=torch.int64),
                        "c": torch.randn(300, 7)},
              "optim": {"m": torch.ones(3)}, "step": 4}
        path = os.path.join(self.root, "step-4")
        ckpt.save(sd, path, blocking=True)
        one = os.path.join(self.root, "one")
        r = ckpt.export(path, one, prefix="model.")
        self.assertEqual(r["files"], ["model.safetensors"])
        back = load_file(os.path.join(one, "model.safetensors"))
        self.assertEqual(set(back), {"a", "b", "c"})
        for k, v in sd["model"].items():
            self.assertEqual(back[k].dtype, v.dtype)
            self.assertTrue(torch.equal(back[k], v), k)
        many = os.path.join(self.root, "many")
        r = ckpt.export(path, many, prefix="model.", max_shard_bytes=1000)
        self.assertEqual(len(r["files"]), 2)  # a + b, then c (above the limit alone)
        self.assertEqual(r["files"][0], "model-00001-of-00002.safetensors")
        with open(os.path.join(many, "model.safetensors.index.json")) as f:
            index = json.load(f)
        self.assertEqual(index["metadata"]["total_size"], 24 + 40 + 8400)
        self.assertEqual(set(index["weight_map"]), {"a", "b", "c"})
        for k, v in sd["model"].items():
            self.assertTrue(torch.equal(load_file(os.path.join(many, index["weight_map"][k]))[k], v))
        with self.assertRaises(ckpt.GristError):
            ckpt.export(path, os.path.join(self.root, "none"), prefix="nothing.")
        # The command line does the same.
        exe = os.path.join(os.environ.get("GRIST_BUILD_DIR", "build"), "grist")
        if os.path.exists(exe):
            cli = os.path.join(self.root, "cli")
            subprocess.run([exe, "ckpt", "export", path, cli, "--prefix", "optim."], check=True,
                           capture_output=True)
            self.assertTrue(torch.equal(load_file(os.path.join(cli, "model.safetensors"))["m"],
                                        torch.ones(3)))

    def test_transformers_from_pretrained_loads_the_export(self):
        try:
            from transformers import LlamaConfig, LlamaForCausalLM
        except ImportError as e:
            self.skipTest(f"transformers unavailable: {e}")
        cfg = LlamaConfig(vocab_size=97, hidden_size=32, intermediate_size=48,
                          num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                          max_position_embeddings=64, tie_word_embeddings=False)
        torch.manual_seed(0)
        model = LlamaForCausalLM(cfg)
        path = os.path.join(self.root, "step-1")
        ckpt.save({"model": model.state_dict(), "step": 1}, path, blocking=True)
        out = os.path.join(self.root, "hf")
        ckpt.export(path, out, prefix="model.", max_shard_bytes=40_000)  # several files + index
        cfg.save_pretrained(out)
        loaded = LlamaForCausalLM.from_pretrained(out)
        for k, v in model.state_dict().items():
            self.assertTrue(torch.equal(loaded.state_dict()[k], v), k)
        ids = torch.tensor([[1, 2, 3, 4]])
        self.assertTrue(torch.equal(model(ids).logits, loaded(ids).logits))


if __name__ == "__main__":
    unittest.main()
