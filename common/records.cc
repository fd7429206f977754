#include "common/records.h"

#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <simdjson.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/hash.h"
#include "common/json_writer.h"
#include "common/status_macros.h"
#include "common/thread_pool.h"

namespace grist {

namespace {
constexpr size_t kReadChunk = 1 << 20;

// A heap buffer that is not zero-filled (std::vector<char> would clear 1 MiB per file opened).
struct Buffer {
  explicit Buffer(size_t n) : ptr(new char[n]), size(n) {}
  char* data() { return ptr.get(); }
  std::unique_ptr<char[]> ptr;
  size_t size;
};
constexpr size_t kMaxErrorText = 64 << 10;

// The frame index of a part (docs/formats/documents.md): a zstd skippable frame at the end,
//   magic u32 | size u32 | entry* | count u32 | xxh3-64 u64 of (entries, count) | "GRISTIDX"
//   entry = compressed-bytes u64 | records u64          (all little-endian)
constexpr uint32_t kIndexFrameMagic = 0x184D2A5B;   // one of zstd's skippable-frame magics
constexpr char kIndexTag[8] = {'G', 'R', 'I', 'S', 'T', 'I', 'D', 'X'};
constexpr uint64_t kIndexEntryBytes = 16, kIndexTailBytes = 20;

void PutLe(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
uint64_t GetLe(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
bool IsJsonName(const std::string& name) {
  return EndsWith(name, ".jsonl") || EndsWith(name, ".json") || EndsWith(name, ".ndjson");
}
}  // namespace

std::string Document::id() const { return absl::StrCat(source, ":", line); }

InputFormat FormatOf(const std::string& path) {
  std::string name = BaseName(path);
  if (EndsWith(name, ".gz")) {
    return IsJsonName(name.substr(0, name.size() - 3)) ? InputFormat::kJsonlGzip
                                                       : InputFormat::kTextGzip;
  }
  if (EndsWith(name, ".zst")) {
    return IsJsonName(name.substr(0, name.size() - 4)) ? InputFormat::kJsonlZstd
                                                       : InputFormat::kTextZstd;
  }
  return IsJsonName(name) ? InputFormat::kJsonl : InputFormat::kText;
}

bool IsStageReportName(std::string_view name) {
  if (name == "dedup_report.json") return true;
  return name.size() > 18 && name.rfind("clean-report-", 0) == 0 && EndsWith(name, ".json");
}

namespace {
absl::Status Walk(Env* env, const std::string& dir, std::vector<InputFile>* out) {
  ASSIGN_OR_RETURN(std::vector<std::string> names, env->ListDir(dir));
  bool stage_output = false;
  for (const auto& n : names) stage_output = stage_output || IsStageReportName(n);
  if (stage_output) {
    // A grist stage's output folder: its kept document parts only, never rejects/, removed/, the
    // report or a part still being written (docs/formats/documents.md, "Stage output folders").
    for (const auto& n : names) {
      if (n.empty() || n[0] == '.' || !EndsWith(n, ".jsonl.zst")) continue;
      std::string p = JoinPath(dir, n);
      if (env->IsDirectory(p)) continue;
      ASSIGN_OR_RETURN(uint64_t size, env->GetFileSize(p));
      out->push_back({p, size, FormatOf(p)});
    }
    return absl::OkStatus();
  }
  for (const auto& n : names) {
    if (n.empty() || n[0] == '.') continue;
    std::string p = JoinPath(dir, n);
    if (env->IsDirectory(p)) {
      RETURN_IF_ERROR(Walk(env, p, out));
    } else {
      ASSIGN_OR_RETURN(uint64_t size, env->GetFileSize(p));
      out->push_back({p, size, FormatOf(p)});
    }
  }
  return absl::OkStatus();
}
}  // namespace

absl::StatusOr<std::vector<InputFile>> ListInputs(Env* env, const std::vector<std::string>& paths) {
  if (paths.empty()) return absl::InvalidArgumentError("no input paths given");
  std::vector<InputFile> out;
  for (const auto& p : paths) {
    if (env->IsDirectory(p)) {
      RETURN_IF_ERROR(Walk(env, p, &out));
    } else if (env->FileExists(p)) {
      ASSIGN_OR_RETURN(uint64_t size, env->GetFileSize(p));
      out.push_back({p, size, FormatOf(p)});
    } else {
      return absl::NotFoundError(absl::StrCat("input ", p, ": no such file or directory"));
    }
  }
  return out;
}

absl::StatusOr<std::optional<std::vector<ZstdFrame>>> ReadZstdFrameIndex(const RandomAccessFile& file) {
  const uint64_t size = file.Size();
  std::optional<std::vector<ZstdFrame>> none;
  if (size < 8 + kIndexTailBytes) return none;
  char tail[kIndexTailBytes];
  ASSIGN_OR_RETURN(size_t got, file.ReadAt(size - kIndexTailBytes, tail, kIndexTailBytes));
  if (got != kIndexTailBytes || std::memcmp(tail + 12, kIndexTag, 8) != 0) return none;
  const uint64_t count = GetLe(tail, 4);
  const uint64_t content = count * kIndexEntryBytes + kIndexTailBytes;
  if (count == 0 || content + 8 > size) return none;
  const uint64_t frame_start = size - 8 - content;
  std::string body(8 + content, '\0');
  ASSIGN_OR_RETURN(got, file.ReadAt(frame_start, body.data(), body.size()));
  if (got != body.size() || GetLe(body.data(), 4) != kIndexFrameMagic ||
      GetLe(body.data() + 4, 4) != content ||
      Hash64(body.data() + 8, count * kIndexEntryBytes + 4) != GetLe(body.data() + 8 + content - 16, 8)) {
    return none;
  }
  std::vector<ZstdFrame> frames(count);
  uint64_t offset = 0;
  for (uint64_t i = 0; i < count; ++i) {
    const char* e = body.data() + 8 + i * kIndexEntryBytes;
    frames[i] = {offset, GetLe(e, 8), GetLe(e + 8, 8)};
    if (frames[i].bytes == 0 || frames[i].bytes > frame_start - offset) return none;
    offset += frames[i].bytes;
  }
  if (offset != frame_start) return none;  // the frames must tile the file up to the index
  return std::optional<std::vector<ZstdFrame>>(std::move(frames));
}

absl::StatusOr<std::vector<InputSplit>> PlanSplits(Env* env, const std::vector<InputFile>& files,
                                                   uint64_t target_bytes, ThreadPool* pool) {
  if (target_bytes == 0) target_bytes = 64ull << 20;
  std::vector<InputSplit> splits;
  for (size_t i = 0; i < files.size(); ++i) {
    const InputFile& f = files[i];
    if (f.size <= target_bytes || (f.format != InputFormat::kJsonl && f.format != InputFormat::kJsonlZstd)) {
      splits.push_back({i, 0, UINT64_MAX, f.size, 0});
      continue;
    }
    if (f.format == InputFormat::kJsonlZstd) {
      // A part with a frame index splits at frame boundaries; records never cross frames, and the
      // index's record counts give each split its absolute line numbers.
      ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> rf, env->NewRandomAccessFile(f.path));
      ASSIGN_OR_RETURN(auto frames, ReadZstdFrameIndex(*rf));
      if (!frames) {
        splits.push_back({i, 0, UINT64_MAX, f.size, 0});
        continue;
      }
      uint64_t begin = 0, bytes = 0, lines = 0, lines_before = 0;
      for (size_t k = 0; k < frames->size(); ++k) {
        const ZstdFrame& fr = (*frames)[k];
        bytes += fr.bytes;
        lines += fr.records;
        if (bytes >= target_bytes || k + 1 == frames->size()) {
          const bool last = k + 1 == frames->size();
          splits.push_back({i, begin, last ? UINT64_MAX : fr.offset + fr.bytes, bytes, lines_before});
          begin = fr.offset + fr.bytes;
          lines_before += lines;
          bytes = lines = 0;
        }
      }
      continue;
    }
    for (uint64_t b = 0; b < f.size; b += target_bytes) {
      uint64_t e = std::min(f.size, b + target_bytes);
      splits.push_back({i, b, e == f.size ? UINT64_MAX : e, e - b, 0});
    }
  }
  // Count newlines inside each byte-range split of plain JSONL so each reader knows its absolute
  // line numbers.
  auto counted = [&](const InputSplit& s) {
    return files[s.file_index].format == InputFormat::kJsonl && (s.begin > 0 || s.end != UINT64_MAX);
  };
  std::vector<uint64_t> counts(splits.size(), 0);
  RETURN_IF_ERROR(ParallelFor(pool, splits.size(), [&](size_t k) -> absl::Status {
    const InputSplit& s = splits[k];
    if (!counted(s)) return absl::OkStatus();
    ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> f,
                     env->NewRandomAccessFile(files[s.file_index].path));
    Buffer buf(kReadChunk);
    uint64_t pos = s.begin, end = std::min<uint64_t>(s.end, f->Size());
    uint64_t n = 0;
    while (pos < end) {
      ASSIGN_OR_RETURN(size_t got, f->ReadAt(pos, buf.data(), std::min<uint64_t>(buf.size, end - pos)));
      if (got == 0) break;
      n += static_cast<uint64_t>(std::count(buf.data(), buf.data() + got, '\n'));
      pos += got;
    }
    counts[k] = n;
    return absl::OkStatus();
  }));
  for (size_t k = 1; k < splits.size(); ++k) {
    if (counted(splits[k]) && splits[k].file_index == splits[k - 1].file_index && splits[k].begin > 0) {
      splits[k].newlines_before = splits[k - 1].newlines_before + counts[k - 1];
    }
  }
  return splits;
}

uint64_t BalancedSplitBytes(const std::vector<InputFile>& files, uint64_t max_split_bytes, int tasks) {
  uint64_t total = 0;
  for (const InputFile& f : files) total += f.size;
  const uint64_t balanced = total / (static_cast<uint64_t>(std::max(1, tasks)) * kSplitsPerTask);
  return std::min(max_split_bytes, std::max(kMinBalancedSplitBytes, balanced));
}

std::vector<InputSplit> SelectTaskSplits(const std::vector<InputSplit>& splits, int task, int tasks) {
  if (tasks <= 1) return splits;
  unsigned __int128 total = 0;
  for (const auto& s : splits) total += s.bytes + 1;  // +1: empty files still count
  std::vector<InputSplit> out;
  unsigned __int128 cum = 0;
  for (const auto& s : splits) {
    // A split belongs to the task whose byte range holds its midpoint.
    unsigned __int128 mid = cum + (s.bytes + 1) / 2;
    int owner = static_cast<int>(mid * tasks / (total == 0 ? 1 : total));
    if (owner >= tasks) owner = tasks - 1;
    if (owner == task) out.push_back(s);
    cum += s.bytes + 1;
  }
  return out;
}

// ------------------------------------------------------------------------------------------------
// Byte sources: raw (a byte range of a file), gzip and zstd streams.

namespace {

// Reads bytes [begin, end) of a file sequentially (a split of an indexed zstd part).
class RangeFile : public SequentialFile {
 public:
  RangeFile(std::unique_ptr<RandomAccessFile> f, uint64_t begin, uint64_t end)
      : f_(std::move(f)), pos_(begin), end_(std::min<uint64_t>(end, f_->Size())) {}
  absl::StatusOr<size_t> Read(char* buf, size_t n) override {
    if (pos_ >= end_) return size_t{0};
    ASSIGN_OR_RETURN(size_t got, f_->ReadAt(pos_, buf, std::min<uint64_t>(n, end_ - pos_)));
    pos_ += got;
    return got;
  }
  const std::string& path() const override { return f_->path(); }

