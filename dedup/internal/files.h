// Checked intermediate files (docs/formats/dedup.md) and an external sort in bounded memory.
// Private to grist::dedup.
#ifndef GRIST_DEDUP_INTERNAL_FILES_H_
#define GRIST_DEDUP_INTERNAL_FILES_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <cstring>
#include <memory>
#include <queue>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/env.h"
#include "common/hash.h"
#include "common/task_parts.h"
#include "common/thread_pool.h"
#include "dedup/dedup_format.h"

namespace grist::dedup::internal {

struct FileHeader {
  format::Kind kind = format::Kind::kStats;
  uint32_t record_size = 0;  // 0 = variable length (kIds)
  uint32_t aux = 0;
  uint32_t task = 0;
  uint32_t tasks = 1;
  uint64_t fingerprint = 0;  // of the input plan and the options that shape this file
};

// Writes `path` under a temporary name; Finish() appends the footer, syncs (unless opened with
// sync = false: scratch files that no later run reads, such as sort runs and verification spills),
// renames. A writer destroyed without Finish() removes its temporary file. Not thread-safe.
class FileWriter {
 public:
  static absl::StatusOr<std::unique_ptr<FileWriter>> Open(Env* env, std::string path,
                                                          const FileHeader& header,
                                                          bool sync = true);
  ~FileWriter();
  absl::Status Append(const void* data, size_t size);
  template <typename T>
  absl::Status Add(const T& record) {
    ++records_;
    return Append(&record, sizeof(T));
  }
  // One record of `size` bytes (the header's record_size).
  absl::Status AddRecord(const void* data, size_t size) {
    ++records_;
    return Append(data, size);
  }
  absl::Status AddId(uint64_t key, std::string_view id);
  // `count` records already serialized into `data` (e.g. by AppendSetRecord).
  absl::Status AddSerialized(std::string_view data, uint64_t count) {
    records_ += count;
    return Append(data.data(), data.size());
  }
  absl::Status Finish();
  uint64_t records() const { return records_; }
  // Bytes appended so far, header included.
  uint64_t bytes() const { return bytes_; }

 private:
  FileWriter(Env* env, std::string path, std::unique_ptr<WritableFile> file);
  absl::Status FlushBuffer();
  Env* env_;
  std::string path_, tmp_path_;
  std::unique_ptr<WritableFile> file_;
  Hasher64 hasher_;
  std::string buffer_;
  uint64_t records_ = 0;
  uint64_t bytes_ = 0;
  bool sync_ = true;
  bool finished_ = false;
};

// Reads a file written by FileWriter. Open() checks the header (magic, version, kind, record
// size) and the footer (magic, record count consistent with the file size); the checksum of the
// whole file is checked as the last record is read: Next() then returns DataLoss on a mismatch,
// so a consumer sees every corruption before it finishes. Not thread-safe.
class FileReader {
 public:
  static absl::StatusOr<std::unique_ptr<FileReader>> Open(Env* env, const std::string& path,
                                                          format::Kind kind,
                                                          uint32_t record_size);
  const FileHeader& header() const { return header_; }
  uint64_t records() const { return records_; }
  // Fixed-size records: copies the next record into `out` (record_size bytes). False at the end.
  absl::StatusOr<bool> Next(void* out);
  template <typename T>
  absl::StatusOr<bool> Next(T* out) {
    return Next(static_cast<void*>(out));
  }
  // Variable-length id records.
  absl::StatusOr<bool> NextId(uint64_t* key, std::string* id);
  // Variable-length set records (kShingleSets): *values is replaced by the record's values. A count
  // that runs past the end of the file or a nonzero reserved field is DataLoss.
  absl::StatusOr<bool> NextSet(uint64_t* key, std::vector<uint64_t>* values);
  // Reads every fixed-size record.
  template <typename T>
  static absl::StatusOr<std::vector<T>> ReadAll(Env* env, const std::string& path,
                                                format::Kind kind) {
    auto r = Open(env, path, kind, sizeof(T));
    if (!r.ok()) return r.status();
    std::vector<T> v((*r)->records());
    for (auto& x : v) {
      auto more = (*r)->Next(&x);
      if (!more.ok()) return more.status();
    }
    auto end = (*r)->Next(nullptr);
    if (!end.ok()) return end.status();
    return v;
  }

