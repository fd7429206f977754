// Tests of the dedup pipeline (dedup/dedup.h): RunDedup and its stages, end to end.
#include "dedup/dedup.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/json_writer.h"
#include "common/rng.h"
#include "tests/dedup/dedup_test_util.h"
#include "tests/test_util.h"

namespace grist::dedup {
namespace {

using ::grist::dedup::testing::Budget64;
using ::grist::dedup::testing::FamilyCorpus;
using ::grist::dedup::testing::JsonLine;
using ::grist::dedup::testing::Mutate;
using ::grist::dedup::testing::OutDoc;
using ::grist::dedup::testing::OutputBytes;
using ::grist::dedup::testing::Quiet;
using ::grist::dedup::testing::ReadOutput;
using ::grist::dedup::testing::Words;
using ::grist::testing::TempDir;

TEST(Dedup, ExactNearShortEmptyAndBadRecords) {
  TempDir tmp;
  Rng rng(1);
  const std::string a = Words(rng, 300), b = Words(rng, 300), c = Words(rng, 200);
  std::string a_spaced = a;
  std::replace(a_spaced.begin(), a_spaced.end(), ' ', '\t');
  const std::string a_near = Mutate(a, 3, 5);
  const std::string b_far = Mutate(b, 60, 6);
  std::string in;
  in += JsonLine(a);         // line 1: kept
  in += JsonLine(b);         // 2: kept
  in += JsonLine(a_spaced);  // 3: exact duplicate of 1 (whitespace normalization)
  in += JsonLine(a_near);    // 4: near duplicate of 1
  in += JsonLine("");        // 5: kept (first empty document)
  in += JsonLine("");        // 6: exact duplicate of 5
  in += JsonLine("two words");  // 7: kept
  in += "{\"text\": broken\n";  // 8: rejected
  in += JsonLine(b_far);     // 9: kept (Jaccard well below 0.8)
  in += JsonLine(c);         // 10: kept
  const std::string input = tmp.Join("in.jsonl");
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), input, in).ok());
  const std::string out = tmp.Join("out");
  DedupOptions o = Budget64();
  auto rep = RunDedup(Env::Default(), {input}, out, o, Quiet());
  ASSERT_TRUE(rep.ok()) << rep.status();
  EXPECT_EQ(rep->counts.docs_in, 10u);
  EXPECT_EQ(rep->counts.docs_out, 6u);
  EXPECT_EQ(rep->counts.docs_removed, 3u);
  EXPECT_EQ(rep->counts.docs_rejected, 1u);
  EXPECT_EQ(rep->removed_exact, 2u);
  EXPECT_EQ(rep->removed_near, 1u);
  EXPECT_EQ(rep->clusters, 2u);
  EXPECT_EQ(rep->cluster_sizes.at(3), 1u);  // {1, 3, 4}
  EXPECT_EQ(rep->cluster_sizes.at(2), 1u);  // {5, 6}
  EXPECT_EQ(rep->bands, 14);
  EXPECT_EQ(rep->rows, 8);

  std::vector<OutDoc> kept = ReadOutput(out);
  std::vector<uint64_t> kept_lines;
  for (const auto& d : kept) kept_lines.push_back(d.doc.line);
  EXPECT_EQ(kept_lines, (std::vector<uint64_t>{1, 2, 5, 7, 9, 10}));
  EXPECT_EQ(kept[0].doc.text, a);
  EXPECT_EQ(kept[0].doc.metadata, "{\"n\":1}");

  std::vector<OutDoc> removed = ReadOutput(JoinPath(out, "removed"));
  ASSERT_EQ(removed.size(), 4u);
  EXPECT_EQ(removed[0].doc.line, 3u);
  EXPECT_EQ(removed[0].Field("reason"), "exact");
  EXPECT_EQ(removed[0].Field("duplicate_of"), input + ":1");
  EXPECT_EQ(removed[0].Field("kept"), input + ":1");
  EXPECT_EQ(removed[0].Field("similarity"), JsonDouble(1.0));
  EXPECT_EQ(removed[0].Field("cluster"), "0");
  EXPECT_EQ(removed[0].Field("cluster_size"), "3");
  EXPECT_EQ(removed[1].doc.line, 4u);
  EXPECT_EQ(removed[1].Field("reason"), "near");
  std::vector<uint64_t> sa, sn;
  ShingleHashes(a, o.shingle, &sa);
  ShingleHashes(a_near, o.shingle, &sn);
  const double j = JaccardSorted(sa, sn);
  EXPECT_GT(j, 0.8);
  EXPECT_EQ(removed[1].Field("similarity"), JsonDouble(j));
  EXPECT_EQ(removed[1].Field("kept"), input + ":1");
  EXPECT_EQ(removed[2].doc.line, 6u);
  EXPECT_EQ(removed[2].Field("reason"), "exact");
  EXPECT_EQ(removed[2].Field("cluster"), "1");
  EXPECT_EQ(removed[3].doc.line, 8u);
  EXPECT_EQ(removed[3].Field("reason"), "rejected");
  EXPECT_NE(removed[3].Field("error").find("malformed JSON"), std::string::npos);
  // The report is written beside the output; the work directory is gone.
  EXPECT_TRUE(Env::Default()->FileExists(JoinPath(out, "dedup_report.json")));
  EXPECT_FALSE(Env::Default()->FileExists(JoinPath(out, ".dedup-work")));
}

TEST(Dedup, StageRefusesIncompleteTaskSetAndNamesTheMissingTask) {
  TempDir tmp;
  const std::string input = tmp.Join("in.jsonl");
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), input, FamilyCorpus(5, 10)).ok());
  DedupOptions o = Budget64();
  o.split_bytes = 4 << 10;
  const std::string out = tmp.Join("out");
  for (int t : {0, 2}) {
    RunOptions run = Quiet();
    run.task = t;
    run.tasks = 3;
    ASSERT_TRUE(RunDedupStage(Env::Default(), DedupStage::kSignatures, {input}, out, o, run).ok());
  }
  auto r = RunDedupStage(Env::Default(), DedupStage::kBuckets, {input}, out, o, Quiet());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(r.status().message()).find("task 1 of 3 is missing"), std::string::npos)
      << r.status();
  // Running a later stage before its producer names the stage to run.
  auto m = RunDedupStage(Env::Default(), DedupStage::kMerge, {input}, out, o, Quiet());
  ASSERT_FALSE(m.ok());
  EXPECT_NE(std::string(m.status().message()).find("run the 'clusters' stage first"),
            std::string::npos)
      << m.status();
  // Different options than the signatures were made with are refused.
  RunOptions run = Quiet();
  run.task = 1;
  run.tasks = 3;
  DedupOptions other = o;
  other.num_perm = 64;
  other.bands = 8;
  ASSERT_TRUE(RunDedupStage(Env::Default(), DedupStage::kSignatures, {input}, out, other, run).ok());
  auto mixed = RunDedupStage(Env::Default(), DedupStage::kBuckets, {input}, out, o, Quiet());
  ASSERT_FALSE(mixed.ok());
  EXPECT_NE(std::string(mixed.status().message()).find("different inputs or dedup options"),
            std::string::npos)
      << mixed.status();
}