 private:
  std::unique_ptr<RandomAccessFile> f_;
  uint64_t pos_, end_;
};

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Reads up to n bytes; 0 at the end. A truncated or corrupt stream is an error.
  virtual absl::StatusOr<size_t> Read(char* buf, size_t n) = 0;
  virtual uint64_t consumed() const = 0;
};

class RawSource : public ByteSource {
 public:
  RawSource(std::unique_ptr<RandomAccessFile> f, uint64_t begin, uint64_t end)
      : f_(std::move(f)), pos_(begin), end_(std::min<uint64_t>(end, f_->Size())), begin_(begin) {}
  absl::StatusOr<size_t> Read(char* buf, size_t n) override {
    if (pos_ >= end_) return size_t{0};
    ASSIGN_OR_RETURN(size_t got, f_->ReadAt(pos_, buf, std::min<uint64_t>(n, end_ - pos_)));
    pos_ += got;
    return got;
  }
  uint64_t consumed() const override { return pos_ - begin_; }
  // Extends the readable range to the end of the file (a split's last line may cross its end).
  void ExtendToEof() { end_ = f_->Size(); }
  uint64_t pos() const { return pos_; }
  // Continues reading at `p` (only before the first Read of a LineReader over this source).
  void Seek(uint64_t p) { pos_ = p; }

