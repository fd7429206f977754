/* grist_capi.h: the C ABI of libgrist_capi.so, the native half of the grist Python package.
 *
 * This header is the one home of the ABI. python/capi/capi_*.cc include it (so the compiler holds the
 * definitions to these declarations), python/grist/_capi.py declares the same functions, structs
 * and enums for ctypes, and tests/python/test_capi_header.py checks the two against each other and
 * against the library's exported symbols. tests/capi/ calls every function from C++ exactly as
 * Python does, under AddressSanitizer and UndefinedBehaviorSanitizer in CI. The wheel installs
 * this file as grist/include/grist_capi.h (grist.get_include()).
 *
 * Declaration style (the checker parses it; keep to it): one declaration per statement, functions
 * as `GRIST_CAPI_EXPORT <type> <name>(<type> <name>, ...);`, structs and enums as `typedef struct
 * name { <type> <field>; ... } name;` with one field per line, opaque handles as `typedef struct
 * name name;`, comments in C89 block form. Types: void, int, int32_t, uint32_t, int64_t,
 * uint64_t, double, size_t, uintptr_t, the typedefs below, `const char*`, and pointers to these.
 *
 * ---- Contracts shared by every function ----
 *
 * Errors: a function returning `int` returns 0 (GRIST_OK) on success, otherwise the NEGATED
 * grist_status code of the error (e.g. -GRIST_NOT_FOUND), and sets this thread's error message
 * (grist_last_error). Functions returning a count or a flag say so. No C++ exception crosses the
 * boundary (one that escapes is returned as GRIST_INTERNAL). A NULL handle, a NULL required out
 * pointer, a negative count or an options struct whose struct_size is not this library's is
 * GRIST_INVALID_ARGUMENT, never a crash; a *_free / *_close of NULL is a no-op.
 *
 * Options structs: the caller fills one with <struct>_init() (which sets struct_size and the
 * library's defaults), changes the fields it wants and passes a pointer; the library reads it
 * during the call only. struct_size must equal the library's sizeof (a mismatch means Python and
 * the native library come from different builds). Fields are only ever appended, and
 * GRIST_CAPI_ABI_VERSION grows with any change of this header.
 *
 * Handles: opaque, created by grist_*_open / _new / _load and released by the matching _close /
 * _free, which the caller must call exactly once. Strings passed in are copied during the call.
 *
 * Returned strings: `const char*` results are owned by the library. Unless a function says
 * otherwise, a string returned through a handle stays valid until the next call on that handle, and
 * one returned by a grist_ckpt_* function without a handle until the next grist_ckpt_* call on the
 * same thread. Copy it before calling again.
 *
 * Thread safety: a grist_loader, grist_ckpt_pending or grist_ckpt_load_handle is used by one thread
 * at a time (distinct handles are independent). A grist_batch may be freed on any thread, also
 * after its loader is closed. A grist_ckpt_writer runs one file at a time: grist_ckpt_begin and
 * grist_ckpt_save_in_place wait until its previous file is finished. Functions without a handle
 * are thread-safe.
 */
#ifndef GRIST_PYTHON_CAPI_GRIST_CAPI_H_
#define GRIST_PYTHON_CAPI_GRIST_CAPI_H_

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define GRIST_CAPI_EXPORT __attribute__((visibility("default")))
#else
#define GRIST_CAPI_EXPORT
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Grows with every change of this header; grist_capi_abi_version() returns the library's. */
#define GRIST_CAPI_ABI_VERSION 3

/* ==== Errors ==== */

/* The canonical status codes (the numbers of absl::StatusCode, which the library's errors carry).
 * A failed call returns the negated code. */
typedef enum grist_status {
  GRIST_OK = 0,
  GRIST_CANCELLED = 1,
  GRIST_UNKNOWN = 2,
  GRIST_INVALID_ARGUMENT = 3,
  GRIST_DEADLINE_EXCEEDED = 4,
  GRIST_NOT_FOUND = 5,
  GRIST_ALREADY_EXISTS = 6,
  GRIST_PERMISSION_DENIED = 7,
  GRIST_RESOURCE_EXHAUSTED = 8,
  GRIST_FAILED_PRECONDITION = 9,
  GRIST_ABORTED = 10,
  GRIST_OUT_OF_RANGE = 11,
  GRIST_UNIMPLEMENTED = 12,
  GRIST_INTERNAL = 13,
  GRIST_UNAVAILABLE = 14,
  GRIST_DATA_LOSS = 15,
  GRIST_UNAUTHENTICATED = 16
} grist_status;

