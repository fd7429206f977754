// The I/O environment: every file operation in grist goes through an Env, so tests can swap the
// POSIX file system for an in-memory one (NewMemEnv) or inject faults (FaultInjectionEnv).
//
// Thread safety: Env implementations are thread-safe. File objects are not; use one per thread.
// Errors: NotFound for a missing path, PermissionDenied, ResourceExhausted for a full disk (ENOSPC),
// DataLoss for short reads of a file that should be complete, Internal/Unknown for the rest. Every
// message names the path.
#ifndef GRIST_COMMON_ENV_H_
#define GRIST_COMMON_ENV_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace grist {

class SequentialFile {
 public:
  virtual ~SequentialFile() = default;
  // Reads up to `n` bytes into `buf`. Returns the count read; 0 means end of file.
  virtual absl::StatusOr<size_t> Read(char* buf, size_t n) = 0;
  virtual const std::string& path() const = 0;
};

class RandomAccessFile {
 public:
  virtual ~RandomAccessFile() = default;
  // Reads up to `n` bytes at `offset`. Returns fewer only at end of file.
  virtual absl::StatusOr<size_t> ReadAt(uint64_t offset, char* buf, size_t n) const = 0;
  virtual uint64_t Size() const = 0;
  virtual const std::string& path() const = 0;
};

class WritableFile {
 public:
  virtual ~WritableFile() = default;
  virtual absl::Status Append(std::string_view data) = 0;
  // Pushes buffered data to the OS (not durable).
  virtual absl::Status Flush() = 0;
  // Makes everything appended so far durable (fdatasync/fsync).
  virtual absl::Status Sync() = 0;
  // Flushes and closes. Does not sync. Idempotent.
  virtual absl::Status Close() = 0;
  virtual uint64_t Size() const = 0;
  virtual const std::string& path() const = 0;
  // For a file that will be synced: starts writing what was appended to the device every `bytes`
  // bytes (Linux sync_file_range(SYNC_FILE_RANGE_WRITE): begun, not waited for), so that Sync()
  // waits only for the rest instead of flushing the whole file at the end. 0 (the default) leaves
  // write-back to the kernel. A hint: it makes nothing durable and never fails; Sync() reports
  // any write error.
  virtual void SetWritebackBytes(uint64_t bytes) { (void)bytes; }
};

// The write-back step of the large outputs that are synced when finished (shards, token files,
// document parts): a sync at the end then waits for at most about this much.
inline constexpr uint64_t kWritebackBytes = 8ull << 20;

// A file's size, times and inode number as stat(2) gives them: what a cache of checksums checks
// before trusting what it remembers of the file's bytes (release/internal/file_sums.h). Any write
// to the file, or any change to its inode (chmod, rename, link), sets ctime, which no user can set
// back. All of it is the file system's (the same on every client of NFS, Lustre or GlusterFS); the
// device number, which a client numbers for itself, is left out.
struct FileStat {
  uint64_t size = 0;
  int64_t mtime_ns = 0, ctime_ns = 0;  // since the epoch
  uint64_t inode = 0;
  bool directory = false;  // a folder (where stat says so; no file the cache holds is one)
  bool operator==(const FileStat&) const = default;
};

class Env {
 public:
  virtual ~Env() = default;
  // The process-wide POSIX environment. Never deleted.
  static Env* Default();

  virtual absl::StatusOr<std::unique_ptr<SequentialFile>> NewSequentialFile(
      const std::string& path) = 0;
  virtual absl::StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& path) = 0;
  // Creates or truncates `path`.
  virtual absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(
      const std::string& path) = 0;

  virtual bool FileExists(const std::string& path) = 0;
  virtual bool IsDirectory(const std::string& path) = 0;
  virtual absl::StatusOr<uint64_t> GetFileSize(const std::string& path) = 0;
  // stat(2) of `path` (following links). Unimplemented where the Env has no such times (the
  // in-memory one): then nothing is cached by them.
  virtual absl::StatusOr<FileStat> Stat(const std::string& path) {
    return absl::UnimplementedError(path + ": no file times in this Env");
  }
  // Names (not paths) of the entries of `dir`, sorted bytewise, without "." and "..".
  virtual absl::StatusOr<std::vector<std::string>> ListDir(const std::string& dir) = 0;
  // mkdir -p.
  virtual absl::Status CreateDirs(const std::string& path) = 0;
  virtual absl::Status RemoveFile(const std::string& path) = 0;
  // rm -rf; OK when `path` does not exist.
  virtual absl::Status RemoveAll(const std::string& path) = 0;
  // Atomic rename(2) within one file system; replaces `to`.
  virtual absl::Status RenameFile(const std::string& from, const std::string& to) = 0;
  // fsync on the directory itself, making renames and creations in it durable.
  virtual absl::Status SyncDir(const std::string& dir) = 0;
  // fsync of the existing file `path` (opened for it): makes durable what every writer of it has
  // handed to the OS (written, or Flushed) so far, as the writers' own Sync() would.
  virtual absl::Status SyncFile(const std::string& path) = 0;
};

// An Env that hands every call to `base`: a wrapper derives from it and overrides only the calls
// it changes (fails, counts, defers or acts on). `base` must outlive it. Thread-safe as `base` is.
class ForwardingEnv : public Env {
 public:
  explicit ForwardingEnv(Env* base = Env::Default()) : base_(base) {}