 private:
  std::unique_ptr<RandomAccessFile> f_;
  uint64_t pos_, end_, begin_;
};

// A decompressing source: reads the compressed file in chunks and decodes into the caller's buffer.
// A damaged stream hands back what was decoded before the damage first; the error comes with the
// next Read, so every line before the damage still reaches the caller.
class DecodingSource : public ByteSource {
 public:
  DecodingSource(std::unique_ptr<SequentialFile> f, size_t chunk) : f_(std::move(f)), in_(chunk) {}
  absl::StatusOr<size_t> Read(char* buf, size_t n) final {
    if (!pending_.ok()) return pending_;
    if (done_) return size_t{0};
    size_t produced = 0;
    absl::Status s = Decode(buf, n, &produced);
    if (s.ok()) return produced;
    if (produced == 0) return s;
    pending_ = std::move(s);
    return produced;
  }
  uint64_t consumed() const final { return consumed_; }

 protected:
  // Decodes up to n bytes into buf, setting *produced; sets done_ at the clean end of the input.
  virtual absl::Status Decode(char* buf, size_t n, size_t* produced) = 0;
  // The next chunk of compressed input (0 bytes at the end of the file).
  absl::StatusOr<size_t> Refill() {
    ASSIGN_OR_RETURN(size_t got, f_->Read(in_.data(), in_.size));
    consumed_ += got;
    return got;
  }
  absl::Status Corrupt(const std::string& what) const {
    return absl::DataLossError(absl::StrCat(f_->path(), ": ", what));
  }
  std::unique_ptr<SequentialFile> f_;
  Buffer in_;
  bool done_ = false;

 private:
  absl::Status pending_;
  uint64_t consumed_ = 0;
};

class GzipSource : public DecodingSource {
 public:
  GzipSource(std::unique_ptr<SequentialFile> f) : DecodingSource(std::move(f), kReadChunk) {
    std::memset(&z_, 0, sizeof(z_));
    init_ok_ = inflateInit2(&z_, 15 + 32) == Z_OK;  // gzip or zlib header, auto-detected
  }
  ~GzipSource() override { inflateEnd(&z_); }