/* The message of the last failed call on this thread ("" if none failed yet). Meaningful right
 * after a call returned non-zero; valid until the next grist_* call on this thread. */
GRIST_CAPI_EXPORT const char* grist_last_error(void);

/* Copies that message into buf (at most size - 1 bytes and a terminating NUL; nothing when buf is
 * NULL or size is 0) and returns its full length in bytes, as snprintf does. */
GRIST_CAPI_EXPORT size_t grist_last_error_copy(char* buf, size_t size);

/* "ALREADY_EXISTS", ... for a grist_status (negated or not); "UNKNOWN" for other numbers. Static. */
GRIST_CAPI_EXPORT const char* grist_status_name(int code);

/* The library's GRIST_CAPI_ABI_VERSION: Python refuses a library whose number is not its own. */
GRIST_CAPI_EXPORT int grist_capi_abi_version(void);

/* grist's version ("0.1.0"). Static. */
GRIST_CAPI_EXPORT const char* grist_version(void);

/* ==== Loader (loader/loader.h) ==== */

typedef struct grist_loader grist_loader;
typedef struct grist_batch grist_batch;

typedef enum grist_device {
  GRIST_DEVICE_CPU = 0,
  GRIST_DEVICE_CUDA = 1
} grist_device;

/* loader::LoaderOptions. num_releases == 1 reads one release; >= 2 a weighted blend (its default
 * fields then include release_index). */
typedef struct grist_loader_options {
  uint32_t struct_size;        /* sizeof(grist_loader_options), set by _init */
  int32_t num_releases;        /* entries of paths and weights (>= 1) */
  const char* const* paths;    /* release folders */
  const double* weights;       /* blend weights; NULL: 1.0 each */
  const char* split;           /* "train" (default) or "validation"; NULL: "train" */
  int64_t micro_batch_size;
  int64_t global_batch_size;
  int64_t dp_rank;
  int64_t dp_size;
  int32_t has_seed;            /* 0: the release's seed */
  uint64_t seed;
  int64_t epochs;              /* 0: unlimited */
  int32_t prefetch;            /* batches filled ahead (>= 1) */
  int32_t num_workers;         /* fill threads; 0: min(4, CPUs) */
  int32_t device;              /* a grist_device */
  int32_t cuda_device;
  int32_t int32_ids;           /* input_ids/labels/position_ids as int32 */
  const char* fields;          /* comma-separated field names; NULL or "": the default set */
  int32_t verify_checksums;    /* hash every shard file against the manifest at open */
  int32_t elastic;             /* a state saved with another global batch size may be loaded */
} grist_loader_options;

/* What a grist_loader knows about its run (grist_loader_get_info). */
typedef struct grist_loader_info {
  uint32_t struct_size;            /* the caller sets sizeof(grist_loader_info) */
  int32_t on_cuda;                 /* batches are CUDA tensors */
  int64_t size;                    /* micro batches of the whole run on this rank; -1 unlimited */
  int64_t remaining;               /* micro batches left from the current position; -1 unlimited */
  uint64_t seed;                   /* the seed in use */
  int64_t num_samples;             /* samples in the split */
  int64_t seq_len;
  int64_t batch_bytes;             /* bytes of one batch's buffer */
  int64_t num_workers;             /* fill threads in use */
  int64_t micro_batches_per_step;  /* of this rank, per optimizer step */
} grist_loader_info;

/* Sets struct_size and LoaderOptions' defaults (no releases: the caller sets paths). */
GRIST_CAPI_EXPORT void grist_loader_options_init(grist_loader_options* options);

/* Opens a loader; *out gets the handle (NULL on error). Option errors, a missing release or a
 * release whose checksum does not match fail here. */
GRIST_CAPI_EXPORT int grist_loader_open(const grist_loader_options* options, grist_loader** out);

