#include "tokenize/indexed_dataset.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/status_macros.h"

namespace grist::tokenize {
namespace {

constexpr char kMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
constexpr size_t kHeader = 9 + 8 + 1 + 8 + 8;
constexpr uint8_t kCodeUint16 = 8, kCodeInt32 = 4;

template <typename T>
void Put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(v));
}
template <typename T>
T Get(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

}  // namespace

absl::StatusOr<std::unique_ptr<IndexedDatasetWriter>> IndexedDatasetWriter::Open(
    Env* env, std::string prefix, int dtype_bytes) {
  if (dtype_bytes != 2 && dtype_bytes != 4) {
    return absl::InvalidArgumentError(absl::StrCat("dtype size ", dtype_bytes, " (2 or 4)"));
  }
  auto w = std::unique_ptr<IndexedDatasetWriter>(new IndexedDatasetWriter());
  w->env_ = env;
  w->prefix_ = std::move(prefix);
  w->dtype_bytes_ = dtype_bytes;
  ASSIGN_OR_RETURN(w->bin_, env->NewWritableFile(w->prefix_ + ".bin.tmp"));
  return w;
}

IndexedDatasetWriter::~IndexedDatasetWriter() {
  if (!finished_ && bin_) {
    (void)bin_->Close();
    (void)env_->RemoveFile(prefix_ + ".bin.tmp");
  }
}

absl::Status IndexedDatasetWriter::Add(std::span<const int> ids) {
  if (ids.size() > static_cast<size_t>(INT32_MAX)) {
    return absl::InvalidArgumentError("sequence longer than 2^31-1 tokens");
  }
  const int64_t hi = dtype_bytes_ == 2 ? 65535 : INT32_MAX;
  buf_.resize(ids.size() * dtype_bytes_);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] > hi) {
      return absl::InvalidArgumentError(absl::StrCat(prefix_, ": token id ", ids[i],
                                                     " does not fit the dataset's dtype"));
    }
    if (dtype_bytes_ == 2) {
      uint16_t v = static_cast<uint16_t>(ids[i]);
      std::memcpy(&buf_[i * 2], &v, 2);
    } else {
      int32_t v = ids[i];
      std::memcpy(&buf_[i * 4], &v, 4);
    }
  }
  RETURN_IF_ERROR(bin_->Append(buf_));
  lengths_.push_back(static_cast<int32_t>(ids.size()));
  tokens_ += ids.size();
  return absl::OkStatus();
}

absl::StatusOr<DatasetInfo> IndexedDatasetWriter::Finish() {
  const uint64_t n = lengths_.size();
  std::string idx;
  idx.reserve(kHeader + n * 12 + (n + 1) * 8);
  idx.append(kMagic, 9);
  Put<uint64_t>(&idx, 1);
  Put<uint8_t>(&idx, dtype_bytes_ == 2 ? kCodeUint16 : kCodeInt32);
  Put<uint64_t>(&idx, n);
  Put<uint64_t>(&idx, n + 1);
  for (int32_t l : lengths_) Put<int32_t>(&idx, l);
  int64_t ptr = 0;
  for (int32_t l : lengths_) {
    Put<int64_t>(&idx, ptr);
    ptr += static_cast<int64_t>(l) * dtype_bytes_;
  }
  for (uint64_t k = 0; k <= n; ++k) Put<int64_t>(&idx, static_cast<int64_t>(k));
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
  info.sequences = n;
  info.tokens = tokens_;
  info.dtype_bytes = dtype_bytes_;
  info.bin_bytes = tokens_ * dtype_bytes_;
  info.idx_bytes = idx.size();
  return info;
}

struct IndexedDatasetReader::Impl {
  std::string copy;  // non-POSIX Env
  void* map = nullptr;
  size_t map_size = 0;
  const char* data = nullptr;
  ~Impl() {
    if (map != nullptr) ::munmap(map, map_size);
  }
};

