// `grist build`'s I/O, on the suite of build_fault_fixture.h:
//  - a one-process build syncs a stage's outputs beside the next stage, yet every output is durable
//    before the stage's record names it, and `--stage tokenizer` records after the stages it ran;
//  - a resume reads no input or stage output whose stat holds (WORK/sums.json), and a rebuild with
//    nothing changed leaves the published release as it is;
//  - a staged step asks the file system about each input once.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/hash.h"
#include "common/status_macros.h"
#include "release/release.h"
#include "shard/shard_format.h"
#include "tests/release/build_fault_fixture.h"
#include "tests/test_util.h"

namespace grist::release {
namespace {

using ::testing::HasSubstr;

// The real file system with every file's times ten seconds back (settled, as those of a corpus
// made long before the build: WORK/sums.json remembers only such files' checksums), counting the
// files opened for reading under a folder.
class SettledTimesEnv : public grist::testing::ForwardingEnv {
 public:
  absl::StatusOr<FileStat> Stat(const std::string& p) override {
    absl::StatusOr<FileStat> st = ForwardingEnv::Stat(p);
    if (st.ok()) {
      st->mtime_ns -= 10'000'000'000;
      st->ctime_ns -= 10'000'000'000;
    }
    return st;
  }
  absl::StatusOr<std::unique_ptr<SequentialFile>> NewSequentialFile(const std::string& p) override {
    Count(p);
    return ForwardingEnv::NewSequentialFile(p);
  }
  absl::StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& p) override {
    Count(p);
    return ForwardingEnv::NewRandomAccessFile(p);
  }
  // Files opened for reading under `dir` since the last call.
  int Opened(const std::string& dir) {
    std::lock_guard<std::mutex> l(mu_);
    int n = 0;
    for (auto it = opened_.begin(); it != opened_.end();) {
      if (it->rfind(dir + "/", 0) == 0) {
        ++n;
        it = opened_.erase(it);
      } else {
        ++it;
      }
    }
    return n;
  }

 private:
  void Count(const std::string& p) {
    std::lock_guard<std::mutex> l(mu_);
    opened_.push_back(p);
  }
  std::mutex mu_;
  std::vector<std::string> opened_;
};

// The real file system, following which bytes written through it are durable: a file is dirty
// from its first Append until a Sync of its writer or a SyncFile of its path (renames followed).
// When a stage's record is renamed into place (WORK/stages/NAME.json), every file then under that
// stage's output root must have been written through it and be durable: otherwise a power loss
// could leave a record that vouches for outputs that are not there.
class DurabilityEnv : public grist::testing::ForwardingEnv {
 public:
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& p) override {
    ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> f, ForwardingEnv::NewWritableFile(p));
    Set(p, false);
    return std::unique_ptr<WritableFile>(new File(std::move(f), this));
  }
  absl::Status SyncFile(const std::string& p) override {
    RETURN_IF_ERROR(ForwardingEnv::SyncFile(p));
    Set(p, false);
    return absl::OkStatus();
  }
  absl::Status RemoveFile(const std::string& p) override {
    RETURN_IF_ERROR(ForwardingEnv::RemoveFile(p));
    std::lock_guard<std::mutex> l(mu_);
    dirty_.erase(p);
    return absl::OkStatus();
  }
  absl::Status RenameFile(const std::string& a, const std::string& b) override {
    static const std::map<std::string, std::string> kRoots = {{"clean", "clean"},
                                                              {"dedup", "dedup"},
                                                              {"tokenizer", "tokenizer.model"},
                                                              {"tokenize", "tokens"}};
    const std::string stages = DirName(b), name = BaseName(b);
    const std::string stage = name.size() > 5 ? name.substr(0, name.size() - 5) : "";
    if (BaseName(stages) == "stages" && kRoots.contains(stage)) {
      std::lock_guard<std::mutex> l(mu_);
      const std::string root = JoinPath(DirName(stages), kRoots.at(stage));
      std::vector<std::string> files;
      if (std::filesystem::is_directory(root)) {
        for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
          if (e.is_regular_file()) files.push_back(e.path().string());
        }
      } else if (std::filesystem::exists(root)) {
        files.push_back(root);
      }
      for (const std::string& f : files) {
        const auto it = dirty_.find(f);
        if (it == dirty_.end() || it->second) not_durable_.push_back(name + ": " + f);
      }
      ++records_;
    }
    RETURN_IF_ERROR(ForwardingEnv::RenameFile(a, b));
    std::lock_guard<std::mutex> l(mu_);
    if (auto it = dirty_.find(a); it != dirty_.end()) {
      dirty_[b] = it->second;
      dirty_.erase(a);
    }
    return absl::OkStatus();
  }
  std::vector<std::string> not_durable() {
    std::lock_guard<std::mutex> l(mu_);
    return not_durable_;
  }
  int records() {
    std::lock_guard<std::mutex> l(mu_);
    return records_;
  }

 private:
  class File : public WritableFile {
   public:
    File(std::unique_ptr<WritableFile> base, DurabilityEnv* env)
        : base_(std::move(base)), env_(env) {}
    absl::Status Append(std::string_view d) override {
      env_->Set(base_->path(), true);
      return base_->Append(d);
    }
    absl::Status Flush() override { return base_->Flush(); }
    absl::Status Sync() override {
      RETURN_IF_ERROR(base_->Sync());
      env_->Set(base_->path(), false);
      return absl::OkStatus();
    }
    absl::Status Close() override { return base_->Close(); }
    uint64_t Size() const override { return base_->Size(); }
    const std::string& path() const override { return base_->path(); }
    void SetWritebackBytes(uint64_t b) override { base_->SetWritebackBytes(b); }

   private:
    std::unique_ptr<WritableFile> base_;
    DurabilityEnv* env_;
  };
  void Set(const std::string& p, bool dirty) {
    std::lock_guard<std::mutex> l(mu_);
    dirty_[p] = dirty;
  }
  std::mutex mu_;
  std::map<std::string, bool> dirty_;  // every file written through this Env: whether dirty
  std::vector<std::string> not_durable_;
  int records_ = 0;
};

