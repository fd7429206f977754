#include "common/record_reader.h"

#include <simdjson.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/internal/byte_sources.h"
#include "common/internal/line_reader.h"
#include "common/internal/python_records.h"
#include "common/internal/stream_cutter.h"
#include "common/json_writer.h"
#include "common/status_macros.h"
#include "common/utf8.h"

namespace grist {

absl::StatusOr<bool> RecordReader::Skip(uint64_t* input_bytes) {
  ASSIGN_OR_RETURN(bool more, Next(&skip_doc_));
  if (more) *input_bytes = skip_doc_.input_bytes;
  return more;
}

absl::StatusOr<bool> RecordReader::NextLineOrDoc(Line* /*line*/, Document* doc, bool* as_line) {
  *as_line = false;
  return Next(doc);
}

namespace {

using internal::Buffer;
using internal::ByteSource;
using internal::IsBlank;
using internal::kMaxErrorText;
using internal::kReadChunk;
using internal::LineReader;
using internal::RangeFile;
using internal::RawSource;
using internal::TrimRight;

std::string TruncatedForError(std::string_view s) {
  return std::string(s.substr(0, std::min(s.size(), kMaxErrorText)));
}

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
    // The reads grow from 4 KiB: a line start is usually near, and what is read here is read
    // again by the line reader.
    Buffer buf(64 << 10);
    size_t want = 4 << 10;
    uint64_t pos = raw_->pos();
    while (true) {
      ASSIGN_OR_RETURN(size_t got, raw_->Read(buf.data(), want));
      want = std::min(buf.size, want * 2);
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
    std::string_view line;
    uint64_t raw_bytes = 0;
    bool oversized = false;
    ASSIGN_OR_RETURN(bool more, NextLine(&line, &raw_bytes, &oversized));
    if (more) Fill(doc, line, raw_bytes, oversized);
    return more;
  }

  absl::StatusOr<bool> Skip(uint64_t* input_bytes) override {
    std::string_view line;
    bool oversized = false;
    return NextLine(&line, input_bytes, &oversized);
  }

  absl::StatusOr<bool> NextLineOrDoc(Line* out, Document* doc, bool* as_line) override {
    std::string_view line;
    uint64_t raw_bytes = 0;
    bool oversized = false;
    ASSIGN_OR_RETURN(bool more, NextLine(&line, &raw_bytes, &oversized));
    if (!more) return false;
    size_t text_bytes = 0;
    *as_line = !oversized && AsWritten(line, &text_bytes);
    if (*as_line) {
      out->bytes = line;
      out->input_bytes = raw_bytes;
      out->text_bytes = text_bytes;
    } else {
      Fill(doc, line, raw_bytes, oversized);
    }
    return true;
  }

  uint64_t bytes_consumed() const override { return src_->consumed(); }

 private:
  // The next record's line (blank lines are not records), as the line reader gives it.
  absl::StatusOr<bool> NextLine(std::string_view* line, uint64_t* raw_bytes, bool* oversized) {
    if (empty_) return false;
    while (true) {
      if (raw_ != nullptr && split_.end != UINT64_MAX) {
        // Stop once the next line would start at or after the split's end.
        if (split_.begin + skipped_ + consumed_in_lines_ >= split_.end) return false;
      }
      *raw_bytes = 0;
      *oversized = false;
      auto more = lines_.Next(line, raw_bytes, oversized);
      if (!more.ok()) {
        return Annotate(more.status(), absl::StrCat("after line ", line_no_));
      }
      if (!*more) return false;
      consumed_in_lines_ += *raw_bytes;
      ++line_no_;
      if (!*oversized && IsBlank(*line)) continue;  // blank lines are not records
      return true;
    }
  }

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

