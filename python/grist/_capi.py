"""The ctypes declarations of grist's C ABI: python/capi/grist_capi.h (installed beside this package
as grist/include/grist_capi.h), one entry per C declaration, in the header's order.

The header is the one home of the ABI; this module mirrors it for ctypes and
tests/python/test_capi_header.py checks the mirror field by field (every function's restype and
argtypes, every struct's _fields_, every enum's members) and against the symbols the library
exports. Change the header first, then this file; the test names any mismatch.

Type correspondence: int / int32_t -> c_int, int64_t -> c_int64, uint32_t -> c_uint32, uint64_t ->
c_uint64, size_t / uintptr_t -> c_size_t, double -> c_double, const char* -> c_char_p, a pointer to
an opaque handle -> c_void_p, void* -> c_void_p, a pointer to a struct -> POINTER(its Structure),
any other T* -> POINTER(T), void -> None; enum-typed values travel as c_int.
"""

import ctypes as _c
import enum

# GRIST_CAPI_ABI_VERSION of the header this module mirrors.
ABI_VERSION = 3


class Status(enum.IntEnum):
    """grist_status (GRIST_<name>): absl's canonical codes. A failed call returns -code."""
    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


class Device(enum.IntEnum):
    """grist_device (GRIST_DEVICE_<name>)."""
    CPU = 0
    CUDA = 1


class LoaderOptions(_c.Structure):
    """grist_loader_options."""
    _fields_ = [
        ("struct_size", _c.c_uint32),
        ("num_releases", _c.c_int32),
        ("paths", _c.POINTER(_c.c_char_p)),
        ("weights", _c.POINTER(_c.c_double)),
        ("split", _c.c_char_p),
        ("micro_batch_size", _c.c_int64),
        ("global_batch_size", _c.c_int64),
        ("dp_rank", _c.c_int64),
        ("dp_size", _c.c_int64),
        ("has_seed", _c.c_int32),
        ("seed", _c.c_uint64),
        ("epochs", _c.c_int64),
        ("prefetch", _c.c_int32),
        ("num_workers", _c.c_int32),
        ("device", _c.c_int32),
        ("cuda_device", _c.c_int32),
        ("int32_ids", _c.c_int32),
        ("fields", _c.c_char_p),
        ("verify_checksums", _c.c_int32),
        ("elastic", _c.c_int32),
    ]


class LoaderInfo(_c.Structure):
    """grist_loader_info."""
    _fields_ = [
        ("struct_size", _c.c_uint32),
        ("on_cuda", _c.c_int32),
        ("size", _c.c_int64),
        ("remaining", _c.c_int64),
        ("seed", _c.c_uint64),
        ("num_samples", _c.c_int64),
        ("seq_len", _c.c_int64),
        ("batch_bytes", _c.c_int64),
        ("num_workers", _c.c_int64),
        ("micro_batches_per_step", _c.c_int64),
    ]


class SyntheticReleaseOptions(_c.Structure):
    """grist_synthetic_release_options."""
    _fields_ = [
        ("struct_size", _c.c_uint32),
        ("seq_len", _c.c_uint32),
        ("samples", _c.c_uint64),
        ("validation_samples", _c.c_uint64),
        ("samples_per_shard", _c.c_uint64),
        ("vocab_size", _c.c_uint32),
        ("mean_document_tokens", _c.c_uint32),
        ("seed", _c.c_uint64),
    ]


class CkptWriterOptions(_c.Structure):
    """grist_ckpt_writer_options."""
    _fields_ = [
        ("struct_size", _c.c_uint32),
        ("direct", _c.c_int32),
        ("queue_depth", _c.c_int32),
        ("overlap", _c.c_int32),
        ("block_size", _c.c_uint64),
        ("copy_threads", _c.c_int32),
    ]


# The header's names of the mirrored types (the test looks them up here).
ENUMS = {"grist_status": (Status, "GRIST_"), "grist_device": (Device, "GRIST_DEVICE_")}
STRUCTS = {"grist_loader_options": LoaderOptions, "grist_loader_info": LoaderInfo,
           "grist_synthetic_release_options": SyntheticReleaseOptions,
           "grist_ckpt_writer_options": CkptWriterOptions}
# Opaque handles: c_void_p on this side.
HANDLES = ("grist_loader", "grist_batch", "grist_ckpt_writer", "grist_ckpt_pending",
           "grist_ckpt_load_handle", "grist_ckpt_ranges")
# grist_ckpt_dtype is not mirrored: ckpt.py takes the codes' names from grist_ckpt_dtype_name.

_i, _i64, _u64, _P, _S = _c.c_int, _c.c_int64, _c.c_uint64, _c.c_void_p, _c.c_char_p
_PP, _PS, _Pi, _Pi64, _Pu64 = (_c.POINTER(_P), _c.POINTER(_S), _c.POINTER(_i),
                               _c.POINTER(_i64), _c.POINTER(_u64))