// The unstaged build syncs a stage's outputs beside the next stage (DeferredSyncEnv), not as it
// writes them: its record must still come after they are durable.
TEST_F(BuildFaultTest, EveryStageOutputIsDurableBeforeItsRecord) {
  TempDir t;
  for (int threads : {1, 2}) {
    SCOPED_TRACE(threads);
    DurabilityEnv env;
    BuildOptions o = Options(t.Join(absl::StrCat("rel-", threads)));
    o.run.threads = threads;
    auto r = BuildRelease(&env, o);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(env.records(), 4) << "clean, dedup, tokenizer, tokenize";
    EXPECT_THAT(env.not_durable(), ::testing::IsEmpty());
    ExpectSameRelease(*reference_, o.output_dir);
  }
}

// `--stage tokenizer` runs clean and dedup first in its own process, each completed on a thread
// beside the next stage; the tokenizer's record must name what they wrote, so it is written only
// once theirs are: with every fsync slowed (their completions still running when the tokenizer
// is done), the steps after it find the tokenizer's record holding and the release is the
// reference's.
TEST_F(BuildFaultTest, TheTokenizerStepRecordsAfterTheStagesItRan) {
  class SlowSyncEnv : public grist::testing::ForwardingEnv {
   public:
    absl::Status SyncFile(const std::string& p) override {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      return ForwardingEnv::SyncFile(p);
    }
  } env;
  TempDir t;
  BuildOptions o = Options(t.Join("rel"));
  for (const char* step : {"tokenizer", "tokenize", "tokenize-merge", "pack"}) {
    o.stage = step;
    auto r = BuildRelease(&env, o);
    ASSERT_TRUE(r.ok()) << step << ": " << r.status();
  }
  for (const char* stage : {"clean", "dedup", "tokenizer", "tokenize"}) {
    const std::string record = absl::StrCat(o.output_dir, ".work/stages/", stage, ".json");
    EXPECT_TRUE(Env::Default()->FileExists(record)) << stage;
  }
  ExpectSameRelease(*reference_, o.output_dir);
}