  // Whether `line` is exactly the record line AppendRecord writes for the document Fill would make
  // of it, so that it can be used as it is: `{"text":` T `,"meta":` M `,"grist":{"src":` S
  // `,"line":` N `}}` with T and S strings as AppendJsonString writes them (S not empty), M an
  // object as it comes out of minify, N a number as to_chars writes it, all valid UTF-8, the text
  // field "text" (a record's other members, or any other shape, make Fill parse it). Sets
  // *text_bytes to the text's decoded size. The checks run cheapest first, so a line of another
  // shape costs little.
  bool AsWritten(std::string_view line, size_t* text_bytes) {
    static constexpr std::string_view kHead = "{\"text\":", kMeta = ",\"meta\":",
                                      kGrist = ",\"grist\":{\"src\":", kLine = ",\"line\":";
    if (opts_.text_field != "text" || line.size() < kHead.size() + 2 + kMeta.size() + 2 +
                                                       kGrist.size() + 3 + kLine.size() + 3) {
      return false;
    }
    if (line.substr(0, kHead.size()) != kHead || line.substr(line.size() - 2) != "}}") {
      return false;
    }
    // The provenance, read from the end: the line number, `,"line":`, and the source string,
    // which starts after the last `,"grist":{"src":` before it (inside a string those quotes
    // would be escaped; a "grist" member inside meta comes before the record's own). Each step
    // looks at a few bytes, so a line of another shape is turned down without a pass over it.
    const size_t digits_end = line.size() - 2;
    size_t digits = digits_end;
    while (digits > 0 && digits_end - digits <= 18 && line[digits - 1] >= '0' &&
           line[digits - 1] <= '9') {
      --digits;
    }
    if (digits == digits_end || digits_end - digits > 18) return false;
    if (line[digits] == '0' && digits_end - digits > 1) return false;
    if (digits < kLine.size() + 1 || line.substr(digits - kLine.size(), kLine.size()) != kLine) {
      return false;
    }
    const size_t src_end = digits - kLine.size();  // after the source's closing quote
    const size_t grist = line.rfind(kGrist, src_end - 1);
    if (grist == std::string_view::npos || grist < kHead.size()) return false;
    size_t scanned_end = 0, src_bytes = 0;
    if (!ScanJsonStringAsWritten(line, grist + kGrist.size(), &scanned_end, &src_bytes) ||
        scanned_end != src_end || src_bytes == 0) {
      return false;
    }
    if (!simdjson::validate_utf8(line.data(), line.size())) return false;
    size_t text_end = 0;
    if (!ScanJsonStringAsWritten(line, kHead.size(), &text_end, text_bytes)) return false;
    if (line.substr(text_end, kMeta.size()) != kMeta) return false;
    const size_t meta = text_end + kMeta.size();
    if (meta >= grist || line[meta] != '{') return false;
    const std::string_view m = line.substr(meta, grist - meta);
    if (m != "{}") {
      padded_.assign(m.data(), m.size());
      padded_.append(simdjson::SIMDJSON_PADDING, '\0');
      simdjson::dom::element root;
      if (parser_.parse(padded_.data(), m.size(), false).get(root) || !root.is_object()) {
        return false;
      }
      if (simdjson::minify(root) != m) return false;
    }
    return true;
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
    meta_.clear();
    meta_.push_back('{');
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
  // `lines_before`: lines of the file before the source's first byte (a stream split's).
  TextReader(std::unique_ptr<ByteSource> src, std::string path, InputOptions opts,
             uint64_t lines_before = 0)
      : src_(std::move(src)), path_(std::move(path)), opts_(std::move(opts)),
        lines_(src_.get(), 0), line_no_(lines_before) {}

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
  uint64_t line_no_;
  bool done_ = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<RecordReader>> OpenRecordReader(Env* env, const InputFile& file,
                                                               const InputSplit& split,
                                                               const InputOptions& options,
                                                               SplitDecoders* decoders) {
  if (options.txt_mode != "file" && options.txt_mode != "blocks") {
    return absl::InvalidArgumentError(
        absl::StrCat("txt_mode must be \"file\" or \"blocks\", got \"", options.txt_mode, "\""));
  }
  if (split.stream_stride > 0) {
    ASSIGN_OR_RETURN(std::unique_ptr<internal::StreamSplitSource> src,
                     internal::OpenStreamSplit(env, file, split, options, decoders));
    const uint64_t lines_before = src->lines_before();
    if (IsJsonFormat(file.format)) {
      InputSplit s = split;
      s.newlines_before = lines_before;
      auto r = std::make_unique<JsonlReader>(std::move(src), nullptr, file.path, s, options);
      RETURN_IF_ERROR(r->Init());
      return std::unique_ptr<RecordReader>(std::move(r));
    }
    return std::unique_ptr<RecordReader>(
        new TextReader(std::move(src), file.path, options, lines_before));
  }
  bool ranged = split.begin > 0 || split.end != UINT64_MAX;
  if (internal::IsPythonFormat(file.format)) {
    // One JSON object per row from the Python reader: line numbers are 1-based row numbers.
    if (ranged) return absl::InvalidArgumentError(absl::StrCat(file.path, ": this input cannot be split"));
    ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> rows,
                     internal::OpenPythonRecords(file, options.text_field));
    auto r = std::make_unique<JsonlReader>(std::move(rows), nullptr, file.path, split, options);
    RETURN_IF_ERROR(r->Init());
    return std::unique_ptr<RecordReader>(std::move(r));
  }
  std::unique_ptr<ByteSource> src;
  RawSource* raw = nullptr;
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
      src = internal::NewGzipSource(std::move(f));
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
      src = internal::NewZstdSource(std::move(f));
      break;
    }
    case InputFormat::kParquet:
    case InputFormat::kHfDataset:
      break;  // read above
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

absl::StatusOr<uint64_t> DecodeWholeFile(Env* env, const InputFile& file) {
  if (!IsCompressedFormat(file.format)) {
    return absl::InvalidArgumentError(absl::StrCat(file.path, ": not a compressed input"));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<SequentialFile> f, env->NewSequentialFile(file.path));
  const bool gzip =
      file.format == InputFormat::kJsonlGzip || file.format == InputFormat::kTextGzip;
  std::unique_ptr<ByteSource> src =
      gzip ? internal::NewGzipSource(std::move(f)) : internal::NewZstdSource(std::move(f));
  Buffer buf(kReadChunk);
  uint64_t total = 0;
  while (true) {
    ASSIGN_OR_RETURN(size_t got, src->Read(buf.data(), buf.size));
    if (got == 0) return total;
    total += got;
  }
}

}  // namespace grist