absl::StatusOr<std::unique_ptr<IndexedDatasetReader>> IndexedDatasetReader::Open(
    Env* env, const std::string& prefix) {
  const std::string idx_path = prefix + ".idx", bin_path = prefix + ".bin";
  ASSIGN_OR_RETURN(std::string idx, ReadFileToString(env, idx_path));
  auto bad = [&](const std::string& what) {
    return absl::DataLossError(absl::StrCat(idx_path, ": corrupt index: ", what));
  };
  if (idx.size() < kHeader) return bad("shorter than its header");
  const char* p = idx.data();
  if (std::memcmp(p, kMagic, 9) != 0) return bad("bad magic (not MMIDIDX)");
  if (Get<uint64_t>(p + 9) != 1) return bad("unsupported version");
  uint8_t code = static_cast<uint8_t>(p[17]);
  if (code != kCodeUint16 && code != kCodeInt32) return bad(absl::StrCat("dtype code ", code));
  auto r = std::unique_ptr<IndexedDatasetReader>(new IndexedDatasetReader());
  r->dtype_bytes_ = code == kCodeUint16 ? 2 : 4;
  uint64_t n = Get<uint64_t>(p + 18), d = Get<uint64_t>(p + 26);
  if (n > idx.size() || d != n + 1) return bad("counts");
  if (kHeader + n * 12 + d * 8 != idx.size()) {
    return bad(absl::StrCat("size ", idx.size(), " bytes, header implies ",
                            kHeader + n * 12 + d * 8));
  }
  r->lengths_.resize(n);
  r->offsets_.resize(n + 1);
  std::memcpy(r->lengths_.data(), p + kHeader, n * 4);
  uint64_t tok = 0;
  for (uint64_t k = 0; k < n; ++k) {
    if (r->lengths_[k] < 0) return bad(absl::StrCat("negative length of sequence ", k));
    if (Get<int64_t>(p + kHeader + n * 4 + k * 8) != static_cast<int64_t>(tok * r->dtype_bytes_)) {
      return bad(absl::StrCat("pointer of sequence ", k));
    }
    r->offsets_[k] = tok;
    tok += static_cast<uint64_t>(r->lengths_[k]);
  }
  r->offsets_[n] = tok;
  for (uint64_t k = 0; k <= n; ++k) {
    if (Get<int64_t>(p + kHeader + n * 12 + k * 8) != static_cast<int64_t>(k)) {
      return bad(absl::StrCat("document index ", k));
    }
  }
  r->tokens_ = tok;
  const uint64_t want = tok * r->dtype_bytes_;
  r->impl_ = std::make_unique<Impl>();
  if (env != Env::Default()) {
    ASSIGN_OR_RETURN(r->impl_->copy, ReadFileToString(env, bin_path));
    if (r->impl_->copy.size() != want) {
      return absl::DataLossError(absl::StrCat(bin_path, ": size ", r->impl_->copy.size(),
                                              " bytes, index implies ", want));
    }
    r->impl_->data = r->impl_->copy.data();
    return r;
  }
  int fd = ::open(bin_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, bin_path);
  struct stat st;
  if (::fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) != want) {
    ::close(fd);
    return absl::DataLossError(absl::StrCat(bin_path, ": size ", st.st_size,
                                            " bytes, index implies ", want));
  }
  if (want > 0) {
    void* m = ::mmap(nullptr, want, PROT_READ, MAP_SHARED, fd, 0);
    int e = errno;
    ::close(fd);
    if (m == MAP_FAILED) return ErrnoError(e, absl::StrCat("mmap ", bin_path));
    r->impl_->map = m;
    r->impl_->map_size = want;
    r->impl_->data = static_cast<const char*>(m);
  } else {
    ::close(fd);
    r->impl_->data = "";
  }
  return r;
}

IndexedDatasetReader::~IndexedDatasetReader() = default;

void IndexedDatasetReader::Read(uint64_t i, std::vector<int32_t>* out) const {
  const uint64_t b = offsets_[i], e = offsets_[i + 1];
  const char* d = impl_->data;
  if (dtype_bytes_ == 2) {
    const uint16_t* t = reinterpret_cast<const uint16_t*>(d) + b;
    out->insert(out->end(), t, t + (e - b));
  } else {
    const int32_t* t = reinterpret_cast<const int32_t*>(d) + b;
    out->insert(out->end(), t, t + (e - b));
  }
}

}  // namespace grist::tokenize