TEST_F(BuildFaultTest, AResumedBuildReadsNoInputOrOutputWhoseStatHolds) {
  TempDir t;
  const std::string corpus = t.Join("corpus"), input = t.Join("corpus/corpus.jsonl");
  ASSERT_TRUE(Env::Default()->CreateDirs(corpus).ok());
  const std::string text = ReadAll(dir_->Join("corpus.jsonl"));
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), input, text).ok());
  BuildOptions o = Options(t.Join("rel"));
  o.config_path = ConfigWithInput(*config_, input, t.Join("c.toml"));
  SettledTimesEnv env;
  ASSERT_TRUE(BuildRelease(&env, o).ok());
  EXPECT_GT(env.Opened(corpus), 0) << "the first build reads its input through the Env";
  const auto first = ReleaseBytes(t.Join("rel"));
  const std::string sums = ReadAll(t.Join("rel.work/sums.json"));
  EXPECT_THAT(sums, HasSubstr(absl::StrCat("\"kind\":\"xxh3_128\",\"path\":\"", input, "\"")));
  EXPECT_THAT(sums, HasSubstr(Hash128Of(text).ToHex()));
  EXPECT_THAT(sums, HasSubstr("\"kind\":\"xxh3_128_of_4mib_pieces\""));
  (void)env.Opened(t.Join("rel.work"));

  // Nothing changed: every stage resumes without reading the input or the outputs of clean and
  // dedup (tokenize's are what pack reads).
  auto resumed = BuildRelease(&env, o);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  for (const StageSummary& s : resumed->stages) {
    if (s.name != "pack+shard") {
      EXPECT_TRUE(s.resumed) << s.name;
    }
  }
  EXPECT_EQ(env.Opened(corpus), 0);
  EXPECT_EQ(env.Opened(t.Join("rel.work/clean")), 0);
  EXPECT_EQ(env.Opened(t.Join("rel.work/dedup")), 0);
  ExpectSameRelease(first, t.Join("rel"));

  // The input written again in place, the same bytes: new times, so it is read (and found the
  // same: every stage resumes).
  grist::testing::OverwriteInPlace(input, 0, text);
  auto rewritten = BuildRelease(&env, o);
  ASSERT_TRUE(rewritten.ok()) << rewritten.status();
  EXPECT_GT(env.Opened(corpus), 0);
  for (const StageSummary& s : rewritten->stages) {
    if (s.name != "pack+shard") {
      EXPECT_TRUE(s.resumed) << s.name;
    }
  }

  // A byte of a clean part changed in place, its size kept: read, found changed, and clean and
  // every stage after it run again, to the same release.
  auto parts = Env::Default()->ListDir(t.Join("rel.work/clean"));
  ASSERT_TRUE(parts.ok());
  std::string part;
  for (const std::string& n : *parts) {
    if (n.ends_with(".jsonl.zst")) part = t.Join("rel.work/clean/" + n);
  }
  ASSERT_FALSE(part.empty());
  grist::testing::OverwriteInPlace(part, 20, "\xff");
  ::testing::internal::CaptureStderr();
  auto damaged = BuildRelease(&env, o);
  const std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(damaged.ok()) << damaged.status();
  EXPECT_THAT(err, HasSubstr("does not match its checksum")) << err;
  for (const StageSummary& s : damaged->stages) {
    if (s.name == "clean") {
      EXPECT_FALSE(s.resumed);
    }
  }
  ExpectSameRelease(first, t.Join("rel"));
}

// SettledTimesEnv that also counts the metadata requests (stat, the folder test, the size, the
// existence test) made of one path: on a shared file system each is a request to its metadata
// servers, per input and per task of an array.
class MetadataCountingEnv : public SettledTimesEnv {
 public:
  explicit MetadataCountingEnv(std::string path) : path_(std::move(path)) {}
  absl::StatusOr<FileStat> Stat(const std::string& p) override {
    Count(p);
    return SettledTimesEnv::Stat(p);
  }
  bool IsDirectory(const std::string& p) override {
    Count(p);
    return SettledTimesEnv::IsDirectory(p);
  }
  absl::StatusOr<uint64_t> GetFileSize(const std::string& p) override {
    Count(p);
    return SettledTimesEnv::GetFileSize(p);
  }
  bool FileExists(const std::string& p) override {
    Count(p);
    return SettledTimesEnv::FileExists(p);
  }
  int Take() { return requests_.exchange(0); }

 private:
  void Count(const std::string& p) {
    if (p == path_) ++requests_;
  }
  std::string path_;
  std::atomic<int> requests_{0};
};

