// `grist bench pack` and `grist bench build` through the binary, on a small generated corpus (no
// shared corpus needed): the figures and peers they print, the exact packing arithmetic of concat,
// and that bench build builds the very release `grist build` publishes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/rng.h"
#include "tests/test_util.h"

namespace grist {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

using ::grist::testing::CliRun;
using ::grist::testing::RunGrist;

// The text after `key` up to the end of its line.
std::string After(const std::string& text, const std::string& key) {
  size_t p = text.find(key);
  if (p == std::string::npos) return "";
  p += key.size();
  return text.substr(p, text.find('\n', p) - p);
}

class PipelineBenchTest : public ::testing::Test {
 protected:
  // 300 documents of sentences that pass the default clean filters, every 10th an exact copy of an
  // earlier one (for dedup), every 25th too short (for clean).
  void SetUp() override {
    static const char* kWords[] = {"the",     "data",   "pipeline", "token", "shard",
                                   "release", "loader", "train",    "model", "batch",
                                   "seed",    "merge",  "to",       "of",    "and",
                                   "with",    "that",   "have",     "be",    "cluster"};
    Rng rng(11);
    std::vector<std::string> docs;
    std::string jsonl;
    for (int d = 0; d < 300; ++d) {
      std::string text;
      if (d % 25 == 5) {
        text = "too short";
      } else if (d % 10 == 3 && d > 10) {
        text = docs[d - 7];
      } else {
        int sentences = 6 + static_cast<int>(rng.Uniform(8));
        for (int s = 0; s < sentences; ++s) {
          int words = 8 + static_cast<int>(rng.Uniform(8));
          for (int w = 0; w < words; ++w) {
            if (w) text += " ";
            std::string word = kWords[rng.Uniform(20)];
            if (w == 0) word[0] = static_cast<char>(word[0] - 'a' + 'A');
            text += word;
          }
          text += ". ";
        }
      }
      docs.push_back(text);
      jsonl += "{\"text\": \"" + text + "\"}\n";
    }
    ASSERT_TRUE(WriteFileAtomic(Env::Default(), tmp_.Join("corpus.jsonl"), jsonl).ok());
  }
  std::string Config(bool clean_and_dedup) {
    std::string on = clean_and_dedup ? "true" : "false";
    std::string config =
        "seed = 5\n[release]\nversion = \"bench-test\"\n[inputs]\npaths = [\"" +
        tmp_.Join("corpus.jsonl") + "\"]\n[clean]\nenabled = " + on + "\n[dedup]\nenabled = " + on +
        "\n[tokenizer]\nmodel_type = \"bpe\"\nvocab_size = 300\ncharacter_coverage = 1.0\n"
        "byte_fallback = true\nnormalization = \"identity\"\nadd_dummy_prefix = true\n"
        "split_digits = true\nuser_defined_symbols = []\ncontrol_symbols = []\n"
        "input_sentence_size = 100000\nmax_sentence_length = 16384\n"
        "unk_id = 0\nbos_id = 1\neos_id = 2\npad_id = 3\n"
        "[tokenize]\nadd_bos = false\nadd_eos = true\npiece_bytes = 1048576\n"
        "[pack]\nseq_len = 64\nstrategy = \"bestfit\"\nbestfit_window_tokens = 65536\n"
        "[split]\nvalidation_fraction = 0.1\n[shard]\nmax_bytes = 16384\n";
    std::string path = tmp_.Join(clean_and_dedup ? "full.toml" : "plain.toml");
    EXPECT_TRUE(WriteFileAtomic(Env::Default(), path, config).ok());
    return path;
  }
  testing::TempDir tmp_;
};

TEST_F(PipelineBenchTest, PackReportsBothStrategiesAgainstMemcpyWithExactConcatArithmetic) {
  CliRun b = RunGrist("build --quiet --config " + Config(false) + " --output " + tmp_.Join("rel"));
  ASSERT_EQ(b.exit_code, 0) << b.output;
  CliRun r = RunGrist("bench pack --tokens " + tmp_.Join("rel.work/tokens") +
                   " --seq-len 64 --window 65536 --repetitions 1 --warmup 0 --work " +
                   tmp_.Join("w") + " --output " + tmp_.Join("out"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* row :
       {"| concat throughput | ", "| concat throughput vs memcpy | ",
        "| bestfit throughput vs memcpy | ", "| concat samples/s | ", "| bestfit samples/s | "}) {
    EXPECT_THAT(r.output, HasSubstr(row));
  }
  EXPECT_THAT(r.output, HasSubstr("| memcpy of the same tokens (ceiling) | "));
  EXPECT_THAT(r.output, HasSubstr("- documents: 300\n"));
  // concat cuts the stream every 65 tokens and pads only the last sample.
  const long long tokens = std::atoll(After(r.output, "- input tokens: ").c_str());
  ASSERT_GT(tokens, 1000);
  const long long samples = (tokens + 64) / 65;
  EXPECT_THAT(r.output,
              HasSubstr(absl::StrCat("concat: ", samples, " samples of 65 tokens, padding ")));
  EXPECT_THAT(r.output, HasSubstr(absl::StrCat("(", samples * 65 - tokens, " tokens)")));
  EXPECT_THAT(After(r.output, "bestfit: "), HasSubstr(" 0 truncated, 0 empty"));
  // passes: the measured stream holds at least 32 Mi tokens.
  const long long passes = std::atoll(After(r.output, "- passes per measured run: ").c_str());
  EXPECT_EQ(passes, ((32ll << 20) + tokens - 1) / tokens);
  EXPECT_TRUE(Env::Default()->FileExists(tmp_.Join("out/pack-0.json")));
  EXPECT_TRUE(Env::Default()->FileExists(tmp_.Join("out/pack.svg")));
}

TEST_F(PipelineBenchTest, BuildBenchBuildsTheSameReleaseAndTimesEveryStage) {
  const std::string config = Config(true);
  CliRun b =
      RunGrist("build --quiet --threads 2 --config " + config + " --output " + tmp_.Join("rel"));
  ASSERT_EQ(b.exit_code, 0) << b.output;
  const std::string id = After(b.output, "release ").substr(0, 32);
  ASSERT_EQ(id.size(), 32u) << b.output;
  CliRun r = RunGrist("bench build --config " + config +
                   " --threads 2 --repetitions 1 --warmup 0 "
                   "--work " +
                   tmp_.Join("w") + " --output " + tmp_.Join("out"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("| build end to end | "));
  EXPECT_THAT(r.output, HasSubstr("| the clean stage alone on the same inputs, same options "
                                  "(ceiling: the build's first stage) | "));
  EXPECT_THAT(After(r.output, "| build end to end | "), Not(HasSubstr("unavailable")));
  EXPECT_THAT(r.output, HasSubstr("| build wall time | "));
  EXPECT_THAT(r.output, HasSubstr("| sum of the stage times in the build's report | "));
  for (const char* stage : {"\n| clean | ", "\n| dedup | ", "\n| tokenizer | ", "\n| tokenize | ",
                            "\n| pack+shard | "}) {
    EXPECT_THAT(r.output, HasSubstr(stage));
  }
  // The bench builds the config from scratch: the very release grist build publishes.
  EXPECT_THAT(r.output, HasSubstr("; release " + id + "\n"));
  EXPECT_FALSE(Env::Default()->IsDirectory(tmp_.Join("w/release")));  // cleaned up
}

TEST_F(PipelineBenchTest, BuildSweepOverThreadsFitsEveryStageAndChecksTheReleaseBytes) {
  const std::string config = Config(true);
  CliRun r = RunGrist("bench build --config " + config +
                      " --sweep threads=1,2 --repetitions 1 --warmup 0 --quiet --work " +
                      tmp_.Join("w") + " --output " + tmp_.Join("out"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // The bench sweeps itself (one process), not through the harness's one process per value.
  EXPECT_THAT(r.output, Not(HasSubstr("Swept by the harness")));
  EXPECT_THAT(r.output, HasSubstr("### grist bench build: sweep over threads\n"));
  EXPECT_THAT(r.output, HasSubstr("#### build end to end (MB/s)\n"));
  EXPECT_THAT(r.output, HasSubstr("#### stage tokenize (input MB/s)\n"));
  EXPECT_THAT(r.output, HasSubstr("Scaling per stage, threads 1 to 2 (Amdahl's law"));
  EXPECT_THAT(r.output, HasSubstr("| stage | s at 1 | s at 2 | measured speedup 1->2 | "));
  for (const char* stage : {"\n| clean | ", "\n| dedup | ", "\n| dedup: signatures | ",
                            "\n| dedup: merge | ", "\n| dedup: filter | ", "\n| tokenizer | ",
                            "\n| tokenize | ", "\n| pack+shard | "}) {
    EXPECT_THAT(r.output, HasSubstr(stage)) << stage;
  }
  EXPECT_THAT(r.output, ::testing::ContainsRegex("\n(Below 0.8x linear at 2 threads: |No stage "
                                                 "below 0.8x linear at 2 threads)"));
  // pack+shard beside the disk's floor for its bytes, at each count.
  EXPECT_THAT(r.output,
              ::testing::ContainsRegex(
                  "\n\\| 2 \\| [0-9.]+ input MB/s \\[[^]]*\\] \\| writing and syncing the "
                  "release's [0-9.]+ MB \\(its file sizes, 4 MiB writes, fsync each\\) \\| "
                  "[0-9.]+ input MB/s \\| [0-9.]+x \\|"));
  EXPECT_FALSE(Env::Default()->IsDirectory(tmp_.Join("w/release.ceiling")));
  // Every stage beside two one-thread builds at once (this host's ceiling at 2 threads).
  EXPECT_THAT(r.output,
              HasSubstr("Against this host's ceiling at 2 threads: 2 one-thread builds "));
  EXPECT_THAT(r.output, HasSubstr("| stage | s at 1 | s at 2 | speed-up | s in 2 one-thread "
                                  "processes | ceiling speed-up | of the ceiling | target |"));
  for (const char* stage : {"build", "clean", "tokenize"}) {
    EXPECT_THAT(r.output,
                ::testing::ContainsRegex(absl::StrCat(
                    "\n\\| ", stage, " \\| [0-9.]+ \\| [0-9.]+ \\| [0-9.]+x \\| [0-9.]+ ",
                    "\\| [0-9.]+x \\| [0-9.]+ \\| >= 0.8: ")))
        << stage;
  }
  EXPECT_THAT(r.output, ::testing::ContainsRegex("\n(Below 0.8 of this host's ceiling at 2 "
                                                 "threads: |No stage below 0.8 of this host's "
                                                 "ceiling at 2 threads)"));
  EXPECT_FALSE(Env::Default()->IsDirectory(tmp_.Join("w/ceiling")));
  EXPECT_THAT(r.output, HasSubstr("Release bytes identical at threads 1, 2 ("));
  auto json = ReadFileToString(Env::Default(), tmp_.Join("out/build-0.json"));
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_THAT(*json, HasSubstr("\"sweep_param\": \"threads\""));
  EXPECT_TRUE(Env::Default()->FileExists(tmp_.Join("out/build-stage-clean.svg")));
  EXPECT_FALSE(Env::Default()->IsDirectory(tmp_.Join("w/release")));  // cleaned up
}

}  // namespace
}  // namespace grist