 private:
  FileReader() = default;
  absl::Status Fill(char* out, size_t n);
  absl::Status FinishIfDone();
  std::string path_;
  std::unique_ptr<SequentialFile> file_;
  FileHeader header_;
  uint64_t records_ = 0;
  uint64_t read_ = 0;
  uint64_t body_left_ = 0;
  uint64_t expected_hash_ = 0;
  std::unique_ptr<Hasher64> hasher_;
  std::string buffer_;
  size_t buffer_pos_ = 0;
  bool checked_ = false;
};

// Appends one kShingleSets record (format::SetRecord, then the values) to `out`.
void AppendSetRecord(std::string* out, uint64_t key, const std::vector<uint64_t>& values);

// The file names of tasks 0..tasks-1 of a stage in `dir`: "<stem>-IIIII-of-NNNNN.bin"
// (common/task_parts.h).
inline constexpr char kTaskFileSuffix[] = ".bin";
std::string TaskFileName(const std::string& stem, int task, int tasks);
// Finds the outputs "<stem>-*-of-NNNNN.bin" in `dir`, checks that they agree on NNNNN and that every
// task's file is there, and returns their paths in task order. An incomplete set is
// FailedPrecondition naming the first missing task; none at all names the stage to run first.
absl::StatusOr<std::vector<std::string>> FindTaskFiles(Env* env, const std::string& dir,
                                                       const std::string& stem,
                                                       const std::string& producing_stage);

// Sorts [data, data + n) as std::sort would (the records' operator<); bucket records, the most
// numerous, by radix first: grouped by tag, then by the top bits of the hash that varies in the
// group (`hi`, else `lo`), in place, the small buckets then sorted by std::sort. The result is
// std::sort's for any records (the order is total); 2-3x faster on the buckets stage's records.
template <typename T>
void SortRecords(T* data, size_t n) {
  std::sort(data, data + n);
}
void SortRecords(format::BucketRecord* data, size_t n);

// The threads ParallelSortInto sorts `n` records on: one per 16Ki records, at most the pool's (a
// build's 315 Ki bucket records: 16 threads, not 4; on the GPU host the buckets stage at 16
// threads took 0.032 s instead of 0.043).
inline size_t ParallelSortParts(size_t n, const ThreadPool* pool) {
  constexpr size_t kMinPerThread = size_t{1} << 14;
  return pool == nullptr ? 1
                         : std::min<size_t>(static_cast<size_t>(std::max(1, pool->size())),
                                            std::max<size_t>(1, n / kMinPerThread));
}

// Sorts `n` records at `data` (T with operator<) on the pool's threads and returns where the
// sorted records are: `data` itself when one thread sorts (ParallelSortParts(n, pool) == 1: in
// place, `out` untouched, may be null), else `out` (room for n): the data cut into one range per
// thread, each range sorted, then the sorted ranges cut at common splitter values (sampled from
// them) into one segment per thread, each segment merged into its place in `out`. With operator< a
// total order (as the dedup records' are) the result is the one std::sort gives, whatever the
// thread count.
template <typename T>
absl::StatusOr<const T*> ParallelSortInto(T* data, size_t n, T* out, ThreadPool* pool) {
  const size_t parts = ParallelSortParts(n, pool);
  if (parts <= 1) {
    SortRecords(data, n);
    return static_cast<const T*>(data);
  }
  std::vector<size_t> bound(parts + 1);
  for (size_t i = 0; i <= parts; ++i) bound[i] = n * i / parts;
  absl::Status s = ParallelFor(pool, parts, [&](size_t i) {
    SortRecords(data + bound[i], bound[i + 1] - bound[i]);
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  // Splitters: 64 evenly spaced records of each sorted range, sorted, every 64th of them.
  constexpr size_t kSamples = 64;
  std::vector<T> sample;
  sample.reserve(parts * kSamples);
  for (size_t i = 0; i < parts; ++i) {
    const size_t len = bound[i + 1] - bound[i];
    for (size_t k = 0; k < kSamples; ++k) sample.push_back(data[bound[i] + len * k / kSamples]);
  }
  std::sort(sample.begin(), sample.end());
  // cut[i * (parts + 1) + j]: where segment j starts in range i (records >= splitter j).
  std::vector<size_t> cut(parts * (parts + 1));
  for (size_t i = 0; i < parts; ++i) {
    cut[i * (parts + 1)] = bound[i];
    cut[i * (parts + 1) + parts] = bound[i + 1];
    for (size_t j = 1; j < parts; ++j) {
      const T& splitter = sample[j * sample.size() / parts];
      const size_t from = cut[i * (parts + 1) + j - 1];
      cut[i * (parts + 1) + j] =
          static_cast<size_t>(std::lower_bound(data + from, data + bound[i + 1], splitter) - data);
    }
  }
  std::vector<size_t> offset(parts + 1, 0);
  for (size_t j = 0; j < parts; ++j) {
    size_t len = 0;
    for (size_t i = 0; i < parts; ++i) len += cut[i * (parts + 1) + j + 1] - cut[i * (parts + 1) + j];
    offset[j + 1] = offset[j] + len;
  }
  s = ParallelFor(pool, parts, [&](size_t j) {
    struct Head {
      const T* p;
      const T* end;
      size_t range;
    };
    // A min-heap of the ranges' next records (ties by range, so the merge is stable).
    auto later = [](const Head& a, const Head& b) {
      if (*b.p < *a.p) return true;
      if (*a.p < *b.p) return false;
      return a.range > b.range;
    };
    std::vector<Head> heap;
    for (size_t i = 0; i < parts; ++i) {
      const size_t b = cut[i * (parts + 1) + j], e = cut[i * (parts + 1) + j + 1];
      if (b < e) heap.push_back(Head{data + b, data + e, i});
    }
    std::make_heap(heap.begin(), heap.end(), later);
    T* o = out + offset[j];
    while (heap.size() > 1) {
      std::pop_heap(heap.begin(), heap.end(), later);
      Head& h = heap.back();
      *o++ = *h.p++;
      if (h.p == h.end) {
        heap.pop_back();
      } else {
        std::push_heap(heap.begin(), heap.end(), later);
      }
    }
    if (!heap.empty()) std::copy(heap[0].p, heap[0].end, o);
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return static_cast<const T*>(out);
}

// Sorts fixed-size records of type T (with operator<) within `memory_bytes`: records collect in a
// buffer; a full buffer is sorted and spilled as a run file (format::Kind::kRun) in `dir`; Finish()
// merges the runs. Each run is read back through FileReader, so a corrupted spill is an error.
// With a pool of more than one thread, buffers are sorted on its threads (ParallelSortInto) into a
// second buffer of the same size, both within `memory_bytes`. Not thread-safe (the pool is used
// only inside Add and Finish, by the calling thread).
template <typename T>
class ExternalSorter {
  static_assert(std::is_trivially_default_constructible_v<T> && std::is_trivially_copyable_v<T>,
                "records are raw bytes, their buffer left uninitialized until they arrive");

 public:
  ExternalSorter(Env* env, std::string dir, std::string stem, uint64_t memory_bytes,
                 ThreadPool* pool = nullptr)
      : env_(env), dir_(std::move(dir)), stem_(std::move(stem)),
        pool_(pool != nullptr && pool->size() > 1 ? pool : nullptr) {
    capacity_ = std::max<uint64_t>(1024, memory_bytes / sizeof(T) / (pool_ ? 2 : 1));
  }
  ~ExternalSorter() {
    for (const auto& p : runs_) (void)env_->RemoveFile(p);
  }
  absl::Status Add(const T& r) {
    Allocate();
    if (size_ >= capacity_) {
      absl::Status s = Spill();
      if (!s.ok()) return s;
    }
    buffer_[size_++] = r;
    ++total_;
    return absl::OkStatus();
  }
  // Adds chunks of records made elsewhere: chunk k's counts[k] records, which copy(k, out) writes
  // to out[0, counts[k]), called for every chunk at once on the pool's threads, straight into the
  // buffer: the same records in the same order as Adding chunk 0's, then chunk 1's, and so on
  // (the buffer may spill before them instead of among them: the same sorted output). Chunks that
  // do not fit beside the buffer's records spill it first; more than a buffer holds go through Add.
  template <typename Copy>
  absl::Status AddChunks(const std::vector<size_t>& counts, Copy copy) {
    Allocate();
    std::vector<size_t> at(counts.size() + 1, 0);
    for (size_t k = 0; k < counts.size(); ++k) at[k + 1] = at[k] + counts[k];
    const size_t n = at.back();
    if (size_ + n > capacity_ && size_ > 0) {
      absl::Status s = Spill();
      if (!s.ok()) return s;
    }
    if (n > capacity_) {
      std::vector<T> chunk;
      for (size_t k = 0; k < counts.size(); ++k) {
        chunk.resize(counts[k]);
        copy(k, chunk.data());
        for (const T& r : chunk) {
          absl::Status s = Add(r);
          if (!s.ok()) return s;
        }
      }
      return absl::OkStatus();
    }
    T* out = buffer_.get() + size_;
    absl::Status s = ParallelFor(pool_, counts.size(), [&](size_t k) {
      copy(k, out + at[k]);
      return absl::OkStatus();
    });
    if (!s.ok()) return s;
    size_ += n;
    total_ += n;
    return absl::OkStatus();
  }
  uint64_t total() const { return total_; }
  size_t runs() const { return runs_.size(); }

  // Like Finish, for a caller that can take the records all at once (e.g. to split them among
  // threads): when nothing was spilled, calls whole(std::span<const T>) once with every record in
  // sorted order and returns what it returns; else calls emit(record) for each, as Finish does.
  template <typename Whole, typename Emit>
  absl::Status FinishWhole(Whole whole, Emit emit) {
    if (!runs_.empty()) return Finish(std::move(emit));
    absl::StatusOr<const T*> sorted = SortBuffer();
    if (!sorted.ok()) return sorted.status();
    absl::Status s = whole(std::span<const T>(*sorted, size_));
    size_ = 0;
    buffer_.reset();
    sorted_.reset();
    return s;
  }

  // Calls emit(record) for every record in sorted order (equal records in any order).
  template <typename Emit>
  absl::Status Finish(Emit emit) {
    if (runs_.empty()) {
      return FinishWhole(
          [&](std::span<const T> all) {
            for (const T& r : all) {
              absl::Status s = emit(r);
              if (!s.ok()) return s;
            }
            return absl::OkStatus();
          },
          emit);
    }
    if (size_ > 0) {
      absl::Status s = Spill();
      if (!s.ok()) return s;
    }
    size_ = 0;
    buffer_.reset();
    sorted_.reset();
    std::vector<std::unique_ptr<FileReader>> readers;
    struct Head {
      T rec;
      size_t run;
      bool operator>(const Head& o) const {
        if (o.rec < rec) return true;
        if (rec < o.rec) return false;
        return run > o.run;
      }
    };
    std::priority_queue<Head, std::vector<Head>, std::greater<Head>> heap;
    for (size_t i = 0; i < runs_.size(); ++i) {
      auto r = FileReader::Open(env_, runs_[i], format::Kind::kRun, sizeof(T));
      if (!r.ok()) return r.status();
      readers.push_back(std::move(*r));
      Head h{T{}, i};
      auto more = readers[i]->Next(&h.rec);
      if (!more.ok()) return more.status();
      if (*more) heap.push(h);
    }
    while (!heap.empty()) {
      Head h = heap.top();
      heap.pop();
      absl::Status s = emit(h.rec);
      if (!s.ok()) return s;
      auto more = readers[h.run]->Next(&h.rec);
      if (!more.ok()) return more.status();
      if (*more) heap.push(h);
    }
    return absl::OkStatus();
  }

 private:
  // The buffer's records in order: the buffer itself sorted in place, or (sorted on several of the
  // pool's threads) sorted_.
  absl::StatusOr<const T*> SortBuffer() {
    // Not value-initialized: its pages are touched only by the merge, as the buffer's are by Add;
    // allocated only once a buffer is large enough to sort on more than one thread.
    if (!sorted_ && ParallelSortParts(size_, pool_) > 1) sorted_.reset(new T[capacity_]);
    return ParallelSortInto(buffer_.get(), size_, sorted_.get(), pool_);
  }
  // The buffer, allocated once and not value-initialized: its pages are touched only as records
  // arrive (by several threads at once through AddChunks), so the budget holds and nothing is
  // copied as it fills.
  void Allocate() {
    if (!buffer_) buffer_.reset(new T[capacity_]);
  }

  absl::Status Spill() {
    absl::StatusOr<const T*> sorted = SortBuffer();
    if (!sorted.ok()) return sorted.status();
    std::string path = JoinPath(dir_, stem_ + "-run-" + std::to_string(runs_.size()) + ".bin");
    FileHeader h;
    h.kind = format::Kind::kRun;
    h.record_size = sizeof(T);
    auto w = FileWriter::Open(env_, path, h, /*sync=*/false);
    if (!w.ok()) return w.status();
    for (size_t i = 0; i < size_; ++i) {
      absl::Status s = (*w)->Add((*sorted)[i]);
      if (!s.ok()) return s;
    }
    absl::Status s = (*w)->Finish();
    if (!s.ok()) return s;
    runs_.push_back(path);
    size_ = 0;
    return absl::OkStatus();
  }

  Env* env_;
  std::string dir_, stem_;
  ThreadPool* pool_;
  uint64_t capacity_;
  uint64_t total_ = 0;
  std::unique_ptr<T[]> buffer_;  // room for capacity_ records, the first size_ of them added
  size_t size_ = 0;
  std::unique_ptr<T[]> sorted_;  // a buffer sorted on several threads, merged
  std::vector<std::string> runs_;
};

}  // namespace grist::dedup::internal

#endif  // GRIST_DEDUP_INTERNAL_FILES_H_
