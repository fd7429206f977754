#include "common/record_writer.h"

#include <zstd.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <algorithm>
#include <charconv>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/documents_format.h"
#include "common/env.h"
#include "common/internal/le.h"
#include "common/internal/line_reader.h"
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

absl::StatusOr<CheckedFrame> CheckDataFrame(std::string frame, std::string_view content) {
  auto bad = [](const char* what) {
    return absl::InvalidArgumentError(absl::StrCat("data frame to append whole: ", what));
  };
  if (content.empty() || content.back() != '\n') return bad("content is not whole record lines");
  if (frame.size() < 9 ||
      ZSTD_findFrameCompressedSize(frame.data(), frame.size()) != frame.size()) {
    return bad("not one whole zstd frame");
  }
  // The frame header descriptor follows the 4-byte magic; bit 2 is the content checksum flag.
  if ((static_cast<unsigned char>(frame[4]) & 0x04) == 0) {
    return bad("frame without a content checksum");
  }
  if (ZSTD_getFrameContentSize(frame.data(), frame.size()) != content.size()) {
    return bad("the frame's stated content size differs from the content's");
  }
  // The checksum: the low 32 bits of XXH64 (seed 0) of the content, in the frame's last 4 bytes.
  const uint32_t want = static_cast<uint32_t>(XXH64(content.data(), content.size(), 0));
  if (internal::GetLe(frame.data() + frame.size() - 4, 4) != want) {
    return bad("the frame's checksum differs from the content's");
  }
  CheckedFrame f;
  f.records_ = internal::CountNewlines(content.data(), content.size());
  f.content_bytes_ = content.size();
  f.bytes_ = std::move(frame);
  return f;
}

namespace {

// One zstd frame of a part: its records' lines, compressed as a whole (ZSTD_compress2 with the
// writer's level and a checksum), so its bytes depend on the lines alone, not on which thread
// compressed it or on how the lines arrived.
struct Frame {
  std::string raw;
  std::string compressed;
  uint64_t records = 0;
  absl::Status status;
  bool done = false;
  bool whole = false;  // appended already compressed (AppendFrame): never in the pool
};

// Compresses f->raw into f->compressed (exactly its size) through `scratch`. The caller then
// recycles f->raw (RawBuffers): a frame waiting to be written holds only its compressed bytes.
absl::Status CompressFrame(ZSTD_CCtx* cctx, std::string* scratch, Frame* f) {
  scratch->resize(ZSTD_compressBound(f->raw.size()));
  const size_t n = ZSTD_compress2(cctx, scratch->data(), scratch->size(), f->raw.data(), f->raw.size());
  if (ZSTD_isError(n)) return absl::InternalError(absl::StrCat("zstd: ", ZSTD_getErrorName(n)));
  f->compressed.assign(scratch->data(), n);
  return absl::OkStatus();
}

// The buffers frames' lines are gathered in, handed out again once a frame is compressed: a frame
// fills a buffer that already has its pages and room, instead of growing a new string by
// doubling (copying it as it grows and faulting in fresh pages every frame). At most `keep`
// buffers are kept; the rest are freed. Thread-safe.
class RawBuffers {
 public:
  RawBuffers(size_t keep, size_t reserve) : keep_(keep), reserve_(reserve) {}
  // An empty buffer with room for a frame.
  std::string Take() {
    std::string b;
    {
      std::lock_guard<std::mutex> l(mu_);
      if (!free_.empty()) {
        b = std::move(free_.back());
        free_.pop_back();
      }
    }
    b.clear();
    if (b.capacity() < reserve_) b.reserve(reserve_);
    return b;
  }
  void Give(std::string* b) {
    std::lock_guard<std::mutex> l(mu_);
    if (free_.size() < keep_ && b->capacity() <= 2 * reserve_) {
      free_.push_back(std::move(*b));
    }
    std::string().swap(*b);
  }

 private:
  std::mutex mu_;
  std::vector<std::string> free_;
  const size_t keep_, reserve_;
};

ZSTD_CCtx* NewCCtx(int level) {
  ZSTD_CCtx* c = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, level);
  ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
  return c;
}