TEST(Dedup, CorruptedIntermediateFileIsDetected) {
  TempDir tmp;
  const std::string input = tmp.Join("in.jsonl");
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), input, FamilyCorpus(5, 6)).ok());
  DedupOptions o = Budget64();
  const std::string out = tmp.Join("out");
  ASSERT_TRUE(RunDedupStage(Env::Default(), DedupStage::kSignatures, {input}, out, o, Quiet()).ok());
  const std::string sig = JoinPath(out, ".dedup-work/sig/sig-00000-of-00001.bin");
  auto data = ReadFileToString(Env::Default(), sig);
  ASSERT_TRUE(data.ok());
  std::string bad = *data;
  bad[bad.size() / 2] ^= 0x01;
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), sig, bad).ok());
  auto r = RunDedupStage(Env::Default(), DedupStage::kBuckets, {input}, out, o, Quiet());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(std::string(r.status().message()).find("checksum mismatch"), std::string::npos)
      << r.status();
  // A truncated file is caught by its footer.
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), sig, data->substr(0, data->size() - 5)).ok());
  r = RunDedupStage(Env::Default(), DedupStage::kBuckets, {input}, out, o, Quiet());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
}

TEST(Dedup, DiskFullDuringTheRunIsAnErrorNotACrash) {
  TempDir tmp;
  const std::string input = tmp.Join("in.jsonl");
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), input, FamilyCorpus(10, 10)).ok());
  int64_t total = 0;
  {
    FaultInjectionEnv env(Env::Default());
    ASSERT_TRUE(RunDedup(&env, {input}, tmp.Join("full"), Budget64(), Quiet()).ok());
    total = env.appended_bytes();
  }
  ASSERT_GT(total, 1000);
  // (Not up to the last byte: the report holds timings, so its length varies between runs.)
  for (int64_t budget : {int64_t{100}, total / 3, total * 3 / 4}) {
    FaultInjectionEnv env(Env::Default());
    env.SetDiskSpace(budget);
    const std::string out = tmp.Join("out" + std::to_string(budget));
    auto r = RunDedup(&env, {input}, out, Budget64(), Quiet());
    ASSERT_FALSE(r.ok()) << "budget " << budget;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
    EXPECT_FALSE(Env::Default()->FileExists(JoinPath(out, "dedup_report.json")));
  }
}

// Many short near-duplicate pairs, then the whole corpus again (exact copies): thousands of
// candidate pairs whose first documents do not fit the verification cache of a 1 MB budget.
std::string ManyDuplicatesCorpus(int families) {
  Rng rng(17);
  std::vector<std::string> docs;
  for (int f = 0; f < families; ++f) {
    std::string base = Words(rng, 160);
    docs.push_back(Mutate(base, 1, rng.Next()));
    docs.push_back(std::move(base));
  }
  std::string in;
  for (int copy = 0; copy < 2; ++copy) {
    for (const std::string& d : docs) in += JsonLine(d);
  }
  return in;
}

TEST(Dedup, TinyMemoryLimitGivesTheSameOutputAsALargeOne) {
  TempDir tmp;
  const std::string input = tmp.Join("in.jsonl");
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), input, ManyDuplicatesCorpus(600)).ok());
  uint64_t candidate_docs = 0;  // documents in candidate pairs: every set read from the input
  for (bool verify : {false, true}) {
    SCOPED_TRACE(verify ? "verify" : "no verify");
    DedupOptions big = Budget64();  // one pass: everything fits
    big.verify = verify;
    big.split_bytes = 64 << 10;
    big.keep_shingles = DedupOptions::KeepShingles::kNever;
    auto r1 = RunDedup(Env::Default(), {input}, tmp.Join("big"), big, Quiet(1));
    ASSERT_TRUE(r1.ok()) << r1.status();
    EXPECT_EQ(r1->verify_passes, 1u);  // everything fits: one scan of the spilled sets
    EXPECT_GT(r1->removed_near, 500u);
    EXPECT_EQ(r1->removed_exact, 1200u);  // the second copies
    // The signatures stage's shingles are not kept (kNever): every candidate's set
    // is recomputed from the input.
    if (!verify) {
      candidate_docs = r1->sets_from_input;
      EXPECT_GT(candidate_docs, 1000u);
    } else {
      EXPECT_EQ(r1->sets_from_input, candidate_docs);
    }
    DedupOptions tiny = big;
    tiny.memory_limit = 1 << 20;  // blocks of 1024 pairs, a 128 KB cache: ~160 KB of first sets
    auto r2 = RunDedup(Env::Default(), {input}, tmp.Join("tiny"), tiny, Quiet(2));
    ASSERT_TRUE(r2.ok()) << r2.status();
    EXPECT_EQ(r2->sets_from_input, candidate_docs);
    // More scans than blocks of pairs: first documents that did not fit waited for a later scan.
    const uint64_t blocks = (r2->candidate_pairs + r2->exact_pairs + 1023) / 1024;
    EXPECT_GE(blocks, 2u);
    EXPECT_GT(r2->verify_passes, blocks);
    EXPECT_GT(r2->spilled_set_bytes, uint64_t{1} << 19);  // past an eighth of 1 MB: spilled
    EXPECT_EQ(r1->spilled_set_bytes, 0u);  // they fit an eighth of 64 MB: held in memory
    // The same sets written to the file at 64 MB: as many bytes as the tiny budget spilled.
    DedupOptions spilled = big;
    spilled.force_spilled_sets = true;
    auto r3 = RunDedup(Env::Default(), {input}, tmp.Join("spilled"), spilled, Quiet(2));
    ASSERT_TRUE(r3.ok()) << r3.status();
    EXPECT_EQ(r3->spilled_set_bytes, r2->spilled_set_bytes);
    EXPECT_EQ(r3->verify_passes, 1u);
    EXPECT_EQ(OutputBytes(tmp.Join("spilled")), OutputBytes(tmp.Join("big")));
    EXPECT_EQ(OutputBytes(tmp.Join("spilled/removed")), OutputBytes(tmp.Join("big/removed")));
    EXPECT_EQ(r2->candidate_pairs, r1->candidate_pairs);
    EXPECT_EQ(r2->verified_pairs, r1->verified_pairs);
    EXPECT_EQ(r2->cluster_sizes, r1->cluster_sizes);
    const std::string kept = OutputBytes(tmp.Join("big"));
    EXPECT_FALSE(kept.empty());
    EXPECT_EQ(OutputBytes(tmp.Join("tiny")), kept);
    EXPECT_EQ(OutputBytes(tmp.Join("tiny/removed")), OutputBytes(tmp.Join("big/removed")));
    // Every removed document points to an earlier one (here each has an edge to one).
    for (const OutDoc& d : ReadOutput(tmp.Join("tiny/removed"))) {
      const std::string dup = d.Field("duplicate_of");
      ASSERT_EQ(dup.rfind(input + ":", 0), 0u) << dup;
      EXPECT_LT(std::stoull(dup.substr(input.size() + 1)), d.doc.line) << d.raw;
    }
  }
}

