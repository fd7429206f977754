#include "common/split_decoders.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/env.h"
#include "common/internal/byte_sources.h"
#include "common/internal/stream_cutter.h"
#include "common/status_macros.h"

namespace grist {

using internal::StreamCutter;
using internal::StreamPiece;

namespace {

absl::StatusOr<std::unique_ptr<StreamCutter>> NewCutter(Env* env, const InputFile& file,
                                                        uint64_t stride, const InputOptions& o) {
  ASSIGN_OR_RETURN(std::unique_ptr<SequentialFile> f, env->NewSequentialFile(file.path));
  std::unique_ptr<internal::DecodingSource> src;
  switch (file.format) {
    case InputFormat::kJsonlGzip:
    case InputFormat::kTextGzip:
      src = internal::NewGzipSource(std::move(f));
      break;
    case InputFormat::kJsonlZstd:
    case InputFormat::kTextZstd:
      src = internal::NewZstdSource(std::move(f));
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(file.path, ": not a compressed input"));
  }
  const bool blocks = !IsJsonFormat(file.format);
  if (blocks && o.txt_mode != "blocks") {
    return absl::InvalidArgumentError(
        absl::StrCat(file.path, ": a text file in txt_mode \"file\" cannot be split"));
  }
  return std::make_unique<StreamCutter>(std::move(src), stride, blocks);
}

// Copies pieces out to a reader.
class PieceSource : public internal::StreamSplitSource {
 public:
  explicit PieceSource(const InputSplit& split) : split_(split) {}
  absl::StatusOr<size_t> Read(char* buf, size_t n) final {
    size_t out = 0;
    while (out < n) {
      if (pos_ == piece_.size) {
        if (end_) break;
        absl::StatusOr<bool> more = NextPiece(&piece_);
        pos_ = 0;
        if (!more.ok() || !*more) {
          piece_ = StreamPiece{};
          end_ = true;
          if (!more.ok()) error_ = more.status();
          break;
        }
      }
      const size_t take = std::min(n - out, piece_.size - pos_);
      std::memcpy(buf + out, piece_.data() + pos_, take);
      pos_ += take;
      out += take;
    }
    if (out == 0 && !error_.ok()) return error_;
    if (out == 0) done_ = true;
    return out;
  }
  uint64_t consumed() const final { return done_ ? split_.bytes : 0; }
  uint64_t lines_before() const final { return lines_before_; }

 protected:
  // The split's next piece; false at its end; an error that belongs to the split.
  virtual absl::StatusOr<bool> NextPiece(StreamPiece* piece) = 0;
  // Takes the first piece (or learns the split is empty) so that lines_before() is known.
  absl::Status Start() {
    absl::StatusOr<bool> more = NextPiece(&piece_);
    pos_ = 0;
    if (!more.ok()) {
      error_ = more.status();
      end_ = true;
      piece_ = StreamPiece{};
      return absl::OkStatus();
    }
    if (!*more) {
      end_ = true;
      piece_ = StreamPiece{};
    } else {
      lines_before_ = piece_.lines_before;
    }
    return absl::OkStatus();
  }
  const InputSplit split_;
  uint64_t lines_before_ = 0;

 private:
  StreamPiece piece_;
  size_t pos_ = 0;
  bool end_ = false, done_ = false;
  absl::Status error_;
};

// Decodes the file from its start, keeping the pieces of one split.
class PrivateSource : public PieceSource {
 public:
  PrivateSource(std::unique_ptr<StreamCutter> cutter, const InputSplit& split)
      : PieceSource(split), cutter_(std::move(cutter)), index_(split.begin / split.stream_stride) {}
  absl::Status Open() { return Start(); }

 private:
  absl::StatusOr<bool> NextPiece(StreamPiece* piece) override {
    while (!finished_) {
      absl::StatusOr<bool> more = cutter_->Next(piece);
      if (!more.ok()) {
        finished_ = true;
        if (cutter_->current_split() == index_) return more.status();
        return false;  // damage before this split: it is empty
      }
      if (!*more || piece->split > index_) {
        finished_ = true;
        return false;
      }
      if (piece->split == index_) return true;
    }
    return false;
  }
  std::unique_ptr<StreamCutter> cutter_;
  const uint64_t index_;
  bool finished_ = false;
};

}  // namespace