 private:
  absl::Status Decode(char* buf, size_t n, size_t* produced) override {
    if (!init_ok_) return absl::InternalError(absl::StrCat(f_->path(), ": zlib init failed"));
    z_.next_out = reinterpret_cast<Bytef*>(buf);
    z_.avail_out = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    const size_t want = z_.avail_out;
    absl::Status s;
    while (z_.avail_out > 0) {
      if (z_.avail_in == 0) {
        ASSIGN_OR_RETURN(size_t got, Refill());
        if (got == 0) {
          if (in_stream_) s = Corrupt("truncated gzip stream");
          else done_ = true;
          break;
        }
        z_.next_in = reinterpret_cast<Bytef*>(in_.data());
        z_.avail_in = static_cast<uInt>(got);
      }
      in_stream_ = true;
      int r = inflate(&z_, Z_NO_FLUSH);
      if (r == Z_STREAM_END) {
        in_stream_ = false;
        inflateReset(&z_);  // concatenated members continue
      } else if (r == Z_NEED_DICT || r == Z_DATA_ERROR || r == Z_MEM_ERROR) {
        s = Corrupt(absl::StrCat("corrupt gzip data (", z_.msg ? z_.msg : "inflate error", ")"));
        break;
      } else if (r == Z_BUF_ERROR && z_.avail_in != 0) {
        s = Corrupt("corrupt gzip data");
        break;
      }
    }
    *produced = want - z_.avail_out;
    return s;
  }
  z_stream z_;
  bool init_ok_ = false, in_stream_ = false;
};

class ZstdSource : public DecodingSource {
 public:
  ZstdSource(std::unique_ptr<SequentialFile> f)
      : DecodingSource(std::move(f), ZSTD_DStreamInSize()), dctx_(ZSTD_createDCtx()) {}
  ~ZstdSource() override { ZSTD_freeDCtx(dctx_); }

 private:
  absl::Status Decode(char* buf, size_t n, size_t* produced) override {
    ZSTD_outBuffer out{buf, n, 0};
    absl::Status s;
    while (out.pos < out.size) {
      if (input_.pos == input_.size) {
        ASSIGN_OR_RETURN(size_t got, Refill());
        if (got == 0) {
          if (frame_open_) s = Corrupt("truncated zstd stream");
          else done_ = true;
          break;
        }
        input_ = ZSTD_inBuffer{in_.data(), got, 0};
      }
      size_t r = ZSTD_decompressStream(dctx_, &out, &input_);
      if (ZSTD_isError(r)) {
        s = Corrupt(absl::StrCat("corrupt zstd data (", ZSTD_getErrorName(r), ")"));
        break;
      }
      frame_open_ = r != 0;
    }
    *produced = out.pos;
    return s;
  }
  ZSTD_DCtx* dctx_;
  ZSTD_inBuffer input_{nullptr, 0, 0};
  bool frame_open_ = false;
};

// Splits a byte source into lines ('\n'-terminated; a final line without '\n' counts). Lines longer
// than `max_bytes` are reported as oversized: their first kMaxErrorText bytes are kept, the rest
// skipped.
class LineReader {
 public:
  LineReader(ByteSource* src, uint64_t max_bytes) : src_(src), max_(max_bytes ? max_bytes : UINT64_MAX) {}
  // Returns false at the end. *line points into an internal buffer valid until the next call.
  absl::StatusOr<bool> Next(std::string_view* line, uint64_t* raw_bytes, bool* oversized) {
    *oversized = false;
    *raw_bytes = 0;
    line_.clear();
    bool dropping = false;
    while (true) {
      if (pos_ == len_) {
        if (eof_) break;
        ASSIGN_OR_RETURN(size_t got, src_->Read(buf_.data(), buf_.size));
        pos_ = 0;
        len_ = got;
        if (got == 0) {
          eof_ = true;
          break;
        }
      }
      const char* start = buf_.data() + pos_;
      const char* nl = static_cast<const char*>(std::memchr(start, '\n', len_ - pos_));
      size_t take = nl ? static_cast<size_t>(nl - start) : len_ - pos_;
      *raw_bytes += take + (nl ? 1 : 0);
      if (!dropping) {
        if (line_.size() + take > max_) {
          dropping = true;
          *oversized = true;
          size_t keep = line_.size() < kMaxErrorText ? kMaxErrorText - line_.size() : 0;
          line_.append(start, std::min(keep, take));
        } else {
          line_.append(start, take);
        }
      }
      pos_ += take + (nl ? 1 : 0);
      if (nl) {
        *line = line_;
        return true;
      }
    }
    if (*raw_bytes == 0) return false;
    *line = line_;
    return true;
  }

 private:
  ByteSource* src_;
  uint64_t max_;
  Buffer buf_{kReadChunk};
  size_t pos_ = 0, len_ = 0;
  bool eof_ = false;
  std::string line_;
};

// Replaces invalid UTF-8 sequences with U+FFFD; returns how many were replaced.
uint32_t RepairUtf8(std::string_view in, std::string* out) {
  out->clear();
  out->reserve(in.size() + 16);
  uint32_t bad = 0;
  const auto* p = reinterpret_cast<const unsigned char*>(in.data());
  size_t n = in.size();
  for (size_t i = 0; i < n;) {
    unsigned char c = p[i];
    if (c < 0x80) {
      out->push_back(static_cast<char>(c));
      ++i;
      continue;
    }
    int len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    bool ok = len > 0 && i + len <= n;
    uint32_t cp = len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
    for (int k = 1; ok && k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) ok = false;
      else cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if (ok && ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
               cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))) {
      ok = false;
    }
    if (ok) {
      out->append(in.data() + i, len);
      i += len;
    } else {
      out->append("\xEF\xBF\xBD");
      ++bad;
      ++i;
    }
  }
  return bad;
}