// With keep_shingles kAlways, the clusters stage makes the candidates' sets from the shingles the
// signatures stage kept (RunDedup, within an eighth of the budget), from the input where they
// were not kept, or both: the output is the same.
TEST(Dedup, SetsFromKeptShinglesOrFromTheInputGiveTheSameOutput) {
  TempDir tmp;
  const std::string input = tmp.Join("in.jsonl");
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), input, FamilyCorpus(60, 20)).ok());
  DedupOptions o = Budget64();
  o.split_bytes = 64 << 10;
  // Stage by stage: nothing kept, every candidate's set read from the input.
  const std::string staged = tmp.Join("staged");
  uint64_t candidate_docs = 0;
  for (DedupStage st : kDedupStages) {
    auto r = RunDedupStage(Env::Default(), st, {input}, staged, o, Quiet(2));
    ASSERT_TRUE(r.ok()) << DedupStageName(st) << ": " << r.status();
    if (st == DedupStage::kReport) candidate_docs = r->sets_from_input;
  }
  EXPECT_GT(candidate_docs, 500u);
  const std::string kept = OutputBytes(staged);
  ASSERT_FALSE(kept.empty());
  // 64 MB: every split kept. 12 MB: 1.5 MB of shingles kept, fewer than the corpus has (about
  // 1.9 MB; here 124-157 of 822 candidates' sets then come from the input), while its bucket
  // records (1.2 MB sorted in memory) still fit beside them.
  o.keep_shingles = DedupOptions::KeepShingles::kAlways;
  for (uint64_t mb : {64, 12}) {
    SCOPED_TRACE(mb);
    o.memory_limit = mb << 20;
    const std::string out = tmp.Join(absl::StrCat("whole", mb));
    for (int threads : {1, 2}) {
      auto r = RunDedup(Env::Default(), {input}, out, o, Quiet(threads));
      ASSERT_TRUE(r.ok()) << r.status();
      if (mb == 64) {
        EXPECT_EQ(r->sets_from_input, 0u);
      } else {
        EXPECT_GT(r->sets_from_input, 0u);
        EXPECT_LT(r->sets_from_input, candidate_docs);
      }
      EXPECT_EQ(OutputBytes(out), kept);
      EXPECT_EQ(OutputBytes(JoinPath(out, "removed")), OutputBytes(JoinPath(staged, "removed")));
    }
  }
}

// By default (kDecide) a trial over the first eighth of the input decides whether the shingles
// are kept: on a corpus of near-duplicate families every split holds candidates, so they are
// kept; on distinct documents with one near pair (in the last split) none of the trial's splits
// does, so the cache is abandoned and the pair's sets come from the input. The verdict is the
// same for any thread count, and the output is the one without a cache.
TEST(Dedup, TheTrialKeepsTheShinglesWhereCandidatesAreManyAndOnlyThere) {
  TempDir tmp;
  Rng rng(5);
  std::string distinct;
  const std::string base = Words(rng, 200);
  for (int i = 0; i < 400; ++i) distinct += JsonLine(Words(rng, 120));
  distinct += JsonLine(base) + JsonLine(Mutate(base, 2, 9));
  struct Case {
    const char* name;
    std::string corpus;
    bool kept;
  };
  for (const Case& k : {Case{"families", FamilyCorpus(40, 15), true},
                        Case{"distinct", distinct, false}}) {
    SCOPED_TRACE(k.name);
    const std::string input = tmp.Join(absl::StrCat(k.name, ".jsonl"));
    ASSERT_TRUE(WriteFileAtomic(Env::Default(), input, k.corpus).ok());
    DedupOptions o = Budget64();
    o.split_bytes = 16 << 10;
    o.keep_shingles = DedupOptions::KeepShingles::kNever;
    const std::string never = tmp.Join(absl::StrCat(k.name, "-never"));
    auto r0 = RunDedup(Env::Default(), {input}, never, o, Quiet(2));
    ASSERT_TRUE(r0.ok()) << r0.status();
    EXPECT_EQ(r0->trial_splits, 0u);
    EXPECT_EQ(r0->shingles_kept, 0u);
    EXPECT_GT(r0->sets_from_input, 0u);
    EXPECT_GT(r0->removed_near, 0u);
    o.keep_shingles = DedupOptions::KeepShingles::kDecide;
    uint64_t trial_splits = 0, candidate_splits = 0;
    for (int threads : {1, 2}) {
      SCOPED_TRACE(threads);
      const std::string out = tmp.Join(absl::StrCat(k.name, "-decide", threads));
      auto r = RunDedup(Env::Default(), {input}, out, o, Quiet(threads));
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_GT(r->trial_splits, 1u);
      if (threads == 1) {
        trial_splits = r->trial_splits;
        candidate_splits = r->trial_candidate_splits;
      }
      EXPECT_EQ(r->trial_splits, trial_splits);
      EXPECT_EQ(r->trial_candidate_splits, candidate_splits);
      if (k.kept) {
        EXPECT_EQ(r->trial_candidate_splits, r->trial_splits);
        EXPECT_EQ(r->shingles_kept, 1u);
        EXPECT_GT(r->splits_kept, r->trial_splits);
        EXPECT_EQ(r->sets_from_input, 0u);
      } else {
        EXPECT_EQ(r->trial_candidate_splits, 0u);
        EXPECT_EQ(r->shingles_kept, 0u);
        EXPECT_EQ(r->splits_kept, 0u);
        EXPECT_EQ(r->sets_from_input, r0->sets_from_input);
      }
      EXPECT_EQ(r->removed_near, r0->removed_near);
      EXPECT_EQ(OutputBytes(out), OutputBytes(never));
      EXPECT_EQ(OutputBytes(JoinPath(out, "removed")), OutputBytes(JoinPath(never, "removed")));
    }
  }
}

