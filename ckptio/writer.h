// The checkpoint file writer: one safetensors file per rank, written with io_uring from a staging
// arena (the file's exact image in memory), O_DIRECT where the file system allows it, several
// writes in flight, per-block XXH3 checksums, the header written last, then truncate to the exact
// length and fsync (submitted only after every write completed).
//
//   ASSIGN_OR_RETURN(auto writer, FileWriter::Create(options));
//   ASSIGN_OR_RETURN(auto pending, writer->Save(path, tensors, metadata));  // snapshot taken
//   ... the caller may now modify its tensors ...
//   ASSIGN_OR_RETURN(FileResult r, pending->Wait());                          // durable
//
// Synchronously, without a snapshot (tensors written from their own memory where aligned):
//   ASSIGN_OR_RETURN(FileResult r, writer->Write(path, tensors, metadata));
//
// Or piece by piece (the GPU path: device-to-host copies land in the arena while earlier pieces
// are already being written):
//   ASSIGN_OR_RETURN(auto pending, writer->Begin(path, specs, metadata));
//   memcpy(pending->data() + layout.tensors[i].begin, ...); pending->MarkReady(end_of_piece);
//   pending->Commit();
//
// Snapshot rule: Save() returns after every tensor was copied into the arena, so the caller may
// modify its tensors as soon as Save() returns. With Begin(), the caller owns the copy: bytes
// passed to MarkReady() must not change afterwards.
//
// No-snapshot rule: SaveInPlace() returns at once and writes every tensor whose file range and
// memory address fit the O_DIRECT alignment straight from the caller's memory (the rest, and the
// unaligned head and tail of each tensor, are staged); the caller must neither modify nor free
// its tensors until Wait() returns (or the PendingFile is destroyed, which waits). The bytes on
// disk are identical to Save()'s.
//
// Snapshot copies run on a persistent pool of WriterOptions::copy_threads threads (the caller is
// one of them) over consecutive chunks; the ready mark follows the contiguous copied prefix, so
// with overlap the first chunks are written while later ones are still being copied.
//
// Staging: the arena (the file's image) is kept for the writer's later files. PrepareStaging()
// allocates, faults in, pins and registers it on the I/O thread ahead of the first file, bounded by
// WriterOptions::prepare_limit, so that the first Save() blocks for its copy only.
//
// Durability: when Wait() returns OK the file's data and size are on stable storage (fsync). The
// file's directory entry is made durable by PublishCheckpoint (manifest.h).
//
// Thread safety: a FileWriter runs one file at a time on its own I/O thread (the thread that owns
// the io_uring ring); Begin()/Save() wait until the previous file is finished. Use one FileWriter
// per concurrent stream (e.g. per rank thread). A PendingFile may be used from one thread.
//
// Fault injection: with options.env other than Env::Default() the data goes through that Env's
// WritableFile (so FaultInjectionEnv and MemEnv apply); on the io_uring path, options.faults makes
// the N-th write completion, or the fsync, fail with a chosen errno, as the kernel would report it.
#ifndef GRIST_CKPTIO_WRITER_H_
#define GRIST_CKPTIO_WRITER_H_

#include <cerrno>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ckptio/safetensors.h"
#include "common/env.h"
#include "common/hash.h"