/* Stops the workers and frees the loader. Batches already returned stay valid. */
GRIST_CAPI_EXPORT void grist_loader_close(grist_loader* loader);

/* The next micro batch into *out (a new handle for grist_batch_free). At the end of the data:
 * -GRIST_OUT_OF_RANGE with *out NULL. A worker's I/O or data error is returned here and by every
 * later call. */
GRIST_CAPI_EXPORT int grist_loader_next(grist_loader* loader, grist_batch** out);

/* The position of the next batch as one-line JSON (loader::LoaderState::ToJson). */
GRIST_CAPI_EXPORT int grist_loader_state(grist_loader* loader, const char** out);

/* Continues from a state of grist_loader_state; the error names the mismatching field. */
GRIST_CAPI_EXPORT int grist_loader_load_state(grist_loader* loader, const char* json);

/* info->struct_size must be set by the caller. */
GRIST_CAPI_EXPORT int grist_loader_get_info(grist_loader* loader, grist_loader_info* info);

/* The release id (of the first release of a blend). */
GRIST_CAPI_EXPORT int grist_loader_release_id(grist_loader* loader, const char** out);

/* Why a CUDA request runs on the CPU ("" when it does not). */
GRIST_CAPI_EXPORT int grist_loader_device_note(grist_loader* loader, const char** out);

/* New blend weights (n == num_releases) from the current step boundary on. */
GRIST_CAPI_EXPORT int grist_loader_set_weights(grist_loader* loader, const double* weights, int n);

/* Draws of each release per step into out[0 .. min(n, capacity) - 1], with *n the number of
 * releases (one release: [global_batch_size]). out may be NULL when capacity is 0. */
GRIST_CAPI_EXPORT int grist_loader_blend_draws(grist_loader* loader, int64_t* out, int capacity,
                                               int* n);

/* Frees a batch; its buffer returns to the loader's pool once no DLPack tensor views it. */
GRIST_CAPI_EXPORT void grist_batch_free(grist_batch* batch);

/* The number of tensors of a batch (the same for every batch of a loader). */
GRIST_CAPI_EXPORT int grist_batch_num_tensors(grist_batch* batch, int* n);

/* Tensor i's name ("input_ids", ...): a static string. i out of range: -GRIST_OUT_OF_RANGE. */
GRIST_CAPI_EXPORT int grist_batch_tensor_name(grist_batch* batch, int i, const char** out);

/* CUDA: `stream` (a cudaStream_t as an integer; 0 = the legacy default stream) waits for the
 * batch's copy. A no-op for CPU batches. */
GRIST_CAPI_EXPORT int grist_batch_wait(grist_batch* batch, uintptr_t stream);

/* A new DLPack (v0.8) DLManagedTensor viewing tensor i, into *out. It holds a reference to the
 * batch's buffer: the consumer calls its deleter once (torch does, for a "dltensor" capsule), or
 * the caller passes it to grist_dlpack_free. */
GRIST_CAPI_EXPORT int grist_batch_dlpack(grist_batch* batch, int i, void** out);

/* grist_batch_dlpack of tensors 0 .. n-1 into out[0 .. n-1]; on error none is left allocated. */
GRIST_CAPI_EXPORT int grist_batch_dlpack_all(grist_batch* batch, void** out, int n);

/* Calls a DLManagedTensor's deleter (NULL: nothing). */
GRIST_CAPI_EXPORT void grist_dlpack_free(void* managed);

/* loader::SyntheticReleaseOptions: a deterministic release for tests, benchmarks and examples. */
typedef struct grist_synthetic_release_options {
  uint32_t struct_size;           /* sizeof(grist_synthetic_release_options), set by _init */
  uint32_t seq_len;
  uint64_t samples;               /* training samples */
  uint64_t validation_samples;
  uint64_t samples_per_shard;
  uint32_t vocab_size;
  uint32_t mean_document_tokens;
  uint64_t seed;
} grist_synthetic_release_options;

GRIST_CAPI_EXPORT void grist_synthetic_release_options_init(
    grist_synthetic_release_options* options);

