// The suite shared by `grist build`'s fault tests (build_fault_test.cc) and its I/O tests
// (build_io_test.cc): a generated corpus and config (no ../shared needed), the reference build made
// once per test binary (its release bytes and the crash points it reached), and the helpers that
// run builds and compare releases.
#ifndef GRIST_TESTS_RELEASE_BUILD_FAULT_FIXTURE_H_
#define GRIST_TESTS_RELEASE_BUILD_FAULT_FIXTURE_H_

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/env.h"
#include "common/rng.h"
#include "release/release.h"
#include "tests/test_util.h"

namespace grist::release {

using grist::testing::TempDir;

inline std::map<std::string, std::string> ReleaseBytes(const std::string& dir) {
  std::map<std::string, std::string> out;
  grist::testing::CollectReleaseFiles(dir, "", &out);
  return out;
}

inline void ExpectSameRelease(const std::map<std::string, std::string>& want,
                              const std::string& dir) {
  auto got = ReleaseBytes(dir);
  ASSERT_EQ(got.size(), want.size()) << dir;
  for (const auto& [path, bytes] : want) {
    ASSERT_TRUE(got.count(path)) << path;
    EXPECT_TRUE(got.at(path) == bytes) << path << " differs from the uninterrupted build";
  }
}

// Runs `grist build` in a child with `env_vars` set; returns the wait status.
inline int RunBuild(const std::string& config, const std::string& out,
             const std::vector<std::pair<std::string, std::string>>& env_vars,
             const std::string& log) {
  pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    for (const auto& [k, v] : env_vars) ::setenv(k.c_str(), v.c_str(), 1);
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    const std::string bin = std::string(GRIST_BINARY_DIR) + "/grist";
    ::execl(bin.c_str(), bin.c_str(), "build", "--quiet", "--threads", "2", "--config",
            config.c_str(), "--output", out.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return -1;
  return status;
}

class BuildFaultTest : public ::testing::Test {
 protected:
  // The suite's shared inputs are made by the first test's SetUp, not in SetUpTestSuite: a
  // failure there would have gtest skip every test (and ctest count them as passed).
  void SetUp() override {
    if (!prepared_) {
      prepared_ = true;
      Prepare();
    }
    ASSERT_NE(reference_, nullptr) << "the suite's reference build failed (see the first test)";
  }
  static void Prepare() {
    dir_ = new TempDir();
    // 300 documents of sentences over a small vocabulary (with the stop words the clean filters
    // look for), every tenth repeated verbatim further on (dedup removes those).
    static const char* kWords[] = {"the", "data", "pipeline", "token", "shard", "release", "loader",
                                   "train", "model", "batch", "seed", "merge", "task", "node",
                                   "cluster", "write", "read", "fast", "slow", "byte", "river",
                                   "stone", "green", "and", "to", "of", "with", "that",
                                   "have", "be"};
    Rng rng(11);
    std::string jsonl;
    std::vector<std::string> texts;
    for (int d = 0; d < 300; ++d) {
      std::string text;
      if (d % 10 == 9) {
        text = texts[d / 2];
      } else {
        int sentences = 3 + static_cast<int>(rng.Uniform(8));
        for (int s = 0; s < sentences; ++s) {
          int words = 6 + static_cast<int>(rng.Uniform(14));
          std::string sent;
          for (int w = 0; w < words; ++w) {
            std::string word = kWords[rng.Uniform(30)];
            if (w == 0) word[0] = static_cast<char>(word[0] - 'a' + 'A');
            sent += (w ? " " : "") + word;
          }
          text += (s ? " " : "") + sent + ".";
        }
      }
      texts.push_back(text);
      jsonl += "{\"text\": \"" + text + "\", \"n\": " + std::to_string(d) + "}\n";
    }
    ASSERT_TRUE(WriteFileAtomic(Env::Default(), dir_->Join("corpus.jsonl"), jsonl).ok());
    std::string config =
        "seed = 5\n[release]\nversion = \"faults\"\n[inputs]\npaths = [\"" +
        dir_->Join("corpus.jsonl") +
        "\"]\n[dedup]\nmemory_limit_mb = 64\n"
        "[tokenizer]\nmodel_type = \"bpe\"\nvocab_size = 300\ncharacter_coverage = 1.0\n"
        "byte_fallback = true\ninput_sentence_size = 100000\n"
        "unk_id = 0\nbos_id = 1\neos_id = 2\npad_id = 3\n"
        "[pack]\nseq_len = 64\nstrategy = \"bestfit\"\n"
        "[split]\nvalidation_fraction = 0.1\n[shard]\nmax_bytes = 16384\n";
    config_ = new std::string(dir_->Join("c.toml"));
    ASSERT_TRUE(WriteFileAtomic(Env::Default(), *config_, config).ok());
    // The uninterrupted build, its work folder kept, with the points it reaches traced.
    const std::string trace = dir_->Join("trace.txt");
    int st = RunBuild(*config_, dir_->Join("ref"), {{"GRIST_CRASH_TRACE", trace}},
                      dir_->Join("ref.log"));
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0)
        << ReadFileToString(Env::Default(), dir_->Join("ref.log")).value_or("");
    reference_ = new std::map<std::string, std::string>(ReleaseBytes(dir_->Join("ref")));
    trace_ = new std::string(ReadFileToString(Env::Default(), trace).value_or(""));
  }
  static void TearDownTestSuite() {
    delete reference_;
    delete trace_;
    delete config_;
    delete dir_;
  }
  static BuildOptions Options(const std::string& out) {
    BuildOptions o;
    o.config_path = *config_;
    o.output_dir = out;
    o.run.threads = 2;
    o.run.progress = false;
    return o;
  }
  // A copy of the reference build's release and work folder at `out`, to damage.
  static std::string CopyOfReference(const std::string& name) {
    const std::string out = dir_->Join(name);
    std::string cmd = "cp -a " + dir_->Join("ref") + " " + out + " && cp -a " +
                      dir_->Join("ref.work") + " " + out + ".work";
    EXPECT_EQ(std::system(cmd.c_str()), 0);
    return out;
  }
  static inline bool prepared_ = false;
  static inline TempDir* dir_ = nullptr;
  static inline std::string* config_ = nullptr;
  static inline std::map<std::string, std::string>* reference_ = nullptr;
  static inline std::string* trace_ = nullptr;
};

// The suite's config with `input` as its one input, written to `path`.
inline std::string ConfigWithInput(const std::string& config, const std::string& input,
                            const std::string& path) {
  std::string text = *ReadFileToString(Env::Default(), config);
  const size_t at = text.find("paths = [\"");
  EXPECT_NE(at, std::string::npos);
  const size_t begin = at + 10, end = text.find('"', begin);
  text.replace(begin, end - begin, input);
  EXPECT_TRUE(WriteFileAtomic(Env::Default(), path, text).ok());
  return path;
}

inline std::string ReadAll(const std::string& path) {
  return *ReadFileToString(Env::Default(), path);
}

// The name of the first file in `dir` whose name ends in `ext` (a test failure if none).
inline std::string FirstFile(const std::string& dir, const std::string& ext) {
  auto names = Env::Default()->ListDir(dir);
  EXPECT_TRUE(names.ok());
  for (const std::string& n : *names) {
    if (n.size() > ext.size() && n.compare(n.size() - ext.size(), ext.size(), ext) == 0) return n;
  }
  ADD_FAILURE() << "no *" << ext << " in " << dir;
  return "";
}

}  // namespace grist::release

#endif  // GRIST_TESTS_RELEASE_BUILD_FAULT_FIXTURE_H_
