#include "common/internal/stream_cutter.h"

#include <algorithm>
#include <cstring>
#include <string_view>

#include "common/internal/line_reader.h"
#include "common/status_macros.h"

namespace grist::internal {

std::shared_ptr<PieceBuffers> PieceBuffers::Create() {
  return std::shared_ptr<PieceBuffers>(new PieceBuffers());
}

PieceBuffers::~PieceBuffers() {
  for (char* p : free_) delete[] p;
}

std::shared_ptr<char[]> PieceBuffers::Get() {
  char* p = nullptr;
  {
    absl::MutexLock l(&mu_);
    if (!free_.empty()) {
      p = free_.back();
      free_.pop_back();
    } else {
      ++allocated_;
    }
  }
  if (p == nullptr) p = new char[kReadChunk];
  // The deleter holds the pool, so a piece may outlive every cutter and decoder that used it.
  return std::shared_ptr<char[]>(p, [pool = shared_from_this()](char* q) { pool->Put(q); });
}

void PieceBuffers::Put(char* p) {
  {
    absl::MutexLock l(&mu_);
    if (free_.size() < kKeptFree) {
      free_.push_back(p);
      return;
    }
  }
  delete[] p;
}

size_t PieceBuffers::allocated() const {
  absl::MutexLock l(&mu_);
  return allocated_;
}

StreamCutter::StreamCutter(std::unique_ptr<DecodingSource> src, uint64_t stride, bool blocks,
                           std::shared_ptr<PieceBuffers> buffers)
    : src_(std::move(src)), stride_(std::max<uint64_t>(1, stride)), blocks_(blocks),
      buffers_(buffers != nullptr ? std::move(buffers) : PieceBuffers::Create()) {
  src_->set_input_limit(stride_);
}

size_t StreamCutter::FindCut(const char* p, size_t n) {
  size_t i = 0;
  while (i < n) {
    if (at_line_start_) {
      if (!blocks_ || prev_blank_) return i;
      line_blank_ = true;
    }
    const char* nl = static_cast<const char*>(std::memchr(p + i, '\n', n - i));
    const size_t end = nl ? static_cast<size_t>(nl - p) : n;
    line_blank_ = line_blank_ && IsBlank(std::string_view(p + i, end - i));
    if (nl == nullptr) {
      at_line_start_ = false;
      return n;
    }
    prev_blank_ = line_blank_;
    at_line_start_ = true;
    i = end + 1;
  }
  return n;
}

void StreamCutter::Advance(const char* p, size_t n) {
  if (n == 0) return;
  if (!blocks_) {
    at_line_start_ = p[n - 1] == '\n';
    return;
  }
  if (at_line_start_) line_blank_ = true;
  const char* last = static_cast<const char*>(memrchr(p, '\n', n));
  if (last == nullptr) {
    line_blank_ = line_blank_ && IsBlank(std::string_view(p, n));
    at_line_start_ = false;
    return;
  }
  // The line that ends at `last`: from the newline before it, or (none in p) from before p.
  const size_t last_pos = static_cast<size_t>(last - p);
  const char* prev = last_pos == 0 ? nullptr
                                   : static_cast<const char*>(memrchr(p, '\n', last_pos));
  if (prev == nullptr) {
    prev_blank_ = line_blank_ && IsBlank(std::string_view(p, last_pos));
  } else {
    prev_blank_ = IsBlank(std::string_view(prev + 1, static_cast<size_t>(last - prev - 1)));
  }
  const size_t tail = n - last_pos - 1;
  at_line_start_ = tail == 0;
  line_blank_ = IsBlank(std::string_view(last + 1, tail));
}

absl::StatusOr<bool> StreamCutter::Next(StreamPiece* piece) {
  if (has_pending_) {
    has_pending_ = false;
    *piece = std::move(pending_);
    lines_ += CountNewlines(piece->data(), piece->size);
    return true;
  }
  while (!eof_) {
    if (buf_ == nullptr || kReadChunk - used_ < kMinPieceRoom) {
      buf_ = buffers_->Get();
      used_ = 0;
    }
    ASSIGN_OR_RETURN(size_t n, src_->Read(buf_.get() + used_, kReadChunk - used_));
    if (n == 0) {
      if (!src_->paused()) {
        eof_ = true;
        break;
      }
      ++seg_;
      src_->set_input_limit(seg_ + 1 > UINT64_MAX / stride_ ? UINT64_MAX : (seg_ + 1) * stride_);
      continue;
    }
    const size_t begin = used_;
    used_ += n;
    const char* p = buf_.get() + begin;
    size_t size = n;  // of this piece, for split cur_ (before any cut)
    if (cur_ < seg_) {
      const size_t cut = FindCut(p, n);  // the line state is now that at `cut`
      if (cut < n) {
        Advance(p + cut, n - cut);
        if (cut == 0) {
          cur_ = seg_;
        } else {
          pending_ = StreamPiece{seg_, lines_ + CountNewlines(p, cut), buf_, begin + cut, n - cut};
          has_pending_ = true;
          size = cut;
        }
      }
    } else {
      Advance(p, n);
    }
    *piece = StreamPiece{cur_, lines_, buf_, begin, size};
    lines_ += CountNewlines(p, size);
    if (has_pending_) cur_ = seg_;
    return true;
  }
  return false;
}

}  // namespace grist::internal
