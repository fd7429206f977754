// Helpers shared by the GoogleTest suites.
#ifndef GRIST_TESTS_TEST_UTIL_H_
#define GRIST_TESTS_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "common/env.h"

namespace grist::testing {

// ../shared/corpus beside the source tree (or $GRIST_CORPUS_DIR); empty when absent.
inline std::string CorpusDir() {
  if (const char* e = std::getenv("GRIST_CORPUS_DIR"); e && *e) {
    return Env::Default()->IsDirectory(e) ? std::string(e) : std::string();
  }
  std::string d = std::string(GRIST_SOURCE_DIR) + "/../shared/corpus";
  return Env::Default()->IsDirectory(d) ? d : std::string();
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

}  // namespace grist::testing

// Skips the test (with the reason) when ../shared/corpus/<sub> is absent.
#define GRIST_REQUIRE_CORPUS(var, sub)                                                    \
  std::string var = ::grist::testing::CorpusDir();                                       \
  if (var.empty() || !::grist::Env::Default()->FileExists(var + "/" + (sub))) {          \
    GTEST_SKIP() << "shared corpus " << (sub) << " not present (../shared/corpus); skipped"; \
  }                                                                                       \
  var = var + "/" + (sub)

#endif  // GRIST_TESTS_TEST_UTIL_H_
