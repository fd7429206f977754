#include "shard/internal/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/status_macros.h"

namespace grist::shard::internal {

absl::StatusOr<std::unique_ptr<MappedFile>> MappedFile::Open(Env* env, const std::string& path,
                                                             uint64_t expected_size) {
  auto f = std::unique_ptr<MappedFile>(new MappedFile());
  f->path_ = path;
  if (env != Env::Default()) {
    ASSIGN_OR_RETURN(uint64_t size, env->GetFileSize(path));
    if (expected_size != UINT64_MAX && size != expected_size) {
      return absl::DataLossError(
          absl::StrCat(path, ": size ", size, " bytes, expected ", expected_size));
    }
    ASSIGN_OR_RETURN(f->copy_, ReadFileToString(env, path));
    if (f->copy_.size() != size) {
      return absl::DataLossError(absl::StrCat(path, ": changed while being read"));
    }
    f->data_ = f->copy_.data();
    f->size_ = f->copy_.size();
    return f;
  }
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, path);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return ErrnoError(e, path);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::FailedPreconditionError(absl::StrCat(path, ": not a regular file"));
  }
  uint64_t size = static_cast<uint64_t>(st.st_size);
  if (expected_size != UINT64_MAX && size != expected_size) {
    ::close(fd);
    return absl::DataLossError(
        absl::StrCat(path, ": size ", size, " bytes, expected ", expected_size));
  }
  f->size_ = size;
  if (size == 0) {
    ::close(fd);
    f->data_ = "";
    return f;
  }
  void* m = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  int e = errno;
  ::close(fd);
  if (m == MAP_FAILED) return ErrnoError(e, absl::StrCat("mmap ", path));
  f->map_ = m;
  f->map_size_ = size;
  f->data_ = static_cast<const char*>(m);
  return f;
}

MappedFile::~MappedFile() {
  if (map_ != nullptr) ::munmap(map_, map_size_);
}

}  // namespace grist::shard::internal