  absl::StatusOr<std::unique_ptr<SequentialFile>> NewSequentialFile(
      const std::string& path) override {
    return base_->NewSequentialFile(path);
  }
  absl::StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& path) override {
    return base_->NewRandomAccessFile(path);
  }
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    return base_->NewWritableFile(path);
  }
  bool FileExists(const std::string& path) override { return base_->FileExists(path); }
  bool IsDirectory(const std::string& path) override { return base_->IsDirectory(path); }
  absl::StatusOr<uint64_t> GetFileSize(const std::string& path) override {
    return base_->GetFileSize(path);
  }
  absl::StatusOr<FileStat> Stat(const std::string& path) override { return base_->Stat(path); }
  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& dir) override {
    return base_->ListDir(dir);
  }
  absl::Status CreateDirs(const std::string& path) override { return base_->CreateDirs(path); }
  absl::Status RemoveFile(const std::string& path) override { return base_->RemoveFile(path); }
  absl::Status RemoveAll(const std::string& path) override { return base_->RemoveAll(path); }
  absl::Status RenameFile(const std::string& from, const std::string& to) override {
    return base_->RenameFile(from, to);
  }
  absl::Status SyncDir(const std::string& dir) override { return base_->SyncDir(dir); }
  absl::Status SyncFile(const std::string& path) override { return base_->SyncFile(path); }

 protected:
  Env* base() const { return base_; }

 private:
  Env* base_;
};

// An Env held entirely in memory. Tracks what was synced: DropUnsyncedData() truncates every file to
// its last synced size, simulating a power loss.
class MemEnv : public Env {
 public:
  MemEnv();
  ~MemEnv() override;
  absl::StatusOr<std::unique_ptr<SequentialFile>> NewSequentialFile(
      const std::string& path) override;
  absl::StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& path) override;
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override;
  bool FileExists(const std::string& path) override;
  bool IsDirectory(const std::string& path) override;
  absl::StatusOr<uint64_t> GetFileSize(const std::string& path) override;
  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& dir) override;
  absl::Status CreateDirs(const std::string& path) override;
  absl::Status RemoveFile(const std::string& path) override;
  absl::Status RemoveAll(const std::string& path) override;
  absl::Status RenameFile(const std::string& from, const std::string& to) override;
  absl::Status SyncDir(const std::string& dir) override;
  absl::Status SyncFile(const std::string& path) override;
  void DropUnsyncedData();

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

// Wraps another Env and fails chosen operations. Counters are process-wide for this object and
// thread-safe. A fault returns the same Status a real failure would (e.g. ResourceExhausted with
// "No space left on device" when the byte budget is spent).
class FaultInjectionEnv : public ForwardingEnv {
 public:
  explicit FaultInjectionEnv(Env* base);
  ~FaultInjectionEnv() override;

  // The n-th (1-based, counted from now) Append fails with an I/O error; 0 disables.
  void FailNthAppend(int n);
  // Every Sync / SyncDir / SyncFile fails while set.
  void SetFailSync(bool fail);
  // Rename fails while set.
  void SetFailRename(bool fail);
  // After `bytes` more bytes are appended in total, Appends fail with ENOSPC; -1 disables.
  void SetDiskSpace(int64_t bytes);
  int64_t appended_bytes() const;
  // Bytes read so far from the files opened through this Env (sequential and random access).
  int64_t read_bytes() const;
  // From now on, a ReadAt of `path` at exactly `offset` for exactly `n` bytes fails with an I/O
  // error, or with `short_read` returns n - 1 bytes (as a file cut under its reader would). One
  // such rule at a time; n = 0 clears it.
  void FailReadAt(const std::string& path, uint64_t offset, size_t n, bool short_read = false);

  absl::StatusOr<std::unique_ptr<SequentialFile>> NewSequentialFile(
      const std::string& path) override;
  absl::StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& path) override;
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override;
  absl::Status RenameFile(const std::string& from, const std::string& to) override;
  absl::Status SyncDir(const std::string& dir) override;
  absl::Status SyncFile(const std::string& path) override;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

// Wraps another Env and defers durability: Sync() of a file written through it pushes the bytes
// to the OS (Flush) and notes the file instead of waiting for the device, SyncDir notes the
// directory, and SyncAll() later makes all of it durable at once. Lets a stage's outputs be
// synced while the next stage already runs (release/build.cc), with the same guarantee at the
// point that trusts them: every file a writer synced, at the name it has when SyncAll runs
// (renames through this Env followed; files removed through it dropped), and the directory that
// holds each such name (and, for a directory renamed with such files in it, its new entry), as
// well as every directory synced, are durable when SyncAll returns OK.
// Everything else is forwarded as it is. Thread-safe.
class DeferredSyncEnv : public ForwardingEnv {
 public:
  explicit DeferredSyncEnv(Env* base);
  ~DeferredSyncEnv() override;

  // fsyncs the noted files on up to `threads` threads, then the noted directories (deepest
  // first), and forgets them; the first error, naming its path, after trying all of them. Files
  // noted while it runs are left for the next call.
  absl::Status SyncAll(int threads);
  // How many files and directories are noted, not yet synced (for tests).
  size_t pending_files() const;
  size_t pending_dirs() const;

  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override;
  absl::Status CreateDirs(const std::string& path) override;
  absl::Status RemoveFile(const std::string& path) override;
  absl::Status RemoveAll(const std::string& path) override;
  absl::Status RenameFile(const std::string& from, const std::string& to) override;
  absl::Status SyncDir(const std::string& dir) override;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

// ---- Helpers over any Env ----

absl::StatusOr<std::string> ReadFileToString(Env* env, const std::string& path);
// Writes `data` to `path` crash-safely: `path.tmp.<pid>` is written, synced, renamed over `path`,
// and the parent directory is synced. On error the old `path` (if any) is untouched.
absl::Status WriteFileAtomic(Env* env, const std::string& path, std::string_view data);
// Parent directory of `path` ("." when none).
std::string DirName(const std::string& path);
std::string BaseName(const std::string& path);
std::string JoinPath(std::string_view a, std::string_view b);

}  // namespace grist

#endif  // GRIST_COMMON_ENV_H_
