// The POSIX Env.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/status_macros.h"

namespace grist {
namespace {

absl::Status PathError(int err, std::string_view op, const std::string& path) {
  return ErrnoError(err, absl::StrCat(std::string(op), " ", path));
}

class PosixSequentialFile : public SequentialFile {
 public:
  PosixSequentialFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixSequentialFile() override { ::close(fd_); }
  absl::StatusOr<size_t> Read(char* buf, size_t n) override {
    while (true) {
      ssize_t r = ::read(fd_, buf, n);
      if (r >= 0) return static_cast<size_t>(r);
      if (errno == EINTR) continue;
      return PathError(errno, "read", path_);
    }
  }
  const std::string& path() const override { return path_; }

 private:
  std::string path_;
  int fd_;
};

class PosixRandomAccessFile : public RandomAccessFile {
 public:
  PosixRandomAccessFile(std::string path, int fd, uint64_t size)
      : path_(std::move(path)), fd_(fd), size_(size) {}
  ~PosixRandomAccessFile() override { ::close(fd_); }
  absl::StatusOr<size_t> ReadAt(uint64_t offset, char* buf, size_t n) const override {
    size_t done = 0;
    while (done < n) {
      ssize_t r = ::pread(fd_, buf + done, n - done, static_cast<off_t>(offset + done));
      if (r < 0) {
        if (errno == EINTR) continue;
        return PathError(errno, "pread", path_);
      }
      if (r == 0) break;
      done += static_cast<size_t>(r);
    }
    return done;
  }
  uint64_t Size() const override { return size_; }
  const std::string& path() const override { return path_; }

 private:
  std::string path_;
  int fd_;
  uint64_t size_;
};

class PosixWritableFile : public WritableFile {
 public:
  PosixWritableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {
    buf_.reserve(kBufSize);
  }
  ~PosixWritableFile() override { (void)Close(); }
  absl::Status Append(std::string_view data) override {
    if (fd_ < 0) return absl::FailedPreconditionError(absl::StrCat("append to closed ", path_));
    size_ += data.size();
    if (buf_.size() + data.size() <= kBufSize) {
      buf_.append(data);
      return absl::OkStatus();
    }
    RETURN_IF_ERROR(Flush());
    if (data.size() >= kBufSize) return WriteRaw(data);
    buf_.append(data);
    return absl::OkStatus();
  }
  absl::Status Flush() override {
    if (buf_.empty()) return absl::OkStatus();
    absl::Status s = WriteRaw(buf_);
    buf_.clear();
    return s;
  }
  absl::Status Sync() override {
    RETURN_IF_ERROR(Flush());
    if (::fsync(fd_) != 0) return PathError(errno, "fsync", path_);
    return absl::OkStatus();
  }
  absl::Status Close() override {
    if (fd_ < 0) return absl::OkStatus();
    absl::Status s = Flush();
    if (::close(fd_) != 0 && s.ok()) s = PathError(errno, "close", path_);
    fd_ = -1;
    return s;
  }
  uint64_t Size() const override { return size_; }
  const std::string& path() const override { return path_; }
  void SetWritebackBytes(uint64_t bytes) override { writeback_bytes_ = bytes; }