// Wraps the clusters stage's spill of candidate sets ("...-sets.bin") to corrupt it, truncate it,
// or record where it starts in the stream of appended bytes.
class SpillTamperingEnv : public FaultInjectionEnv {
 public:
  enum class Mode { kNone, kFlipByte, kDropBytes };
  SpillTamperingEnv(Env* base, Mode mode, std::string match = "-sets.bin")
      : FaultInjectionEnv(base), mode_(mode), match_(std::move(match)) {}
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    auto f = FaultInjectionEnv::NewWritableFile(path);
    if (!f.ok() || path.find(match_) == std::string::npos) return f;
    if (spill_starts_at_ < 0) spill_starts_at_ = appended_bytes();
    tampered_path_ = path;
    return std::unique_ptr<WritableFile>(new File(std::move(*f), this));
  }
  int64_t spill_starts_at() const { return spill_starts_at_; }
  const std::string& tampered_path() const { return tampered_path_; }
  uint64_t spill_bytes() const { return spill_bytes_; }

 private:
  class File : public WritableFile {
   public:
    File(std::unique_ptr<WritableFile> base, SpillTamperingEnv* env)
        : base_(std::move(base)), env_(env) {}
    absl::Status Append(std::string_view data) override {
      env_->spill_bytes_ += data.size();
      if (env_->mode_ == Mode::kNone || done_ || data.size() < 4096) return base_->Append(data);
      done_ = true;
      std::string bad(data);
      if (env_->mode_ == Mode::kFlipByte) {
        bad[bad.size() / 2] ^= 0x10;
      } else {
        bad.erase(bad.size() / 2, 40);
      }
      return base_->Append(bad);
    }
    absl::Status Flush() override { return base_->Flush(); }
    absl::Status Sync() override { return base_->Sync(); }
    absl::Status Close() override { return base_->Close(); }
    uint64_t Size() const override { return base_->Size(); }
    const std::string& path() const override { return base_->path(); }

   private:
    std::unique_ptr<WritableFile> base_;
    SpillTamperingEnv* env_;
    bool done_ = false;
  };
  Mode mode_;
  std::string match_;
  std::string tampered_path_;
  int64_t spill_starts_at_ = -1;
  uint64_t spill_bytes_ = 0;
};

TEST(Dedup, CorruptOrTruncatedVerificationSpillIsDataLoss) {
  TempDir tmp;
  const std::string input = tmp.Join("in.jsonl");
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), input, ManyDuplicatesCorpus(300)).ok());
  for (auto mode : {SpillTamperingEnv::Mode::kFlipByte, SpillTamperingEnv::Mode::kDropBytes}) {
    SpillTamperingEnv env(Env::Default(), mode);
    const std::string out = tmp.Join(mode == SpillTamperingEnv::Mode::kFlipByte ? "flip" : "drop");
    DedupOptions o = Budget64();
    o.force_spilled_sets = true;  // the sets would fit in memory
    auto r = RunDedup(&env, {input}, out, o, Quiet());
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
    EXPECT_NE(std::string(r.status().message()).find("-sets.bin"), std::string::npos)
        << r.status();
    EXPECT_FALSE(Env::Default()->FileExists(JoinPath(out, "dedup_report.json")));
    EXPECT_FALSE(Env::Default()->FileExists(
        JoinPath(out, ".dedup-work/clusters/edges-00000-of-00001.bin")));
  }
}

// Records the path (as opened: the temporary name) of every file synced through it.
class SyncRecordingEnv : public FaultInjectionEnv {
 public:
  explicit SyncRecordingEnv(Env* base) : FaultInjectionEnv(base) {}
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    auto f = FaultInjectionEnv::NewWritableFile(path);
    if (!f.ok()) return f;
    return std::unique_ptr<WritableFile>(new File(std::move(*f), this));
  }
  // The synced files under `dir`, by file name with the temporary suffix cut off.
  std::set<std::string> SyncedUnder(const std::string& dir) const {
    std::set<std::string> out;
    for (const std::string& p : synced_) {
      if (p.rfind(dir + "/", 0) != 0) continue;
      std::string name = BaseName(p);
      out.insert(name.substr(0, name.find(".tmp")));
    }
    return out;
  }

 private:
  class File : public WritableFile {
   public:
    File(std::unique_ptr<WritableFile> base, SyncRecordingEnv* env)
        : base_(std::move(base)), env_(env) {}
    absl::Status Append(std::string_view data) override { return base_->Append(data); }
    absl::Status Flush() override { return base_->Flush(); }
    absl::Status Sync() override {
      env_->synced_.push_back(base_->path());
      return base_->Sync();
    }
    absl::Status Close() override { return base_->Close(); }
    uint64_t Size() const override { return base_->Size(); }
    const std::string& path() const override { return base_->path(); }

   private:
    std::unique_ptr<WritableFile> base_;
    SyncRecordingEnv* env_;
  };
  std::vector<std::string> synced_;
};

