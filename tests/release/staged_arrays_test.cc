// `grist build --stage ...` with clean and dedup as job arrays, run by hand as separate processes
// (what scripts/slurm/pipeline.sh submits, without Slurm): every array step as 3 tasks in a
// shuffled order, each merge after its tasks, gives exactly the release bytes of an unstaged
// build; a merge (or the next step) names a task that did not finish; and a build resumes from the
// stages an interrupted chain completed. The corpus is generated here (no ../shared needed).
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/env.h"
#include "common/rng.h"
#include "tests/test_util.h"

namespace grist {
namespace {

using ::grist::testing::CliRun;
using ::grist::testing::RunGrist;
using ::testing::HasSubstr;


// The array steps and the merges of clean and dedup, in chain order.
struct ChainStep {
  const char* name;
  bool array;
};
const ChainStep kCleanDedup[] = {{"clean", true},           {"clean-merge", false},
                                 {"dedup-signatures", true}, {"dedup-buckets", true},
                                 {"dedup-clusters", true},   {"dedup-merge", false},
                                 {"dedup-filter", true},     {"dedup-report", false}};
const ChainStep kRest[] = {{"tokenizer", false}, {"tokenize", true}, {"tokenize-merge", false},
                           {"pack", false}};

class StagedArraysTest : public ::testing::Test {
 protected:
  // The suite's shared inputs are made by the first test's SetUp, not in SetUpTestSuite: a
  // failure there would have gtest skip every test (and ctest count them as passed).
  void SetUp() override {
    if (!prepared_) {
      prepared_ = true;
      Prepare();
    }
    ASSERT_NE(local_, nullptr) << "the suite's reference build failed (see the first test)";
  }
  static void Prepare() {
    tmp_ = new testing::TempDir();
    // Four input files (so three tasks each get work) of sentences over a small vocabulary: some
    // too short for the cleaner, exact copies and near copies (one word changed) for dedup, the
    // copies often in another file than the original.
    static const char* kWords[] = {"the", "data", "pipeline", "token", "shard", "release", "loader",
                                   "train", "model", "batch", "seed", "merge", "task", "node",
                                   "cluster", "write", "read", "fast", "slow", "byte", "river",
                                   "stone", "and", "to", "of", "with", "that", "have", "be"};
    Rng rng(23);
    std::vector<std::string> texts;
    std::string files[4];
    for (int d = 0; d < 480; ++d) {
      std::string text;
      if (d % 40 == 7) {
        text = "too short to keep";
      } else if (d % 10 == 3 && d > 20) {
        text = texts[d - 17];
      } else if (d % 15 == 4 && d > 20) {
        text = texts[d - 13];
        size_t sp = text.find(' ', text.size() / 2);
        if (sp != std::string::npos) text = text.substr(0, sp) + " cluster" + text.substr(sp);
      } else {
        int sentences = 4 + static_cast<int>(rng.Uniform(8));
        for (int s = 0; s < sentences; ++s) {
          int words = 7 + static_cast<int>(rng.Uniform(12));
          for (int w = 0; w < words; ++w) {
            std::string word = kWords[rng.Uniform(29)];
            if (w == 0) word[0] = static_cast<char>(word[0] - 'a' + 'A');
            text += (w ? " " : (s ? " " : "")) + word;
          }
          text += ".";
        }
      }
      texts.push_back(text);
      files[d * 4 / 480] += "{\"text\": \"" + text + "\", \"n\": " + std::to_string(d) + "}\n";
    }
    std::string paths;
    for (int f = 0; f < 4; ++f) {
      const std::string p = tmp_->Join(absl::StrCat("in-", f, ".jsonl"));
      ASSERT_TRUE(WriteFileAtomic(Env::Default(), p, files[f]).ok());
      paths += absl::StrCat(f ? ", " : "", "\"", p, "\"");
    }
    std::string config =
        "seed = 17\n[release]\nversion = \"arrays\"\n[inputs]\npaths = [" + paths +
        "]\n[clean]\nenabled = true\n[dedup]\nenabled = true\nexact = true\nnear = true\n"
        "threshold = 0.8\nmemory_limit_mb = 64\n"
        "[tokenizer]\nmodel_type = \"bpe\"\nvocab_size = 300\ncharacter_coverage = 1.0\n"
        "byte_fallback = true\ninput_sentence_size = 100000\n"
        "unk_id = 0\nbos_id = 1\neos_id = 2\npad_id = 3\n"
        "[tokenize]\nadd_bos = false\nadd_eos = true\n"
        "[pack]\nseq_len = 64\nstrategy = \"bestfit\"\n"
        "[split]\nvalidation_fraction = 0.1\n[shard]\nmax_bytes = 16384\n";
    ASSERT_TRUE(WriteFileAtomic(Env::Default(), tmp_->Join("c.toml"), config).ok());
    CliRun local = RunGrist(Build("local", ""));
    ASSERT_EQ(local.exit_code, 0) << local.output;
    local_ = new std::map<std::string, std::string>();
    grist::testing::CollectReleaseFiles(tmp_->Join("local"), "", local_);
  }
  static void TearDownTestSuite() {
    delete local_;
    delete tmp_;
  }
  // The suite's inputs copied into `t`, and its config over them written to t/c.toml; returns
  // the config's text (to change and write again).
  static std::string CopyOfSuite(const testing::TempDir& t) {
    std::string config = *ReadFileToString(Env::Default(), tmp_->Join("c.toml"));
    for (int f = 0; f < 4; ++f) {
      const std::string from = tmp_->Join(absl::StrCat("in-", f, ".jsonl"));
      const std::string to = t.Join(absl::StrCat("in-", f, ".jsonl"));
      EXPECT_TRUE(
          WriteFileAtomic(Env::Default(), to, *ReadFileToString(Env::Default(), from)).ok());
      config.replace(config.find(from), from.size(), to);
    }
    EXPECT_TRUE(WriteFileAtomic(Env::Default(), t.Join("c.toml"), config).ok());
    return config;
  }
  static std::string Build(const std::string& out, const std::string& extra) {
    return "build --quiet --threads 2 --config " + tmp_->Join("c.toml") + " --output " +
           tmp_->Join(out) + " " + extra;
  }
  // Runs one step of the chain (all `tasks` tasks of an array step, in the order 2, 0, 1, ...).
  static void RunStep(const std::string& out, const ChainStep& s, int tasks,
                      const std::vector<int>& skip = {}) {
    if (!s.array) {
      CliRun r = RunGrist(Build(out, std::string("--stage ") + s.name));
      ASSERT_EQ(r.exit_code, 0) << s.name << ": " << r.output;
      return;
    }
    std::vector<int> order = {tasks - 1};  // the last task first, then the others in order
    for (int t = 0; t + 1 < tasks; ++t) order.push_back(t);
    for (int t : order) {
      if (std::find(skip.begin(), skip.end(), t) != skip.end()) continue;
      CliRun r = RunGrist(Build(out, absl::StrCat("--stage ", s.name, " --task ", t, " --tasks ", tasks)));
      ASSERT_EQ(r.exit_code, 0) << s.name << " task " << t << ": " << r.output;
      EXPECT_THAT(r.output, HasSubstr(absl::StrCat("task ", t, " of ", tasks)));
    }
  }
  // A count in the record of `stage` in OUT.work/stages/ (written by JsonWriter: "key": value).
  static uint64_t RecordField(const std::string& out, const std::string& stage, const std::string& key) {
    auto text = ReadFileToString(Env::Default(), tmp_->Join(out + ".work/stages/" + stage + ".json"));
    EXPECT_TRUE(text.ok()) << stage;
    if (!text.ok()) return 0;
    size_t at = text->find("\"" + key + "\": ");
    EXPECT_NE(at, std::string::npos) << key;
    if (at == std::string::npos) return 0;
    return std::stoull(text->substr(at + key.size() + 4));
  }
  static void ExpectSameAsLocal(const std::string& out) {
    std::map<std::string, std::string> got;
    grist::testing::CollectReleaseFiles(tmp_->Join(out), "", &got);
    ASSERT_GT(local_->size(), 3u);
    ASSERT_EQ(got.size(), local_->size());
    for (const auto& [path, bytes] : *local_) {
      ASSERT_TRUE(got.count(path)) << path;
      EXPECT_TRUE(got[path] == bytes) << path << " differs from the local build";
    }
  }
  static bool prepared_;
  static testing::TempDir* tmp_;
  static std::map<std::string, std::string>* local_;
};

bool StagedArraysTest::prepared_ = false;
testing::TempDir* StagedArraysTest::tmp_ = nullptr;
std::map<std::string, std::string>* StagedArraysTest::local_ = nullptr;

TEST_F(StagedArraysTest, ThreeTaskArraysOfEveryStageGiveTheBytesOfALocalBuild) {
  for (const ChainStep& s : kCleanDedup) RunStep("arrays", s, 3);
  // clean and dedup really ran as three tasks: a kept part of each.
  for (int t = 0; t < 3; ++t) {
    EXPECT_TRUE(Env::Default()->FileExists(tmp_->Join(
        absl::StrCat("arrays.work/clean/clean-report-0000", t, "-of-00003.json"))));
    EXPECT_TRUE(Env::Default()->FileExists(tmp_->Join(
        absl::StrCat("arrays.work/dedup/dedup-0000", t, "-of-00003-00000.jsonl.zst"))));
  }
  // A merge run again is a no-op that reports the completed stage.
  CliRun r = RunGrist(Build("arrays", "--stage clean-merge"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("stage clean-merge done merged 3 task(s)"));
  for (const ChainStep& s : kRest) RunStep("arrays", s, 3);
  ExpectSameAsLocal("arrays");
  // Clean rejected the short documents and dedup removed exact and near copies (the merged
  // records' counts).
  EXPECT_GE(RecordField("arrays", "clean", "docs_rejected"), 12u);  // the 12 short ones at least
  EXPECT_GT(RecordField("arrays", "clean", "docs_out"), 300u);
  EXPECT_GT(RecordField("arrays", "dedup", "docs_removed"), 40u);
}

TEST_F(StagedArraysTest, TwoTasksGiveTheSameBytesToo) {
  for (const ChainStep& s : kCleanDedup) RunStep("two", s, 2);
  for (const ChainStep& s : kRest) RunStep("two", s, 2);
  ExpectSameAsLocal("two");
}

TEST_F(StagedArraysTest, MissingTasksAreNamedAndABuildResumesFromCompletedStages) {
  // The next stage before clean completed: refused, naming the steps to run.
  CliRun r = RunGrist(Build("gap", "--stage dedup-signatures --task 0 --tasks 3"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("stage clean has not completed under this config"));
  EXPECT_THAT(r.output, HasSubstr("run --stage clean (every task) and clean-merge first"));
  // Clean task 1 of 3 never ran: the merge names it and records nothing.
  RunStep("gap", kCleanDedup[0], 3, /*skip=*/{1});
  r = RunGrist(Build("gap", "--stage clean-merge"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("clean-report-00001-of-00003.json: clean task 1 of 3 has not finished"));
  EXPECT_FALSE(Env::Default()->FileExists(tmp_->Join("gap.work/stages/clean.json")));
  r = RunGrist(Build("gap", "--stage clean --task 1 --tasks 3"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  RunStep("gap", kCleanDedup[1], 3);
  // A task step of a completed stage is refused (the chain skips completed stages).
  r = RunGrist(Build("gap", "--stage clean --task 0 --tasks 3"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("--stage clean: the stage is already complete"));
  // Dedup signatures task 2 of 3 never ran: the next step names it.
  RunStep("gap", kCleanDedup[2], 3, /*skip=*/{2});
  r = RunGrist(Build("gap", "--stage dedup-buckets --task 0 --tasks 3"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("task 2 of 3 is missing"));
  // The chain stopped there; an unstaged build resumes from the completed clean stage, redoes
  // dedup whole and gives the local build's bytes.
  r = RunGrist("build --threads 2 --config " + tmp_->Join("c.toml") + " --output " + tmp_->Join("gap"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("(earlier run)"));
  ExpectSameAsLocal("gap");
}

TEST_F(StagedArraysTest, AChangedInputStopsTheNextStepWhichRemovesTheStaleRecords) {
  // The suite's config over copies of its inputs, built as a chain of 2-task arrays.
  testing::TempDir t;
  CopyOfSuite(t);
  const std::string c = t.Join("c.toml"), out = t.Join("rel");
  auto step = [&](const std::string& args) {
    return RunGrist("build --quiet --threads 2 --config " + c + " --output " + out + " " + args);
  };
  std::vector<ChainStep> chain(std::begin(kCleanDedup), std::end(kCleanDedup));
  chain.insert(chain.end(), std::begin(kRest), std::end(kRest));
  auto run_chain = [&] {
    for (const ChainStep& s : chain) {
      for (int task = 0; task < (s.array ? 2 : 1); ++task) {
        CliRun r = step(absl::StrCat("--stage ", s.name,
                                     s.array ? absl::StrCat(" --task ", task, " --tasks 2") : ""));
        ASSERT_EQ(r.exit_code, 0) << s.name << ": " << r.output;
      }
    }
  };
  run_chain();
  // An input file loses its last document: the next step run (pack) finds clean's record stale,
  // says why, removes it and the records after it, and refuses.
  const std::string in3 = t.Join("in-3.jsonl");
  std::string text = *ReadFileToString(Env::Default(), in3);
  text.erase(text.rfind('\n', text.size() - 2) + 1);
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), in3, text).ok());
  CliRun r = step("--stage pack");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--stage pack: the record of stage clean no longer holds"));
  EXPECT_THAT(r.output, HasSubstr("what the stage read has changed since it ran"));
  EXPECT_THAT(r.output, HasSubstr("run --stage clean (every task) and clean-merge and the steps "
                                  "after it again"));
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr("the stage runs again")));
  for (const char* stage : {"clean", "dedup", "tokenizer", "tokenize"}) {
    EXPECT_FALSE(Env::Default()->FileExists(absl::StrCat(out, ".work/stages/", stage, ".json")))
        << stage;
  }
  // The chain run again gives the bytes of an unstaged build of the changed inputs.
  run_chain();
  r = RunGrist("build --quiet --threads 2 --config " + c + " --output " + t.Join("local"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::map<std::string, std::string> want, got;
  grist::testing::CollectReleaseFiles(t.Join("local"), "", &want);
  grist::testing::CollectReleaseFiles(out, "", &got);
  EXPECT_TRUE(want == got) << "the chain's release differs from the unstaged build's";
  EXPECT_FALSE(want == *local_) << "the changed input should give another release";
}

TEST_F(StagedArraysTest, AnInputChangedAfterTheCleanTasksStopsTheMerge) {
  // The suite's config over copies of its inputs; the clean array of 2 tasks runs, then an input
  // changes before clean-merge: the merge would record clean's outputs as built from inputs the
  // tasks never read.
  testing::TempDir t;
  std::string config = CopyOfSuite(t);
  const std::string c = t.Join("c.toml"), out = t.Join("rel");
  auto step = [&](const std::string& args) {
    return RunGrist("build --quiet --threads 2 --config " + c + " --output " + out + " " + args);
  };
  auto clean_tasks = [&] {
    for (int task = 0; task < 2; ++task) {
      CliRun r = step(absl::StrCat("--stage clean --task ", task, " --tasks 2"));
      ASSERT_EQ(r.exit_code, 0) << r.output;
    }
  };
  const std::string in1 = t.Join("in-1.jsonl");
  const std::string text = *ReadFileToString(Env::Default(), in1);
  const size_t at = text.find("the ");
  ASSERT_NE(at, std::string::npos);
  // One letter of in-1 changed in place, its size kept.
  clean_tasks();
  testing::OverwriteInPlace(in1, at, "T");
  CliRun r = step("--stage clean-merge");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("clean-inputs-00000-of-00002.json: the inputs changed since "
                                  "clean task 0 of 2 read them (" + in1 +
                                  " was written or replaced since the task read it"));
  EXPECT_THAT(r.output, HasSubstr("run --stage clean (every task) again, then clean-merge"));
  EXPECT_FALSE(Env::Default()->FileExists(out + ".work/stages/clean.json"));
  // A file added to the inputs (a folder of them) alike; the tasks run again, the merge records.
  config.replace(config.find(in1), in1.size(), t.Join("more"));
  ASSERT_TRUE(Env::Default()->CreateDirs(t.Join("more")).ok());
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), t.Join("more/a.jsonl"), text).ok());
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), c, config).ok());
  clean_tasks();
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), t.Join("more/b.jsonl"), text).ok());
  r = step("--stage clean-merge");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr(t.Join("more/b.jsonl") + " is listed now, not by the task"));
  // ... a file grown since, ...
  clean_tasks();
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), t.Join("more/a.jsonl"), text + text).ok());
  r = step("--stage clean-merge");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr(absl::StrCat(t.Join("more/a.jsonl"), " had ", text.size(),
                                               " bytes when the task read it, ", 2 * text.size(),
                                               " now")));
  // ... and a file gone from it.
  clean_tasks();
  ASSERT_TRUE(Env::Default()->RemoveFile(t.Join("more/b.jsonl")).ok());
  r = step("--stage clean-merge");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output,
              HasSubstr("the task read " + t.Join("more/b.jsonl") + ", which is not listed now"));
  // A task's list damaged, or missing: the merge refuses, naming it.
  clean_tasks();
  const std::string list = out + ".work/clean/clean-inputs-00001-of-00002.json";
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), list, "{\"format\":\"grist-clean").ok());
  r = step("--stage clean-merge");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr(list + ": the inputs changed since clean task 1 of 2 read them "
                                  "(not a list of a clean task's inputs)"));
  // An entry without its size; the entries in another order.
  clean_tasks();
  const std::string good = ReadFileToString(Env::Default(), list).value();
  std::string bad = good;
  ASSERT_NE(bad.find("\"bytes\":"), std::string::npos) << good;
  bad.replace(bad.find("\"bytes\":"), 8, "\"byte\":");
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), list, bad).ok());
  r = step("--stage clean-merge");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr(list + ": the inputs changed since clean task 1 of 2 read them "
                                  "(a bad entry)"));
  const size_t from = good.find("\"inputs\":[") + 10, to = good.rfind("]}");
  ASSERT_LT(from, to) << good;
  std::vector<std::string> entries =
      absl::StrSplit(good.substr(from, to - from), "},{", absl::SkipEmpty());
  ASSERT_GE(entries.size(), 2u) << good;
  for (std::string& e : entries) {  // whole objects again
    if (e.front() != '{') e.insert(0, "{");
    if (e.back() != '}') e.push_back('}');
  }
  std::reverse(entries.begin(), entries.end());
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), list,
                              good.substr(0, from) + absl::StrJoin(entries, ",") + good.substr(to))
                  .ok());
  r = step("--stage clean-merge");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr(list + ": the inputs changed since clean task 1 of 2 read them "
                                  "(the task listed the inputs in another order)"));
  ASSERT_TRUE(Env::Default()->RemoveFile(list).ok());
  r = step("--stage clean-merge");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr(list + ": clean task 1 of 2 has not finished"));
  clean_tasks();
  r = step("--stage clean-merge");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(Env::Default()->FileExists(out + ".work/stages/clean.json"));
}