/* Writes the release into folder `dir` (created). */
GRIST_CAPI_EXPORT int grist_write_synthetic_release(const char* dir,
                                                    const grist_synthetic_release_options* options);

/* ==== Checkpoints (ckptio/) ==== */

typedef struct grist_ckpt_writer grist_ckpt_writer;
typedef struct grist_ckpt_pending grist_ckpt_pending;
typedef struct grist_ckpt_load_handle grist_ckpt_load_handle;
typedef struct grist_ckpt_ranges grist_ckpt_ranges;

/* Tensor dtype codes of the checkpoint functions, in ckptio::DType's order (the library
 * static_asserts each). The safetensors names come from grist_ckpt_dtype_name. */
typedef enum grist_ckpt_dtype {
  GRIST_DTYPE_BOOL = 0,
  GRIST_DTYPE_U8 = 1,
  GRIST_DTYPE_I8 = 2,
  GRIST_DTYPE_F8_E5M2 = 3,
  GRIST_DTYPE_F8_E4M3 = 4,
  GRIST_DTYPE_I16 = 5,
  GRIST_DTYPE_U16 = 6,
  GRIST_DTYPE_F16 = 7,
  GRIST_DTYPE_BF16 = 8,
  GRIST_DTYPE_I32 = 9,
  GRIST_DTYPE_U32 = 10,
  GRIST_DTYPE_F32 = 11,
  GRIST_DTYPE_I64 = 12,
  GRIST_DTYPE_U64 = 13,
  GRIST_DTYPE_F64 = 14,
  GRIST_DTYPE_COUNT = 15
} grist_ckpt_dtype;

/* The number of dtype codes (GRIST_DTYPE_COUNT). */
GRIST_CAPI_EXPORT int grist_ckpt_num_dtypes(void);

/* The safetensors name of a dtype code ("F32", "BF16", ...; a static string). */
GRIST_CAPI_EXPORT int grist_ckpt_dtype_name(int code, const char** out);

/* ckptio::WriterOptions. */
typedef struct grist_ckpt_writer_options {
  uint32_t struct_size;   /* sizeof(grist_ckpt_writer_options), set by _init */
  int32_t direct;         /* O_DIRECT (falls back to buffered where refused, noted) */
  int32_t queue_depth;    /* writes in flight; 0: the default */
  int32_t overlap;        /* -1 auto, 0 write after the snapshot, 1 write while copying */
  uint64_t block_size;    /* bytes per write, a multiple of 4096; 0: the default */
  int32_t copy_threads;   /* snapshot copy threads; 0: grist_ckpt_default_copy_threads() */
} grist_ckpt_writer_options;

GRIST_CAPI_EXPORT void grist_ckpt_writer_options_init(grist_ckpt_writer_options* options);

/* A writer with its staging arena and I/O thread, into *out. */
GRIST_CAPI_EXPORT int grist_ckpt_writer_new(const grist_ckpt_writer_options* options,
                                            grist_ckpt_writer** out);

/* Waits for its file in flight, then frees it. */
GRIST_CAPI_EXPORT void grist_ckpt_writer_free(grist_ckpt_writer* writer);

/* Prepares the writer's staging arena in the background for a save of `data_bytes` of tensor data
 * in `tensors` tensors with `text_bytes` of header text: allocated, pre-faulted, pinned for CUDA
 * where present, registered with io_uring (ckptio::FileWriter::PrepareStaging). With `wait`
 * nonzero, returns once it is ready. *out receives the bytes the arena will hold; a request above
 * the writer's prepare limit prepares nothing and fails with GRIST_RESOURCE_EXHAUSTED. */
GRIST_CAPI_EXPORT int grist_ckpt_writer_prepare(grist_ckpt_writer* writer, uint64_t data_bytes,
                                                uint64_t tensors, uint64_t text_bytes, int wait,
                                                uint64_t* out);

/* The bytes of staging arena the writer holds now, and its prepare limit. */
GRIST_CAPI_EXPORT int grist_ckpt_writer_staging(grist_ckpt_writer* writer, uint64_t* arena_bytes,
                                                uint64_t* limit);

/* Times the writer's staging arena was allocated (ckptio::FileWriter::arena_allocations). */
GRIST_CAPI_EXPORT int grist_ckpt_writer_arena_allocations(grist_ckpt_writer* writer, uint64_t* out);