namespace grist::ckptio {

enum class IoMode { kDirect, kBuffered };
enum class Overlap { kAuto, kOn, kOff };

struct UringFaults {
  int fail_write_at = 0;     // 1-based index of the write completion to fail; 0: never
  int write_errno = EIO;     // its error (ENOSPC for a full disk)
  bool fail_fsync = false;   // the fsync completes with EIO
};

struct WriterOptions {
  IoMode mode = IoMode::kDirect;        // kDirect falls back to buffered where refused (noted)
  int queue_depth = 16;                 // writes in flight
  uint64_t block_size = 4ull << 20;     // bytes per write (a multiple of 4096)
  uint64_t checksum_block = 1ull << 20; // bytes per XXH3-64 block of the data region
  bool register_buffers = true;         // io_uring fixed buffers (falls back when refused)
  bool preallocate = true;              // fallocate the rounded-up size first
  bool pin_for_cuda = true;             // cudaHostRegister the arena when a GPU is present
  // Whether writes start while the snapshot is still being copied (pieces are written as they
  // land) or only once it is complete. Overlap takes the copy off the time to durable; the I/O
  // thread then mostly sleeps in the ring while the copy pool works. kAuto: overlap (kOff only
  // for measuring the copy alone).
  Overlap overlap = Overlap::kAuto;
  // Threads copying host tensors into the arena (Save, PendingFile::CopyIn), started with the
  // writer and reused by every save; the calling thread is one of them. 0: DefaultCopyThreads().
  int copy_threads = 0;
  // SaveInPlace: a tensor is written from the caller's memory only when its aligned interior is at
  // least this long (shorter ones are cheaper to copy than to write separately).
  uint64_t in_place_min_bytes = 256ull << 10;
  // Staging memory the writer holds ahead of a save (PrepareStaging(), and the headroom it adds
  // when the arena grows) is bounded by this many bytes; a save's own image is always allocated.
  // -1: DefaultPrepareLimit(); 0: nothing is prepared ahead and no headroom is kept.
  int64_t prepare_limit = -1;
  Env* env = nullptr;                   // nullptr: Env::Default() (the io_uring path)
  UringFaults faults;
};

// The bound on staging memory prepared ahead when WriterOptions::prepare_limit is -1:
// GRIST_CKPT_PREPARE_MAX when set (bytes, with an optional K/M/G/T suffix; 0 turns preparation
// off), else half the physical memory divided by the ranks on this node (LOCAL_WORLD_SIZE).
uint64_t DefaultPrepareLimit();

// What a coming file will hold, for FileWriter::PrepareStaging: its data bytes, and when known
// its tensor count and the text its header will carry (names, metadata values), from which a
// conservative bound of the header is computed.
struct StagingEstimate {
  uint64_t data_bytes = 0;
  uint64_t tensors = 0;
  uint64_t text_bytes = 0;
};

// The arena bytes a file described by `e` needs at most (header bound + data, 4096-aligned).
uint64_t StagingBytesFor(const StagingEstimate& e, uint64_t checksum_block = 1ull << 20);

// The CPUs this process may run on (sched_getaffinity: a Slurm or cgroup CPU set narrows it)
// divided by the ranks on this node (LOCAL_WORLD_SIZE, set by torchrun; 1 when unset), clamped to
// [1, 16]. The caller is blocked while the snapshot copies, so it may use the rank's share of the
// node: on the 16-core H200 host 8 threads copied at 28 GB/s and 16 at 45 GB/s (docs/ckptio.md).
int DefaultCopyThreads();

// What was written; recorded in the manifest.
struct FileResult {
  std::string path;
  uint64_t size = 0;        // exact file length
  uint64_t data_len = 0;    // tensor bytes
  uint64_t tensors = 0;
  Hash128 data_hash;        // as in the header's grist.data_xxh3
  uint64_t header_hash = 0; // XXH3-64 of bytes [0, data_start)
  bool direct = false;      // O_DIRECT was used
  uint64_t dio_align = 0;   // offset alignment used (0: buffered)
  unsigned ring_flags = 0;  // io_uring setup flags accepted by the kernel
  bool fixed_buffers = false;
  double seconds = 0;       // from Begin() to durable
  uint64_t in_place_bytes = 0;  // data bytes written from the caller's memory (SaveInPlace)
  // Bytes of the staging image (header + data, rounded to the alignment) that were not resident
  // when Begin()/Save() started: allocated and faulted in on the caller's time. 0 when
  // PrepareStaging() or an earlier staged save of at least this size had prepared them. An in-place
  // save (SaveInPlace, Write) counts its whole image: it is not known which pages it touched.
  uint64_t staging_fresh_bytes = 0;
  std::vector<std::string> notes;  // fallbacks taken, e.g. "O_DIRECT refused: buffered I/O"
};

// A host tensor to save: `data` holds the spec's bytes (row-major, contiguous).
struct HostTensor {
  TensorSpec spec;
  const void* data = nullptr;
};

// A host copy into the data region: `len` bytes from `src` to data() + `offset`.
struct HostSpan {
  uint64_t offset = 0;
  const void* src = nullptr;
  uint64_t len = 0;
};

class FileWriter;

class PendingFile {
 public:
  virtual ~PendingFile() = default;
  virtual const FileLayout& layout() const = 0;
  // Start of the data region in the arena; tensor i goes at data() + layout().tensors[i].begin.
  virtual char* data() = 0;
  // Bytes [0, upto) of the data region are final and may be written. Monotonic.
  virtual void MarkReady(uint64_t upto) = 0;
  // Copies `spans` into the data region with the writer's copy pool; returns when all landed. With
  // `mark_ready`, marks the contiguous copied prefix ready as chunks land: the spans must then be
  // sorted, contiguous, and start where everything before them is already ready (e.g. all
  // tensors of the file in order). Without it, the caller marks (e.g. after its GPU copies).
  virtual void CopyIn(const std::vector<HostSpan>& spans, bool mark_ready) = 0;
  // Everything is filled (same as MarkReady(layout().data_len)).
  void Commit() { MarkReady(layout().data_len); }
  // Abandons the file: Wait() returns `why`; the partial file is removed.
  virtual void Abort(absl::Status why) = 0;
  // Blocks until the file is durable or failed. Idempotent.
  virtual absl::StatusOr<FileResult> Wait() = 0;
  virtual bool Done() const = 0;
};

class FileWriter {
 public:
  static absl::StatusOr<std::unique_ptr<FileWriter>> Create(const WriterOptions& options);
  virtual ~FileWriter() = default;
  // Creates `path` (truncating it) and plans its layout. The data region must be filled by the
  // caller. Waits for this writer's previous file first.
  virtual absl::StatusOr<std::unique_ptr<PendingFile>> Begin(const std::string& path,
                                                              const std::vector<TensorSpec>& specs,
                                                              Metadata metadata) = 0;
  // Begin() plus copying every tensor into the arena; returns once the snapshot is complete.
  absl::StatusOr<std::unique_ptr<PendingFile>> Save(const std::string& path,
                                                     const std::vector<HostTensor>& tensors,
                                                     Metadata metadata);
  // Creates `path` and writes `tensors` without a snapshot (see the no-snapshot rule above):
  // returns once the small staged parts are copied and the file is committed.
  virtual absl::StatusOr<std::unique_ptr<PendingFile>> SaveInPlace(
      const std::string& path, const std::vector<HostTensor>& tensors, Metadata metadata) = 0;
  // The synchronous save: SaveInPlace() then Wait(); returns once the file is durable (nothing
  // can modify the tensors meanwhile, so no snapshot is taken).
  absl::StatusOr<FileResult> Write(const std::string& path, const std::vector<HostTensor>& tensors,
                                   Metadata metadata);
  // Prepares the staging arena for a coming file in the background, on the writer's I/O thread:
  // allocated, pre-faulted, pinned for CUDA when a GPU is present (on the caller's current
  // device), registered with io_uring, so that the next Save()/Begin() that fits touches no fresh
  // memory on the caller's time. Returns the arena bytes the writer will hold (the current size
  // when it already fits). ResourceExhausted, with nothing prepared, when the file needs more than
  // the prepare limit (WriterOptions::prepare_limit). A Begin() that comes while the preparation
  // still runs waits for it.
  virtual absl::StatusOr<uint64_t> PrepareStaging(const StagingEstimate& estimate) = 0;
  // Blocks until no preparation is queued or running.
  virtual void WaitStaging() = 0;
  // The prepare limit in bytes (options().prepare_limit resolved).
  virtual uint64_t prepare_limit() const = 0;
  // The copy pool's thread count (options().copy_threads resolved).
  virtual int copy_threads() const = 0;
  // Arena bytes currently held (the largest file image so far).
  virtual uint64_t arena_bytes() const = 0;
  // Times the arena was allocated (by PrepareStaging() or by a file that did not fit), since the
  // writer was created.
  virtual uint64_t arena_allocations() const = 0;
  virtual const WriterOptions& options() const = 0;
};

// Parallel memcpy used for snapshots (`threads` <= 1: plain memcpy).
void CopyBytes(void* dst, const void* src, size_t n, int threads);

// Whether the CUDA runtime is built in and sees a device (cached; never fails).
bool CudaAvailable();

}  // namespace grist::ckptio

#endif  // GRIST_CKPTIO_WRITER_H_
