#include "common/internal/byte_sources.h"

#include <zlib.h>
#define ZSTD_STATIC_LINKING_ONLY  // ZSTD_createDCtx_advanced
#include <zstd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
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

// The memory of zstd's decoding contexts (a context of about 100 KiB and, once a frame starts, its
// window and block buffers in one allocation: about 1.2 MiB for a part's 1 MiB frames). A source
// is opened per split, and each took fresh pages for both, faulted in again every time and given
// back to the kernel on free (above malloc's mmap threshold, or trimmed from the thread's arena),
// which at 16 threads kept the faulting threads queueing on the process's memory map. Blocks a
// thread's contexts free are kept by that thread for its next ones, up to kCachedDecoderBytes a
// thread. Each context is still created fresh (never reset and reused, see ZstdSource): zstd asks
// for the same sizes as with malloc and never reads what it has not written, so it decodes in
// the same steps; a block may be larger than asked for, which zstd does not know.
constexpr size_t kCachedDecoderBytes = 4u << 20;
constexpr size_t kBlockHeader = 16;  // a block starts with its capacity; keeps 16-byte alignment

thread_local bool t_decoder_cache_gone = false;

struct DecoderBlockCache {
  struct Block {
    void* p;
    size_t capacity;
  };
  std::vector<Block> free;
  size_t bytes = 0;
  ~DecoderBlockCache() {
    for (const Block& b : free) std::free(b.p);
    t_decoder_cache_gone = true;
  }
};
thread_local DecoderBlockCache t_decoder_blocks;

std::atomic<bool> decoder_allocation_fails{false};  // SetZstdDecoderAllocationFailsForTesting

void* DecoderAlloc(void*, size_t size) {
  if (decoder_allocation_fails.load(std::memory_order_relaxed)) return nullptr;
  if (!t_decoder_cache_gone) {
    auto& f = t_decoder_blocks.free;
    size_t best = f.size();
    for (size_t i = 0; i < f.size(); ++i) {
      if (f[i].capacity >= size && (best == f.size() || f[i].capacity < f[best].capacity)) best = i;
    }
    if (best != f.size()) {
      void* p = f[best].p;
      t_decoder_blocks.bytes -= f[best].capacity;
      f.erase(f.begin() + static_cast<std::ptrdiff_t>(best));
      return static_cast<char*>(p) + kBlockHeader;
    }
  }
  void* p = std::malloc(size + kBlockHeader);
  if (p == nullptr) return nullptr;
  std::memcpy(p, &size, sizeof(size));
  return static_cast<char*>(p) + kBlockHeader;
}

void DecoderFree(void*, void* q) {
  if (q == nullptr) return;
  void* p = static_cast<char*>(q) - kBlockHeader;
  size_t capacity;
  std::memcpy(&capacity, p, sizeof(capacity));
  if (t_decoder_cache_gone || capacity > kCachedDecoderBytes) {
    std::free(p);
    return;
  }
  auto& f = t_decoder_blocks.free;
  f.push_back({p, capacity});
  t_decoder_blocks.bytes += capacity;
  // Over the bound: the smallest blocks go first (a larger one serves any smaller request).
  while (t_decoder_blocks.bytes > kCachedDecoderBytes) {
    auto smallest = std::min_element(f.begin(), f.end(), [](const auto& a, const auto& b) {
      return a.capacity < b.capacity;
    });
    t_decoder_blocks.bytes -= smallest->capacity;
    std::free(smallest->p);
    f.erase(smallest);
  }
}

ZSTD_DCtx* NewDecoderContext() {
  return ZSTD_createDCtx_advanced(ZSTD_customMem{DecoderAlloc, DecoderFree, nullptr});
}

}  // namespace

void SetZstdDecoderAllocationFailsForTesting(bool fails) {
  decoder_allocation_fails.store(fails, std::memory_order_relaxed);
}

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
      : DecodingSource(std::move(f), ZSTD_DStreamInSize()), dctx_(NewDecoderContext()) {}
  // A context is never reused between sources: one reset by ZSTD_DCtx_reset keeps the buffers a
  // larger frame grew, and with them decodes in other steps than a fresh one, so two reads of a
  // corrupt stream (one after such a frame) met the damage at different records (fuzz_records).
  // Only its memory is (NewDecoderContext).
  ~ZstdSource() override { ZSTD_freeDCtx(dctx_); }

 private:
  absl::Status Decode(char* buf, size_t n, size_t* produced) override {
    *produced = 0;
    if (dctx_ == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat(f_->path(), ": no memory for a zstd decoder"));
    }
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
