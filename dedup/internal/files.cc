#include "dedup/internal/files.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace grist::dedup::internal {
namespace {

constexpr size_t kBufferBytes = 1 << 20;

void PutU32(std::string* s, uint32_t v) { s->append(reinterpret_cast<const char*>(&v), 4); }
void PutU64(std::string* s, uint64_t v) { s->append(reinterpret_cast<const char*>(&v), 8); }
uint32_t GetU32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t GetU64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

}  // namespace

FileWriter::FileWriter(Env* env, std::string path, std::unique_ptr<WritableFile> file)
    : env_(env), path_(std::move(path)), file_(std::move(file)) {
  tmp_path_ = file_->path();
  buffer_.reserve(kBufferBytes);
}

FileWriter::~FileWriter() {
  if (!finished_) {
    (void)file_->Close();
    (void)env_->RemoveFile(tmp_path_);
  }
}

absl::StatusOr<std::unique_ptr<FileWriter>> FileWriter::Open(Env* env, std::string path,
                                                             const FileHeader& header, bool sync) {
  std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  ASSIGN_OR_RETURN(auto file, env->NewWritableFile(tmp));
  std::unique_ptr<FileWriter> w(new FileWriter(env, std::move(path), std::move(file)));
  w->sync_ = sync;
  // A synced file starts its write-back as it grows, so Finish's fsync waits for the last few
  // MiB rather than the whole file (the signatures of a stage are tens of MB, written by the one
  // thread that orders the splits: its fsync was the stage's serial tail).
  if (sync) w->file_->SetWritebackBytes(kWritebackBytes);
  std::string h(format::kMagic, sizeof(format::kMagic));
  PutU32(&h, format::kVersion);
  PutU32(&h, static_cast<uint32_t>(header.kind));
  PutU32(&h, header.record_size);
  PutU32(&h, header.aux);
  PutU32(&h, header.task);
  PutU32(&h, header.tasks);
  PutU64(&h, header.fingerprint);
  RETURN_IF_ERROR(w->Append(h.data(), h.size()));
  return w;
}

absl::Status FileWriter::Append(const void* data, size_t size) {
  hasher_.Update(data, size);
  bytes_ += size;
  buffer_.append(static_cast<const char*>(data), size);
  if (buffer_.size() >= kBufferBytes) return FlushBuffer();
  return absl::OkStatus();
}

absl::Status FileWriter::FlushBuffer() {
  if (buffer_.empty()) return absl::OkStatus();
  absl::Status s = file_->Append(buffer_);
  buffer_.clear();
  return s;
}

absl::Status FileWriter::AddId(uint64_t key, std::string_view id) {
  if (id.size() > format::kMaxIdBytes) id = id.substr(0, format::kMaxIdBytes);
  std::string rec;
  PutU64(&rec, key);
  PutU32(&rec, static_cast<uint32_t>(id.size()));
  rec.append(id);
  ++records_;
  return Append(rec.data(), rec.size());
}