 private:
  static constexpr size_t kBufSize = 1 << 20;
  absl::Status WriteRaw(std::string_view data) {
    while (!data.empty()) {
      ssize_t w = ::write(fd_, data.data(), data.size());
      if (w < 0) {
        if (errno == EINTR) continue;
        return PathError(errno, "write", path_);
      }
      data.remove_prefix(static_cast<size_t>(w));
      written_ += static_cast<uint64_t>(w);
    }
    if (writeback_bytes_ > 0 && written_ - writeback_from_ >= writeback_bytes_) {
      // Errors are left to Sync(): the range is only a head start for it.
      (void)::sync_file_range(fd_, static_cast<off_t>(writeback_from_),
                              static_cast<off_t>(written_ - writeback_from_), SYNC_FILE_RANGE_WRITE);
      writeback_from_ = written_;
    }
    return absl::OkStatus();
  }
  std::string path_;
  int fd_;
  uint64_t size_ = 0;
  std::string buf_;
  uint64_t written_ = 0;         // bytes written to fd_
  uint64_t writeback_bytes_ = 0;  // SetWritebackBytes
  uint64_t writeback_from_ = 0;   // where the next write-back range starts
};

class PosixEnv : public Env {
 public:
  absl::StatusOr<std::unique_ptr<SequentialFile>> NewSequentialFile(
      const std::string& path) override {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return PathError(errno, "open", path);
    struct stat st;
    if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
      ::close(fd);
      return absl::FailedPreconditionError(absl::StrCat("open ", path, ": is a directory"));
    }
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    return std::unique_ptr<SequentialFile>(new PosixSequentialFile(path, fd));
  }
  absl::StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& path) override {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return PathError(errno, "open", path);
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      int e = errno;
      ::close(fd);
      return PathError(e, "fstat", path);
    }
    return std::unique_ptr<RandomAccessFile>(
        new PosixRandomAccessFile(path, fd, static_cast<uint64_t>(st.st_size)));
  }
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return PathError(errno, "create", path);
    return std::unique_ptr<WritableFile>(new PosixWritableFile(path, fd));
  }
  bool FileExists(const std::string& path) override { return ::access(path.c_str(), F_OK) == 0; }
  bool IsDirectory(const std::string& path) override {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  }
  absl::StatusOr<uint64_t> GetFileSize(const std::string& path) override {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return PathError(errno, "stat", path);
    return static_cast<uint64_t>(st.st_size);
  }
  absl::StatusOr<FileStat> Stat(const std::string& path) override {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return PathError(errno, "stat", path);
    auto ns = [](const struct timespec& t) {
      return static_cast<int64_t>(t.tv_sec) * 1000000000 + static_cast<int64_t>(t.tv_nsec);
    };
    return FileStat{.size = static_cast<uint64_t>(st.st_size),
                    .mtime_ns = ns(st.st_mtim),
                    .ctime_ns = ns(st.st_ctim),
                    .inode = static_cast<uint64_t>(st.st_ino),
                    .directory = S_ISDIR(st.st_mode)};
  }
  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& dir) override {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return PathError(errno, "opendir", dir);
    std::vector<std::string> names;
    while (struct dirent* e = ::readdir(d)) {
      std::string_view n(e->d_name);
      if (n == "." || n == "..") continue;
      names.emplace_back(n);
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    return names;
  }
  absl::Status CreateDirs(const std::string& path) override {
    if (path.empty()) return absl::OkStatus();
    std::string cur;
    size_t pos = 0;
    while (pos != std::string::npos) {
      pos = path.find('/', pos + 1);
      cur = path.substr(0, pos);
      if (cur.empty()) continue;
      if (::mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) return PathError(errno, "mkdir", cur);
    }
    if (!IsDirectory(path)) {
      return absl::FailedPreconditionError(absl::StrCat("mkdir ", path, ": not a directory"));
    }
    return absl::OkStatus();
  }
  absl::Status RemoveFile(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return PathError(errno, "unlink", path);
    return absl::OkStatus();
  }
  absl::Status RemoveAll(const std::string& path) override {
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) {
      if (errno == ENOENT) return absl::OkStatus();
      return PathError(errno, "lstat", path);
    }
    if (S_ISDIR(st.st_mode)) {
      ASSIGN_OR_RETURN(std::vector<std::string> names, ListDir(path));
      for (const auto& n : names) RETURN_IF_ERROR(RemoveAll(JoinPath(path, n)));
      if (::rmdir(path.c_str()) != 0) return PathError(errno, "rmdir", path);
      return absl::OkStatus();
    }
    return RemoveFile(path);
  }
  absl::Status RenameFile(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) {
      return PathError(errno, "rename", absl::StrCat(from, " -> ", to));
    }
    return absl::OkStatus();
  }
  absl::Status SyncDir(const std::string& dir) override {
    return FsyncPath(dir, O_DIRECTORY, "open directory", "fsync directory");
  }
  absl::Status SyncFile(const std::string& path) override {
    return FsyncPath(path, 0, "open", "fsync");
  }

 private:
  // Opens `path` read-only (with `flags`), fsyncs and closes it; the error names the step.
  static absl::Status FsyncPath(const std::string& path, int flags, const char* open_what,
                                const char* fsync_what) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | flags);
    if (fd < 0) return PathError(errno, open_what, path);
    int r = ::fsync(fd);
    int e = errno;
    ::close(fd);
    if (r != 0) return PathError(e, fsync_what, path);
    return absl::OkStatus();
  }
};

}  // namespace

Env* Env::Default() {
  static Env* env = new PosixEnv();
  return env;
}

std::string DirName(const std::string& path) {
  size_t p = path.find_last_of('/');
  if (p == std::string::npos) return ".";
  if (p == 0) return "/";
  return path.substr(0, p);
}

std::string BaseName(const std::string& path) {
  size_t p = path.find_last_of('/');
  return p == std::string::npos ? path : path.substr(p + 1);
}

std::string JoinPath(std::string_view a, std::string_view b) {
  if (a.empty()) return std::string(b);
  if (!b.empty() && b.front() == '/') return std::string(b);
  std::string out(a);
  if (out.back() != '/') out.push_back('/');
  out.append(b);
  return out;
}

absl::StatusOr<std::string> ReadFileToString(Env* env, const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<SequentialFile> f, env->NewSequentialFile(path));
  std::string out;
  char buf[1 << 16];
  while (true) {
    ASSIGN_OR_RETURN(size_t n, f->Read(buf, sizeof(buf)));
    if (n == 0) break;
    out.append(buf, n);
  }
  return out;
}

absl::Status WriteFileAtomic(Env* env, const std::string& path, std::string_view data) {
  std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  {
    ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> f, env->NewWritableFile(tmp));
    absl::Status s = f->Append(data);
    if (s.ok()) s = f->Sync();
    if (s.ok()) s = f->Close();
    if (!s.ok()) {
      (void)env->RemoveFile(tmp);
      return s;
    }
  }
  absl::Status s = env->RenameFile(tmp, path);
  if (!s.ok()) {
    (void)env->RemoveFile(tmp);
    return s;
  }
  return env->SyncDir(DirName(path));
}

}  // namespace grist