TEST_F(StagedArraysTest, TasksOfAnArrayShareTheOutputsLockAndEveryOtherStepTakesItAlone) {
  const std::string out = tmp_->Join("locked");
  const int fd = ::open((out + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  // While a task of an array runs (it holds the lock shared), the other tasks run too ...
  ASSERT_EQ(::flock(fd, LOCK_SH | LOCK_NB), 0);
  for (int t = 0; t < 2; ++t) {
    CliRun r = RunGrist(Build("locked", absl::StrCat("--stage clean --task ", t, " --tasks 2")));
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  // ... but not the merge, nor a whole build, which would remove and rename their files.
  for (const std::string& args : {std::string("--stage clean-merge"), std::string()}) {
    CliRun r = RunGrist(Build("locked", args));
    EXPECT_EQ(r.exit_code, 1) << args;
    EXPECT_THAT(r.output, HasSubstr(absl::StrCat("another grist build or pack is writing ", out)))
        << args;
  }
  EXPECT_FALSE(Env::Default()->FileExists(out + ".work/stages/clean.json"));
  ::close(fd);
  CliRun r = RunGrist(Build("locked", "--stage clean-merge"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST_F(StagedArraysTest, StepsOfADisabledStageDoNothing) {
  const std::string config = tmp_->Join("off.toml");
  auto text = ReadFileToString(Env::Default(), tmp_->Join("c.toml"));
  ASSERT_TRUE(text.ok());
  std::string t = *text;
  t.replace(t.find("[clean]\nenabled = true"), 22, "[clean]\nenabled = false");
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), config, t).ok());
  CliRun r = RunGrist("build --quiet --config " + config + " --output " + tmp_->Join("off") +
                      " --stage clean --task 1 --tasks 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("stage clean done disabled in the config"));
  EXPECT_FALSE(Env::Default()->IsDirectory(tmp_->Join("off.work/clean")));
}

}  // namespace
}  // namespace grist
