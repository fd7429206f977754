// Helpers shared by the GoogleTest suites.
#ifndef GRIST_TESTS_TEST_UTIL_H_
#define GRIST_TESTS_TEST_UTIL_H_

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/env.h"

namespace grist::testing {

// Whether the environment asks that tests needing the test hooks fail rather than skip when the
// hooks are compiled out (GRIST_REQUIRE_TEST_HOOKS=1: scripts/test.sh and the sanitizer scripts,
// which build with -DGRIST_TEST_HOOKS=ON).
inline bool TestHooksRequired() {
  const char* e = std::getenv("GRIST_REQUIRE_TEST_HOOKS");
  return e != nullptr && std::string(e) == "1";
}

// For a test that needs the test hooks (GRIST_TEST_HOOKS: common/crash_point.h, the bench's
// GRIST_BENCH_INJECT_FAULT); `compiled_in` is crash::Enabled() or bench::FaultInjectionEnabled().
// Without them the test skips, saying why, or fails under GRIST_REQUIRE_TEST_HOOKS=1.
#define GRIST_NEED_TEST_HOOKS(compiled_in)                                                     \
  do {                                                                                         \
    if (!(compiled_in)) {                                                                      \
      if (::grist::testing::TestHooksRequired()) {                                             \
        GTEST_FAIL() << "GRIST_REQUIRE_TEST_HOOKS=1 but the test hooks are compiled out "      \
                        "(configure with -DGRIST_TEST_HOOKS=ON)";                              \
      }                                                                                        \
      GTEST_SKIP() << "the test hooks are compiled out (GRIST_TEST_HOOKS=OFF; scripts/test.sh " \
                      "configures with -DGRIST_TEST_HOOKS=ON)";                                \
    }                                                                                          \
  } while (0)

// ../shared/corpus beside the source tree (or $GRIST_CORPUS_DIR); empty when absent.
inline std::string CorpusDir() {
  if (const char* e = std::getenv("GRIST_CORPUS_DIR"); e && *e) {
    return Env::Default()->IsDirectory(e) ? std::string(e) : std::string();
  }
  std::string d = std::string(GRIST_SOURCE_DIR) + "/../shared/corpus";
  return Env::Default()->IsDirectory(d) ? d : std::string();
}

// An Env that hands every call to `base` (the POSIX one by default): a test derives from it and
// overrides the calls it wants to deny, fail or act on (common/env.h).
using ::grist::ForwardingEnv;

// Writes `bytes` over `path` at `offset` in place (the same inode, the size kept unless it runs
// past the end), after sleeping past the file system's timestamp tick (the kernel's coarse clock,
// at most 10 ms), so that the write gets new times: an edit that size and name checks cannot see.
inline void OverwriteInPlace(const std::string& path, uint64_t offset, std::string_view bytes) {
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0) << path;
  ASSERT_EQ(::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset)),
            static_cast<ssize_t>(bytes.size()))
      << path;
  ::close(fd);
}

// A fresh directory under $TMPDIR (or /tmp), removed by the destructor unless GRIST_KEEP_TEMP=1.
class TempDir {
 public:
  TempDir() {
    const char* t = std::getenv("TMPDIR");
    std::string tmpl = std::string(t && *t ? t : "/tmp") + "/grist_test_XXXXXX";
    char* d = ::mkdtemp(tmpl.data());
    path_ = d ? std::string(d) : std::string();
  }
  ~TempDir() {
    const char* keep = std::getenv("GRIST_KEEP_TEMP");
    if (!path_.empty() && !(keep && std::string(keep) == "1")) (void)Env::Default()->RemoveAll(path_);
  }
  const std::string& path() const { return path_; }
  std::string Join(const std::string& name) const { return JoinPath(path_, name); }

 private:
  std::string path_;
};

// The result of running the built `grist` binary.
struct CliRun {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs `grist ARGS` from the build tree through the shell; `env` is put before the command (e.g.
// "GRIST_X=1").
inline CliRun RunGrist(const std::string& args, const std::string& env = "") {
  std::string cmd = env + " " + GRIST_BINARY_DIR + "/grist " + args + " 2>&1";
  CliRun r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) r.output.append(buf, n);
  int st = ::pclose(p);
  r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

// Every regular file under `dir` except reports/ (timings), as relative path -> bytes: what two
// releases must agree on byte for byte.
inline void CollectReleaseFiles(const std::string& dir, const std::string& rel,
                                std::map<std::string, std::string>* out) {
  Env* env = Env::Default();
  auto names = env->ListDir(rel.empty() ? dir : JoinPath(dir, rel));
  ASSERT_TRUE(names.ok()) << names.status();
  for (const std::string& n : *names) {
    std::string r = rel.empty() ? n : JoinPath(rel, n);
    if (r == "reports") continue;
    if (env->IsDirectory(JoinPath(dir, r))) {
      CollectReleaseFiles(dir, r, out);
    } else {
      auto bytes = ReadFileToString(env, JoinPath(dir, r));
      ASSERT_TRUE(bytes.ok()) << bytes.status();
      (*out)[r] = *bytes;
    }
  }
}

}  // namespace grist::testing

// Skips the test (with the reason) when ../shared/corpus/<sub> is absent.
#define GRIST_REQUIRE_CORPUS(var, sub)                                                    \
  std::string var = ::grist::testing::CorpusDir();                                       \
  if (var.empty() || !::grist::Env::Default()->FileExists(var + "/" + (sub))) {          \
    GTEST_SKIP() << "shared corpus " << (sub) << " not present (../shared/corpus); skipped"; \
  }                                                                                       \
  var = var + "/" + (sub)

#endif  // GRIST_TESTS_TEST_UTIL_H_