// A step of a staged build that does not read the inputs (here dedup-signatures, which checks the
// clean stage's record: the inputs' checksums, remembered in sums.json) asks the file system about
// each input once: its stat when listed serves the listing, the stat the build compares later, and
// the remembered checksum (four requests each before: the folder test and the size in the listing,
// a stat for the build, a stat for the cache). The clean task that reads it asks twice (seven
// before): the build's listing, which the cleaner reads by, and the check that it did not change.
TEST_F(BuildFaultTest, AStagedStepAsksAboutEachInputOnce) {
  TempDir t;
  const std::string corpus = t.Join("corpus"), input = t.Join("corpus/corpus.jsonl");
  ASSERT_TRUE(Env::Default()->CreateDirs(corpus).ok());
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), input, ReadAll(dir_->Join("corpus.jsonl"))).ok());
  BuildOptions o = Options(t.Join("rel"));
  o.config_path = ConfigWithInput(*config_, corpus, t.Join("c.toml"));
  MetadataCountingEnv env(input);
  o.stage = "clean";
  auto r = BuildRelease(&env, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(env.Take(), 2);
  o.stage = "clean-merge";
  r = BuildRelease(&env, o);
  ASSERT_TRUE(r.ok()) << r.status();
  (void)env.Take();
  (void)env.Opened(corpus);
  o.stage = "dedup-signatures";
  r = BuildRelease(&env, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(env.Take(), 1);
  EXPECT_EQ(env.Opened(corpus), 0);
}

TEST_F(BuildFaultTest, ARebuildWithNothingChangedLeavesThePublishedReleaseAsItIs) {
  TempDir t;
  const std::string out = t.Join("rel");
  ASSERT_TRUE(BuildRelease(Env::Default(), Options(out)).ok());
  ExpectSameRelease(*reference_, out);
  EXPECT_TRUE(Env::Default()->FileExists(out + ".work/stages/pack.json"));
  const std::string manifest = out + "/" + std::string(shard::kManifestName);
  const FileStat before = Env::Default()->Stat(manifest).value();
  const std::string shard = out + "/shards/" + FirstFile(out + "/shards", ".bin");
  // Nothing changed: every stage resumes, and so does pack (its record names this release, whose
  // files are as its manifest lists them); the release is not written again.
  auto again = BuildRelease(Env::Default(), Options(out));
  ASSERT_TRUE(again.ok()) << again.status();
  for (const StageSummary& s : again->stages) EXPECT_TRUE(s.resumed) << s.name;
  EXPECT_EQ(again->stages.back().note, "release up to date");
  EXPECT_THAT(ReadAll(manifest), HasSubstr(again->release_id));
  EXPECT_EQ(Env::Default()->Stat(manifest).value(), before) << "the manifest was written again";
  ExpectSameRelease(*reference_, out);
  // A byte of a shard changed in place: pack runs again and publishes the release whole.
  grist::testing::OverwriteInPlace(shard, 10, "\xff");
  ::testing::internal::CaptureStderr();
  BuildOptions o = Options(out);
  o.run.progress = true;
  auto damaged = BuildRelease(Env::Default(), o);
  const std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(damaged.ok()) << damaged.status();
  EXPECT_THAT(err, HasSubstr("does not match its checksum in the manifest; packing again")) << err;
  EXPECT_FALSE(damaged->stages.back().resumed);
  ExpectSameRelease(*reference_, out);
  // The release removed: pack runs again.
  ASSERT_TRUE(Env::Default()->RemoveAll(out).ok());
  auto removed = BuildRelease(Env::Default(), Options(out));
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_FALSE(removed->stages.back().resumed);
  ExpectSameRelease(*reference_, out);
}

// The work folders beside `out.work` that builds discarded (<work>.discarded-*).
std::vector<std::string> Discarded(const std::string& out) {
  std::vector<std::string> found;
  const std::string prefix = BaseName(out) + ".work.discarded-";
  const std::vector<std::string> names = Env::Default()->ListDir(DirName(out)).value();
  for (const std::string& n : names) {
    if (n.rfind(prefix, 0) == 0) found.push_back(n);
  }
  return found;
}

// Fails RemoveAll of any discarded work folder while set (as a file system that refuses would).
class RefusingRemovalEnv : public grist::testing::ForwardingEnv {
 public:
  std::atomic<bool> refuse{true};
  absl::Status RemoveAll(const std::string& p) override {
    if (refuse && p.find(".work.discarded-") != std::string::npos) {
      return absl::PermissionDeniedError(p + ": Permission denied (injected)");
    }
    return ForwardingEnv::RemoveAll(p);
  }
};

// Holds the removal of a discarded work folder until the clean stage's record exists (at most 20
// s), and notes whether it came: so only if the build ran beside the removal.
class WaitingRemovalEnv : public grist::testing::ForwardingEnv {
 public:
  explicit WaitingRemovalEnv(std::string record) : record_(std::move(record)) {}
  std::atomic<bool> saw_record{false};
  absl::Status RemoveAll(const std::string& p) override {
    if (p.find(".work.discarded-") != std::string::npos) {
      for (int i = 0; i < 2000 && !saw_record; ++i) {
        saw_record = base()->FileExists(record_);
        if (!saw_record) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    return ForwardingEnv::RemoveAll(p);
  }

 private:
  const std::string record_;
};

TEST_F(BuildFaultTest, ARestartDiscardsTheOldWorkFolderBesideTheBuild) {
  TempDir t;
  const std::string out = t.Join("rel");
  ASSERT_TRUE(BuildRelease(Env::Default(), Options(out)).ok());
  // Something of the old work folder only, to see it go.
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), out + ".work/clean/old-output.bin", "x").ok());
  BuildOptions o = Options(out);
  o.restart = true;
  WaitingRemovalEnv env(out + ".work/stages/clean.json");
  auto r = BuildRelease(&env, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(env.saw_record) << "the old work folder was removed before the build went on";
  for (const StageSummary& s : r->stages) EXPECT_FALSE(s.resumed) << s.name;
  ExpectSameRelease(*reference_, out);
  EXPECT_FALSE(Env::Default()->FileExists(out + ".work/clean/old-output.bin"));
  EXPECT_THAT(Discarded(out), ::testing::IsEmpty()) << "removed by the time the build returns";
}

TEST_F(BuildFaultTest, AWorkFolderOfAnotherConfigIsDiscardedBesideTheBuild) {
  TempDir t;
  const std::string out = t.Join("rel");
  ASSERT_TRUE(BuildRelease(Env::Default(), Options(out)).ok());
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), out + ".work/clean/old-output.bin", "x").ok());
  // The records say another config made them.
  const std::string record = out + ".work/stages/clean.json";
  std::string text = ReadAll(record);
  const size_t at = text.find("\"config_xxh3_128\": \"");
  ASSERT_NE(at, std::string::npos) << text;
  text[at + 20] = text[at + 20] == '0' ? '1' : '0';
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), record, text).ok());
  ::testing::internal::CaptureStderr();
  BuildOptions o = Options(out);
  o.run.progress = true;
  auto r = BuildRelease(Env::Default(), o);
  const std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(err, HasSubstr("was made with another config; starting over")) << err;
  for (const StageSummary& s : r->stages) EXPECT_FALSE(s.resumed) << s.name;
  ExpectSameRelease(*reference_, out);
  EXPECT_FALSE(Env::Default()->FileExists(out + ".work/clean/old-output.bin"));
  EXPECT_THAT(Discarded(out), ::testing::IsEmpty());
}