std::string TruncatedForError(std::string_view s) {
  return std::string(s.substr(0, std::min(s.size(), kMaxErrorText)));
}

std::string_view TrimRight(std::string_view s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n')) {
    s.remove_suffix(1);
  }
  return s;
}

bool IsBlank(std::string_view s) {
  for (char c : s) {
    if (c != ' ' && c != '\t' && c != '\r' && c != '\f' && c != '\v') return false;
  }
  return true;
}

// ------------------------------------------------------------------------------------------------

class JsonlReader : public RecordReader {
 public:
  JsonlReader(std::unique_ptr<ByteSource> src, RawSource* raw, std::string path,
              const InputSplit& split, InputOptions opts)
      : src_(std::move(src)), raw_(raw), path_(std::move(path)), opts_(std::move(opts)),
        lines_(src_.get(), opts_.max_record_bytes), split_(split) {
    line_no_ = split.newlines_before;  // the number of the line before the first one read
  }

  absl::Status Init() {
    if (raw_ == nullptr) return absl::OkStatus();
    // Lines are read whole even when they cross the split's end; Next() stops at the first line
    // that starts at or after `end`.
    if (split_.begin == 0) {
      raw_->ExtendToEof();
      return absl::OkStatus();
    }
    // A byte-range split starts at the first line beginning at or after `begin`. The source is
    // positioned at begin - 1: find the first newline there, looking no further than the split's
    // end (a split inside one long line holds no line start; scanning on to the line's end would
    // make a long line cost every split it spans). If that newline lies at or after `begin`, it is
    // one more line before ours than newlines_before counts.
    Buffer buf(64 << 10);
    uint64_t pos = raw_->pos();
    while (true) {
      ASSIGN_OR_RETURN(size_t got, raw_->Read(buf.data(), buf.size));
      if (got == 0) {  // no line starts in this split
        empty_ = true;
        return absl::OkStatus();
      }
      const char* nl = static_cast<const char*>(std::memchr(buf.data(), '\n', got));
      if (nl != nullptr) {
        pos += static_cast<uint64_t>(nl - buf.data());
        break;
      }
      pos += got;
    }
    if (pos >= split_.begin) ++line_no_;
    skipped_ = pos + 1 - split_.begin;
    raw_->Seek(pos + 1);
    raw_->ExtendToEof();
    return absl::OkStatus();
  }

  absl::StatusOr<bool> Next(Document* doc) override {
    if (empty_) return false;
    while (true) {
      if (raw_ != nullptr && split_.end != UINT64_MAX) {
        // Stop once the next line would start at or after the split's end.
        if (split_.begin + skipped_ + consumed_in_lines_ >= split_.end) return false;
      }
      std::string_view line;
      uint64_t raw_bytes = 0;
      bool oversized = false;
      auto more = lines_.Next(&line, &raw_bytes, &oversized);
      if (!more.ok()) {
        return Annotate(more.status(), absl::StrCat("after line ", line_no_));
      }
      if (!*more) return false;
      consumed_in_lines_ += raw_bytes;
      ++line_no_;
      if (!oversized && IsBlank(line)) continue;  // blank lines are not records
      Fill(doc, line, raw_bytes, oversized);
      return true;
    }
  }

  uint64_t bytes_consumed() const override { return src_->consumed(); }

 private:
  void Fill(Document* doc, std::string_view line, uint64_t raw_bytes, bool oversized) {
    doc->text.clear();
    doc->metadata = "{}";
    doc->source = path_;
    doc->line = line_no_;
    doc->error.clear();
    doc->input_bytes = raw_bytes;
    doc->invalid_utf8 = 0;
    if (oversized) {
      doc->error = absl::StrCat(path_, ":", line_no_, ": record longer than ",
                                opts_.max_record_bytes, " bytes");
      doc->text = std::string(line);
      return;
    }
    line = TrimRight(line);
    std::string_view json = line;
    // simdjson validates UTF-8; repair first when needed so that the record can still be read.
    if (!simdjson::validate_utf8(line.data(), line.size())) {
      doc->invalid_utf8 = RepairUtf8(line, &repaired_);
      json = repaired_;
    }
    padded_.assign(json.data(), json.size());
    padded_.append(simdjson::SIMDJSON_PADDING, '\0');
    absl::Status s = Parse(padded_.data(), json.size(), doc);
    if (!s.ok()) {
      doc->error = absl::StrCat(path_, ":", line_no_, ": ", s.message());
      doc->text = TruncatedForError(line);
      doc->metadata = "{}";
    }
  }

