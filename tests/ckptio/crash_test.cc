// Crash consistency: a process saving checkpoints in a loop is SIGKILLed at random points many
// times; after every kill the newest published checkpoint loads, verifies, and holds exactly the
// state of its step. Each restart resumes from that checkpoint, as training would.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "ckptio/checkpoint.h"
#include "ckptio/reader.h"
#include "common/env.h"
#include "tests/ckptio/ckpt_test_util.h"
#include "tests/test_util.h"

namespace grist::ckptio {
namespace {

[[noreturn]] void SaveLoop(const std::string& root, int64_t first_step) {
  auto w = FileWriter::Create({});
  if (!w.ok()) ::_exit(3);
  for (int64_t step = first_step;; ++step) {
    auto ts = testing::StepState(step, 1 << 20);
    SaveOptions so;
    so.keep_last = 3;
    auto h = SaveCheckpoint(w->get(), JoinPath(root, absl::StrCat("step-", step)), testing::Refs(ts),
                            {}, so);
    if (!h.ok() || !(*h)->Wait().ok()) ::_exit(4);
  }
}

TEST(CrashConsistency, SigkillAtRandomPointsNeverLosesThePublishedCheckpoint) {
  grist::testing::TempDir tmp;
  uint64_t rng = 0x5eed;
  int64_t resume = 0;
  int published_after_kill = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(40);
  for (int kill = 0; kill < 30 && std::chrono::steady_clock::now() < deadline; ++kill) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) SaveLoop(tmp.path(), resume);
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    // Random points within the first saves; on a loaded machine (nothing published after a few
    // kills) some children get longer so that publishing, and resuming from it, is exercised too.
    uint64_t delay_us = 2000 + rng % 60000;
    if (kill >= 3 && (published_after_kill == 0 || kill % 5 == 0)) delay_us += 200000 + rng % 200000;
    std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
    ASSERT_EQ(::kill(pid, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the saver exited by itself with " << WEXITSTATUS(status);
    auto latest = LatestCheckpoint(Env::Default(), tmp.path(), /*verify=*/false);
    if (!latest.ok()) {
      ASSERT_EQ(latest.status().code(), absl::StatusCode::kNotFound);
      ASSERT_EQ(resume, 0) << "a published checkpoint disappeared";
      continue;
    }
    ++published_after_kill;
    auto ck = LoadCheckpoint(*latest, {});
    ASSERT_TRUE(ck.ok()) << "kill " << kill << ": " << ck.status();
    const int64_t step = ck->manifest.step;
    ASSERT_GE(step, resume - 1) << "went backwards";
    auto want = testing::StepState(step, 1 << 20);
    ASSERT_EQ(ck->files[0]->tensors().size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_TRUE(ck->files[0]->Bytes(ck->files[0]->tensors()[i]) == want[i].bytes) << step;
    }
    resume = step + 1;
  }
  EXPECT_GT(published_after_kill, 0) << "no checkpoint was ever published: kills came too early";
}

}  // namespace
}  // namespace grist::ckptio
