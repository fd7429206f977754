// The checksums a build has computed, remembered by file identity in WORK/sums.json
// (docs/formats/build.md), so that a resumed build, and every step of a staged one, reads an input
// or a stage's output again only when the file may have changed since it was hashed: on a
// corpus of a terabyte each of a Slurm array's tasks read every input, and every earlier stage's
// outputs, to check the records it resumes after.
//
// Trust: a remembered checksum serves while stat(2) gives the file the same size, mtime, ctime
// and inode it had when hashed (as git trusts its index). A write sets mtime and ctime,
// and ctime cannot be set back, so a changed file is hashed again; only an entry whose times lie
// well before its hashing began is remembered (kSettledNs, or kSettledCoarseNs where the file
// system stamps whole seconds), so that a write later in the same timestamp tick cannot hide.
// `--restart`, or removing WORK/sums.json, hashes everything again. Where the Env has no stat
// (the in-memory one) nothing is remembered.
//
// Thread-safe. Several processes (the tasks of a staged step) may share one file: each writes it
// whole (WriteFileAtomic), the last one's stays; an entry lost so is only hashed again.
#ifndef GRIST_RELEASE_INTERNAL_FILE_SUMS_H_
#define GRIST_RELEASE_INTERNAL_FILE_SUMS_H_

#include <simdjson.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/env.h"
#include "common/json_writer.h"

namespace grist::release::internal {

// How far before the start of its hashing a file's mtime and ctime must lie for its checksum to
// be remembered: above the timestamp tick of Linux file systems (the kernel's coarse clock, at
// most 10 ms); for files whose times are whole seconds (Lustre, ext3, FAT), two seconds and more.
inline constexpr int64_t kSettledNs = 100'000'000;
inline constexpr int64_t kSettledCoarseNs = 2'100'000'000;

class FileSums {
 public:
  // The sums remembered at `path`; a missing, unreadable or damaged file (or one of another
  // format version) is an empty cache, rewritten by Save.
  static std::unique_ptr<FileSums> Load(Env* env, std::string path);

  // What a file looked like before its checksum was computed (Find), handed back to Remember.
  struct Seen {
    std::optional<FileStat> stat;  // none where the Env has no stat or the stat failed
    int64_t started_ns = 0;        // the clock just before the stat
  };
  // The checksum of kind `kind` (e.g. "xxh3_128") remembered for `file` while its stat now is
  // the one remembered ("" if none); *seen is set for Remember either way. With `known`, the
  // file's stat taken at `known_ns` (its listing: InputFile::stat) stands for the stat now, and
  // none is taken: sound where the caller compares the file with that stat again after it used
  // the checksum (the build's completion of a stage that read the file), or where reading the
  // file then is all the checksum stands for.
  std::string Find(std::string_view kind, const std::string& file, Seen* seen,
                   const std::optional<FileStat>& known = std::nullopt, int64_t known_ns = 0);
  // After `sum` was computed from the file's bytes: remembered if the file's stat is still the
  // one `seen` holds and its times lie before seen.started_ns by kSettledNs (kSettledCoarseNs).
  void Remember(std::string_view kind, const std::string& file, const Seen& seen,
                std::string sum);
  // Writes the cache when it changed: the entries of files that still exist.
  absl::Status Save();

  // How many checksums Find served, and how many Remember took (for tests and notes).
  uint64_t served() const;
  uint64_t remembered() const;

 private:
  FileSums(Env* env, std::string path) : env_(env), path_(std::move(path)) {}
  struct Entry {
    FileStat stat;
    std::string sum;
  };
  using Key = std::pair<std::string, std::string>;  // kind, file
  Env* env_;
  std::string path_;
  mutable absl::Mutex mu_;
  std::map<Key, Entry> entries_ ABSL_GUARDED_BY(mu_);
  bool changed_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t served_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t remembered_ ABSL_GUARDED_BY(mu_) = 0;
};

// Whether a file with stat `st` is settled for a hashing that began at `started_ns` (above).
bool SettledBefore(const FileStat& st, int64_t started_ns);

// A file's stat as JSON members, the one spelling of sums.json's entries and of a clean task's
// listing of its inputs (docs/formats/build.md): "bytes", "mtime_ns", "ctime_ns", "inode".
void AppendFileStatFields(JsonWriter* w, const FileStat& st);
// Reads those members of `object` into *st; false if one is missing or of another type.
bool ReadFileStatFields(const simdjson::dom::element& object, FileStat* st);

}  // namespace grist::release::internal

#endif  // GRIST_RELEASE_INTERNAL_FILE_SUMS_H_
