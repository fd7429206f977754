// Tests of the dedup pipeline's determinism: its output and counts byte for byte the same for any
// thread count (the last splits' documents shared among idle threads included) and task count.
#include "dedup/dedup.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "tests/dedup/dedup_test_util.h"
#include "tests/test_util.h"

namespace grist::dedup {
namespace {

using ::grist::dedup::testing::Budget64;
using ::grist::dedup::testing::FamilyCorpus;
using ::grist::dedup::testing::OutputBytes;
using ::grist::dedup::testing::Quiet;
using ::grist::testing::TempDir;

TEST(Dedup, ByteIdenticalForAnyThreadOrTaskCount) {
  TempDir tmp;
  const std::string input = tmp.Join("in.jsonl");
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), input, FamilyCorpus(40, 10)).ok());
  DedupOptions o = Budget64();
  o.split_bytes = 16 << 10;  // many splits
  o.keep_shingles = DedupOptions::KeepShingles::kNever;
  auto r1 = RunDedup(Env::Default(), {input}, tmp.Join("t1"), o, Quiet(1));
  ASSERT_TRUE(r1.ok()) << r1.status();
  auto r2 = RunDedup(Env::Default(), {input}, tmp.Join("t2"), o, Quiet(2));
  ASSERT_TRUE(r2.ok()) << r2.status();
  EXPECT_GT(r1->removed_near, 50u);
  EXPECT_EQ(r1->counts.docs_removed, r2->counts.docs_removed);
  const std::string k1 = OutputBytes(tmp.Join("t1")), k2 = OutputBytes(tmp.Join("t2"));
  EXPECT_FALSE(k1.empty());
  EXPECT_EQ(k1, k2);
  const std::string removed1 = OutputBytes(tmp.Join("t1/removed"));
  EXPECT_EQ(removed1, OutputBytes(tmp.Join("t2/removed")));

  // The same run as a 3-task job array, stage by stage, into the folder of the single run (whose
  // parts must be replaced, not mixed in).
  const std::string out3 = tmp.Join("t1");
  for (DedupStage st : {DedupStage::kSignatures, DedupStage::kBuckets, DedupStage::kClusters,
                        DedupStage::kMerge, DedupStage::kFilter, DedupStage::kReport}) {
    const int tasks = StageIsParallel(st) ? 3 : 1;
    for (int t = tasks - 1; t >= 0; --t) {  // any order
      RunOptions run = Quiet(2);
      run.task = t;
      run.tasks = tasks;
      auto r = RunDedupStage(Env::Default(), st, {input}, out3, o, run);
      ASSERT_TRUE(r.ok()) << DedupStageName(st) << " task " << t << ": " << r.status();
      if (st == DedupStage::kReport) {
        // No shingles kept (stages on their own, or kNever): every set read from the
        // input, by each clusters task for the candidates of its pairs (a document may be in
        // several tasks' pairs).
        EXPECT_GT(r1->sets_from_input, 0u);
        EXPECT_GE(r->sets_from_input, r1->sets_from_input);
        EXPECT_EQ(r->counts.docs_removed, r1->counts.docs_removed);
        EXPECT_EQ(r->clusters, r1->clusters);
        EXPECT_EQ(r->cluster_sizes, r1->cluster_sizes);
        EXPECT_EQ(r->candidate_pairs, r1->candidate_pairs);
        EXPECT_EQ(r->verified_pairs, r1->verified_pairs);
      }
    }
  }
  EXPECT_EQ(OutputBytes(out3), k1);
  EXPECT_EQ(OutputBytes(JoinPath(out3, "removed")), removed1);
  auto names = Env::Default()->ListDir(out3);
  ASSERT_TRUE(names.ok());
  int parts = 0;
  for (const std::string& n : *names) {
    if (n.rfind("dedup-", 0) != 0) continue;
    ++parts;
    EXPECT_EQ(n.find("-of-00003-"), 11u) << n;  // the single run's parts are gone
  }
  EXPECT_EQ(parts, 3);
}

// One split, so every thread but its owner finds nothing to start and computes the split's last
// documents' records (common/shared_work.h): the signatures stage's files, and a whole run's
// output and counts with the shingles kept and line dedup on, are those of one thread.
TEST(Dedup, IdleThreadsHelpingWithTheLastSplitChangeNoByte) {
  TempDir tmp;
  const std::string input = tmp.Join("in.jsonl");
  std::string corpus = FamilyCorpus(30, 10);
  corpus += "{\"text\": \"not closed\n";
  corpus += FamilyCorpus(10, 5);
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), input, corpus).ok());
  DedupOptions o = Budget64();
  o.split_bytes = 64 << 20;  // one split
  o.line_dedup = true;
  std::map<std::string, std::string> want_sig;
  std::string want_kept, want_removed, want_report;
  for (int threads : {1, 4, 8}) {
    const std::string sig_out = tmp.Join(absl::StrCat("sig", threads));
    auto st = RunDedupStage(Env::Default(), DedupStage::kSignatures, {input}, sig_out, o,
                            Quiet(threads));
    ASSERT_TRUE(st.ok()) << st.status();
    const std::string sig_dir = JoinPath(sig_out, ".dedup-work/sig");
    auto names = Env::Default()->ListDir(sig_dir);
    ASSERT_TRUE(names.ok()) << names.status();
    std::map<std::string, std::string> files;
    for (const std::string& n : *names) {
      files[n] = *ReadFileToString(Env::Default(), JoinPath(sig_dir, n));
    }
    ASSERT_GE(files.size(), 3u);  // sig, ids, lines

    DedupOptions whole = o;
    whole.keep_shingles = DedupOptions::KeepShingles::kAlways;
    const std::string out = tmp.Join(absl::StrCat("whole", threads));
    auto r = RunDedup(Env::Default(), {input}, out, whole, Quiet(threads));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->shingles_kept, 1u);
    EXPECT_EQ(r->sets_from_input, 0u);
    if (threads == 1) {
      EXPECT_GT(r->removed_near, 20u);
      EXPECT_EQ(r->counts.docs_rejected, 1u);
      want_sig = files;
      want_kept = OutputBytes(out);
      want_removed = OutputBytes(JoinPath(out, "removed"));
      want_report = r->CountsJson();
      continue;
    }
    EXPECT_EQ(files, want_sig) << threads << " threads";
    EXPECT_EQ(OutputBytes(out), want_kept) << threads << " threads";
    EXPECT_EQ(OutputBytes(JoinPath(out, "removed")), want_removed) << threads << " threads";
    EXPECT_EQ(r->CountsJson(), want_report) << threads << " threads";
  }
}

}  // namespace
}  // namespace grist::dedup
