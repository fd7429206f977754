"""Loads libgrist_capi.so, declares its C ABI (grist._capi, the mirror of grist_capi.h) and turns
its error codes into GristError."""

import ctypes
import os

from grist import _capi
from grist._capi import Status

_LIB_NAME = "libgrist_capi.so"


class GristError(RuntimeError):
    """An error reported by grist's C++ core. `code` is its grist_capi.h status (a Status, an int
    subclass: Status.NOT_FOUND == 5)."""

    def __init__(self, message, code=Status.UNKNOWN):
        super().__init__(message)
        try:
            self.code = Status(code)
        except ValueError:
            self.code = code


def _load():
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.environ.get("GRIST_CAPI_LIB", os.path.join(here, _LIB_NAME))
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise ImportError(
            f"grist: cannot load {path}: {e}. Build grist first "
            "(cmake -S . -B build -G Ninja && cmake --build build) and put build/python on "
            "PYTHONPATH") from e
    try:
        _capi.declare(lib)
    except AttributeError as e:  # a function this package declares is missing
        raise ImportError(f"grist: {path} is not the library of this package ({e}): rebuild "
                          "grist") from e
    return lib


lib = _load()


def check(rc):
    """Raises GristError for a non-zero return code of a grist_* function (rc = -status)."""
    if rc != 0:
        msg = lib.grist_last_error().decode("utf-8", "replace")
        raise GristError(msg, -rc)
    return rc


def version():
    return lib.grist_version().decode()


def get_include():
    """The folder holding grist_capi.h, the C ABI of this package's native library (for C or C++
    code that calls libgrist_capi.so directly)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "include")