// RunDedup clears its work directory before the first stage and after the last, so without
// keep_work no later run reads the work files: they are not synced (a crash leaves files the next
// run clears). Its outputs are, and with keep_work (later --stage runs read the files) or stage by
// stage, so is every work file. The outputs are the same bytes either way.
TEST(Dedup, WorkFilesAreSyncedOnlyWhenALaterRunMayReadThem) {
  TempDir tmp;
  const std::string input = tmp.Join("in.jsonl");
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), input, ManyDuplicatesCorpus(60)).ok());
  DedupOptions o = Budget64();
  const std::set<std::string> outputs = {"dedup-00000.jsonl.zst", "dedup_report.json"};
  std::string scratch_bytes;
  {
    SyncRecordingEnv env(Env::Default());
    const std::string out = tmp.Join("scratch");
    auto r = RunDedup(&env, {input}, out, o, Quiet(2));
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_GT(r->counts.docs_removed, 0u);
    EXPECT_EQ(env.SyncedUnder(out), outputs);
    EXPECT_EQ(env.SyncedUnder(JoinPath(out, "removed")),
              std::set<std::string>{"dedup-00000.jsonl.zst"});
    EXPECT_TRUE(env.SyncedUnder(JoinPath(out, ".dedup-work")).empty());
    EXPECT_FALSE(Env::Default()->FileExists(JoinPath(out, ".dedup-work")));
    scratch_bytes = OutputBytes(out) + OutputBytes(JoinPath(out, "removed"));
  }
  const std::set<std::string> work = {
      "sig-00000-of-00001.bin",  "ids-00000-of-00001.bin",      "pairs-00000-of-00001.bin",
      "edges-00000-of-00001.bin", "clusters-00000-of-00001.bin", "kept-ids-00000-of-00001.bin",
      "dup-ids-00000-of-00001.bin"};
  const std::set<std::string> stats = {
      "signatures-00000-of-00001.bin", "buckets-00000-of-00001.bin", "clusters-00000-of-00001.bin",
      "merge-00000-of-00001.bin", "filter-00000-of-00001.bin"};
  auto check_work = [&](const SyncRecordingEnv& env, const std::string& out) {
    const std::string w = JoinPath(out, ".dedup-work");
    std::set<std::string> got;
    for (const char* sub : {"sig", "buckets", "clusters", "merge"}) {
      for (const std::string& n : env.SyncedUnder(JoinPath(w, sub))) got.insert(n);
    }
    got.erase("duplines-00000-of-00001.bin");  // (written, empty, without line dedup)
    EXPECT_EQ(got, work);
    EXPECT_EQ(env.SyncedUnder(JoinPath(w, "stats")), stats);
    EXPECT_EQ(OutputBytes(out) + OutputBytes(JoinPath(out, "removed")), scratch_bytes);
  };
  {
    SyncRecordingEnv env(Env::Default());
    const std::string out = tmp.Join("kept");
    DedupOptions k = o;
    k.keep_work = true;
    auto r = RunDedup(&env, {input}, out, k, Quiet(2));
    ASSERT_TRUE(r.ok()) << r.status();
    check_work(env, out);
  }
  {
    SyncRecordingEnv env(Env::Default());
    const std::string out = tmp.Join("staged");
    for (DedupStage st : {DedupStage::kSignatures, DedupStage::kBuckets, DedupStage::kClusters,
                          DedupStage::kMerge, DedupStage::kFilter, DedupStage::kReport}) {
      auto r = RunDedupStage(&env, st, {input}, out, o, Quiet(2));
      ASSERT_TRUE(r.ok()) << DedupStageName(st) << ": " << r.status();
    }
    check_work(env, out);
  }
}

TEST(Dedup, DiskFullDuringTheVerificationSpill) {
  TempDir tmp;
  const std::string input = tmp.Join("in.jsonl");
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), input, ManyDuplicatesCorpus(300)).ok());
  int64_t start = 0;
  uint64_t size = 0;
  DedupOptions o = Budget64();
  o.force_spilled_sets = true;  // the sets would fit in memory
  {
    SpillTamperingEnv env(Env::Default(), SpillTamperingEnv::Mode::kNone);
    ASSERT_TRUE(RunDedup(&env, {input}, tmp.Join("ok"), o, Quiet()).ok());
    start = env.spill_starts_at();
    size = env.spill_bytes();
  }
  ASSERT_GT(start, 0);
  ASSERT_GT(size, 100000u);
  SpillTamperingEnv env(Env::Default(), SpillTamperingEnv::Mode::kNone);
  env.SetDiskSpace(start + static_cast<int64_t>(size / 2));
  const std::string out = tmp.Join("full");
  auto r = RunDedup(&env, {input}, out, o, Quiet());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  // The buckets stage finished, the clusters stage published nothing, the spill is gone.
  const std::string work = JoinPath(out, ".dedup-work");
  EXPECT_TRUE(Env::Default()->FileExists(JoinPath(work, "buckets/pairs-00000-of-00001.bin")));
  EXPECT_FALSE(Env::Default()->FileExists(JoinPath(work, "clusters/edges-00000-of-00001.bin")));
  auto left = Env::Default()->ListDir(JoinPath(work, "tmp"));
  ASSERT_TRUE(left.ok());
  for (const std::string& n : *left) EXPECT_EQ(n.find("-sets.bin"), std::string::npos) << n;
  EXPECT_FALSE(Env::Default()->FileExists(JoinPath(out, "dedup_report.json")));
}

// Three chains of near duplicates D0 ~ D1 ~ ... of `length` documents each (each one word away
// from the next, Jaccard 0.84, but two apart only 0.70: below the threshold, so a chain's cluster
// is connected only through its hops), plus `groups` texts with `copies` exact copies each, mixed
// at random positions. Chain 0 is in chain order in the input, chain 1 reversed, chain 2 zigzag
// (D1 D0 D3 D2 ...). Chain documents carry "chain": "C.I".
std::string ChainCorpus(int length, int groups, int copies) {
  std::vector<std::vector<std::string>> chains(3);
  for (int c = 0; c < 3; ++c) {
    std::vector<std::string> base;
    for (int j = 0; j < 60; ++j) base.push_back(absl::StrCat("c", c, "w", j));
    for (int i = 0; i < length; ++i) {
      std::vector<std::string> words = base;
      // Positions 5 + 11k mod 50: distinct, at least 5 apart for consecutive links, away from the
      // ends, so each link changes exactly 5 of the 56 shingles.
      for (int k = 0; k < i; ++k) words[5 + (k * 11) % 50] = absl::StrCat("link", k);
      std::string text;
      for (size_t j = 0; j < words.size(); ++j) absl::StrAppend(&text, j ? " " : "", words[j]);
      std::string s = "{\"text\":";
      AppendJsonString(&s, text);
      chains[c].push_back(absl::StrCat(s, ",\"chain\":\"", c, ".", i, "\"}\n"));
    }
  }
  std::reverse(chains[1].begin(), chains[1].end());
  for (int i = 0; i + 1 < length; i += 2) std::swap(chains[2][i], chains[2][i + 1]);
  Rng rng(99);
  std::vector<std::string> lines;
  for (int g = 0; g < groups; ++g) {
    const std::string line = JsonLine(Words(rng, 30));
    for (int k = 0; k < copies; ++k) lines.push_back(line);
  }
  for (int c = 0; c < 3; ++c) {
    for (int i = 0; i < length; ++i) lines.push_back(std::to_string(c));  // a slot of chain c
  }
  for (size_t i = lines.size(); i > 1; --i) std::swap(lines[i - 1], lines[rng.Uniform(i)]);
  std::vector<size_t> next(3, 0);
  std::string in;
  for (const std::string& l : lines) {
    if (l.size() == 1) {
      const int c = l[0] - '0';
      in += chains[c][next[c]++];
    } else {
      in += l;
    }
  }
  return in;
}

