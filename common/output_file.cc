#include "common/output_file.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/env.h"

namespace grist {
namespace {

absl::Status WriteAllTo(int fd, std::string_view data, const std::string& what) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::ErrnoToStatus(errno, absl::StrCat("writing ", what));
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

// Opens an existing non-regular file (device, FIFO, socket, /proc magic link) and appends.
absl::Status WriteThrough(const std::string& path, std::string_view data) {
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("opening ", path));
  absl::Status s = WriteAllTo(fd, data, path);
  if (::close(fd) != 0 && s.ok()) s = absl::ErrnoToStatus(errno, absl::StrCat("closing ", path));
  return s;
}

}  // namespace

absl::Status WriteOutputFile(const std::string& path, std::string_view data, int stdout_fd) {
  if (path == "-") {
    absl::Status s = WriteAllTo(stdout_fd, data, "the standard output");
    if (s.ok() && !data.empty() && data.back() != '\n') s = WriteAllTo(stdout_fd, "\n", "the standard output");
    return s;
  }
  struct stat ls;
  if (::lstat(path.c_str(), &ls) != 0) {
    if (errno != ENOENT) return absl::ErrnoToStatus(errno, absl::StrCat("stat ", path));
    return WriteFileAtomic(Env::Default(), path, data);  // a new file
  }
  if (S_ISREG(ls.st_mode)) return WriteFileAtomic(Env::Default(), path, data);
  if (!S_ISLNK(ls.st_mode)) return WriteThrough(path, data);
  // A link: follow it hop by hop. A /proc/<pid>/fd link is a handle on an open file (perhaps the
  // standard output redirected to a file this process is still writing), never a name to replace.
  std::string cur = path;
  for (int hop = 0; hop < 40; ++hop) {
    if (cur.rfind("/proc/", 0) == 0 || cur.rfind("/dev/fd/", 0) == 0) return WriteThrough(path, data);
    struct stat cs;
    if (::lstat(cur.c_str(), &cs) != 0) {
      if (errno != ENOENT) return absl::ErrnoToStatus(errno, absl::StrCat("stat ", cur));
      return WriteFileAtomic(Env::Default(), cur, data);  // a dangling link: create its target
    }
    if (S_ISREG(cs.st_mode)) return WriteFileAtomic(Env::Default(), cur, data);
    if (!S_ISLNK(cs.st_mode)) return WriteThrough(path, data);
    char buf[PATH_MAX];
    ssize_t n = ::readlink(cur.c_str(), buf, sizeof(buf) - 1);
    if (n < 0) return absl::ErrnoToStatus(errno, absl::StrCat("readlink ", cur));
    std::string next(buf, static_cast<size_t>(n));
    if (next.empty()) return absl::DataLossError(absl::StrCat(cur, ": empty symbolic link"));
    cur = next.front() == '/' ? next : JoinPath(DirName(cur), next);
  }
  return absl::FailedPreconditionError(absl::StrCat(path, ": too many levels of symbolic links"));
}

}  // namespace grist