absl::Status FileWriter::Finish() {
  std::string f;
  PutU64(&f, records_);
  PutU64(&f, hasher_.Digest());
  f.append(format::kFooterMagic, sizeof(format::kFooterMagic));
  buffer_.append(f);
  RETURN_IF_ERROR(FlushBuffer());
  if (sync_) RETURN_IF_ERROR(file_->Sync());
  RETURN_IF_ERROR(file_->Close());
  RETURN_IF_ERROR(env_->RenameFile(tmp_path_, path_));
  finished_ = true;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<FileReader>> FileReader::Open(Env* env, const std::string& path,
                                                             format::Kind kind,
                                                             uint32_t record_size) {
  std::unique_ptr<FileReader> r(new FileReader());
  r->path_ = path;
  ASSIGN_OR_RETURN(uint64_t size, env->GetFileSize(path));
  auto corrupt = [&](std::string_view what) {
    return absl::DataLossError(absl::StrCat(path, ": corrupt dedup intermediate file: ", std::string(what)));
  };
  if (size < format::kHeaderSize + format::kFooterSize) return corrupt("truncated");
  ASSIGN_OR_RETURN(auto raf, env->NewRandomAccessFile(path));
  char head[format::kHeaderSize];
  char foot[format::kFooterSize];
  ASSIGN_OR_RETURN(size_t n1, raf->ReadAt(0, head, sizeof(head)));
  ASSIGN_OR_RETURN(size_t n2, raf->ReadAt(size - sizeof(foot), foot, sizeof(foot)));
  if (n1 != sizeof(head) || n2 != sizeof(foot)) return corrupt("short read");
  if (std::memcmp(head, format::kMagic, 8) != 0) return corrupt("bad magic");
  if (std::memcmp(foot + 16, format::kFooterMagic, 8) != 0) {
    return corrupt("bad footer (incomplete write?)");
  }
  if (GetU32(head + 8) != format::kVersion) {
    return corrupt(absl::StrCat("unsupported version ", GetU32(head + 8)));
  }
  FileHeader& h = r->header_;
  h.kind = static_cast<format::Kind>(GetU32(head + 12));
  h.record_size = GetU32(head + 16);
  h.aux = GetU32(head + 20);
  h.task = GetU32(head + 24);
  h.tasks = GetU32(head + 28);
  h.fingerprint = GetU64(head + 32);
  if (h.kind != kind) {
    return corrupt(absl::StrCat("kind ", static_cast<uint32_t>(h.kind), ", expected ",
                                static_cast<uint32_t>(kind)));
  }
  if (record_size != 0 && h.record_size != record_size) {
    return corrupt(absl::StrCat("record size ", h.record_size, ", expected ", record_size));
  }
  r->records_ = GetU64(foot);
  r->expected_hash_ = GetU64(foot + 8);
  r->body_left_ = size - format::kHeaderSize - format::kFooterSize;
  if (h.record_size != 0) {
    if (r->records_ > r->body_left_ / h.record_size ||
        r->records_ * h.record_size != r->body_left_) {
      return corrupt("record count does not match the file size");
    }
  }
  r->hasher_ = std::make_unique<Hasher64>();
  r->hasher_->Update(head, sizeof(head));
  ASSIGN_OR_RETURN(r->file_, env->NewSequentialFile(path));
  // Skip the header in the sequential stream.
  char skip[format::kHeaderSize];
  size_t got = 0;
  while (got < sizeof(skip)) {
    ASSIGN_OR_RETURN(size_t n, r->file_->Read(skip + got, sizeof(skip) - got));
    if (n == 0) return corrupt("truncated header");
    got += n;
  }
  return r;
}

absl::Status FileReader::Fill(char* out, size_t n) {
  if (n > body_left_) {
    return absl::DataLossError(absl::StrCat(path_, ": corrupt dedup intermediate file: record "
                                            "runs past the end"));
  }
  size_t done = 0;
  while (done < n) {
    if (buffer_pos_ == buffer_.size()) {
      buffer_.resize(std::min<uint64_t>(kBufferBytes, body_left_ - done));
      buffer_pos_ = 0;
      size_t want = buffer_.size();
      size_t got = 0;
      while (got < want) {
        ASSIGN_OR_RETURN(size_t k, file_->Read(buffer_.data() + got, want - got));
        if (k == 0) break;
        got += k;
      }
      if (got == 0) {
        return absl::DataLossError(absl::StrCat(path_, ": unexpected end of file"));
      }
      buffer_.resize(got);
    }
    size_t take = std::min(n - done, buffer_.size() - buffer_pos_);
    std::memcpy(out + done, buffer_.data() + buffer_pos_, take);
    buffer_pos_ += take;
    done += take;
  }
  body_left_ -= n;
  hasher_->Update(out, n);
  return absl::OkStatus();
}

absl::Status FileReader::FinishIfDone() {
  if (checked_) return absl::OkStatus();
  checked_ = true;
  if (body_left_ != 0) {
    return absl::DataLossError(
        absl::StrCat(path_, ": corrupt dedup intermediate file: trailing bytes"));
  }
  if (hasher_->Digest() != expected_hash_) {
    return absl::DataLossError(
        absl::StrCat(path_, ": corrupt dedup intermediate file: checksum mismatch"));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> FileReader::Next(void* out) {
  if (read_ >= records_) {
    RETURN_IF_ERROR(FinishIfDone());
    return false;
  }
  RETURN_IF_ERROR(Fill(static_cast<char*>(out), header_.record_size));
  ++read_;
  if (read_ == records_) RETURN_IF_ERROR(FinishIfDone());
  return true;
}

absl::StatusOr<bool> FileReader::NextId(uint64_t* key, std::string* id) {
  if (read_ >= records_) {
    RETURN_IF_ERROR(FinishIfDone());
    return false;
  }
  char h[12];
  RETURN_IF_ERROR(Fill(h, sizeof(h)));
  *key = GetU64(h);
  uint32_t len = GetU32(h + 8);
  if (len > format::kMaxIdBytes) {
    return absl::DataLossError(
        absl::StrCat(path_, ": corrupt dedup intermediate file: id length ", len));
  }
  id->resize(len);
  RETURN_IF_ERROR(Fill(id->data(), len));
  ++read_;
  if (read_ == records_) RETURN_IF_ERROR(FinishIfDone());
  return true;
}

absl::StatusOr<bool> FileReader::NextSet(uint64_t* key, std::vector<uint64_t>* values) {
  if (read_ >= records_) {
    RETURN_IF_ERROR(FinishIfDone());
    return false;
  }
  format::SetRecord h;
  RETURN_IF_ERROR(Fill(reinterpret_cast<char*>(&h), sizeof(h)));
  if (h.reserved != 0 || uint64_t{h.count} * 8 > body_left_) {
    return absl::DataLossError(absl::StrCat(
        path_, ": corrupt dedup intermediate file: set record of ", h.count, " values at record ",
        read_));
  }
  *key = h.key;
  values->resize(h.count);
  RETURN_IF_ERROR(Fill(reinterpret_cast<char*>(values->data()), 8 * size_t{h.count}));
  ++read_;
  if (read_ == records_) RETURN_IF_ERROR(FinishIfDone());
  return true;
}

void AppendSetRecord(std::string* out, uint64_t key, const std::vector<uint64_t>& values) {
  format::SetRecord h{key, static_cast<uint32_t>(values.size()), 0};
  out->append(reinterpret_cast<const char*>(&h), sizeof(h));
  out->append(reinterpret_cast<const char*>(values.data()), 8 * values.size());
}

std::string TaskFileName(const std::string& stem, int task, int tasks) {
  return TaskPartName(stem, task, tasks) + kTaskFileSuffix;
}

absl::StatusOr<std::vector<std::string>> FindTaskFiles(Env* env, const std::string& dir,
                                                       const std::string& stem,
                                                       const std::string& producing_stage) {
  std::vector<std::string> names;
  if (env->IsDirectory(dir)) {
    ASSIGN_OR_RETURN(names, env->ListDir(dir));
  }
  ASSIGN_OR_RETURN(TaskParts parts, FindTaskParts(names, stem, kTaskFileSuffix, dir));
  if (parts.tasks == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no ", stem, " files in ", dir, ": run the '", producing_stage, "' stage first"));
  }
  if (const int t = parts.FirstMissing(); t >= 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "incomplete ", producing_stage, " outputs in ", dir, ": task ", t, " of ", parts.tasks,
        " is missing (", TaskFileName(stem, t, parts.tasks), "); rerun '", producing_stage,
        "' with --task ", t, " --tasks ", parts.tasks));
  }
  std::vector<std::string> out;
  for (const auto& [task, name] : parts.names) out.push_back(JoinPath(dir, name));
  return out;
}

namespace {

// Moves the records of [data, data + n) into the buckets `key` gives them (0 <= key < buckets),
// in bucket order, in place (an American flag sort pass); `start` gets each bucket's beginning
// (buckets + 1 entries).
template <typename Key>
void PermuteIntoBuckets(format::BucketRecord* data, size_t n, size_t buckets, Key key,
                        std::vector<size_t>* start) {
  start->assign(buckets + 1, 0);
  for (size_t i = 0; i < n; ++i) ++(*start)[key(data[i]) + 1];
  for (size_t k = 0; k < buckets; ++k) (*start)[k + 1] += (*start)[k];
  std::vector<size_t> next(start->begin(), start->end() - 1);
  for (size_t k = 0; k < buckets; ++k) {
    const size_t end = (*start)[k + 1];
    while (next[k] < end) {
      const size_t d = key(data[next[k]]);
      if (d == k) {
        ++next[k];
      } else {
        std::swap(data[next[k]], data[next[d]++]);
      }
    }
  }
}

}  // namespace

void SortRecords(format::BucketRecord* data, size_t n) {
  constexpr size_t kSmall = 64;
  constexpr uint64_t kMaxTags = 4096;  // more distinct tags than a dedup writes: std::sort
  if (n < kSmall) {
    std::sort(data, data + n);
    return;
  }
  uint64_t max_tag = 0;
  for (size_t i = 0; i < n; ++i) max_tag = std::max(max_tag, data[i].tag);
  if (max_tag >= kMaxTags) {
    std::sort(data, data + n);
    return;
  }
  std::vector<size_t> tag_start, start;
  const size_t tags = static_cast<size_t>(max_tag) + 1;
  PermuteIntoBuckets(data, n, tags, [](const format::BucketRecord& r) {
    return static_cast<size_t>(r.tag);
  }, &tag_start);
  for (size_t t = 0; t < tags; ++t) {
    format::BucketRecord* const g = data + tag_start[t];
    const size_t len = tag_start[t + 1] - tag_start[t];
    if (len < kSmall) {
      std::sort(g, g + len);
      continue;
    }
    // Within a tag the order is (hi, lo, doc): the top bits of hi order the records, or those of
    // lo where every hi is the same (band records carry their hash in lo). About one record a
    // bucket; each bucket is then sorted on its own.
    bool same_hi = true;
    for (size_t i = 1; i < len && same_hi; ++i) same_hi = g[i].hi == g[0].hi;
    const int bits = std::min(20, 63 - __builtin_clzll(static_cast<unsigned long long>(len)));
    const int shift = 64 - bits;
    if (same_hi) {
      PermuteIntoBuckets(g, len, size_t{1} << bits, [shift](const format::BucketRecord& r) {
        return static_cast<size_t>(r.lo >> shift);
      }, &start);
    } else {
      PermuteIntoBuckets(g, len, size_t{1} << bits, [shift](const format::BucketRecord& r) {
        return static_cast<size_t>(r.hi >> shift);
      }, &start);
    }
    for (size_t k = 0; k + 1 < start.size(); ++k) {
      const size_t b = start[k], e = start[k + 1];
      if (e - b > 1) std::sort(g + b, g + e);
    }
  }
}

}  // namespace grist::dedup::internal
