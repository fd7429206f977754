"""The torch grist runs on: imported on first use, its version checked once.

Supported: torch >= 2.5 (MIN_TORCH). grist's checkpoint code imports DTensor and its placements
from torch.distributed.tensor, public from 2.5 on (torch 2.4 kept them in the private
torch.distributed._tensor, where grist would not recognise a DTensor and would save it as a plain
tensor); DCP's storage classes (grist.ckpt.StorageWriter/StorageReader) use the 2.5 interface.
Below that version every grist entry point that touches torch raises ImportError saying so,
instead of failing somewhere inside a save. Tested with 2.13 (CPU, CI) and 2.11 (CUDA, the GPU
machine); 2.5 is the oldest release the checkpoint tests were run with.
"""

MIN_TORCH = (2, 5)

_checked = None


def _version_tuple(text):
    """(major, minor) of a torch version string ("2.13.0+cpu", "2.5.0a0+git1234")."""
    parts = []
    for p in text.split("+")[0].split(".")[:2]:
        digits = ""
        for c in p:
            if not c.isdigit():
                break
            digits += c
        parts.append(int(digits) if digits else 0)
    while len(parts) < 2:
        parts.append(0)
    return tuple(parts)


def require(torch_module=None):
    """The torch module, after checking it is at least MIN_TORCH. Raises ImportError naming the
    version found and where it was imported from."""
    global _checked
    given = torch_module is not None
    if not given:
        if _checked is not None:
            return _checked
        import torch as torch_module
    found = _version_tuple(getattr(torch_module, "__version__", "0"))
    if found < MIN_TORCH:
        need = ".".join(map(str, MIN_TORCH))
        raise ImportError(
            f"grist needs torch >= {need} (DTensor and its placements in torch.distributed.tensor); "
            f"this is torch {torch_module.__version__} from "
            f"{getattr(torch_module, '__file__', '?')}. Install a newer torch "
            f"(pip install 'torch>={need}')")
    if not given:
        _checked = torch_module
    return torch_module
