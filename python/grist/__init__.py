"""grist: the data loader and checkpoint writer for PyTorch training.

    import grist
    loader = grist.Loader("release/", micro_batch_size=8, global_batch_size=64)
    handle = grist.ckpt.save(model.state_dict(), "ckpt/step-100")

The heavy lifting is in libgrist_capi.so (C ABI, loaded with ctypes), so this package works with any
Python 3 and any torch that the interpreter has.
"""

from grist._native import GristError, get_include, version

__version__ = version()

__all__ = ["GristError", "Loader", "ckpt", "data", "get_include", "version", "__version__"]


def __getattr__(name):
    # Submodules load lazily so that `import grist` needs neither torch nor numpy.
    if name == "Loader":
        from grist.loader import Loader
        return Loader
    if name in ("ckpt", "data"):
        import importlib
        return importlib.import_module("grist." + name)
    raise AttributeError(f"module 'grist' has no attribute {name!r}")