DedupOptions ChainOptions() {
  DedupOptions o = Budget64();
  // 56 x 2: for each link some band holds the pair without the document before them (candidate
  // pairs join each bucket's first document to the others), so every link is a candidate.
  o.bands = 56;
  o.rows = 2;
  o.split_bytes = 64 << 10;
  return o;
}

TEST(Dedup, ExternalMergeGivesTheSameOutputAsTheInMemoryOne) {
  TempDir tmp;
  const std::string input = tmp.Join("in.jsonl");
  constexpr int kChains = 3, kChain = 30;
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), input, ChainCorpus(kChain, 40, 100)).ok());
  const DedupOptions big = ChainOptions();
  auto r1 = RunDedup(Env::Default(), {input}, tmp.Join("big"), big, Quiet(1));
  ASSERT_TRUE(r1.ok()) << r1.status();
  EXPECT_EQ(r1->merge_rounds, 0u);  // in memory
  DedupOptions tiny = big;
  tiny.memory_limit = 1 << 20;  // 3276 edges in memory at most; this corpus has more
  auto r2 = RunDedup(Env::Default(), {input}, tmp.Join("tiny"), tiny, Quiet(2));
  ASSERT_TRUE(r2.ok()) << r2.status();
  EXPECT_GE(r2->merge_rounds, 2u);
  EXPECT_EQ(r2->clusters, r1->clusters);
  EXPECT_EQ(r2->cluster_sizes, r1->cluster_sizes);
  EXPECT_EQ(r2->removed_exact, r1->removed_exact);
  EXPECT_EQ(r2->removed_near, r1->removed_near);
  EXPECT_EQ(r1->removed_exact, 40u * 99u);
  EXPECT_EQ(r1->clusters, 40u + kChains);
  const std::string kept = OutputBytes(tmp.Join("big"));
  EXPECT_FALSE(kept.empty());
  EXPECT_EQ(OutputBytes(tmp.Join("tiny")), kept);
  const std::string removed = OutputBytes(tmp.Join("big/removed"));
  EXPECT_EQ(OutputBytes(tmp.Join("tiny/removed")), removed);
  // Each chain is one cluster (reached only through its hops).
  std::map<std::string, int> chain_removed;   // chain -> removed documents
  std::map<std::string, std::string> cluster;  // chain -> its cluster number
  std::set<std::string> clusters;
  for (const OutDoc& d : ReadOutput(tmp.Join("tiny/removed"))) {
    const size_t at = d.raw.find("\"chain\":\"");
    if (at == std::string::npos) {
      EXPECT_EQ(d.Field("reason"), "exact") << d.raw;
      EXPECT_EQ(d.Field("cluster_size"), "100") << d.raw;
      continue;
    }
    const std::string chain = d.raw.substr(at + 9, d.raw.find('.', at) - at - 9);
    ++chain_removed[chain];
    EXPECT_EQ(d.Field("reason"), "near") << d.raw;
    EXPECT_EQ(d.Field("cluster_size"), std::to_string(kChain)) << d.raw;
    if (cluster[chain].empty()) cluster[chain] = d.Field("cluster");
    EXPECT_EQ(d.Field("cluster"), cluster[chain]) << d.raw;
    clusters.insert(d.Field("cluster"));
    const double sim = std::stod(d.Field("similarity"));
    EXPECT_GT(sim, 0.8);
    EXPECT_LT(sim, 0.85);
  }
  EXPECT_EQ(clusters.size(), static_cast<size_t>(kChains));
  ASSERT_EQ(chain_removed.size(), static_cast<size_t>(kChains));
  for (const auto& [chain, n] : chain_removed) EXPECT_EQ(n, kChain - 1) << chain;

  // The same under the tiny budget as a 3-task job array, stage by stage.
  const std::string out3 = tmp.Join("tasks3");
  for (DedupStage st : {DedupStage::kSignatures, DedupStage::kBuckets, DedupStage::kClusters,
                        DedupStage::kMerge, DedupStage::kFilter, DedupStage::kReport}) {
    const int tasks = StageIsParallel(st) ? 3 : 1;
    for (int t = 0; t < tasks; ++t) {
      RunOptions run = Quiet(1);
      run.task = t;
      run.tasks = tasks;
      auto r = RunDedupStage(Env::Default(), st, {input}, out3, tiny, run);
      ASSERT_TRUE(r.ok()) << DedupStageName(st) << " task " << t << ": " << r.status();
      if (st == DedupStage::kReport) {
        EXPECT_EQ(r->merge_rounds, r2->merge_rounds);
        EXPECT_EQ(r->cluster_sizes, r1->cluster_sizes);
      }
    }
  }
  EXPECT_EQ(OutputBytes(out3), kept);
  EXPECT_EQ(OutputBytes(JoinPath(out3, "removed")), removed);
  // No scratch file of the merge is left behind.
  auto left = Env::Default()->ListDir(JoinPath(out3, ".dedup-work/tmp"));
  ASSERT_TRUE(left.ok());
  for (const std::string& n : *left) EXPECT_EQ(n.rfind("merge-", 0), std::string::npos) << n;
}