// One file's decoder thread and the queues of its listed splits.
class SplitDecoders::FileDecoder {
 public:
  FileDecoder(Env* env, InputFile file, InputOptions options, uint64_t stride, size_t max_pieces)
      : env_(env), file_(std::move(file)), options_(std::move(options)), stride_(stride),
        max_pieces_(std::max<size_t>(1, max_pieces)) {}
  ~FileDecoder() {
    {
      absl::MutexLock l(&mu_);
      stop_ = true;
    }
    if (thread_.joinable()) thread_.join();
  }

  void List(uint64_t index) {
    absl::MutexLock l(&mu_);
    queues_[index];
    last_ = std::max(last_, index);
  }
  // Whether `index` is listed and not yet claimed; claims it.
  bool Claim(uint64_t index) {
    absl::MutexLock l(&mu_);
    auto it = queues_.find(index);
    if (it == queues_.end() || it->second.claimed) return false;
    it->second.claimed = true;
    StartLocked();
    return true;
  }
  // Starts decoding before any split of the file is claimed (SplitDecoders::kAheadFiles).
  void StartAhead() {
    absl::MutexLock l(&mu_);
    StartLocked();
  }
  // The next piece of split `index` (claimed): false at its end, or its error.
  absl::StatusOr<bool> Pull(uint64_t index, StreamPiece* piece) {
    absl::MutexLock l(&mu_);
    Queue& q = queues_[index];
    auto ready = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return !q.pieces.empty() || finished_ || index < filling_;
    };
    mu_.Await(absl::Condition(&ready));
    if (!q.pieces.empty()) {
      *piece = std::move(q.pieces.front());
      q.pieces.pop_front();
      --held_;
      return true;
    }
    if (finished_ && !error_.ok() && error_split_ == index) return error_;
    return false;
  }
  // The reader of `index` is gone: drop its pieces, keep no more.
  void Release(uint64_t index) {
    absl::MutexLock l(&mu_);
    Queue& q = queues_[index];
    q.released = true;
    held_ -= q.pieces.size();
    q.pieces.clear();
  }
  bool started() const {
    absl::MutexLock l(&mu_);
    return started_;
  }
  size_t held() const {
    absl::MutexLock l(&mu_);
    return held_;
  }

 private:
  struct Queue {
    std::deque<StreamPiece> pieces;
    bool claimed = false, released = false;
  };

  void Run() {
    absl::StatusOr<std::unique_ptr<StreamCutter>> cutter = NewCutter(env_, file_, stride_, options_);
    if (!cutter.ok()) {
      Finish(cutter.status(), 0);
      return;
    }
    StreamPiece piece;
    while (true) {
      absl::StatusOr<bool> more = (*cutter)->Next(&piece);
      if (!more.ok()) {
        Finish(more.status(), (*cutter)->current_split());
        return;
      }
      if (!*more) {
        Finish(absl::OkStatus(), 0);
        return;
      }
      absl::MutexLock l(&mu_);
      filling_ = piece.split;
      if (stop_ || piece.split > last_) break;
      auto it = queues_.find(piece.split);
      if (it == queues_.end() || it->second.released) continue;
      auto room = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
        return stop_ || held_ < max_pieces_ || it->second.released;
      };
      mu_.Await(absl::Condition(&room));
      if (stop_) break;
      if (it->second.released) continue;
      it->second.pieces.push_back(std::move(piece));
      ++held_;
    }
    absl::MutexLock l(&mu_);
    finished_ = true;
  }

  void StartLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!started_) {
      started_ = true;
      thread_ = std::thread([this] { Run(); });
    }
  }

  void Finish(absl::Status s, uint64_t split) {
    absl::MutexLock l(&mu_);
    error_ = std::move(s);
    error_split_ = split;
    finished_ = true;
  }

  Env* env_;
  const InputFile file_;
  const InputOptions options_;
  const uint64_t stride_;
  const size_t max_pieces_;
  std::thread thread_;
  mutable absl::Mutex mu_;
  std::map<uint64_t, Queue> queues_ ABSL_GUARDED_BY(mu_);  // the listed splits
  uint64_t last_ ABSL_GUARDED_BY(mu_) = 0;      // the last listed split
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;      // the SplitDecoders is being destroyed
  // The split the decoder is filling: every split before it is complete.
  uint64_t filling_ ABSL_GUARDED_BY(mu_) = 0;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // every split is complete
  size_t held_ ABSL_GUARDED_BY(mu_) = 0;        // pieces queued
  absl::Status error_ ABSL_GUARDED_BY(mu_);     // how the decode ended, and in which split
  uint64_t error_split_ ABSL_GUARDED_BY(mu_) = 0;
};

