// Named crash points of a checkpoint save (ckptio/internal/crash_points.h): every point is
// reached by one save with retention; a SIGKILL at each point leaves the previous checkpoint
// intact and `latest()` untorn, and resuming gives exactly the bytes of an uninterrupted run; an
// injected failure at each point is reported with its name, publishes nothing that was not
// already renamed, and leaves the writer usable.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ckptio/checkpoint.h"
#include "ckptio/internal/crash_points.h"
#include "ckptio/reader.h"
#include "common/crash_point.h"
#include "common/env.h"
#include "tests/ckptio/ckpt_test_util.h"
#include "tests/test_util.h"

namespace grist::ckptio {
namespace {

using internal::kCrashPoints;
using testing::Refs;
using testing::StepState;

constexpr int kKeepLast = 1;
constexpr uint64_t kBig = 3 << 20;  // several writes per file at the 1 MiB block size below

WriterOptions CrashWriterOptions() {
  WriterOptions o;
  o.block_size = 1 << 20;
  return o;
}

absl::Status SaveStep(FileWriter* w, const std::string& root, int64_t step) {
  auto ts = StepState(step, kBig);
  SaveOptions so;
  so.keep_last = kKeepLast;
  auto h = SaveCheckpoint(w, JoinPath(root, absl::StrCat("step-", step)), Refs(ts), {}, so);
  if (!h.ok()) return h.status();
  return (*h)->Wait();
}

// Relative path -> bytes of every file in every published checkpoint under `root`.
std::map<std::string, std::string> PublishedBytes(const std::string& root) {
  std::map<std::string, std::string> out;
  auto all = ListCheckpoints(Env::Default(), root);
  EXPECT_TRUE(all.ok()) << all.status();
  for (const PublishedCheckpoint& c : *all) {
    auto names = Env::Default()->ListDir(c.path);
    EXPECT_TRUE(names.ok());
    for (const std::string& n : *names) {
      auto bytes = ReadFileToString(Env::Default(), JoinPath(c.path, n));
      EXPECT_TRUE(bytes.ok()) << bytes.status();
      out[absl::StrCat(BaseName(c.path), "/", n)] = *bytes;
    }
  }
  return out;
}

// Steps 1..3 with keep_last = 1, uninterrupted.
std::map<std::string, std::string> Reference() {
  grist::testing::TempDir tmp;
  auto w = FileWriter::Create(CrashWriterOptions());
  EXPECT_TRUE(w.ok());
  for (int64_t step = 1; step <= 3; ++step) EXPECT_TRUE(SaveStep(w->get(), tmp.path(), step).ok());
  return PublishedBytes(tmp.path());
}

bool IsRetention(std::string_view point) {
  return point == internal::kCrashRetentionAfterHide || point == internal::kCrashRetentionDuringRemove ||
         point == internal::kCrashRetentionBeforeFsync;
}

// Names directly under `root`, sorted.
std::vector<std::string> Entries(const std::string& root) {
  auto names = Env::Default()->ListDir(root);
  EXPECT_TRUE(names.ok()) << names.status();
  std::vector<std::string> v = names.ok() ? *names : std::vector<std::string>{};
  std::sort(v.begin(), v.end());
  return v;
}

// The published checkpoints' folder names, oldest first.
std::vector<std::string> Published(const std::string& root) {
  auto all = ListCheckpoints(Env::Default(), root);
  EXPECT_TRUE(all.ok()) << all.status();
  std::vector<std::string> v;
  for (const PublishedCheckpoint& c : *all) v.push_back(BaseName(c.path));
  return v;
}

// Whether the point comes once manifest.json is renamed into place (the new checkpoint is then
// published, if not yet durable against power loss).
bool AfterRename(std::string_view point) {
  return point == internal::kCrashAfterManifestRename || point == internal::kCrashBeforeParentFsync ||
         IsRetention(point);
}

// What is published after step 2 was stopped at `point` (step 1 published before): before the
// manifest rename step-1 alone; after it, until retention ran, both; once retention hid step-1
// (whatever of it is still on disk, under a hidden name), step-2 alone.
std::vector<std::string> WantPublished(std::string_view point) {
  if (!AfterRename(point)) return {"step-1"};
  if (IsRetention(point)) return {"step-2"};
  return {"step-1", "step-2"};
}

TEST(CkptCrashPoints, OneSaveWithRetentionReachesEveryPointInOrder) {
  GRIST_NEED_TEST_HOOKS(crash::Enabled());
  grist::testing::TempDir tmp;
  auto w = FileWriter::Create(CrashWriterOptions());
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(SaveStep(w->get(), tmp.path(), 1).ok());
  crash::ResetHits();
  ASSERT_TRUE(SaveStep(w->get(), tmp.path(), 2).ok());
  for (std::string_view p : kCrashPoints) EXPECT_EQ(crash::Hits(p), 1u) << p;
  EXPECT_EQ(crash::Reached(), std::vector<std::string>(std::begin(kCrashPoints), std::end(kCrashPoints)));
}

TEST(CkptCrashPoints, SigkillAtEveryPointKeepsThePreviousCheckpointAndResumesToTheSameBytes) {
  GRIST_NEED_TEST_HOOKS(crash::Enabled());
  const auto want = Reference();
  ASSERT_EQ(want.size(), 2u);  // step-3/manifest.json, step-3/rank-00000.safetensors
  for (std::string_view point : kCrashPoints) {
    SCOPED_TRACE(std::string(point));
    grist::testing::TempDir tmp;
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      auto w = FileWriter::Create(CrashWriterOptions());
      if (!w.ok() || !SaveStep(w->get(), tmp.path(), 1).ok()) ::_exit(3);
      crash::Arm(point, 1, crash::Action::kKill);
      (void)SaveStep(w->get(), tmp.path(), 2);
      ::_exit(7);  // the point was not reached
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
        << "the saver was not killed at the point: exit " << WEXITSTATUS(status);

    // Exactly what was published (WantPublished), and what is on disk.
    const std::vector<std::string> want_published = WantPublished(point);
    EXPECT_EQ(Published(tmp.path()), want_published);
    const std::vector<std::string> before = Entries(tmp.path());
    const bool hidden_left = std::count(before.begin(), before.end(), ".deleting.step-1") == 1;
    EXPECT_EQ(hidden_left, point != internal::kCrashRetentionBeforeFsync && IsRetention(point));
    if (hidden_left) {  // killed mid-retention: step-1 is hidden, its manifest possibly still in it
      EXPECT_EQ(before, (std::vector<std::string>{".deleting.step-1", "step-2"}));
    }

    // latest() is the newest published checkpoint and it is whole: with and without verifying,
    // the same folder, holding exactly its step's state.
    const int64_t expect_step = AfterRename(point) ? 2 : 1;
    auto latest = LatestCheckpoint(Env::Default(), tmp.path(), /*verify=*/false);
    ASSERT_TRUE(latest.ok()) << latest.status();
    EXPECT_EQ(*latest, tmp.Join(absl::StrCat("step-", expect_step)));
    auto verified = LatestCheckpoint(Env::Default(), tmp.path(), /*verify=*/true);
    ASSERT_TRUE(verified.ok()) << verified.status();
    EXPECT_EQ(*verified, *latest);
    // latest() swept what the killed retention left; the published set is unchanged.
    for (const std::string& n : Entries(tmp.path())) EXPECT_NE(n[0], '.') << "left over: " << n;
    EXPECT_EQ(Published(tmp.path()), want_published);
    auto ck = LoadCheckpoint(*latest, {});
    ASSERT_TRUE(ck.ok()) << ck.status();
    EXPECT_EQ(ck->manifest.step, expect_step);
    auto state = StepState(expect_step, kBig);
    for (size_t i = 0; i < state.size(); ++i) {
      EXPECT_TRUE(ck->files[0]->Bytes(ck->files[0]->tensors()[i]) == state[i].bytes) << i;
    }
    // Before the rename the previous checkpoint is untouched (retention has not run).
    if (!AfterRename(point)) {
      EXPECT_TRUE(VerifyCheckpoint(tmp.Join("step-1"), {}).ok());
      EXPECT_FALSE(Env::Default()->FileExists(tmp.Join("step-2/manifest.json")));
    }

    // Resume as training would: from the step after latest(), in a new writer.
    auto w = FileWriter::Create(CrashWriterOptions());
    ASSERT_TRUE(w.ok());
    for (int64_t step = expect_step + 1; step <= 3; ++step) {
      ASSERT_TRUE(SaveStep(w->get(), tmp.path(), step).ok()) << step;
    }
    const auto got = PublishedBytes(tmp.path());
    ASSERT_EQ(got.size(), want.size());
    for (const auto& [name, bytes] : want) {
      ASSERT_TRUE(got.count(name)) << name;
      EXPECT_TRUE(got.at(name) == bytes) << name << " differs from the uninterrupted run";
    }
    // After the next saves nothing is left over, whatever point the kill hit: exactly step-3.
    EXPECT_EQ(Entries(tmp.path()), (std::vector<std::string>{"step-3"}));
    EXPECT_EQ(Published(tmp.path()), (std::vector<std::string>{"step-3"}));
  }
}

TEST(CkptCrashPoints, AFailureAtEveryPointIsReportedAndTheWriterSavesNext) {
  GRIST_NEED_TEST_HOOKS(crash::Enabled());
  for (std::string_view point : kCrashPoints) {
    SCOPED_TRACE(std::string(point));
    grist::testing::TempDir tmp;
    auto w = FileWriter::Create(CrashWriterOptions());
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(SaveStep(w->get(), tmp.path(), 1).ok());
    crash::Arm(point, 1, crash::Action::kFail);
    absl::Status s = SaveStep(w->get(), tmp.path(), 2);
    crash::Disarm();
    EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
    EXPECT_EQ(std::string(s.message()), absl::StrCat("injected failure at crash point ", std::string(point)));
    const bool file_failed = point == internal::kCrashAfterDataWrites || point == internal::kCrashAfterFileFsync;
    // A failed rank file is removed; a failed publish leaves the folder torn (no manifest).
    EXPECT_EQ(Env::Default()->FileExists(tmp.Join("step-2/rank-00000.safetensors")), !file_failed);
    EXPECT_EQ(Env::Default()->FileExists(tmp.Join("step-2/manifest.json")), AfterRename(point));
    EXPECT_FALSE(Env::Default()->FileExists(
        tmp.Join(absl::StrCat("step-2/manifest.json.tmp.", ::getpid()))));
    auto latest = LatestCheckpoint(Env::Default(), tmp.path(), /*verify=*/true);
    ASSERT_TRUE(latest.ok()) << latest.status();
    EXPECT_EQ(*latest, tmp.Join(AfterRename(point) ? "step-2" : "step-1"));
    EXPECT_EQ(Published(tmp.path()), WantPublished(point));
    // The same writer saves the next checkpoint; nothing hidden is left.
    ASSERT_TRUE(SaveStep(w->get(), tmp.path(), 3).ok());
    EXPECT_EQ(*LatestCheckpoint(Env::Default(), tmp.path(), true), tmp.Join("step-3"));
    EXPECT_EQ(Published(tmp.path()), (std::vector<std::string>{"step-3"}));
    for (const std::string& n : Entries(tmp.path())) EXPECT_NE(n[0], '.') << "left over: " << n;
  }
}

}  // namespace
}  // namespace grist::ckptio
