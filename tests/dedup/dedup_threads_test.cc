// Tests of the dedup pipeline's determinism: its output and counts byte for byte the same for any
// thread count (the last splits' documents shared among idle threads included) and task count.
#include "dedup/dedup.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "dedup/dedup_format.h"
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

// The buckets stage's group pass, cut into ranges of whole groups on the pool's threads when its
// records are all in memory (and a window of them at a time), else one pass over the merged runs:
// its pair and line files are the same bytes at 1, 4 and 8 threads, and hold the same records with
// a budget so small that the records spill to runs (the header's fingerprint names the budget).
TEST(Dedup, BucketGroupsInRangesMakeTheSamePairsAndLines) {
  TempDir tmp;
  const std::string input = tmp.Join("in.jsonl");
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), input, FamilyCorpus(200, 12)).ok());
  DedupOptions o = Budget64();
  o.memory_limit = 16 << 20;  // windows of ~11 Ki records: several, each of several ranges
  o.line_dedup = true;
  auto bucket_files = [&](const std::string& out) {
    std::map<std::string, std::string> files;
    const std::string dir = JoinPath(out, ".dedup-work/buckets");
    auto names = Env::Default()->ListDir(dir);
    EXPECT_TRUE(names.ok()) << names.status();
    if (!names.ok()) return files;
    for (const std::string& n : *names) {
      files[n] = *ReadFileToString(Env::Default(), JoinPath(dir, n));
    }
    return files;
  };
  auto records = [](const std::map<std::string, std::string>& files) {
    std::map<std::string, std::string> out;
    for (const auto& [n, b] : files) {
      EXPECT_GE(b.size(), format::kHeaderSize + format::kFooterSize) << n;
      out[n] = b.substr(format::kHeaderSize, b.size() - format::kHeaderSize - format::kFooterSize);
    }
    return out;
  };
  std::map<std::string, std::string> want;
  for (const auto& [memory, threads] :
       std::vector<std::pair<uint64_t, int>>{{16 << 20, 1}, {16 << 20, 4}, {16 << 20, 8},
                                             {1 << 20, 8}}) {
    DedupOptions run = o;
    run.memory_limit = memory;
    const std::string out = tmp.Join(absl::StrCat("b", memory, "-", threads));
    for (DedupStage st : {DedupStage::kSignatures, DedupStage::kBuckets}) {
      auto r = RunDedupStage(Env::Default(), st, {input}, out, run, Quiet(threads));
      ASSERT_TRUE(r.ok()) << DedupStageName(st) << ": " << r.status();
    }
    const std::map<std::string, std::string> files = bucket_files(out);
    ASSERT_GE(files.size(), 2u);  // pairs, duplines
    if (want.empty()) {
      want = files;
      size_t bytes = 0;
      for (const auto& [n, b] : records(files)) bytes += b.size();
      EXPECT_GT(bytes, 4096u);  // pairs and lines to compare, not two empty files
      continue;
    }
    if (memory == o.memory_limit) {
      EXPECT_EQ(files, want) << threads << " threads";
    } else {
      EXPECT_EQ(records(files), records(want)) << memory << " bytes, " << threads << " threads";
    }
  }
}

}  // namespace
}  // namespace grist::dedup
