#include "common/record_writer.h"

#include <zstd.h>

#include <charconv>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "common/documents_format.h"
#include "common/env.h"
#include "common/internal/le.h"
#include "common/json_writer.h"
#include "common/status_macros.h"

namespace grist {

void AppendRecord(std::string* out, const Document& doc, std::string_view extra_json) {
  out->reserve(out->size() + doc.text.size() + doc.metadata.size() + doc.source.size() + 64 +
               extra_json.size());
  out->append("{\"text\":");
  AppendJsonString(out, doc.text);
  out->append(",\"meta\":");
  out->append(doc.metadata.empty() ? std::string_view("{}") : std::string_view(doc.metadata));
  out->append(",\"grist\":{\"src\":");
  AppendJsonString(out, doc.source);
  out->append(",\"line\":");
  char digits[24];
  const auto r = std::to_chars(digits, digits + sizeof(digits), doc.line);
  out->append(digits, r.ptr);
  out->push_back('}');
  if (!extra_json.empty()) {
    out->push_back(',');
    out->append(extra_json);
  }
  out->push_back('}');
}

std::string SerializeRecord(const Document& doc, std::string_view extra_json) {
  std::string out;
  AppendRecord(&out, doc, extra_json);
  return out;
}

void RecordBatch::Add(const Document& doc, std::string_view extra_json) {
  AppendRecord(&bytes_, doc, extra_json);
  bytes_.push_back('\n');
  ends_.push_back(bytes_.size());
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

  // Serialized into a buffer kept from record to record (no allocation per record once grown; one
  // grown past 16 MB by a huge document is given back), compressed with its newline in one call.
  absl::Status Append(const Document& doc, std::string_view extra_json) override {
    line_.clear();
    AppendRecord(&line_, doc, extra_json);
    line_.push_back('\n');
    absl::Status s = AppendLine(line_);
    if (line_.capacity() > (size_t{16} << 20)) std::string().swap(line_);
    return s;
  }

  absl::Status AppendSerialized(std::string_view record) override {
    if (finished_) return absl::FailedPreconditionError("RecordWriter: Append after Finish");
    if (!file_) RETURN_IF_ERROR(StartPart());
    RETURN_IF_ERROR(Compress(record, ZSTD_e_continue));
    RETURN_IF_ERROR(Compress("\n", ZSTD_e_continue));
    return Appended(record.size() + 1);
  }

  absl::Status AppendBatch(const RecordBatch& batch) override {
    if (finished_) return absl::FailedPreconditionError("RecordWriter: Append after Finish");
    const std::string_view all = batch.bytes();
    const std::vector<uint64_t>& ends = batch.ends();
    size_t k = 0;
    uint64_t start = 0;  // the first byte not yet compressed
    while (k < ends.size()) {
      if (!file_) RETURN_IF_ERROR(StartPart());
      // The records up to the one that ends the frame or the part (as AppendSerialized decides).
      size_t j = k;
      uint64_t end = start;
      bool end_part = false, end_frame = false;
      while (j < ends.size()) {
        const uint64_t size = ends[j] - end;
        end = ends[j++];
        part_raw_ += size;
        frame_raw_ += size;
        if (part_raw_ >= opts_.part_bytes) {
          end_part = true;
          break;
        }
        if (frame_raw_ >= opts_.frame_bytes) {
          end_frame = true;
          break;
        }
      }
      RETURN_IF_ERROR(Compress(all.substr(start, end - start), ZSTD_e_continue));
      part_records_ += j - k;
      frame_records_ += j - k;
      records_ += j - k;
      k = j;
      start = end;
      if (end_part) {
        RETURN_IF_ERROR(EndPart());
      } else if (end_frame) {
        RETURN_IF_ERROR(EndFrame());
      }
    }
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
  // One record line, its newline included.
  absl::Status AppendLine(std::string_view line) {
    if (finished_) return absl::FailedPreconditionError("RecordWriter: Append after Finish");
    if (!file_) RETURN_IF_ERROR(StartPart());
    RETURN_IF_ERROR(Compress(line, ZSTD_e_continue));
    return Appended(line.size());
  }

  // Counts one record of `size` bytes (newline included) just compressed; ends the part or the
  // frame when it is full.
  absl::Status Appended(uint64_t size) {
    part_raw_ += size;
    frame_raw_ += size;
    ++part_records_;
    ++frame_records_;
    ++records_;
    if (part_raw_ >= opts_.part_bytes) return EndPart();
    if (frame_raw_ >= opts_.frame_bytes) return EndFrame();
    return absl::OkStatus();
  }

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
    internal::PutLe(&index_, part_compressed_ - frame_start_, 8);
    internal::PutLe(&index_, frame_records_, 8);
    frame_start_ = part_compressed_;
    frame_raw_ = frame_records_ = 0;
    return absl::OkStatus();
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
    // The frame index as a skippable frame (zstd readers skip it).
    RETURN_IF_ERROR(file_->Append(documents_format::IndexFrame(index_)));
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
  std::string line_;  // Append's record line, reused
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