namespace {

class SharedSource : public PieceSource {
 public:
  SharedSource(SplitDecoders::FileDecoder* d, const InputSplit& split)
      : PieceSource(split), d_(d), index_(split.begin / split.stream_stride) {}
  ~SharedSource() override { d_->Release(index_); }
  absl::Status Open() { return Start(); }

 private:
  absl::StatusOr<bool> NextPiece(StreamPiece* piece) override { return d_->Pull(index_, piece); }
  SplitDecoders::FileDecoder* d_;
  const uint64_t index_;
};

}  // namespace

size_t SplitDecoders::DefaultChunksInFlight(int threads) {
  return std::max<size_t>(16, 8 * static_cast<size_t>(std::max(1, threads)));
}

SplitDecoders::SplitDecoders(Env* env, const std::vector<InputFile>& files,
                             const std::vector<InputSplit>& splits, const InputOptions& options,
                             size_t chunks_in_flight)
    : env_(env), options_(options), chunks_in_flight_(chunks_in_flight) {
  for (const InputSplit& s : splits) {
    if (s.stream_stride == 0 || s.file_index >= files.size()) continue;
    auto& d = decoders_[s.file_index];
    if (d == nullptr) {
      d = std::make_unique<FileDecoder>(env_, files[s.file_index], options_, s.stream_stride,
                                        chunks_in_flight_);
      position_[d.get()] = order_.size();
      order_.push_back(d.get());
    }
    d->List(s.begin / s.stream_stride);
  }
  uint64_t total = 0;
  std::vector<std::pair<uint64_t, size_t>> by_size;  // (compressed bytes, position in order_)
  for (const auto& [index, d] : decoders_) {
    total += files[index].size;
    by_size.emplace_back(files[index].size, position_.at(d.get()));
  }
  std::sort(by_size.begin(), by_size.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  size_t started = 0;
  for (const auto& [size, pos] : by_size) {
    if (++started > kAheadFiles || size * kLargeFileShare < total) break;
    order_[pos]->StartAhead();
  }
}

SplitDecoders::~SplitDecoders() = default;

bool SplitDecoders::Started(size_t file_index) const {
  auto it = decoders_.find(file_index);
  return it != decoders_.end() && it->second->started();
}

size_t SplitDecoders::HeldPieces(size_t file_index) const {
  auto it = decoders_.find(file_index);
  return it == decoders_.end() ? 0 : it->second->held();
}

SplitDecoders::FileDecoder* SplitDecoders::Claim(const InputSplit& split) {
  auto it = decoders_.find(split.file_index);
  if (it == decoders_.end() || split.stream_stride == 0) return nullptr;
  if (!it->second->Claim(split.begin / split.stream_stride)) return nullptr;
  // The next files' decoders start now, so that their first pieces are ready when their splits
  // are opened (on the GPU host's 16 threads, readers of Wikinews' small files otherwise slept
  // about a tenth of the run waiting for a decoder that started only with the file's first claim).
  const size_t pos = position_.at(it->second.get());
  for (size_t next = pos + 1; next < order_.size() && next <= pos + kAheadFiles; ++next) {
    order_[next]->StartAhead();
  }
  return it->second.get();
}

namespace internal {

absl::StatusOr<std::unique_ptr<StreamSplitSource>> OpenStreamSplit(Env* env, const InputFile& file,
                                                                   const InputSplit& split,
                                                                   const InputOptions& options,
                                                                   SplitDecoders* decoders) {
  if (split.stream_stride == 0 || split.begin % split.stream_stride != 0) {
    return absl::InvalidArgumentError(absl::StrCat(file.path, ": not a stream split"));
  }
  if (!IsJsonFormat(file.format) && options.txt_mode != "blocks") {
    return absl::InvalidArgumentError(
        absl::StrCat(file.path, ": a text file in txt_mode \"file\" cannot be split"));
  }
  SplitDecoders::FileDecoder* d = decoders != nullptr ? decoders->Claim(split) : nullptr;
  if (d != nullptr) {
    auto s = std::make_unique<SharedSource>(d, split);
    RETURN_IF_ERROR(s->Open());
    return std::unique_ptr<StreamSplitSource>(std::move(s));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<StreamCutter> cutter,
                   NewCutter(env, file, split.stream_stride, options));
  auto s = std::make_unique<PrivateSource>(std::move(cutter), split);
  RETURN_IF_ERROR(s->Open());
  return std::unique_ptr<StreamSplitSource>(std::move(s));
}

}  // namespace internal

}  // namespace grist