  // The DOM API: it validates the whole line and dispatches to the best SIMD kernel at run time
  // (the On Demand API would pick its kernel at compile time).
  absl::Status Parse(const char* data, size_t len, Document* doc) {
    using namespace simdjson;
    dom::element root;
    auto err = parser_.parse(data, len, false).get(root);
    if (err) return absl::InvalidArgumentError(absl::StrCat("malformed JSON: ", error_message(err)));
    dom::object obj;
    if (root.get_object().get(obj)) {
      return absl::InvalidArgumentError("malformed JSON: the line is not a JSON object");
    }
    meta_.assign("{");
    bool first_meta = true, have_text = false, grist_record = false;
    const std::string& text_field = opts_.text_field;
    std::string prov_src;
    int64_t prov_line = -1;
    std::string nested_meta;
    for (dom::key_value_pair kv : obj) {
      std::string_view k = kv.key;
      if (k == "grist" && kv.value.is_object()) {
        grist_record = true;
        dom::object po = kv.value.get_object().value_unsafe();
        std::string_view sv;
        if (!po["src"].get_string().get(sv)) prov_src = std::string(sv);
        int64_t ln;
        if (!po["line"].get_int64().get(ln)) prov_line = ln;
        continue;
      }
      if (k == text_field) {
        std::string_view sv;
        if (kv.value.get_string().get(sv)) {
          return absl::InvalidArgumentError(
              absl::StrCat("text field '", text_field, "' is not a string"));
        }
        doc->text.assign(sv.data(), sv.size());
        have_text = true;
        continue;
      }
      std::string raw = simdjson::minify(kv.value);
      if (k == "meta") nested_meta = raw;
      if (!first_meta) meta_.push_back(',');
      first_meta = false;
      AppendJsonString(&meta_, k);
      meta_.push_back(':');
      meta_.append(raw);
    }
    if (!have_text) {
      return absl::InvalidArgumentError(absl::StrCat("missing text field '", text_field, "'"));
    }
    meta_.push_back('}');
    if (grist_record) {
      doc->metadata = nested_meta.empty() ? "{}" : nested_meta;
      if (!prov_src.empty()) doc->source = prov_src;
      if (prov_line >= 0) doc->line = static_cast<uint64_t>(prov_line);
    } else {
      doc->metadata = meta_;
    }
    return absl::OkStatus();
  }

  std::unique_ptr<ByteSource> src_;
  RawSource* raw_;  // == src_ for uncompressed files, else null
  std::string path_;
  InputOptions opts_;
  LineReader lines_;
  InputSplit split_;
  uint64_t line_no_ = 0;
  uint64_t skipped_ = 0;
  uint64_t consumed_in_lines_ = 0;
  bool empty_ = false;  // the split holds no line start
  simdjson::dom::parser parser_;
  std::string padded_, repaired_, meta_;
};

class TextReader : public RecordReader {
 public:
  TextReader(std::unique_ptr<ByteSource> src, std::string path, InputOptions opts)
      : src_(std::move(src)), path_(std::move(path)), opts_(std::move(opts)),
        lines_(src_.get(), 0) {}

  absl::StatusOr<bool> Next(Document* doc) override {
    if (opts_.txt_mode == "blocks") return NextBlock(doc);
    if (done_) return false;
    done_ = true;
    std::string text;
    Buffer buf(kReadChunk);
    uint64_t total = 0;
    bool oversized = false;
    while (true) {
      ASSIGN_OR_RETURN(size_t got, src_->Read(buf.data(), buf.size));
      if (got == 0) break;
      total += got;
      uint64_t limit = opts_.max_record_bytes ? opts_.max_record_bytes : UINT64_MAX;
      if (text.size() + got > limit) {
        oversized = true;
        if (text.size() < kMaxErrorText) text.append(buf.data(), std::min(got, kMaxErrorText - text.size()));
      } else {
        text.append(buf.data(), got);
      }
    }
    Reset(doc, 1, total);
    if (total == 0) {
      doc->error = absl::StrCat(path_, ":1: empty file");
    } else if (oversized) {
      doc->error = absl::StrCat(path_, ":1: document longer than ", opts_.max_record_bytes, " bytes");
    }
    doc->text = std::move(text);
    return true;
  }

  uint64_t bytes_consumed() const override { return src_->consumed(); }

 private:
  void Reset(Document* doc, uint64_t line, uint64_t bytes) {
    doc->text.clear();
    doc->metadata = "{}";
    doc->source = path_;
    doc->line = line;
    doc->error.clear();
    doc->input_bytes = bytes;
    doc->invalid_utf8 = 0;
  }

  absl::StatusOr<bool> NextBlock(Document* doc) {
    std::string block;
    uint64_t start_line = 0, bytes = 0;
    bool oversized = false;
    uint64_t limit = opts_.max_record_bytes ? opts_.max_record_bytes : UINT64_MAX;
    while (true) {
      std::string_view line;
      uint64_t raw_bytes;
      bool over;
      ASSIGN_OR_RETURN(bool more, lines_.Next(&line, &raw_bytes, &over));
      if (!more) break;
      ++line_no_;
      if (IsBlank(line)) {
        if (start_line == 0) continue;
        bytes += raw_bytes;
        break;
      }
      if (start_line == 0) start_line = line_no_;
      bytes += raw_bytes;
      if (block.size() + line.size() + 1 > limit) {
        oversized = true;
        if (block.size() < kMaxErrorText) block.append(line.substr(0, kMaxErrorText - block.size()));
        continue;
      }
      if (!block.empty()) block.push_back('\n');
      block.append(line.data(), line.size());
    }
    if (start_line == 0) return false;
    Reset(doc, start_line, bytes);
    if (oversized) {
      doc->error = absl::StrCat(path_, ":", start_line, ": document longer than ",
                                opts_.max_record_bytes, " bytes");
    }
    doc->text = std::move(block);
    return true;
  }

