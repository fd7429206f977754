// The stages on one large compressed input without a frame index (stream splits,
// common/split_decoders.h): clean, dedup and tokenize write the same bytes for 1, 2 and 4 threads,
// and clean's tasks together write what one task writes. Generated text (tests/synthetic_corpus.h),
// so this runs on a fresh clone.
#include <gtest/gtest.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "clean/run_clean.h"
#include "common/env.h"
#include "common/records.h"
#include "dedup/dedup.h"
#include "tests/synthetic_corpus.h"
#include "tests/compress_util.h"
#include "tests/test_util.h"
#include "tokenize/encode.h"
#include "tokenize/tokenizer.h"

namespace grist {
namespace {

using ::grist::testing::Gzip;
using ::grist::testing::Zstd;

using ::grist::testing::TempDir;

std::string Slurp(const std::string& path) {
  auto s = ReadFileToString(Env::Default(), path);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : std::string();
}

// Every file under `dir` whose name ends with one of `suffixes`, by relative path, with its bytes.
std::map<std::string, std::string> Files(const std::string& dir,
                                         const std::vector<std::string>& suffixes) {
  std::map<std::string, std::string> out;
  std::vector<std::string> todo{""};
  while (!todo.empty()) {
    std::string rel = todo.back();
    todo.pop_back();
    const std::string abs = rel.empty() ? dir : JoinPath(dir, rel);
    auto names = Env::Default()->ListDir(abs);
    if (!names.ok()) continue;
    for (const std::string& n : *names) {
      const std::string r = rel.empty() ? n : JoinPath(rel, n);
      if (Env::Default()->IsDirectory(JoinPath(dir, r))) {
        todo.push_back(r);
        continue;
      }
      for (const std::string& s : suffixes) {
        if (r.size() >= s.size() && r.compare(r.size() - s.size(), s.size(), s) == 0) {
          out[r] = Slurp(JoinPath(dir, r));
        }
      }
    }
  }
  return out;
}

RunOptions RunOpts(int threads, int task = 0, int tasks = 1) {
  RunOptions r;
  r.threads = threads;
  r.task = task;
  r.tasks = tasks;
  r.progress = false;
  return r;
}

// The records of every part under `dir` (sorted part names), decoded, in order.
std::string Records(const std::string& dir) {
  auto files = ListInputs(Env::Default(), {dir});
  EXPECT_TRUE(files.ok());
  std::string out;
  for (const InputFile& f : *files) {
    if (f.format != InputFormat::kJsonlZstd) continue;
    auto r = OpenRecordReader(Env::Default(), f, InputSplit{}, InputOptions{});
    EXPECT_TRUE(r.ok());
    Document d;
    while (*(*r)->Next(&d)) out += SerializeRecord(d) + "\n";
  }
  return out;
}

class StreamStagesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    ::grist::testing::SyntheticCorpusOptions o;
    o.documents = 5000;
    const std::string jsonl = ::grist::testing::SyntheticJsonl(o);
    ASSERT_GT(jsonl.size(), 4u << 20);  // multi-MB, so many stream splits
    ASSERT_TRUE(WriteFileAtomic(Env::Default(), dir_->Join("c.jsonl.zst"), Zstd(jsonl)).ok());
    ASSERT_TRUE(WriteFileAtomic(Env::Default(), dir_->Join("c.jsonl.gz"), Gzip(jsonl)).ok());
  }
  static void TearDownTestSuite() { delete dir_; }
  static TempDir* dir_;
};
TempDir* StreamStagesTest::dir_ = nullptr;

TEST_F(StreamStagesTest, CleanIsByteIdenticalAcrossThreadsAndTasks) {
  for (const char* name : {"c.jsonl.zst", "c.jsonl.gz"}) {
    const std::string in = dir_->Join(name);
    auto files = ListInputs(Env::Default(), {in});
    ASSERT_TRUE(files.ok());
    std::map<std::string, std::string> one;
    for (int threads : {1, 2, 4}) {
      const std::string out = dir_->Join(absl::StrCat("clean-", name, "-", threads));
      auto rep = clean::RunClean(Env::Default(), {in}, out, clean::CleanOptions(), RunOpts(threads));
      ASSERT_TRUE(rep.ok()) << rep.status();
      EXPECT_GT(rep->splits, 8u) << "a stream-split input";
      EXPECT_EQ(rep->counts.docs_in, 5000u);
      auto parts = Files(out, {".jsonl.zst"});
      ASSERT_FALSE(parts.empty());
      if (threads == 1) {
        one = parts;
      } else {
        EXPECT_TRUE(parts == one) << name << ": " << threads << " threads";
      }
    }
    // Three tasks: together, in task order, the records one task writes.
    const std::string tasks_out = dir_->Join(absl::StrCat("clean-", name, "-tasks"));
    for (int t = 0; t < 3; ++t) {
      auto rep = clean::RunClean(Env::Default(), {in}, tasks_out, clean::CleanOptions(), RunOpts(2, t, 3));
      ASSERT_TRUE(rep.ok()) << rep.status();
    }
    EXPECT_EQ(Records(tasks_out), Records(dir_->Join(absl::StrCat("clean-", name, "-1"))));
  }
}

TEST_F(StreamStagesTest, DedupIsByteIdenticalAcrossThreads) {
  for (const char* name : {"c.jsonl.zst", "c.jsonl.gz"}) {
    std::map<std::string, std::string> one;
    for (int threads : {1, 4}) {
      const std::string out = dir_->Join(absl::StrCat("dedup-", name, "-", threads));
      auto rep = dedup::RunDedup(Env::Default(), {dir_->Join(name)}, out, dedup::DedupOptions(),
                                 RunOpts(threads));
      ASSERT_TRUE(rep.ok()) << rep.status();
      auto parts = Files(out, {".jsonl.zst"});
      ASSERT_FALSE(parts.empty());
      if (threads == 1) {
        one = parts;
      } else {
        EXPECT_TRUE(parts == one) << name << ": " << threads << " threads";
      }
    }
  }
}

TEST_F(StreamStagesTest, TokenizeIsByteIdenticalAcrossThreads) {
  const std::string model = dir_->Join("bpe.model");
  tokenize::TrainOptions o;
  o.model_type = "bpe";
  o.vocab_size = 800;
  o.input_sentence_size = 20000;
  auto trained = tokenize::TrainTokenizer(Env::Default(), {dir_->Join("c.jsonl.zst")}, model, o);
  ASSERT_TRUE(trained.ok()) << trained.status();
  for (const char* name : {"c.jsonl.zst", "c.jsonl.gz"}) {
    std::map<std::string, std::string> one;
    for (int threads : {1, 2, 4}) {
      tokenize::EncodeStageOptions e;
      e.model_path = model;
      e.split_bytes = 64 << 10;
      const std::string out = dir_->Join(absl::StrCat("tok-", name, "-", threads));
      auto rep = tokenize::RunEncode(Env::Default(), {dir_->Join(name)}, out, e, RunOpts(threads));
      ASSERT_TRUE(rep.ok()) << rep.status();
      auto files = Files(out, {".bin", ".idx"});
      ASSERT_EQ(files.size(), 2u);
      if (threads == 1) {
        one = files;
      } else {
        EXPECT_TRUE(files == one) << name << ": " << threads << " threads";
      }
    }
  }
}

}  // namespace
}  // namespace grist
