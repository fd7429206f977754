// `grist build --stage tokenizer|tokenize|tokenize-merge|pack`, the contract the Slurm job arrays
// (scripts/slurm/) rely on: stages run as separate processes, encode tasks in any order, and the
// release is byte-identical to an unstaged build; a stage run too early or a merge of an
// incomplete set is refused with a message naming what is missing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "common/env.h"
#include "common/rng.h"
#include "tests/test_util.h"

namespace grist {
namespace {

using ::testing::HasSubstr;

using ::grist::testing::CliRun;
using ::grist::testing::RunGrist;


class StagedBuildTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A deterministic corpus of 400 documents from a small ASCII vocabulary, plain JSONL (so the
    // encode tasks split it by byte ranges).
    static const char* kWords[] = {"the", "data", "pipeline", "token", "shard", "release", "loader",
                                   "train", "model", "batch", "seed", "merge", "task", "node",
                                   "cluster", "write", "read", "fast", "slow", "byte"};
    Rng rng(7);
    std::string jsonl;
    for (int d = 0; d < 400; ++d) {
      std::string text;
      int words = 20 + static_cast<int>(rng.Uniform(200));
      for (int w = 0; w < words; ++w) {
        if (w) text += (w % 13 == 0) ? ". " : " ";
        text += kWords[rng.Uniform(20)];
      }
      jsonl += "{\"text\": \"" + text + "\", \"n\": " + std::to_string(d) + "}\n";
    }
    ASSERT_TRUE(WriteFileAtomic(Env::Default(), tmp_.Join("corpus.jsonl"), jsonl).ok());
    std::string config =
        "seed = 99\n[release]\nversion = \"test\"\n[inputs]\npaths = [\"" + tmp_.Join("corpus.jsonl") +
        "\"]\n[clean]\nenabled = false\n[dedup]\nmode = \"none\"\n"
        "[tokenizer]\nmodel_type = \"bpe\"\nvocab_size = 400\ncharacter_coverage = 1.0\n"
        "byte_fallback = true\nnormalization = \"identity\"\nadd_dummy_prefix = true\n"
        "split_digits = true\nuser_defined_symbols = []\ncontrol_symbols = []\n"
        "input_sentence_size = 100000\nmax_sentence_length = 16384\n"
        "unk_id = 0\nbos_id = 1\neos_id = 2\npad_id = 3\n"
        "[tokenize]\nadd_bos = false\nadd_eos = true\npiece_bytes = 1048576\n"
        "[pack]\nseq_len = 64\nstrategy = \"bestfit\"\nbestfit_window_tokens = 65536\n"
        "[split]\nvalidation_fraction = 0.1\n[shard]\nmax_bytes = 16384\n";
    ASSERT_TRUE(WriteFileAtomic(Env::Default(), tmp_.Join("c.toml"), config).ok());
  }
  std::string Build(const std::string& out, const std::string& extra) {
    return "build --quiet --threads 2 --config " + tmp_.Join("c.toml") + " --output " +
           tmp_.Join(out) + " " + extra;
  }
  testing::TempDir tmp_;
};

TEST_F(StagedBuildTest, ThreeTasksInAnyOrderGiveTheSameBytesAsOneBuild) {
  CliRun local = RunGrist(Build("local", ""));
  ASSERT_EQ(local.exit_code, 0) << local.output;

  CliRun r = RunGrist(Build("staged", "--stage tokenizer"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("stage tokenizer done trained: 400 documents in"));
  for (int task : {2, 0, 1}) {
    r = RunGrist(Build("staged", "--stage tokenize --task " + std::to_string(task) + " --tasks 3"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_THAT(r.output, HasSubstr("task " + std::to_string(task) + " of 3"));
  }
  r = RunGrist(Build("staged", "--stage tokenize-merge"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // The stage's time is its slowest task's plus the merge's, not the merge's alone.
  EXPECT_THAT(r.output, HasSubstr("stage tokenize-merge done merged 3 task(s); slowest "));
  EXPECT_THAT(r.output, HasSubstr(" s: 400 documents in, 400 out"));
  r = RunGrist(Build("staged", "--stage pack"));
  ASSERT_EQ(r.exit_code, 0) << r.output;

  std::map<std::string, std::string> a, b;
  grist::testing::CollectReleaseFiles(tmp_.Join("local"), "", &a);
  grist::testing::CollectReleaseFiles(tmp_.Join("staged"), "", &b);
  ASSERT_GT(a.size(), 3u);
  EXPECT_TRUE(a.count("manifest.json"));
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [path, bytes] : a) {
    ASSERT_TRUE(b.count(path)) << path;
    EXPECT_TRUE(bytes == b[path]) << path << " differs";
  }
}

TEST_F(StagedBuildTest, StagesOutOfOrderAndIncompleteSetsAreRefused) {
  CliRun r = RunGrist(Build("s", "--stage pack"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("--stage pack: stage tokenizer has not completed under this "
                                  "config"));
  EXPECT_THAT(r.output, HasSubstr("run --stage tokenizer first"));
  ASSERT_EQ(RunGrist(Build("s", "--stage tokenizer")).exit_code, 0);
  r = RunGrist(Build("s", "--stage pack"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("run --stage tokenize (every task) and tokenize-merge first"));
  ASSERT_EQ(RunGrist(Build("s", "--stage tokenize --task 0 --tasks 3")).exit_code, 0);
  ASSERT_EQ(RunGrist(Build("s", "--stage tokenize --task 2 --tasks 3")).exit_code, 0);
  r = RunGrist(Build("s", "--stage tokenize-merge"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("task 1 of 3 has not finished"));
  // Usage errors (exit status 2): flags that do not go together, a stage that does not exist.
  r = RunGrist(Build("s", "--stage pack --task 1 --tasks 3"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, HasSubstr("--task/--tasks go with the job-array stages only (clean, "
                                  "dedup-signatures, dedup-buckets, dedup-clusters, "
                                  "dedup-filter, tokenize)"));
  r = RunGrist(Build("s", "--stage shard"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, HasSubstr("--stage: shard not in {clean,clean-merge,dedup-signatures,"
                                  "dedup-buckets,dedup-clusters,dedup-merge,dedup-filter,"
                                  "dedup-report,tokenizer,tokenize,tokenize-merge,pack}"));
}

}  // namespace
}  // namespace grist
