#include "shard/indexed_dataset.h"

#include <bit>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/status_macros.h"
#include "shard/internal/le_bytes.h"
#include "shard/internal/mapped_file.h"

namespace grist::shard {
namespace {

using internal::Get;
using internal::Put;

}  // namespace

std::string EncodeIdx(TokenDtype dtype, std::span<const int32_t> lengths) {
  const uint64_t n = lengths.size();
  const int64_t size = static_cast<int64_t>(TokenDtypeSize(dtype));
  std::string idx;
  idx.reserve(IdxSize(n, n + 1));
  idx.append(kIdxMagic, kIdxMagicSize);
  Put<uint64_t>(&idx, kIdxVersion);
  Put<uint8_t>(&idx, IdxDtypeCode(dtype));
  Put<uint64_t>(&idx, n);
  Put<uint64_t>(&idx, n + 1);
  idx.append(reinterpret_cast<const char*>(lengths.data()), n * 4);
  int64_t ptr = 0;
  for (int32_t l : lengths) {
    Put<int64_t>(&idx, ptr);
    ptr += static_cast<int64_t>(l) * size;
  }
  for (uint64_t k = 0; k <= n; ++k) Put<int64_t>(&idx, static_cast<int64_t>(k));
  return idx;
}

int32_t IdxView::length(uint64_t i) const { return Get<int32_t>(lengths + i * 4); }

absl::StatusOr<IdxView> ParseIdx(std::string_view idx, const std::string& path) {
  auto bad = [&](const std::string& what) {
    return absl::DataLossError(absl::StrCat(path, ": corrupt index: ", what));
  };
  if (idx.size() < kIdxHeaderSize) return bad("shorter than its header");
  const char* p = idx.data();
  if (std::memcmp(p, kIdxMagic, kIdxMagicSize) != 0) return bad("bad magic (not MMIDIDX)");
  const uint64_t version = Get<uint64_t>(p + kIdxVersionOffset);
  if (version != kIdxVersion) return bad(absl::StrCat("unsupported version ", version));
  const uint8_t code = static_cast<uint8_t>(p[kIdxDtypeOffset]);
  if (code != kDtypeCodeUint16 && code != kDtypeCodeInt32) {
    return bad(absl::StrCat("dtype code ", code, " (grist reads 8 = uint16 and 4 = int32)"));
  }
  IdxView v;
  v.dtype = code == kDtypeCodeUint16 ? TokenDtype::kUint16 : TokenDtype::kInt32;
  const uint64_t n = Get<uint64_t>(p + kIdxSequenceCountOffset);
  const uint64_t d = Get<uint64_t>(p + kIdxDocumentCountOffset);
  // Bounded by the file size before any multiplication can overflow.
  if (n > idx.size() || d > idx.size()) return bad("counts exceed the file size");
  if (d != n + 1) return bad(absl::StrCat("document_count ", d, ", expected ", n + 1));
  if (IdxSize(n, d) != idx.size()) {
    return bad(absl::StrCat("size ", idx.size(), " bytes, header implies ", IdxSize(n, d)));
  }
  const char* lens = p + kIdxHeaderSize;
  const char* ptrs = lens + n * 4;
  const char* docs = ptrs + n * 8;
  const uint64_t size = TokenDtypeSize(v.dtype);
  uint64_t tok = 0;
  for (uint64_t k = 0; k < n; ++k) {
    const int32_t len = Get<int32_t>(lens + k * 4);
    if (len < 0) return bad(absl::StrCat("negative length of sequence ", k));
    if (Get<int64_t>(ptrs + k * 8) != static_cast<int64_t>(tok * size)) {
      return bad(absl::StrCat("pointer of sequence ", k, " is not ", tok * size));
    }
    tok += static_cast<uint64_t>(len);
  }
  for (uint64_t k = 0; k < d; ++k) {
    if (Get<int64_t>(docs + k * 8) != static_cast<int64_t>(k)) {
      return bad(absl::StrCat("document index ", k, " is not ", k));
    }
  }
  v.sequences = n;
  v.tokens = tok;
  v.lengths = lens;
  return v;
}

// ---------------------------------------------------------------------------------------------
// IndexedDatasetWriter

absl::StatusOr<std::unique_ptr<IndexedDatasetWriter>> IndexedDatasetWriter::Open(
    Env* env, std::string prefix, int dtype_bytes) {
  if (dtype_bytes != 2 && dtype_bytes != 4) {
    return absl::InvalidArgumentError(absl::StrCat("dtype size ", dtype_bytes, " (2 or 4)"));
  }
  auto w = std::unique_ptr<IndexedDatasetWriter>(new IndexedDatasetWriter());
  w->env_ = env;
  w->prefix_ = std::move(prefix);
  w->dtype_ = dtype_bytes == 2 ? TokenDtype::kUint16 : TokenDtype::kInt32;
  ASSIGN_OR_RETURN(w->bin_, env->NewWritableFile(w->prefix_ + ".bin.tmp"));
  w->bin_->SetWritebackBytes(kWritebackBytes);
  return w;
}

IndexedDatasetWriter::~IndexedDatasetWriter() {
  if (!finished_ && bin_) {
    (void)bin_->Close();
    (void)env_->RemoveFile(prefix_ + ".bin.tmp");
  }
}

absl::Status IndexedDatasetWriter::Add(std::span<const int32_t> ids) {
  if (ids.size() > static_cast<size_t>(INT32_MAX)) {
    return absl::InvalidArgumentError(absl::StrCat(prefix_, ": sequence longer than 2^31-1 tokens"));
  }
  std::string_view bytes;
  if (const size_t bad = TokenBytes(dtype_, ids, &buf_, &bytes); bad != ids.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(prefix_, ": token id ", ids[bad], " does not fit the dataset's dtype"));
  }
  RETURN_IF_ERROR(bin_->Append(bytes));
  bin_hash_.Update(bytes);
  lengths_.push_back(static_cast<int32_t>(ids.size()));
  tokens_ += ids.size();
  return absl::OkStatus();
}