# name: (restype, argtypes)
FUNCTIONS = {
    # Errors
    "grist_last_error": (_S, []),
    "grist_last_error_copy": (_c.c_size_t, [_c.c_char_p, _c.c_size_t]),
    "grist_status_name": (_S, [_i]),
    "grist_capi_abi_version": (_i, []),
    "grist_version": (_S, []),
    # Loader
    "grist_loader_options_init": (None, [_c.POINTER(LoaderOptions)]),
    "grist_loader_open": (_i, [_c.POINTER(LoaderOptions), _PP]),
    "grist_loader_close": (None, [_P]),
    "grist_loader_next": (_i, [_P, _PP]),
    "grist_loader_state": (_i, [_P, _PS]),
    "grist_loader_load_state": (_i, [_P, _S]),
    "grist_loader_get_info": (_i, [_P, _c.POINTER(LoaderInfo)]),
    "grist_loader_release_id": (_i, [_P, _PS]),
    "grist_loader_device_note": (_i, [_P, _PS]),
    "grist_loader_set_weights": (_i, [_P, _c.POINTER(_c.c_double), _i]),
    "grist_loader_blend_draws": (_i, [_P, _Pi64, _i, _Pi]),
    "grist_batch_free": (None, [_P]),
    "grist_batch_num_tensors": (_i, [_P, _Pi]),
    "grist_batch_tensor_name": (_i, [_P, _i, _PS]),
    "grist_batch_wait": (_i, [_P, _c.c_size_t]),
    "grist_batch_dlpack": (_i, [_P, _i, _PP]),
    "grist_batch_dlpack_all": (_i, [_P, _PP, _i]),
    "grist_dlpack_free": (None, [_P]),
    "grist_synthetic_release_options_init": (None, [_c.POINTER(SyntheticReleaseOptions)]),
    "grist_write_synthetic_release": (_i, [_S, _c.POINTER(SyntheticReleaseOptions)]),
    # Checkpoints
    "grist_ckpt_num_dtypes": (_i, []),
    "grist_ckpt_dtype_name": (_i, [_i, _PS]),
    "grist_ckpt_writer_options_init": (None, [_c.POINTER(CkptWriterOptions)]),
    "grist_ckpt_writer_new": (_i, [_c.POINTER(CkptWriterOptions), _PP]),
    "grist_ckpt_writer_free": (None, [_P]),
    "grist_ckpt_writer_prepare": (_i, [_P, _u64, _u64, _u64, _i, _Pu64]),
    "grist_ckpt_writer_staging": (_i, [_P, _Pu64, _Pu64]),
    "grist_ckpt_writer_arena_allocations": (_i, [_P, _Pu64]),
    "grist_ckpt_default_copy_threads": (_i, []),
    "grist_ckpt_memcpy": (None, [_u64, _u64, _u64, _i]),
    "grist_ckpt_cuda_available": (_i, []),
    "grist_ckpt_prepare_dir": (_i, [_S]),
    "grist_ckpt_begin": (_i, [_P, _S, _i, _PS, _Pi, _Pi, _Pi64, _i, _PS, _PS, _PP]),
    "grist_ckpt_pending_layout": (_i, [_P, _Pu64, _Pu64, _i]),
    "grist_ckpt_save_in_place": (_i, [_P, _S, _i, _PS, _Pi, _Pi, _Pi64, _Pu64, _i, _PS, _PS,
                                      _PP]),
    "grist_ckpt_pending_copy": (_i, [_P, _i, _Pu64, _Pu64, _Pu64, _i]),
    "grist_ckpt_pending_mark_ready": (_i, [_P, _u64]),
    "grist_ckpt_pending_abort": (_i, [_P, _S]),
    "grist_ckpt_pending_done": (_i, [_P]),
    "grist_ckpt_pending_wait": (_i, [_P, _i, _PS]),
    "grist_ckpt_pending_free": (None, [_P]),
    "grist_ckpt_publish": (_i, [_S, _i64, _i, _i, _PS, _i, _PS, _PS, _S, _S, _i]),
    "grist_ckpt_latest": (_i, [_S, _i, _PS]),
    "grist_ckpt_list": (_i, [_S, _PS]),
    "grist_ckpt_verify": (_i, [_S]),
    "grist_ckpt_step_from_name": (_i, [_S, _Pi64]),
    "grist_ckpt_load": (_i, [_S, _i, _i, _i, _PP, _PS]),
    "grist_ckpt_load_wait_data": (_i, [_P, _u64]),
    "grist_ckpt_load_finish": (_i, [_P, _Pi]),
    "grist_ckpt_load_free": (None, [_P]),
    "grist_ckpt_read_manifest": (_i, [_S, _PS]),
    "grist_ckpt_read_ranges": (_i, [_S, _S, _i, _Pu64, _Pu64, _i, _i, _PP, _Pu64]),
    "grist_ckpt_ranges_bytes_read": (_i, [_P, _Pu64]),
    "grist_ckpt_ranges_free": (None, [_P]),
    "grist_ckpt_export": (_i, [_S, _S, _S, _u64, _PS]),
}


def declare(lib):
    """Sets every function's restype and argtypes on `lib` (a ctypes.CDLL of libgrist_capi.so) and
    checks the library's ABI version; ImportError for a library of another build."""
    lib.grist_capi_abi_version.restype = _i
    lib.grist_capi_abi_version.argtypes = []
    have = lib.grist_capi_abi_version()
    if have != ABI_VERSION:
        raise ImportError(f"grist: {lib._name} has C ABI version {have}, this package expects "
                          f"{ABI_VERSION}: rebuild grist (the library and the Python files come "
                          "from different builds)")
    for name, (restype, argtypes) in FUNCTIONS.items():
        f = getattr(lib, name)
        f.restype = restype
        f.argtypes = argtypes


def new_options(lib, struct, init):
    """A `struct` (a Structure above) filled by the library's `init` function (its defaults)."""
    o = struct()
    getattr(lib, init)(_c.byref(o))
    return o


def dtype_names(lib):
    """The safetensors names of the checkpoint dtype codes, in code order (grist_ckpt_dtype)."""
    names = []
    out = _S()
    for code in range(lib.grist_ckpt_num_dtypes()):
        rc = lib.grist_ckpt_dtype_name(code, _c.byref(out))
        if rc != 0:
            raise ImportError(f"grist: grist_ckpt_dtype_name({code}) failed ({rc})")
        names.append(out.value.decode())
    return names