// Compresses frames on up to `threads` threads, first queued first taken. The writer waits for
// each frame in queue order, so the order of the file never depends on the threads. A thread is
// started only when a frame is queued and no started one is free: a writer whose frames mostly
// pass through whole (dedup's filter: at 16 threads its two writers started 32 threads, about 1 ms
// of its start on one core) starts few or none.
class FramePool {
 public:
  FramePool(int threads, int level, RawBuffers* buffers)
      : max_threads_(static_cast<size_t>(std::max(1, threads))), level_(level), buffers_(buffers) {}
  ~FramePool() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }
  // Called by one thread at a time (the writer's caller).
  void Submit(std::shared_ptr<Frame> f) {
    bool start = false;
    {
      std::lock_guard<std::mutex> l(mu_);
      todo_.push_back(std::move(f));
      start = todo_.size() > idle_ && threads_.size() < max_threads_;
    }
    if (start) threads_.emplace_back([this] { Loop(); });
    cv_.notify_one();
  }
  void Wait(const Frame& f) {
    std::unique_lock<std::mutex> l(mu_);
    done_cv_.wait(l, [&] { return f.done; });
  }
  // The most threads it compresses on.
  int threads() const { return static_cast<int>(max_threads_); }

 private:
  void Loop() {
    ZSTD_CCtx* cctx = NewCCtx(level_);
    std::string scratch;
    std::unique_lock<std::mutex> l(mu_);
    while (true) {
      ++idle_;
      cv_.wait(l, [this] { return stop_ || !todo_.empty(); });
      --idle_;
      if (todo_.empty()) break;  // stop_ with nothing left
      std::shared_ptr<Frame> f = std::move(todo_.front());
      todo_.pop_front();
      l.unlock();
      absl::Status s = CompressFrame(cctx, &scratch, f.get());
      buffers_->Give(&f->raw);
      l.lock();
      f->status = std::move(s);
      f->done = true;
      done_cv_.notify_all();
    }
    ZSTD_freeCCtx(cctx);
  }

  const size_t max_threads_;
  const int level_;
  RawBuffers* const buffers_;
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  std::deque<std::shared_ptr<Frame>> todo_;  // guarded by mu_
  size_t idle_ = 0;                          // threads waiting for a frame; guarded by mu_
  bool stop_ = false;                        // guarded by mu_
  std::vector<std::thread> threads_;         // the started ones; the submitting thread's
};

class ZstdRecordWriter : public RecordWriter {
 public:
  ZstdRecordWriter(Env* env, std::string dir, std::string prefix, OutputOptions o)
      : env_(env), dir_(std::move(dir)), prefix_(std::move(prefix)), opts_(o),
        // A frame ends at the first record that takes it to frame_bytes: room for a little more.
        buffers_(static_cast<size_t>(std::max(1, opts_.compress_threads)) + 1,
                 static_cast<size_t>(std::min<uint64_t>(opts_.frame_bytes + opts_.frame_bytes / 8,
                                                        uint64_t{64} << 20))) {
    if (opts_.compress_threads > 1) {
      pool_ = std::make_unique<FramePool>(opts_.compress_threads, opts_.zstd_level, &buffers_);
      writer_ = std::thread([this] { WriterLoop(); });
    } else {
      cctx_ = NewCCtx(opts_.zstd_level);
    }
    frame_ = NewFrame();
  }
  ~ZstdRecordWriter() override {
    StopWriter();   // frames not yet written are dropped with the part
    pool_.reset();  // joins its threads
    if (file_) {
      (void)file_->Close();
      (void)env_->RemoveFile(tmp_path_);
    }
    if (cctx_ != nullptr) ZSTD_freeCCtx(cctx_);
  }

  absl::Status Append(const Document& doc, std::string_view extra_json) override {
    if (finished_) return absl::FailedPreconditionError("RecordWriter: Append after Finish");
    if (!file_) RETURN_IF_ERROR(StartPart());
    const size_t before = frame_->raw.size();
    AppendRecord(&frame_->raw, doc, extra_json);
    frame_->raw.push_back('\n');
    return Added(frame_->raw.size() - before, 1);
  }

  absl::Status AppendSerialized(std::string_view record) override {
    if (finished_) return absl::FailedPreconditionError("RecordWriter: Append after Finish");
    if (!file_) RETURN_IF_ERROR(StartPart());
    frame_->raw.append(record);
    frame_->raw.push_back('\n');
    return Added(record.size() + 1, 1);
  }