absl::StatusOr<DatasetInfo> IndexedDatasetWriter::Finish() {
  if (finished_) return absl::FailedPreconditionError(absl::StrCat(prefix_, ": finished twice"));
  const std::string idx = EncodeIdx(dtype_, lengths_);
  RETURN_IF_ERROR(bin_->Sync());
  RETURN_IF_ERROR(bin_->Close());
  {
    ASSIGN_OR_RETURN(auto f, env_->NewWritableFile(prefix_ + ".idx.tmp"));
    RETURN_IF_ERROR(f->Append(idx));
    RETURN_IF_ERROR(f->Sync());
    RETURN_IF_ERROR(f->Close());
  }
  RETURN_IF_ERROR(env_->RenameFile(prefix_ + ".bin.tmp", prefix_ + ".bin"));
  RETURN_IF_ERROR(env_->RenameFile(prefix_ + ".idx.tmp", prefix_ + ".idx"));
  RETURN_IF_ERROR(env_->SyncDir(DirName(prefix_)));
  finished_ = true;
  DatasetInfo info;
  info.prefix = prefix_;
  info.sequences = lengths_.size();
  info.tokens = tokens_;
  info.dtype_bytes = static_cast<int>(TokenDtypeSize(dtype_));
  info.bin_bytes = tokens_ * TokenDtypeSize(dtype_);
  info.idx_bytes = idx.size();
  info.bin_xxh3_128 = bin_hash_.Digest();
  info.idx_xxh3_128 = Hash128Of(idx);
  return info;
}

// ---------------------------------------------------------------------------------------------
// IndexedDatasetReader

absl::StatusOr<std::unique_ptr<IndexedDatasetReader>> IndexedDatasetReader::Open(
    Env* env, const std::string& prefix) {
  const std::string idx_path = prefix + ".idx", bin_path = prefix + ".bin";
  ASSIGN_OR_RETURN(auto idx_file, internal::MappedFile::Open(env, idx_path));
  ASSIGN_OR_RETURN(IdxView v, ParseIdx(idx_file->view(), idx_path));
  auto r = std::unique_ptr<IndexedDatasetReader>(new IndexedDatasetReader());
  r->dtype_ = v.dtype;
  r->lengths_.resize(v.sequences);
  if (v.sequences > 0) std::memcpy(r->lengths_.data(), v.lengths, v.sequences * 4);
  r->offsets_.resize(v.sequences + 1);
  uint64_t tok = 0;
  for (uint64_t k = 0; k < v.sequences; ++k) {
    r->offsets_[k] = tok;
    tok += static_cast<uint64_t>(r->lengths_[k]);
  }
  r->offsets_[v.sequences] = tok;
  r->tokens_ = tok;
  ASSIGN_OR_RETURN(r->bin_, internal::MappedFile::Open(env, bin_path, tok * TokenDtypeSize(v.dtype)));
  return r;
}

IndexedDatasetReader::~IndexedDatasetReader() = default;

void IndexedDatasetReader::Read(uint64_t i, std::vector<int32_t>* out) const {
  const uint64_t b = offsets_[i], e = offsets_[i + 1];
  const char* d = bin_->data();
  if (dtype_ == TokenDtype::kUint16) {
    const uint16_t* t = reinterpret_cast<const uint16_t*>(d) + b;
    out->insert(out->end(), t, t + (e - b));
  } else {
    const int32_t* t = reinterpret_cast<const int32_t*>(d) + b;
    out->insert(out->end(), t, t + (e - b));
  }
}

}  // namespace grist::shard