// The external merge, forced, against the in-memory one on corpora of other shapes.
TEST(Dedup, ForcedExternalMergeMatchesTheInMemoryOneOnVariedCorpora) {
  TempDir tmp;
  std::string identical, distinct;
  for (int i = 0; i < 50; ++i) identical += JsonLine("the same text in every record of this file");
  for (int i = 0; i < 20; ++i) distinct += JsonLine(absl::StrCat("record ", i, " has its own text"));
  struct Case {
    std::string name, corpus;
    bool verify, line_dedup;
  };
  const std::vector<Case> cases = {
      {"families", FamilyCorpus(25, 10), true, false},
      {"families-noverify", FamilyCorpus(15, 10), false, false},
      {"families-lines", FamilyCorpus(10, 10), true, true},
      {"many", ManyDuplicatesCorpus(40), true, false},
      {"identical", identical, true, false},
      {"chains", ChainCorpus(12, 5, 7), true, false},
      {"no-duplicates", distinct, true, false},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    const std::string input = tmp.Join(k.name + ".jsonl");
    ASSERT_TRUE(WriteFileAtomic(Env::Default(), input, k.corpus).ok());
    DedupOptions o = k.name == "chains" ? ChainOptions() : Budget64();
    o.verify = k.verify;
    o.line_dedup = k.line_dedup;
    o.split_bytes = 16 << 10;
    // 4 MB: the in-memory merge still fits (13,107 edges), and the external one's sort buffers
    // stay small (reserving them is slow under AddressSanitizer).
    o.memory_limit = 4 << 20;
    auto r1 = RunDedup(Env::Default(), {input}, tmp.Join(k.name + "-mem"), o, Quiet(1));
    ASSERT_TRUE(r1.ok()) << r1.status();
    o.force_external_merge = true;
    auto r2 = RunDedup(Env::Default(), {input}, tmp.Join(k.name + "-ext"), o, Quiet(2));
    ASSERT_TRUE(r2.ok()) << r2.status();
    EXPECT_EQ(r1->merge_rounds, 0u);
    if (k.name == "no-duplicates") {
      EXPECT_EQ(r2->merge_rounds, 0u);  // no edge: nothing to hook
      EXPECT_EQ(r2->counts.docs_removed, 0u);
    } else {
      EXPECT_GE(r2->merge_rounds, 1u);
      EXPECT_GT(r1->counts.docs_removed, 0u);
    }
    EXPECT_EQ(r2->clusters, r1->clusters);
    EXPECT_EQ(r2->cluster_sizes, r1->cluster_sizes);
    EXPECT_EQ(r2->removed_exact, r1->removed_exact);
    EXPECT_EQ(r2->removed_near, r1->removed_near);
    EXPECT_EQ(r2->lines_removed, r1->lines_removed);
    EXPECT_EQ(OutputBytes(tmp.Join(k.name + "-ext")), OutputBytes(tmp.Join(k.name + "-mem")));
    EXPECT_EQ(OutputBytes(tmp.Join(k.name + "-ext/removed")),
              OutputBytes(tmp.Join(k.name + "-mem/removed")));
  }
}

TEST(Dedup, CorruptOrTruncatedMergeSpillIsDataLossNamingTheFile) {
  TempDir tmp;
  const std::string input = tmp.Join("in.jsonl");
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), input, ChainCorpus(20, 40, 100)).ok());
  DedupOptions tiny = ChainOptions();
  tiny.memory_limit = 1 << 20;
  for (const char* which : {"merge-edges-by-b-", "merge-graph-", "merge-labels-", "merge-kept-refs-",
                            "merge-dup-ids-run-"}) {
    for (auto mode : {SpillTamperingEnv::Mode::kFlipByte, SpillTamperingEnv::Mode::kDropBytes}) {
      SCOPED_TRACE(which);
      SpillTamperingEnv env(Env::Default(), mode, which);
      const std::string out = tmp.Join(std::string(which) + std::to_string(static_cast<int>(mode)));
      auto r = RunDedup(&env, {input}, out, tiny, Quiet());
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
      ASSERT_FALSE(env.tampered_path().empty());
      EXPECT_NE(std::string(r.status().message()).find(which), std::string::npos) << r.status();
      EXPECT_FALSE(Env::Default()->FileExists(JoinPath(out, "dedup_report.json")));
      EXPECT_FALSE(Env::Default()->FileExists(
          JoinPath(out, ".dedup-work/merge/dup-ids-00000-of-00001.bin")));
    }
  }
}

TEST(Dedup, DiskFullDuringTheMergeSpill) {
  TempDir tmp;
  const std::string input = tmp.Join("in.jsonl");
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), input, ChainCorpus(20, 40, 100)).ok());
  DedupOptions tiny = ChainOptions();
  tiny.memory_limit = 1 << 20;
  int64_t start = 0;
  uint64_t size = 0;
  {
    SpillTamperingEnv env(Env::Default(), SpillTamperingEnv::Mode::kNone, "/tmp/merge-");
    ASSERT_TRUE(RunDedup(&env, {input}, tmp.Join("ok"), tiny, Quiet()).ok());
    start = env.spill_starts_at();
    size = env.spill_bytes();
  }
  ASSERT_GT(start, 0);
  ASSERT_GT(size, 100000u);
  SpillTamperingEnv env(Env::Default(), SpillTamperingEnv::Mode::kNone, "/tmp/merge-");
  env.SetDiskSpace(start + static_cast<int64_t>(size / 2));
  const std::string out = tmp.Join("full");
  auto r = RunDedup(&env, {input}, out, tiny, Quiet());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  // The clusters stage finished, the merge published nothing, its scratch files are gone.
  const std::string work = JoinPath(out, ".dedup-work");
  EXPECT_TRUE(Env::Default()->FileExists(JoinPath(work, "clusters/edges-00000-of-00001.bin")));
  EXPECT_FALSE(Env::Default()->FileExists(JoinPath(work, "merge/clusters-00000-of-00001.bin")));
  auto left = Env::Default()->ListDir(JoinPath(work, "tmp"));
  ASSERT_TRUE(left.ok());
  for (const std::string& n : *left) EXPECT_EQ(n.rfind("merge-", 0), std::string::npos) << n;
  EXPECT_FALSE(Env::Default()->FileExists(JoinPath(out, "dedup_report.json")));
}

