#include "common/internal/byte_sources.h"

#include <zlib.h>
#include <zstd.h>

#include <cstring>
#include <memory>
#include <vector>

namespace grist::internal {

namespace {

// Set once the thread's cache of read buffers is destroyed at the thread's exit, after which a
// buffer freed on that thread is simply freed (a plain bool needs no destructor).
thread_local bool t_caches_gone = false;

struct ReadChunkCache {
  std::vector<std::unique_ptr<char[]>> free;
  ~ReadChunkCache() { t_caches_gone = true; }
};
thread_local ReadChunkCache t_read_chunks;

}  // namespace

Buffer::Buffer(size_t n) : size(n) {
  if (n == kReadChunk && !t_caches_gone && !t_read_chunks.free.empty()) {
    ptr_ = std::move(t_read_chunks.free.back());
    t_read_chunks.free.pop_back();
  } else {
    ptr_.reset(new char[n]);
  }
}

Buffer::~Buffer() {
  if (size == kReadChunk && !t_caches_gone && t_read_chunks.free.size() < kCachedReadChunks) {
    t_read_chunks.free.push_back(std::move(ptr_));
  }
}

namespace {

class GzipSource : public DecodingSource {
 public:
  explicit GzipSource(std::unique_ptr<SequentialFile> f) : DecodingSource(std::move(f), kReadChunk) {
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
        if (got == 0 && at_limit_) {
          // Drain what the input so far decodes to (a long match may still be pending).
          if (!in_stream_) break;
          const uInt before = z_.avail_out;
          int r = inflate(&z_, Z_NO_FLUSH);
          if (r == Z_STREAM_END) {
            in_stream_ = false;
            inflateReset(&z_);
          } else if (r == Z_NEED_DICT || r == Z_DATA_ERROR || r == Z_MEM_ERROR) {
            s = Corrupt(absl::StrCat("corrupt gzip data (", z_.msg ? z_.msg : "inflate error", ")"));
            break;
          } else if (z_.avail_out == before) {
            break;
          }
          continue;
        }
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
  explicit ZstdSource(std::unique_ptr<SequentialFile> f)
      : DecodingSource(std::move(f), ZSTD_DStreamInSize()), dctx_(ZSTD_createDCtx()) {}
  // A context is never reused between sources: one reset by ZSTD_DCtx_reset keeps the buffers a
  // larger frame grew, and with them decodes in other steps than a fresh one, so two reads of a
  // corrupt stream (one after such a frame) met the damage at different records (fuzz_records).
  ~ZstdSource() override { ZSTD_freeDCtx(dctx_); }

 private:
  absl::Status Decode(char* buf, size_t n, size_t* produced) override {
    ZSTD_outBuffer out{buf, n, 0};
    absl::Status s;
    while (out.pos < out.size) {
      if (input_.pos == input_.size) {
        ASSIGN_OR_RETURN(size_t got, Refill());
        if (got == 0 && at_limit_) {
          // Drain what the input so far decodes to (zstd may hold decoded bytes back).
          const size_t before = out.pos;
          size_t r = ZSTD_decompressStream(dctx_, &out, &input_);
          if (ZSTD_isError(r)) {
            s = Corrupt(absl::StrCat("corrupt zstd data (", ZSTD_getErrorName(r), ")"));
            break;
          }
          if (out.pos == before) break;  // (no progress: r is only a hint, frame state unchanged)
          hint_ = r == 0 ? 1 : r;
          frame_open_ = r != 0;
          continue;
        }
        if (got == 0) {
          if (frame_open_) s = Corrupt("truncated zstd stream");
          else done_ = true;
          break;
        }
        input_ = ZSTD_inBuffer{in_.data(), got, 0};
      }
      // At most one block per call: a call that fails reports none of the output it made, so a
      // damaged block then costs only its own bytes, wherever the input chunks happen to end. The
      // decoder's return value is the input that completes its next step (the rest of a block and
      // the next block's header); a frame starts with one byte until the header is known.
      ZSTD_inBuffer in = input_;
      if (hint_ < in.size - in.pos) in.size = in.pos + hint_;
      size_t r = ZSTD_decompressStream(dctx_, &out, &in);
      input_.pos = in.pos;
      if (!ZSTD_isError(r)) hint_ = r == 0 ? 1 : r;
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
  size_t hint_ = 1;  // compressed bytes the next call may take
};

}  // namespace

std::unique_ptr<DecodingSource> NewGzipSource(std::unique_ptr<SequentialFile> f) {
  return std::make_unique<GzipSource>(std::move(f));
}
std::unique_ptr<DecodingSource> NewZstdSource(std::unique_ptr<SequentialFile> f) {
  return std::make_unique<ZstdSource>(std::move(f));
}

}  // namespace grist::internal