  absl::Status AppendBatch(const RecordBatch& batch) override {
    if (finished_) return absl::FailedPreconditionError("RecordWriter: Append after Finish");
    const std::string_view all = batch.bytes();
    const std::vector<uint64_t>& ends = batch.ends();
    size_t k = 0;
    uint64_t start = 0;  // the first byte not yet taken
    while (k < ends.size()) {
      if (!file_) RETURN_IF_ERROR(StartPart());
      // The records up to the one that ends the frame or the part (as Added decides).
      size_t j = k;
      uint64_t end = start, part_raw = part_raw_, frame_raw = frame_->raw.size();
      while (j < ends.size()) {
        const uint64_t size = ends[j] - end;
        end = ends[j++];
        part_raw += size;
        frame_raw += size;
        if (part_raw >= opts_.part_bytes || frame_raw >= opts_.frame_bytes) break;
      }
      frame_->raw.append(all.substr(start, end - start));
      RETURN_IF_ERROR(Added(end - start, j - k));
      k = j;
      start = end;
    }
    return absl::OkStatus();
  }

  absl::Status AppendFrame(CheckedFrame frame) override {
    if (finished_) return absl::FailedPreconditionError("RecordWriter: Append after Finish");
    if (frame.records() == 0) return absl::InvalidArgumentError("RecordWriter: empty frame");
    const uint64_t records = frame.records(), content_bytes = frame.content_bytes();
    if (!file_) RETURN_IF_ERROR(StartPart());
    if (frame_->records > 0) RETURN_IF_ERROR(EndFrame());
    auto f = std::make_shared<Frame>();
    f->compressed = frame.TakeBytes();
    f->records = records;
    f->done = true;  // set before any other thread sees it
    f->whole = true;
    if (!pool_) {
      RETURN_IF_ERROR(WriteFrame(*f));
    } else {
      RETURN_IF_ERROR(Queue(std::move(f)));
    }
    part_raw_ += content_bytes;
    part_records_ += records;
    records_ += records;
    if (part_raw_ >= opts_.part_bytes) return EndPart();
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<PartInfo>> Finish() override {
    if (finished_) return parts_;
    finished_ = true;
    if (file_) RETURN_IF_ERROR(EndPart());
    StopWriter();
    pool_.reset();
    if (!parts_.empty()) RETURN_IF_ERROR(env_->SyncDir(dir_));
    return parts_;
  }

  uint64_t records() const override { return records_; }

 private:
  // `records` lines of `bytes` bytes were appended to the current frame: ends the part or the frame
  // once it holds part_bytes or frame_bytes.
  absl::Status Added(uint64_t bytes, uint64_t records) {
    part_raw_ += bytes;
    part_records_ += records;
    frame_->records += records;
    records_ += records;
    if (part_raw_ >= opts_.part_bytes) return EndPart();
    if (frame_->raw.size() >= opts_.frame_bytes) return EndFrame();
    return absl::OkStatus();
  }

  absl::Status StartPart() {
    char num[16];
    std::snprintf(num, sizeof(num), "%05zu", parts_.size());
    final_path_ = JoinPath(dir_, absl::StrCat(prefix_, "-", num, ".jsonl.zst"));
    tmp_path_ = final_path_ + ".tmp";
    ASSIGN_OR_RETURN(file_, env_->NewWritableFile(tmp_path_));
    file_->SetWritebackBytes(kWritebackBytes);
    part_raw_ = part_records_ = 0;
    index_.clear();
    return absl::OkStatus();
  }

  std::shared_ptr<Frame> NewFrame() {
    auto f = std::make_shared<Frame>();
    f->raw = buffers_.Take();
    return f;
  }

  // Ends the current zstd frame (the next record starts a new, independent one): compressed here,
  // or queued for the pool, and written once it and every frame before it are done.
  absl::Status EndFrame() {
    std::shared_ptr<Frame> f = std::move(frame_);
    if (!pool_) {
      absl::Status s = CompressFrame(cctx_, &scratch_, f.get());
      buffers_.Give(&f->raw);
      frame_ = NewFrame();
      if (!s.ok()) return absl::InternalError(absl::StrCat(tmp_path_, ": ", s.message()));
      return WriteFrame(*f);
    }
    frame_ = NewFrame();
    pool_->Submit(f);
    return Queue(std::move(f));
  }

  // Pool mode: hands `f` (in the pool, or appended whole) to the writer thread, which writes the
  // frames in queue order, each once compressed, so that the caller (a stage's single consumer)
  // neither writes nor waits for a slow frame: at 16 threads dedup's filter spent most of its
  // consumer's time so (file writes, and the wait for a re-serialized frame compressing ahead of
  // the frames it passes through whole), and its workers waited for the consumer. Held at most:
  // one frame per pool thread in the pool (their raw buffers) and up to threads x frame_bytes of
  // frames appended whole; the caller waits beyond. Returns the writer's error once it has one.
  absl::Status Queue(std::shared_ptr<Frame> f) {
    std::unique_lock<std::mutex> l(wmu_);
    if (f->whole) {
      queued_whole_bytes_ += f->compressed.size();
    } else {
      ++queued_compressing_;
    }
    queued_.push_back(std::move(f));
    wcv_.notify_all();
    const size_t threads = static_cast<size_t>(pool_->threads());
    const uint64_t whole_limit = threads * opts_.frame_bytes;
    wcv_.wait(l, [&] {
      return !werror_.ok() ||
             (queued_compressing_ <= threads && queued_whole_bytes_ <= whole_limit);
    });
    return werror_;
  }

  // Pool mode: waits until every queued frame is written; the writer's error if any.
  absl::Status Drain() {
    std::unique_lock<std::mutex> l(wmu_);
    wcv_.wait(l, [&] { return !werror_.ok() || queued_.empty(); });
    return werror_;
  }

  void WriterLoop() {
    std::unique_lock<std::mutex> l(wmu_);
    while (true) {
      wcv_.wait(l, [&] { return wstop_ || (!queued_.empty() && werror_.ok()); });
      if (wstop_) return;
      std::shared_ptr<Frame> f = queued_.front();
      l.unlock();
      pool_->Wait(*f);
      absl::Status s =
          f->status.ok() ? WriteFrame(*f)
                         : absl::InternalError(absl::StrCat(tmp_path_, ": ", f->status.message()));
      l.lock();
      queued_.pop_front();
      if (f->whole) {
        queued_whole_bytes_ -= f->compressed.size();
      } else {
        --queued_compressing_;
      }
      if (!s.ok() && werror_.ok()) werror_ = std::move(s);
      wcv_.notify_all();
    }
  }

  void StopWriter() {
    if (!writer_.joinable()) return;
    {
      std::lock_guard<std::mutex> l(wmu_);
      wstop_ = true;
    }
    wcv_.notify_all();
    writer_.join();
  }

  // Appends a compressed frame to the part and notes it in the part's frame index.
  absl::Status WriteFrame(const Frame& f) {
    RETURN_IF_ERROR(file_->Append(f.compressed));
    internal::PutLe(&index_, f.compressed.size(), 8);
    internal::PutLe(&index_, f.records, 8);
    return absl::OkStatus();
  }

  absl::Status EndPart() {
    if (frame_->records > 0) RETURN_IF_ERROR(EndFrame());
    if (pool_) RETURN_IF_ERROR(Drain());
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
  RawBuffers buffers_;                // before pool_, whose threads give buffers back
  ZSTD_CCtx* cctx_ = nullptr;         // compress_threads <= 1
  std::string scratch_;               // its output buffer
  std::unique_ptr<FramePool> pool_;   // compress_threads > 1
  std::shared_ptr<Frame> frame_;      // the frame being filled
  // Pool mode: the frames not yet written, in file order, and the thread that writes them
  // (WriterLoop). file_ and index_ are the writer's while frames are queued, the caller's once
  // Drain() returned (EndPart).
  std::thread writer_;
  std::mutex wmu_;
  std::condition_variable wcv_;
  std::deque<std::shared_ptr<Frame>> queued_;  // guarded by wmu_
  size_t queued_compressing_ = 0;              // of which in the pool; guarded by wmu_
  uint64_t queued_whole_bytes_ = 0;            // the others' bytes; guarded by wmu_
  absl::Status werror_;                        // the writer's first error; guarded by wmu_
  bool wstop_ = false;                         // guarded by wmu_
  std::unique_ptr<WritableFile> file_;
  std::string tmp_path_, final_path_;
  std::vector<PartInfo> parts_;
  uint64_t part_raw_ = 0, part_records_ = 0, records_ = 0;
  std::string index_;  // the frame index entries of the current part
  bool finished_ = false;
};

}  // namespace

absl::StatusOr<std::vector<std::vector<PartInfo>>> FinishAll(
    const std::vector<RecordWriter*>& writers) {
  std::vector<absl::StatusOr<std::vector<PartInfo>>> results(writers.size());
  std::vector<std::thread> threads;
  for (size_t i = 1; i < writers.size(); ++i) {
    threads.emplace_back([&, i] { results[i] = writers[i]->Finish(); });
  }
  if (!writers.empty()) results[0] = writers[0]->Finish();
  for (std::thread& t : threads) t.join();
  std::vector<std::vector<PartInfo>> out;
  for (auto& r : results) {
    if (!r.ok()) return r.status();
    out.push_back(std::move(*r));
  }
  return out;
}

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
