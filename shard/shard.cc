#include "shard/shard.h"

#include <bit>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "common/env.h"
#include "common/hash.h"
#include "common/status_macros.h"
#include "shard/indexed_dataset.h"
#include "shard/internal/le_bytes.h"
#include "shard/internal/mapped_file.h"
#include "shard/shard_format.h"

namespace grist::shard {
namespace {

using internal::Get;
using internal::Put;

absl::Status WriteAndSync(Env* env, const std::string& path, std::string_view data) {
  ASSIGN_OR_RETURN(auto f, env->NewWritableFile(path));
  RETURN_IF_ERROR(f->Append(data));
  RETURN_IF_ERROR(f->Sync());
  return f->Close();
}

// Checks a .seg image (whole file) against the format and returns its sample count.
absl::Status ValidateSeg(std::string_view seg, const std::string& path, uint32_t sample_tokens,
                         uint64_t samples) {
  auto bad = [&](const std::string& what) {
    return absl::DataLossError(absl::StrCat(path, ": corrupt segment file: ", what));
  };
  if (seg.size() < kSegHeaderSize + 8 + kSegFooterSize) return bad("shorter than its header");
  const char* p = seg.data();
  if (std::memcmp(p, kSegMagic, sizeof(kSegMagic)) != 0) return bad("bad magic");
  uint32_t version = Get<uint32_t>(p + 8);
  if (version != kSegVersion) return bad(absl::StrCat("unsupported version ", version));
  uint32_t st = Get<uint32_t>(p + 12);
  if (st != sample_tokens) {
    return bad(absl::StrCat("sample_tokens ", st, ", manifest says ", sample_tokens));
  }
  uint64_t n = Get<uint64_t>(p + 24);
  uint64_t m = Get<uint64_t>(p + 32);
  if (n != samples) return bad(absl::StrCat("sample_count ", n, ", manifest says ", samples));
  // Sizes are bounded by the file size before any multiplication can overflow.
  if (n > seg.size() / 8 || m > seg.size() / 4) return bad("counts exceed the file size");
  uint64_t want = kSegHeaderSize + (n + 1) * 8 + m * 4 + kSegFooterSize;
  if (want != seg.size()) {
    return bad(absl::StrCat("size ", seg.size(), " bytes, header implies ", want));
  }
  uint64_t footer = Get<uint64_t>(p + seg.size() - kSegFooterSize);
  if (Hash64(p, seg.size() - kSegFooterSize) != footer) return bad("footer checksum mismatch");
  const char* offs = p + kSegHeaderSize;
  const char* segs = offs + (n + 1) * 8;
  if (Get<uint64_t>(offs) != 0) return bad("offsets[0] != 0");
  if (Get<uint64_t>(offs + n * 8) != m) return bad("offsets[sample_count] != segment_count");
  uint64_t prev = 0;
  for (uint64_t k = 0; k < n; ++k) {
    uint64_t b = Get<uint64_t>(offs + k * 8), e = Get<uint64_t>(offs + (k + 1) * 8);
    if (b < prev || e < b || e > m) return bad(absl::StrCat("offsets of sample ", k));
    prev = b;
    uint64_t sum = 0;
    for (uint64_t j = b; j < e; ++j) {
      uint32_t w = Get<uint32_t>(segs + j * 4);
      if (SegmentLength(w) == 0) return bad(absl::StrCat("zero-length segment in sample ", k));
      if (SegmentIsPadding(w) && j + 1 != e) {
        return bad(absl::StrCat("padding segment not last in sample ", k));
      }
      sum += SegmentLength(w);
    }
    if (sum != sample_tokens) {
      return bad(absl::StrCat("segments of sample ", k, " sum to ", sum, ", not ", sample_tokens));
    }
  }
  return absl::OkStatus();
}

// The MMIDIDX checks (ParseIdx), then what a shard adds: the manifest's dtype and sample count,
// every sequence exactly sample_tokens long.
absl::Status ValidateIdx(std::string_view idx, const std::string& path, TokenDtype dtype,
                         uint32_t sample_tokens, uint64_t samples) {
  auto bad = [&](const std::string& what) {
    return absl::DataLossError(absl::StrCat(path, ": corrupt index: ", what));
  };
  ASSIGN_OR_RETURN(IdxView v, ParseIdx(idx, path));
  if (v.dtype != dtype) {
    return bad(absl::StrCat("dtype code ", IdxDtypeCode(v.dtype), ", manifest's token_dtype needs ",
                            IdxDtypeCode(dtype)));
  }
  if (v.sequences != samples) {
    return bad(absl::StrCat("sequence_count ", v.sequences, ", manifest says ", samples));
  }
  for (uint64_t k = 0; k < v.sequences; ++k) {
    if (v.length(k) != static_cast<int32_t>(sample_tokens)) {
      return bad(absl::StrCat("sequence ", k, " length is not ", sample_tokens));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string_view TokenDtypeName(TokenDtype dtype) {
  return dtype == TokenDtype::kUint16 ? "uint16" : "int32";
}

absl::StatusOr<TokenDtype> ParseTokenDtype(std::string_view name) {
  if (name == "uint16") return TokenDtype::kUint16;
  if (name == "int32") return TokenDtype::kInt32;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown token dtype '", std::string(name), "' (uint16 or int32)"));
}

absl::Status CheckRelativePath(std::string_view path) {
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("unsafe path '", std::string(path), "' in release: ", std::string(why)));
  };
  if (path.empty()) return bad("empty");
  if (path.front() == '/') return bad("absolute");
  if (path.find('\\') != std::string_view::npos) return bad("contains a backslash");
  if (path.find('\0') != std::string_view::npos) return bad("contains NUL");
  size_t start = 0;
  while (true) {
    size_t slash = path.find('/', start);
    std::string_view part =
        path.substr(start, slash == std::string_view::npos ? path.size() - start : slash - start);
    if (part.empty()) return bad("empty component");
    if (part == "." || part == "..") return bad("escapes the release folder ('.' or '..')");
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// ShardWriter

struct ShardWriter::Impl {
  Env* env = nullptr;
  std::string dir;
  std::string name;
  uint32_t sample_tokens = 0;
  TokenDtype dtype = TokenDtype::kUint16;
  std::unique_ptr<WritableFile> bin;
  Hasher128 bin_hash;
  uint64_t bin_bytes = 0;
  uint64_t padding = 0;
  std::vector<uint64_t> offsets{0};
  std::vector<uint32_t> segments;
  std::string buf;
  bool finished = false;

  std::string Path(std::string_view ext) const { return JoinPath(dir, name + std::string(ext)); }
};

absl::StatusOr<std::unique_ptr<ShardWriter>> ShardWriter::Open(Env* env, std::string release_dir,
                                                               std::string name,
                                                               uint32_t sample_tokens,
                                                               TokenDtype dtype) {
  if (sample_tokens == 0 || sample_tokens > kMaxSampleTokens) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard ", name, ": sample_tokens must be in [1, ", kMaxSampleTokens, "], got ",
                     sample_tokens));
  }
  RETURN_IF_ERROR(CheckRelativePath(name));
  auto w = std::unique_ptr<ShardWriter>(new ShardWriter());
  w->impl_ = std::make_unique<Impl>();
  Impl& im = *w->impl_;
  im.env = env;
  im.dir = std::move(release_dir);
  im.name = std::move(name);
  im.sample_tokens = sample_tokens;
  im.dtype = dtype;
  ASSIGN_OR_RETURN(im.bin, env->NewWritableFile(im.Path(".bin.tmp")));
  im.bin->SetWritebackBytes(kWritebackBytes);
  return w;
}

ShardWriter::~ShardWriter() {
  if (impl_ && !impl_->finished && impl_->bin) {
    (void)impl_->bin->Close();
    (void)impl_->env->RemoveFile(impl_->Path(".bin.tmp"));
  }
}

uint64_t ShardWriter::bytes() const {
  const Impl& im = *impl_;
  uint64_t n = samples_;
  return im.bin_bytes + IdxSize(n, n + 1) + kSegHeaderSize + (n + 1) * 8 +
         im.segments.size() * 4 + kSegFooterSize;
}

absl::Status ShardWriter::Append(std::span<const int32_t> tokens,
                                 std::span<const uint32_t> segments) {
  Impl& im = *impl_;
  GRIST_CHECK(!im.finished, "ShardWriter::Append after Finish");
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard ", im.name, " sample ", samples_, ": ", what));
  };
  if (tokens.size() != im.sample_tokens) {
    return bad(absl::StrCat(tokens.size(), " tokens, expected ", im.sample_tokens));
  }
  uint64_t sum = 0, pad = 0;
  for (size_t j = 0; j < segments.size(); ++j) {
    uint32_t w = segments[j];
    if (SegmentLength(w) == 0) return bad("zero-length segment");
    if (SegmentIsPadding(w)) {
      if (j + 1 != segments.size()) return bad("padding segment is not the last");
      pad = SegmentLength(w);
    }
    sum += SegmentLength(w);
  }
  if (sum != im.sample_tokens) {
    return bad(absl::StrCat("segments sum to ", sum, ", expected ", im.sample_tokens));
  }
  std::string_view bytes;
  if (const size_t b = TokenBytes(im.dtype, tokens, &im.buf, &bytes); b != tokens.size()) {
    return bad(absl::StrCat("token id ", tokens[b], " does not fit ",
                            std::string(TokenDtypeName(im.dtype))));
  }
  RETURN_IF_ERROR(im.bin->Append(bytes));
  im.bin_hash.Update(bytes);
  im.bin_bytes += bytes.size();
  im.segments.insert(im.segments.end(), segments.begin(), segments.end());
  im.offsets.push_back(im.segments.size());
  im.padding += pad;
  ++samples_;
  return absl::OkStatus();
}

absl::StatusOr<ShardInfo> ShardWriter::Finish() {
  Impl& im = *impl_;
  GRIST_CHECK(!im.finished, "ShardWriter::Finish twice");
  const uint64_t n = samples_;
  const std::string idx =
      EncodeIdx(im.dtype, std::vector<int32_t>(n, static_cast<int32_t>(im.sample_tokens)));

  std::string seg;
  seg.reserve(kSegHeaderSize + (n + 1) * 8 + im.segments.size() * 4 + kSegFooterSize);
  seg.append(kSegMagic, sizeof(kSegMagic));
  Put<uint32_t>(&seg, kSegVersion);
  Put<uint32_t>(&seg, im.sample_tokens);
  Put<uint32_t>(&seg, 0);
  Put<uint32_t>(&seg, 0);
  Put<uint64_t>(&seg, n);
  Put<uint64_t>(&seg, im.segments.size());
  seg.append(reinterpret_cast<const char*>(im.offsets.data()), im.offsets.size() * 8);
  seg.append(reinterpret_cast<const char*>(im.segments.data()), im.segments.size() * 4);
  Put<uint64_t>(&seg, Hash64(seg));

  RETURN_IF_ERROR(im.bin->Sync());
  RETURN_IF_ERROR(im.bin->Close());
  RETURN_IF_ERROR(WriteAndSync(im.env, im.Path(".idx.tmp"), idx));
  RETURN_IF_ERROR(WriteAndSync(im.env, im.Path(".seg.tmp"), seg));
  for (const char* ext : {".bin", ".idx", ".seg"}) {
    RETURN_IF_ERROR(im.env->RenameFile(im.Path(std::string(ext) + ".tmp"), im.Path(ext)));
  }
  RETURN_IF_ERROR(im.env->SyncDir(DirName(im.Path(".bin"))));
  im.finished = true;

  ShardInfo info;
  info.name = im.name;
  info.samples = n;
  info.tokens = n * im.sample_tokens;
  info.padding_tokens = im.padding;
  info.bin = {im.name + ".bin", im.bin_bytes, im.bin_hash.Digest()};
  info.idx = {im.name + ".idx", idx.size(), Hash128Of(idx)};
  info.seg = {im.name + ".seg", seg.size(), Hash128Of(seg)};
  return info;
}

// ---------------------------------------------------------------------------------------------
// ShardReader

struct ShardReader::Impl {
  std::unique_ptr<internal::MappedFile> bin, idx, seg;
  const char* offsets = nullptr;
  const uint32_t* segments = nullptr;
};

absl::StatusOr<std::unique_ptr<ShardReader>> ShardReader::Open(Env* env,
                                                               const std::string& release_dir,
                                                               const ShardInfo& info,
                                                               uint32_t sample_tokens,
                                                               TokenDtype dtype,
                                                               ShardReadOptions options) {
  if (sample_tokens == 0 || sample_tokens > kMaxSampleTokens) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard ", info.name, ": invalid sample_tokens ", sample_tokens));
  }
  for (const FileInfo* f : {&info.bin, &info.idx, &info.seg}) RETURN_IF_ERROR(CheckRelativePath(f->path));
  const uint64_t stride = static_cast<uint64_t>(sample_tokens) * TokenDtypeSize(dtype);
  const std::string bin_path = JoinPath(release_dir, info.bin.path);
  if (info.samples > (UINT64_MAX / stride) || info.bin.bytes != info.samples * stride) {
    return absl::DataLossError(absl::StrCat(bin_path, ": manifest says ", info.bin.bytes,
                                            " bytes for ", info.samples, " samples of ", stride,
                                            " bytes"));
  }
  auto r = std::unique_ptr<ShardReader>(new ShardReader());
  r->impl_ = std::make_unique<Impl>();
  Impl& im = *r->impl_;
  ASSIGN_OR_RETURN(im.bin, internal::MappedFile::Open(env, bin_path, info.bin.bytes));
  const std::string idx_path = JoinPath(release_dir, info.idx.path);
  ASSIGN_OR_RETURN(im.idx, internal::MappedFile::Open(env, idx_path, info.idx.bytes));
  RETURN_IF_ERROR(ValidateIdx(im.idx->view(), idx_path, dtype, sample_tokens, info.samples));
  const std::string seg_path = JoinPath(release_dir, info.seg.path);
  ASSIGN_OR_RETURN(im.seg, internal::MappedFile::Open(env, seg_path, info.seg.bytes));
  RETURN_IF_ERROR(ValidateSeg(im.seg->view(), seg_path, sample_tokens, info.samples));
  if (options.verify_checksums) {
    for (const auto& [file, fi] : {std::pair{im.bin.get(), &info.bin},
                                   std::pair{im.idx.get(), &info.idx},
                                   std::pair{im.seg.get(), &info.seg}}) {
      Hash128 h = Hash128Of(file->data(), file->size());
      if (h != fi->xxh3_128) {
        return absl::DataLossError(absl::StrCat(file->path(), ": XXH3-128 ", h.ToHex(),
                                                " does not match the manifest's ",
                                                fi->xxh3_128.ToHex()));
      }
    }
  }
  im.offsets = im.seg->data() + kSegHeaderSize;
  im.segments = reinterpret_cast<const uint32_t*>(im.offsets + (info.samples + 1) * 8);
  r->samples_ = info.samples;
  r->sample_tokens_ = sample_tokens;
  r->dtype_ = dtype;
  return r;
}

ShardReader::~ShardReader() = default;

SampleView ShardReader::sample(uint64_t k) const {
  GRIST_CHECK(k < samples_, "ShardReader::sample index out of range");
  const Impl& im = *impl_;
  SampleView v;
  v.dtype = dtype_;
  v.sample_tokens = sample_tokens_;
  v.tokens = im.bin->data() + k * sample_tokens_ * TokenDtypeSize(dtype_);
  uint64_t b = Get<uint64_t>(im.offsets + k * 8), e = Get<uint64_t>(im.offsets + (k + 1) * 8);
  v.segments = std::span<const uint32_t>(im.segments + b, e - b);
  return v;
}

}  // namespace grist::shard