  std::unique_ptr<ByteSource> src_;
  std::string path_;
  InputOptions opts_;
  LineReader lines_;
  uint64_t line_no_ = 0;
  bool done_ = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<RecordReader>> OpenRecordReader(Env* env, const InputFile& file,
                                                               const InputSplit& split,
                                                               const InputOptions& options) {
  if (options.txt_mode != "file" && options.txt_mode != "blocks") {
    return absl::InvalidArgumentError(
        absl::StrCat("txt_mode must be \"file\" or \"blocks\", got \"", options.txt_mode, "\""));
  }
  std::unique_ptr<ByteSource> src;
  RawSource* raw = nullptr;
  bool ranged = split.begin > 0 || split.end != UINT64_MAX;
  switch (file.format) {
    case InputFormat::kJsonl:
    case InputFormat::kText: {
      ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> f, env->NewRandomAccessFile(file.path));
      uint64_t begin = split.begin > 0 ? split.begin - 1 : 0;
      auto r = std::make_unique<RawSource>(std::move(f), begin, split.end);
      raw = r.get();
      src = std::move(r);
      break;
    }
    case InputFormat::kJsonlGzip:
    case InputFormat::kTextGzip: {
      if (ranged) return absl::InvalidArgumentError(absl::StrCat(file.path, ": compressed files cannot be split"));
      ASSIGN_OR_RETURN(std::unique_ptr<SequentialFile> f, env->NewSequentialFile(file.path));
      src = std::make_unique<GzipSource>(std::move(f));
      break;
    }
    case InputFormat::kJsonlZstd:
    case InputFormat::kTextZstd: {
      std::unique_ptr<SequentialFile> f;
      if (ranged) {
        // A split of an indexed part (PlanSplits): whole frames, so whole records.
        if (file.format != InputFormat::kJsonlZstd || split.end <= split.begin) {
          return absl::InvalidArgumentError(absl::StrCat(file.path, ": this file cannot be split"));
        }
        ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> rf, env->NewRandomAccessFile(file.path));
        f = std::make_unique<RangeFile>(std::move(rf), split.begin, split.end);
      } else {
        ASSIGN_OR_RETURN(f, env->NewSequentialFile(file.path));
      }
      src = std::make_unique<ZstdSource>(std::move(f));
      break;
    }
  }
  bool jsonl = file.format == InputFormat::kJsonl || file.format == InputFormat::kJsonlGzip ||
               file.format == InputFormat::kJsonlZstd;
  if (jsonl) {
    auto r = std::make_unique<JsonlReader>(std::move(src), ranged ? raw : nullptr, file.path, split,
                                           options);
    RETURN_IF_ERROR(r->Init());
    return std::unique_ptr<RecordReader>(std::move(r));
  }
  if (ranged) return absl::InvalidArgumentError(absl::StrCat(file.path, ": text files cannot be split"));
  return std::unique_ptr<RecordReader>(new TextReader(std::move(src), file.path, options));
}

// ------------------------------------------------------------------------------------------------
// Writer

std::string SerializeRecord(const Document& doc, std::string_view extra_json) {
  std::string out;
  out.reserve(doc.text.size() + doc.metadata.size() + doc.source.size() + 64 + extra_json.size());
  out.append("{\"text\":");
  AppendJsonString(&out, doc.text);
  out.append(",\"meta\":");
  out.append(doc.metadata.empty() ? std::string_view("{}") : std::string_view(doc.metadata));
  out.append(",\"grist\":{\"src\":");
  AppendJsonString(&out, doc.source);
  out.append(",\"line\":");
  out.append(std::to_string(doc.line));
  out.push_back('}');
  if (!extra_json.empty()) {
    out.push_back(',');
    out.append(extra_json);
  }
  out.push_back('}');
  return out;
}

namespace {

class ZstdRecordWriter : public RecordWriter {
 public:
  ZstdRecordWriter(Env* env, std::string dir, std::string prefix, OutputOptions o)
      : env_(env), dir_(std::move(dir)), prefix_(std::move(prefix)), opts_(o),
        cctx_(ZSTD_createCCtx()), out_buf_(ZSTD_CStreamOutSize()) {}
  ~ZstdRecordWriter() override {
    if (file_) {
      (void)file_->Close();
      (void)env_->RemoveFile(tmp_path_);
    }
    ZSTD_freeCCtx(cctx_);
  }

  absl::Status Append(const Document& doc, std::string_view extra_json) override {
    return AppendSerialized(SerializeRecord(doc, extra_json));
  }

