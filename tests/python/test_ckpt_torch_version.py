"""grist._torch: the torch version grist supports (>= 2.5) is checked once, with a clear error
below it. The real torch 2.4.1 was checked by hand (docs/ckptio.md); here a stand-in module."""

import types
import unittest

from grist import _torch


def fake(version):
    m = types.ModuleType("torch")
    m.__version__ = version
    m.__file__ = f"/opt/torch-{version}/torch/__init__.py"
    return m


class TorchVersionTest(unittest.TestCase):
    def test_versions_parse(self):
        for text, want in [("2.13.0+cpu", (2, 13)), ("2.5.0a0+git1234", (2, 5)),
                           ("2.11.0+cu130", (2, 11)), ("2.4.1", (2, 4)), ("3.0", (3, 0)),
                           ("2", (2, 0))]:
            self.assertEqual(_torch._version_tuple(text), want, text)

    def test_below_the_minimum_is_a_clear_import_error(self):
        with self.assertRaises(ImportError) as cm:
            _torch.require(fake("2.4.1"))
        self.assertEqual(str(cm.exception),
                         "grist needs torch >= 2.5 (DTensor and its placements in "
                         "torch.distributed.tensor); this is torch 2.4.1 from "
                         "/opt/torch-2.4.1/torch/__init__.py. Install a newer torch "
                         "(pip install 'torch>=2.5')")
        with self.assertRaises(ImportError):
            _torch.require(fake("1.13.1"))

    def test_the_minimum_and_newer_pass(self):
        for v in ("2.5.0", "2.5.1+cu124", "2.13.0+cpu", "3.1.0"):
            m = fake(v)
            self.assertIs(_torch.require(m), m, v)
        import torch
        self.assertIs(_torch.require(), torch)  # a module passed in is never cached

    def test_the_installed_torch_passes(self):
        import torch
        self.assertIs(_torch.require(), torch)
        self.assertEqual(_torch.MIN_TORCH, (2, 5))


if __name__ == "__main__":
    unittest.main()
