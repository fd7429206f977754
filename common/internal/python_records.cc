#include "common/internal/python_records.h"

#include <fcntl.h>
#include <glob.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/input_plan.h"

extern char** environ;

namespace grist::internal {

namespace {

// Runs a file as __main__ without putting its folder (or the working directory) on sys.path, so
// grist's module names (data.py, loader.py, ...) never shadow the libraries the reader imports.
constexpr char kRunPath[] =
    "import runpy, sys; del sys.path[0]; sys.argv = sys.argv[1:]; "
    "runpy.run_path(sys.argv[0], run_name='__main__')";

std::string ExeDir() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  std::string p(buf, static_cast<size_t>(n));
  const size_t slash = p.rfind('/');
  return slash == std::string::npos ? "" : p.substr(0, slash);
}

bool IsRegularFile(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string Interpreter() {
  const char* env = std::getenv("GRIST_PYTHON");
  if (env != nullptr && *env != '\0') return env;
  const std::string dir = ExeDir();
  if (!dir.empty() && ::access((dir + "/python3").c_str(), X_OK) == 0) return dir + "/python3";
  return "python3";
}

// The arguments that run python/grist/hf.py (see the header for the search order).
std::vector<std::string> ReaderArgs() {
  const std::string dir = ExeDir();
  if (!dir.empty()) {
    const std::string beside = dir + "/python/grist/hf.py";
    if (IsRegularFile(beside)) return {"-c", kRunPath, beside};
    glob_t g;
    const std::string pattern = dir + "/../lib/python3*/site-packages/grist/hf.py";
    if (::glob(pattern.c_str(), 0, nullptr, &g) == 0) {
      std::string found = g.gl_pathc > 0 ? g.gl_pathv[0] : "";
      ::globfree(&g);
      if (!found.empty()) return {"-c", kRunPath, found};
    } else {
      ::globfree(&g);
    }
  }
  return {"-m", "grist.hf"};
}

// The last non-empty line of what the child wrote to `fd` (its standard error), at most 1 KiB.
std::string LastLine(int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0 || st.st_size <= 0) return "";
  const off_t want = std::min<off_t>(st.st_size, 8192);
  std::string tail(static_cast<size_t>(want), '\0');
  const ssize_t got = ::pread(fd, tail.data(), tail.size(), st.st_size - want);
  if (got <= 0) return "";
  tail.resize(static_cast<size_t>(got));
  std::vector<absl::string_view> lines = absl::StrSplit(tail, absl::ByAnyChar("\r\n"), absl::SkipWhitespace());
  if (lines.empty()) return "";
  return std::string(lines.back().substr(0, 1024));
}

class ChildSource : public ByteSource {
 public:
  ChildSource(std::string display, std::string command, pid_t pid, int out_fd, int err_fd)
      : display_(std::move(display)), command_(std::move(command)), pid_(pid), out_(out_fd),
        err_(err_fd) {}

  ~ChildSource() override {
    if (out_ >= 0) ::close(out_);
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      int status;
      while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
    }
    if (err_ >= 0) ::close(err_);
  }

  absl::StatusOr<size_t> Read(char* buf, size_t n) override {
    if (!final_.ok()) return final_;
    if (out_ < 0) return size_t{0};
    while (true) {
      const ssize_t got = ::read(out_, buf, n);
      if (got > 0) {
        consumed_ += static_cast<uint64_t>(got);
        return static_cast<size_t>(got);
      }
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) {
        final_ = ErrnoError(errno, absl::StrCat(display_, ": reading the Python reader's output"));
        return final_;
      }
      break;
    }
    ::close(out_);
    out_ = -1;
    int status = 0;
    pid_t r;
    while ((r = ::waitpid(pid_, &status, 0)) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    if (r < 0) {
      final_ = ErrnoError(errno, absl::StrCat(display_, ": waiting for the Python reader"));
      return final_;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return size_t{0};
    final_ = Failure(status);
    return final_;
  }

  uint64_t consumed() const override { return consumed_; }

 private:
  absl::Status Failure(int status) const {
    const std::string line = LastLine(err_);
    if (absl::StartsWith(line, "grist.hf: ")) {
      // hf.py's own message already names the source.
      return absl::FailedPreconditionError(std::string(absl::StripPrefix(line, "grist.hf: ")));
    }
    std::string how = WIFEXITED(status) ? absl::StrCat("exited with status ", WEXITSTATUS(status))
                                        : absl::StrCat("was killed by signal ", WTERMSIG(status));
    return absl::FailedPreconditionError(
        absl::StrCat(display_, ": the Python reader (", command_, ") ", how,
                     line.empty() ? "" : ": ", line,
                     " (set GRIST_PYTHON to a Python with pyarrow and datasets, "
                     "see docs/hf.md)"));
  }

  std::string display_;
  std::string command_;
  pid_t pid_;
  int out_;
  int err_;
  uint64_t consumed_ = 0;
  absl::Status final_;
};

}  // namespace

bool IsPythonFormat(InputFormat format) {
  return format == InputFormat::kParquet || format == InputFormat::kHfDataset;
}

absl::StatusOr<std::unique_ptr<ByteSource>> OpenPythonRecords(const InputFile& file,
                                                              const std::string& text_field) {
  if (!IsPythonFormat(file.format)) {
    return absl::InvalidArgumentError(absl::StrCat(file.path, ": not a Parquet or dataset input"));
  }
  const bool dataset = file.format == InputFormat::kHfDataset;
  std::string source = file.path;
  if (dataset && source.rfind(kHfDatasetPrefix, 0) == 0) source.erase(0, kHfDatasetPrefix.size());
  const std::string python = Interpreter();
  std::vector<std::string> args = {python};
  for (std::string& a : ReaderArgs()) args.push_back(std::move(a));
  const std::string command = absl::StrCat(python, " ", args.back());
  for (const char* a : {"--records", dataset ? "hf-dataset" : "parquet"}) args.emplace_back(a);
  args.push_back(source);
  args.emplace_back("--text-field");
  args.push_back(text_field);

  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return ErrnoError(errno, absl::StrCat(file.path, ": pipe"));
  const int err = ::memfd_create("grist-python-reader-stderr", MFD_CLOEXEC);
  if (err < 0) {
    const int e = errno;
    ::close(out[0]);
    ::close(out[1]);
    return ErrnoError(e, absl::StrCat(file.path, ": memfd_create"));
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err, 2);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, python.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(out[1]);
  if (rc != 0) {
    ::close(out[0]);
    ::close(err);
    return absl::FailedPreconditionError(absl::StrCat(
        file.path, ": reading ", dataset ? "a Hugging Face dataset" : "Parquet",
        " needs Python 3 with ", dataset ? "datasets" : "pyarrow", ": cannot run '", python,
        "' (", std::strerror(rc), "); set GRIST_PYTHON to the interpreter of an environment "
        "that has it (see docs/hf.md)"));
  }
  return std::unique_ptr<ByteSource>(new ChildSource(file.path, command, pid, out[0], err));
}

}  // namespace grist::internal