/* The writer's default copy thread count (ckptio::DefaultCopyThreads). */
GRIST_CAPI_EXPORT int grist_ckpt_default_copy_threads(void);

/* A parallel memcpy of n bytes from address src to address dst with `threads` threads: the peer
 * that measures the snapshot floor (bench/python/gpu/ckpt_host_blocked.py). Both ranges must be valid. */
GRIST_CAPI_EXPORT void grist_ckpt_memcpy(uint64_t dst, uint64_t src, uint64_t n, int threads);

/* 1 when a CUDA device is usable, else 0. */
GRIST_CAPI_EXPORT int grist_ckpt_cuda_available(void);

/* Creates the checkpoint folder `dir` (and its parents) for a save. */
GRIST_CAPI_EXPORT int grist_ckpt_prepare_dir(const char* dir);

/* Starts file `path`: n tensors with names[i], dtypes[i] (grist_ckpt_dtype), ndims[i] dimensions
 * taken in turn from dims (all tensors' dimensions back to back), and nmeta metadata pairs. *out
 * gets the pending file; the caller copies the bytes into its data region
 * (grist_ckpt_pending_layout) and marks them ready. */
GRIST_CAPI_EXPORT int grist_ckpt_begin(grist_ckpt_writer* writer, const char* path, int n,
                                       const char** names, const int* dtypes, const int* ndims,
                                       const int64_t* dims, int nmeta, const char** meta_keys,
                                       const char** meta_vals, grist_ckpt_pending** out);

/* The data region's address into *data and tensor i's byte offset in it into begins[i]
 * (n must be the pending file's tensor count). */
GRIST_CAPI_EXPORT int grist_ckpt_pending_layout(grist_ckpt_pending* pending, uint64_t* data,
                                                uint64_t* begins, int n);

/* grist_ckpt_begin with tensor i's bytes at address srcs[i], written from there where O_DIRECT
 * alignment allows: they must stay unchanged and alive until grist_ckpt_pending_wait returns and
 * the pending file is freed. */
GRIST_CAPI_EXPORT int grist_ckpt_save_in_place(grist_ckpt_writer* writer, const char* path, int n,
                                               const char** names, const int* dtypes,
                                               const int* ndims, const int64_t* dims,
                                               const uint64_t* srcs, int nmeta,
                                               const char** meta_keys, const char** meta_vals,
                                               grist_ckpt_pending** out);

/* Copies n host spans (data-region offset, source address, length) with the writer's copy pool;
 * with mark_ready the copied prefix is marked ready as it lands. */
GRIST_CAPI_EXPORT int grist_ckpt_pending_copy(grist_ckpt_pending* pending, int n,
                                              const uint64_t* offsets, const uint64_t* srcs,
                                              const uint64_t* lens, int mark_ready);

/* Data bytes [0, upto) are final and may be written. */
GRIST_CAPI_EXPORT int grist_ckpt_pending_mark_ready(grist_ckpt_pending* pending, uint64_t upto);

/* Gives the file up: grist_ckpt_pending_wait returns -GRIST_CANCELLED with `why`. */
GRIST_CAPI_EXPORT int grist_ckpt_pending_abort(grist_ckpt_pending* pending, const char* why);

/* A flag: 1 once the file is finished (durable or failed), 0 before, -GRIST_INVALID_ARGUMENT for
 * a NULL handle. */
GRIST_CAPI_EXPORT int grist_ckpt_pending_done(grist_ckpt_pending* pending);

/* Blocks until the file is durable; *out gets JSON {"record": the manifest file record of `rank`,
 * "direct", "seconds", "fixed_buffers", "in_place_bytes", "staging_fresh_bytes" (the staging
 * memory first touched on the caller's time, ckptio::FileResult), "notes"}. */
GRIST_CAPI_EXPORT int grist_ckpt_pending_wait(grist_ckpt_pending* pending, int rank,
                                              const char** out);

/* Waits for the file if still in flight, then frees the handle. */
GRIST_CAPI_EXPORT void grist_ckpt_pending_free(grist_ckpt_pending* pending);