TEST_F(BuildFaultTest, AFailedRemovalIsReportedAndTheNextBuildFinishesIt) {
  TempDir t;
  const std::string out = t.Join("rel");
  ASSERT_TRUE(BuildRelease(Env::Default(), Options(out)).ok());
  // A discarded folder an earlier build was killed while removing: a staged step leaves it (it
  // may run beside other steps of the same output), an unstaged build removes it.
  const std::string leftover = out + ".work.discarded-1-0";
  ASSERT_TRUE(Env::Default()->CreateDirs(leftover + "/clean").ok());
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), leftover + "/clean/part.jsonl.zst", "x").ok());
  BuildOptions staged = Options(out);
  staged.stage = "pack";
  ASSERT_TRUE(BuildRelease(Env::Default(), staged).ok());
  EXPECT_THAT(Discarded(out), ::testing::ElementsAre(BaseName(leftover)));
  // A restart on a file system that refuses the removal: the build succeeds, says so, and leaves
  // both folders for the next build.
  RefusingRemovalEnv refusing;
  BuildOptions o = Options(out);
  o.restart = true;
  ::testing::internal::CaptureStderr();
  auto r = BuildRelease(&refusing, o);
  const std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectSameRelease(*reference_, out);
  EXPECT_THAT(err, HasSubstr("could not remove " + leftover + " (a discarded work folder)"));
  EXPECT_THAT(err, HasSubstr("Permission denied (injected); the next build tries again"));
  EXPECT_EQ(Discarded(out).size(), 2u) << err;
  // The next build (nothing to rebuild) removes both.
  auto next = BuildRelease(Env::Default(), Options(out));
  ASSERT_TRUE(next.ok()) << next.status();
  for (const StageSummary& s : next->stages) EXPECT_TRUE(s.resumed) << s.name;
  EXPECT_THAT(Discarded(out), ::testing::IsEmpty());
  ExpectSameRelease(*reference_, out);
}

}  // namespace
}  // namespace grist::release