  absl::Status AppendSerialized(std::string_view record) override {
    if (finished_) return absl::FailedPreconditionError("RecordWriter: Append after Finish");
    if (!file_) RETURN_IF_ERROR(StartPart());
    RETURN_IF_ERROR(Compress(record, ZSTD_e_continue));
    RETURN_IF_ERROR(Compress("\n", ZSTD_e_continue));
    const uint64_t size = record.size() + 1;
    part_raw_ += size;
    frame_raw_ += size;
    ++part_records_;
    ++frame_records_;
    ++records_;
    if (part_raw_ >= opts_.part_bytes) return EndPart();
    if (frame_raw_ >= opts_.frame_bytes) return EndFrame();
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<PartInfo>> Finish() override {
    if (finished_) return parts_;
    finished_ = true;
    if (file_) RETURN_IF_ERROR(EndPart());
    if (!parts_.empty()) RETURN_IF_ERROR(env_->SyncDir(dir_));
    return parts_;
  }

  uint64_t records() const override { return records_; }

 private:
  absl::Status StartPart() {
    char num[16];
    std::snprintf(num, sizeof(num), "%05zu", parts_.size());
    final_path_ = JoinPath(dir_, absl::StrCat(prefix_, "-", num, ".jsonl.zst"));
    tmp_path_ = final_path_ + ".tmp";
    ASSIGN_OR_RETURN(file_, env_->NewWritableFile(tmp_path_));
    ZSTD_CCtx_reset(cctx_, ZSTD_reset_session_and_parameters);
    ZSTD_CCtx_setParameter(cctx_, ZSTD_c_compressionLevel, opts_.zstd_level);
    ZSTD_CCtx_setParameter(cctx_, ZSTD_c_checksumFlag, 1);
    part_raw_ = part_records_ = part_compressed_ = 0;
    frame_raw_ = frame_records_ = frame_start_ = 0;
    index_.clear();
    return absl::OkStatus();
  }

  // Ends the current zstd frame (the next record starts a new, independent one) and notes it in the
  // part's frame index.
  absl::Status EndFrame() {
    RETURN_IF_ERROR(Compress({}, ZSTD_e_end));
    PutLe(&index_, part_compressed_ - frame_start_, 8);
    PutLe(&index_, frame_records_, 8);
    frame_start_ = part_compressed_;
    frame_raw_ = frame_records_ = 0;
    return absl::OkStatus();
  }

  // The frame index as a skippable frame (zstd readers skip it).
  std::string IndexFrame() const {
    const uint64_t count = index_.size() / kIndexEntryBytes;
    std::string content = index_;
    PutLe(&content, count, 4);
    const uint64_t h = Hash64(content.data(), content.size());
    PutLe(&content, h, 8);
    content.append(kIndexTag, 8);
    std::string frame;
    PutLe(&frame, kIndexFrameMagic, 4);
    PutLe(&frame, content.size(), 4);
    return frame + content;
  }

  absl::Status Compress(std::string_view data, ZSTD_EndDirective mode) {
    ZSTD_inBuffer in{data.data(), data.size(), 0};
    while (true) {
      ZSTD_outBuffer out{out_buf_.data(), out_buf_.size(), 0};
      size_t r = ZSTD_compressStream2(cctx_, &out, &in, mode);
      if (ZSTD_isError(r)) {
        return absl::InternalError(absl::StrCat(tmp_path_, ": zstd: ", ZSTD_getErrorName(r)));
      }
      if (out.pos) RETURN_IF_ERROR(file_->Append(std::string_view(out_buf_.data(), out.pos)));
      part_compressed_ += out.pos;
      bool done = mode == ZSTD_e_end ? r == 0 : in.pos == in.size;
      if (done) return absl::OkStatus();
    }
  }

  absl::Status EndPart() {
    if (frame_records_ > 0) RETURN_IF_ERROR(EndFrame());
    RETURN_IF_ERROR(file_->Append(IndexFrame()));
    RETURN_IF_ERROR(file_->Sync());
    RETURN_IF_ERROR(file_->Close());
    uint64_t size = file_->Size();
    file_.reset();
    RETURN_IF_ERROR(env_->RenameFile(tmp_path_, final_path_));
    parts_.push_back({final_path_, part_records_, size});
    return absl::OkStatus();
  }

  Env* env_;
  std::string dir_, prefix_;
  OutputOptions opts_;
  ZSTD_CCtx* cctx_;
  std::vector<char> out_buf_;
  std::unique_ptr<WritableFile> file_;
  std::string tmp_path_, final_path_;
  std::vector<PartInfo> parts_;
  uint64_t part_raw_ = 0, part_records_ = 0, part_compressed_ = 0, records_ = 0;
  uint64_t frame_raw_ = 0, frame_records_ = 0, frame_start_ = 0;
  std::string index_;  // the frame index entries of the current part
  bool finished_ = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<RecordWriter>> RecordWriter::Open(Env* env, std::string dir,
                                                                 std::string prefix,
                                                                 OutputOptions options) {
  if (prefix.empty() || prefix.find('/') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("bad record part prefix '", prefix, "'"));
  }
  RETURN_IF_ERROR(env->CreateDirs(dir));
  return std::unique_ptr<RecordWriter>(
      new ZstdRecordWriter(env, std::move(dir), std::move(prefix), options));
}

}  // namespace grist
