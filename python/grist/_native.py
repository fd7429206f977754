"""Loads libgrist_capi.so and turns its error codes into GristError."""

import ctypes
import os

_LIB_NAME = "libgrist_capi.so"


class GristError(RuntimeError):
    """An error reported by grist's C++ core. `code` is the absl::StatusCode number."""

    def __init__(self, message, code=2):
        super().__init__(message)
        self.code = code


def _load():
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.environ.get("GRIST_CAPI_LIB", os.path.join(here, _LIB_NAME))
    try:
        return ctypes.CDLL(path)
    except OSError as e:
        raise ImportError(
            f"grist: cannot load {path}: {e}. Build grist first "
            "(cmake -S . -B build -G Ninja && cmake --build build) and put build/python on "
            "PYTHONPATH") from e


lib = _load()
lib.grist_last_error.restype = ctypes.c_char_p
lib.grist_last_error.argtypes = []
lib.grist_version.restype = ctypes.c_char_p
lib.grist_version.argtypes = []


def check(rc):
    """Raises GristError for a non-zero return code of a grist_* function."""
    if rc != 0:
        msg = lib.grist_last_error().decode("utf-8", "replace")
        raise GristError(msg, -rc)
    return rc


def version():
    return lib.grist_version().decode()