/* Publishes checkpoint `dir`: n JSON file records (from grist_ckpt_pending_wait's "record", one per
 * rank 0 .. world_size-1), nmeta metadata pairs, the global tensor index (JSON, validated first),
 * the structure JSON (NULL: none); then keeps the keep_last newest checkpoints of the parent
 * (0: all). The manifest is written last and atomically. */
GRIST_CAPI_EXPORT int grist_ckpt_publish(const char* dir, int64_t step, int world_size, int n,
                                         const char** records, int nmeta, const char** meta_keys,
                                         const char** meta_vals, const char* index_json,
                                         const char* structure_json, int keep_last);

/* The newest published checkpoint under `root` into *out (with verify, the newest that verifies);
 * -GRIST_NOT_FOUND when there is none. */
GRIST_CAPI_EXPORT int grist_ckpt_latest(const char* root, int verify, const char** out);

/* The published checkpoints under `root` as JSON [{"path", "step"}, ...], oldest first. */
GRIST_CAPI_EXPORT int grist_ckpt_list(const char* root, const char** out);

/* Checks every file and checksum of checkpoint `dir`: -GRIST_DATA_LOSS names the first bad byte
 * range. */
GRIST_CAPI_EXPORT int grist_ckpt_verify(const char* dir);

/* The step a checkpoint folder's name carries ("step-00000042" -> 42; -1 when none). */
GRIST_CAPI_EXPORT int grist_ckpt_step_from_name(const char* dir, int64_t* step);

/* Starts loading rank `rank` of checkpoint `dir` (or, when `dir` ends in .safetensors, that file
 * alone) and returns once the header is read. *handle gets the load; *info JSON: step,
 * world_size, metadata, file_metadata, tensors [{name, dtype (code), shape, offset, nbytes}], the
 * data address and whether the buffer is pinned. Data arrives in file order. */
GRIST_CAPI_EXPORT int grist_ckpt_load(const char* dir, int rank, int verify, int direct,
                                      grist_ckpt_load_handle** handle, const char** info);

/* Blocks until data bytes [0, upto) are in memory (not yet verified). */
GRIST_CAPI_EXPORT int grist_ckpt_load_wait_data(grist_ckpt_load_handle* handle, uint64_t upto);

/* Waits for all data and verifies every checksum; *pinned tells whether the buffer is registered
 * with CUDA. The data stays valid until grist_ckpt_load_free. */
GRIST_CAPI_EXPORT int grist_ckpt_load_finish(grist_ckpt_load_handle* handle, int* pinned);

GRIST_CAPI_EXPORT void grist_ckpt_load_free(grist_ckpt_load_handle* handle);

/* The text of dir/manifest.json once it parsed and validated (checksum, files, tensor index). */
GRIST_CAPI_EXPORT int grist_ckpt_read_manifest(const char* dir, const char** out);

/* Reads the data ranges [begins[i], ends[i]) of file `path`, whose manifest record is
 * record_json; addrs[i] gets range i's address, valid until grist_ckpt_ranges_free(*handle). */
GRIST_CAPI_EXPORT int grist_ckpt_read_ranges(const char* path, const char* record_json, int n,
                                             const uint64_t* begins, const uint64_t* ends,
                                             int verify, int direct, grist_ckpt_ranges** handle,
                                             uint64_t* addrs);

/* The data bytes grist_ckpt_read_ranges read from the file: whole checksum blocks covering the
 * ranges asked for (the header not counted). */
GRIST_CAPI_EXPORT int grist_ckpt_ranges_bytes_read(const grist_ckpt_ranges* handle, uint64_t* out);

GRIST_CAPI_EXPORT void grist_ckpt_ranges_free(grist_ckpt_ranges* handle);

/* ckptio::ExportCheckpoint of the tensors named `prefix`... into out_dir as safetensors shards of
 * at most max_shard_bytes (0: the default); *out gets JSON {files, tensors, total_bytes, index}. */
GRIST_CAPI_EXPORT int grist_ckpt_export(const char* dir, const char* out_dir, const char* prefix,
                                        uint64_t max_shard_bytes, const char** out);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* GRIST_PYTHON_CAPI_GRIST_CAPI_H_ */