// r, x, y in input order: r and x are each near y (Jaccard 0.87) but not near each other (0.76).
// x is removed (its cluster's first document is r) though its only edge goes to the later y.
TEST(Dedup, DuplicateOfIsEarlierUnlessTheOnlyEdgeIsToALaterDocument) {
  TempDir tmp;
  std::vector<std::string> base;
  for (int i = 0; i < 300; ++i) {
    std::string t = "w";
    t += std::to_string(i);
    base.push_back(t);
  }
  auto edit = [&](std::vector<int> at, const std::string& tag) {
    std::vector<std::string> w = base;
    for (size_t k = 0; k < at.size(); ++k) {
      w[at[k]] = tag;
      w[at[k]] += std::to_string(k);
    }
    std::string s;
    for (const auto& t : w) {
      if (!s.empty()) s += ' ';
      s += t;
    }
    return s;
  };
  const std::string r = edit({10, 40, 70, 100}, "r"), x = edit({180, 210, 240, 270}, "x");
  const std::string y = edit({}, "");
  const std::string input = tmp.Join("in.jsonl");
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), input, JsonLine(r) + JsonLine(x) + JsonLine(y)).ok());
  DedupOptions o = Budget64();
  std::vector<uint64_t> sr, sx, sy;
  ShingleHashes(r, o.shingle, &sr);
  ShingleHashes(x, o.shingle, &sx);
  ShingleHashes(y, o.shingle, &sy);
  ASSERT_LT(JaccardSorted(sr, sx), 0.8);
  ASSERT_GE(JaccardSorted(sx, sy), 0.8);
  auto rep = RunDedup(Env::Default(), {input}, tmp.Join("out"), o, Quiet());
  ASSERT_TRUE(rep.ok()) << rep.status();
  EXPECT_EQ(rep->cluster_sizes.at(3), 1u);
  std::vector<OutDoc> removed = ReadOutput(tmp.Join("out/removed"));
  ASSERT_EQ(removed.size(), 2u);
  EXPECT_EQ(removed[0].doc.line, 2u);
  EXPECT_EQ(removed[0].Field("reason"), "near");
  EXPECT_EQ(removed[0].Field("kept"), input + ":1");
  EXPECT_EQ(removed[0].Field("duplicate_of"), input + ":3");  // its only edge
  EXPECT_EQ(removed[0].Field("similarity"), JsonDouble(JaccardSorted(sx, sy)));
  EXPECT_EQ(removed[1].doc.line, 3u);
  EXPECT_EQ(removed[1].Field("duplicate_of"), input + ":1");  // tie with x: the earliest
}

TEST(Dedup, AllIdenticalCorpus) {
  TempDir tmp;
  Rng rng(3);
  const std::string text = Words(rng, 50);
  std::string in;
  for (int i = 0; i < 500; ++i) in += JsonLine(text);
  const std::string input = tmp.Join("in.jsonl");
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), input, in).ok());
  auto r = RunDedup(Env::Default(), {input}, tmp.Join("out"), Budget64(), Quiet(2));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->counts.docs_out, 1u);
  EXPECT_EQ(r->counts.docs_removed, 499u);
  EXPECT_EQ(r->removed_exact, 499u);
  EXPECT_EQ(r->clusters, 1u);
  EXPECT_EQ(r->cluster_sizes.at(500), 1u);
  EXPECT_EQ(r->exact_pairs, 499u);  // a star from the first document, not 500 * 499 / 2
  // The same under the smallest budget (1 MB), in two tasks per stage.
  DedupOptions tiny;
  tiny.memory_limit = 1 << 20;
  tiny.split_bytes = 4 << 10;
  auto t = RunDedup(Env::Default(), {input}, tmp.Join("tiny"), tiny, Quiet(2));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->removed_exact, 499u);
  EXPECT_EQ(t->cluster_sizes, r->cluster_sizes);
  EXPECT_EQ(OutputBytes(tmp.Join("tiny")), OutputBytes(tmp.Join("out")));
  EXPECT_EQ(OutputBytes(tmp.Join("tiny/removed")), OutputBytes(tmp.Join("out/removed")));
}

TEST(Dedup, LineDedupRemovesLinesSharedByDocuments) {
  TempDir tmp;
  std::string in;
  in += JsonLine("menu\nhome\nfirst body\n");
  in += JsonLine("menu\nsecond body\nhome");
  in += JsonLine("menu\nhome\n");
  in += JsonLine("unique\n\nunique\n");  // repeated within one document only; blank lines stay
  const std::string input = tmp.Join("in.jsonl");
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), input, in).ok());
  DedupOptions o = Budget64();
  o.line_dedup = true;
  o.near = false;
  o.exact = false;
  auto r = RunDedup(Env::Default(), {input}, tmp.Join("out"), o, Quiet());
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<OutDoc> kept = ReadOutput(tmp.Join("out"));
  ASSERT_EQ(kept.size(), 3u);
  EXPECT_EQ(kept[0].doc.text, "first body\n");
  EXPECT_EQ(kept[1].doc.text, "second body\n");
  EXPECT_EQ(kept[2].doc.text, "unique\n\nunique\n");
  std::vector<OutDoc> removed = ReadOutput(tmp.Join("out/removed"));
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0].Field("reason"), "lines");
  EXPECT_EQ(removed[0].Field("lines_removed"), "2");
  EXPECT_EQ(r->duplicated_lines, 2u);
  EXPECT_EQ(r->lines_removed, 6u);
  EXPECT_EQ(r->removed_lines, 1u);
}

TEST(Dedup, HugeDocumentAndInvalidUtf8) {
  TempDir tmp;
  Rng rng(8);
  // A 100 MB plain-text document (one document per file), plus Latin-1 bytes.
  ASSERT_TRUE(Env::Default()->CreateDirs(tmp.Join("in")).ok());
  std::string big;
  big.reserve(100u << 20);
  const std::string chunk = Words(rng, 20000);
  while (big.size() < (100u << 20)) big += chunk;
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), tmp.Join("in/a_big.txt"), big).ok());
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), tmp.Join("in/b_latin1.txt"),
                              "caf\xe9 cr\xe8me br\xfbl\xe9" "e and more words here").ok());
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), tmp.Join("in/c_latin1.txt"),
                              "caf\xe9 cr\xe8me br\xfbl\xe9" "e and more words here").ok());
  DedupOptions o;
  auto r = RunDedup(Env::Default(), {tmp.Join("in")}, tmp.Join("out"), o, Quiet(2));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->counts.docs_in, 3u);
  EXPECT_EQ(r->counts.docs_out, 2u);
  EXPECT_EQ(r->removed_exact, 1u);
}

}  // namespace
}  // namespace grist::dedup
