// Faults on the production path (io_uring, Env::Default()): the N-th write, read or fsync
// completion fails with -EIO or -ENOSPC or completes short (ckptio/internal/ring.h), and the
// manifest rename or a directory fsync fails. Each failure is reported with its exact code and
// message, nothing is published, the previous checkpoint stays the latest, the writer saves the
// next checkpoint, and no file descriptor is left open (memory: LeakSanitizer in
// scripts/test_extra.sh).
#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "ckptio/checkpoint.h"
#include "ckptio/internal/ring.h"
#include "ckptio/reader.h"
#include "ckptio/safetensors.h"
#include "common/env.h"
#include "common/status_macros.h"
#include "tests/ckptio/ckpt_test_util.h"
#include "tests/test_util.h"

namespace grist::ckptio {
namespace {

using internal::RingFaultPlan;
using internal::RingOp;
using testing::Refs;
using testing::StepState;

constexpr uint64_t kBig = 3 << 20;
constexpr uint64_t kBlock = 1 << 20;

int OpenFds() {
  int n = 0;
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  while (struct dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(d);
  return n - 1;  // the DIR's own
}

WriterOptions OneAtATime() {
  WriterOptions o;
  o.block_size = kBlock;
  o.queue_depth = 1;  // completions in file order: the N-th is at a known offset
  return o;
}

absl::Status SaveStep(FileWriter* w, const std::string& dir, int64_t step) {
  auto ts = StepState(step, kBig);
  auto h = SaveCheckpoint(w, dir, Refs(ts), {}, {});
  if (!h.ok()) return h.status();
  return (*h)->Wait();
}

// Where the data region of a StepState(_, kBig) rank file starts.
uint64_t DataStart(const std::string& rank_file) {
  auto f = ReadCheckpointFile(rank_file, {});
  EXPECT_TRUE(f.ok()) << f.status();
  return f.ok() ? (*f)->header().data_start : 0;
}

struct RingFaultCase {
  const char* name;
  RingFaultPlan plan;
};

class RingFaults : public ::testing::TestWithParam<RingFaultCase> {
 protected:
  void SetUp() override {
    auto w = FileWriter::Create(OneAtATime());
    ASSERT_TRUE(w.ok());
    writer_ = std::move(*w);
    ASSERT_TRUE(SaveStep(writer_.get(), tmp_.Join("step-1"), 1).ok());
    reference_ = ReadFileToString(Env::Default(), tmp_.Join("step-1/rank-00000.safetensors")).value();
  }
  void TearDown() override { internal::ClearRingFaults(); }
  grist::testing::TempDir tmp_;
  std::unique_ptr<FileWriter> writer_;
  std::string reference_;
};

TEST_P(RingFaults, WriterReportsTheCompletionPublishesNothingAndSavesNext) {
  const RingFaultPlan plan = GetParam().plan;
  const std::string rank2 = tmp_.Join("step-2/rank-00000.safetensors");
  const uint64_t data_start = DataStart(tmp_.Join("step-1/rank-00000.safetensors"));
  const int fds = OpenFds();
  internal::SetRingFaults(plan);
  absl::Status s = SaveStep(writer_.get(), tmp_.Join("step-2"), 2);
  EXPECT_GE(internal::RingCompletions(plan.op), static_cast<uint64_t>(plan.nth));
  internal::ClearRingFaults();
  EXPECT_EQ(OpenFds(), fds) << "a file descriptor was left open";
  if (plan.short_io) {
    // A short completion is not an error: the rest is written again and the file is exact.
    ASSERT_TRUE(s.ok()) << s;
    auto want = StepState(2, kBig);
    auto ck = LoadCheckpoint(tmp_.Join("step-2"), {});
    ASSERT_TRUE(ck.ok()) << ck.status();
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_TRUE(ck->files[0]->Bytes(ck->files[0]->tensors()[i]) == want[i].bytes) << i;
    }
    return;
  }
  absl::Status want = plan.op == RingOp::kFsync
      ? ErrnoError(plan.error, absl::StrCat("fsync ", rank2))
      : ErrnoError(plan.error, absl::StrCat("writing ", rank2, " at offset ",
                                             data_start + (plan.nth - 1) * kBlock));
  EXPECT_EQ(s, want);
  EXPECT_EQ(s.code(), plan.error == ENOSPC ? absl::StatusCode::kResourceExhausted
                                           : absl::ErrnoToStatus(EIO, "").code());
  // Nothing published, the partial file removed, the previous checkpoint still the latest.
  EXPECT_FALSE(Env::Default()->FileExists(tmp_.Join("step-2/manifest.json")));
  EXPECT_FALSE(Env::Default()->FileExists(rank2));
  EXPECT_EQ(*LatestCheckpoint(Env::Default(), tmp_.path(), /*verify=*/true), tmp_.Join("step-1"));
  // The writer saves the next checkpoint, into the same folder, to the uninterrupted bytes.
  ASSERT_TRUE(SaveStep(writer_.get(), tmp_.Join("step-2"), 2).ok());
  auto again = FileWriter::Create(OneAtATime());
  ASSERT_TRUE(again.ok());
  grist::testing::TempDir ref;
  ASSERT_TRUE(SaveStep(again->get(), ref.Join("step-2"), 2).ok());
  EXPECT_TRUE(ReadFileToString(Env::Default(), rank2).value() ==
              ReadFileToString(Env::Default(), ref.Join("step-2/rank-00000.safetensors")).value());
  EXPECT_EQ(*LatestCheckpoint(Env::Default(), tmp_.path(), true), tmp_.Join("step-2"));
}

INSTANTIATE_TEST_SUITE_P(
    Completions, RingFaults,
    ::testing::Values(RingFaultCase{"FirstWriteEio", {RingOp::kWrite, 1, EIO, false}},
                      RingFaultCase{"ThirdWriteEnospc", {RingOp::kWrite, 3, ENOSPC, false}},
                      RingFaultCase{"SecondWriteShort", {RingOp::kWrite, 2, EIO, true}},
                      RingFaultCase{"FsyncEio", {RingOp::kFsync, 1, EIO, false}},
                      RingFaultCase{"FsyncEnospc", {RingOp::kFsync, 1, ENOSPC, false}}),
    [](const ::testing::TestParamInfo<RingFaultCase>& i) { return std::string(i.param.name); });

TEST(RingReadFaults, ReadErrorIsReportedAndAShortReadIsCompleted) {
  grist::testing::TempDir tmp;
  auto w = FileWriter::Create(OneAtATime());
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(SaveStep(w->get(), tmp.Join("step-1"), 1).ok());
  const std::string rank = tmp.Join("step-1/rank-00000.safetensors");
  ReadOptions ro;
  ro.queue_depth = 1;
  ro.block_size = kBlock;
  const int fds = OpenFds();
  internal::SetRingFaults({RingOp::kRead, 2, EIO, false});
  auto bad = LoadCheckpoint(tmp.Join("step-1"), ro);
  internal::ClearRingFaults();
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status(), ErrnoError(EIO, absl::StrCat("reading ", rank, " at offset ", kBlock)));
  EXPECT_EQ(OpenFds(), fds) << "a file descriptor was left open";
  internal::SetRingFaults({RingOp::kRead, 1, EIO, true});
  auto ck = LoadCheckpoint(tmp.Join("step-1"), ro);
  internal::ClearRingFaults();
  ASSERT_TRUE(ck.ok()) << ck.status();
  auto want = StepState(1, kBig);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_TRUE(ck->files[0]->Bytes(ck->files[0]->tensors()[i]) == want[i].bytes) << i;
  }
  EXPECT_EQ(OpenFds(), fds);
}

// An Env over the real file system whose directory fsyncs fail (file fsyncs succeed).
class DirSyncFailsEnv : public FaultInjectionEnv {
 public:
  DirSyncFailsEnv() : FaultInjectionEnv(Env::Default()) {}
  absl::Status SyncDir(const std::string& dir) override {
    return ErrnoError(EIO, absl::StrCat("fsync directory ", dir));
  }
};

// The rank file through the io_uring writer, the manifest through an Env that fails: as the
// multi-rank Python path publishes (rank files first, then PublishCheckpoint).
class PublishFaults : public ::testing::Test {
 protected:
  void SetUp() override {
    auto w = FileWriter::Create(OneAtATime());
    ASSERT_TRUE(w.ok());
    writer_ = std::move(*w);
    ASSERT_TRUE(SaveStep(writer_.get(), tmp_.Join("step-1"), 1).ok());
    ASSERT_TRUE(PrepareCheckpointDir(Env::Default(), tmp_.Join("step-2")).ok());
    auto ts = StepState(2, kBig);
    auto r = writer_->Write(tmp_.Join("step-2/rank-00000.safetensors"), Refs(ts), {});
    ASSERT_TRUE(r.ok()) << r.status();
    manifest_.step = 2;
    manifest_.files.push_back(ToManifestFile(*r, 0));
  }
  grist::testing::TempDir tmp_;
  std::unique_ptr<FileWriter> writer_;
  Manifest manifest_;
};

TEST_F(PublishFaults, RenameFailsNothingIsPublished) {
  FaultInjectionEnv env(Env::Default());
  env.SetFailRename(true);
  const std::string tmp = absl::StrCat(tmp_.Join("step-2/manifest.json"), ".tmp.", ::getpid());
  absl::Status s = PublishCheckpoint(&env, tmp_.Join("step-2"), manifest_);
  EXPECT_EQ(s, absl::DataLossError(absl::StrCat("rename ", tmp, ": Input/output error (injected)")));
  EXPECT_FALSE(Env::Default()->FileExists(tmp_.Join("step-2/manifest.json")));
  EXPECT_FALSE(Env::Default()->FileExists(tmp)) << "the temporary manifest was left behind";
  EXPECT_EQ(*LatestCheckpoint(Env::Default(), tmp_.path(), true), tmp_.Join("step-1"));
  // Publishing again (the rename works now) succeeds: the rank file is intact.
  ASSERT_TRUE(PublishCheckpoint(Env::Default(), tmp_.Join("step-2"), manifest_).ok());
  EXPECT_EQ(*LatestCheckpoint(Env::Default(), tmp_.path(), true), tmp_.Join("step-2"));
}

TEST_F(PublishFaults, DirectoryFsyncFailsTheSaveIsReportedFailed) {
  DirSyncFailsEnv env;
  absl::Status s = PublishCheckpoint(&env, tmp_.Join("step-2"), manifest_);
  // The manifest is renamed, but its directory entry is not known to be durable: the publish is
  // reported as failed (the caller must not delete the previous checkpoint on its strength).
  EXPECT_EQ(s, ErrnoError(EIO, absl::StrCat("fsync directory ", tmp_.Join("step-2"))));
  EXPECT_TRUE(VerifyCheckpoint(tmp_.Join("step-1"), {}).ok());
  // Retention is not applied after a failed publish (SaveCheckpoint): step-1 stays.
  auto all = ListCheckpoints(Env::Default(), tmp_.path());
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->front().path, tmp_.Join("step-1"));
}

TEST(SaveCheckpointFaults, FailedDirectoryFsyncSkipsRetention) {
  grist::testing::TempDir tmp;
  DirSyncFailsEnv env;
  WriterOptions o;
  o.env = &env;
  auto w = FileWriter::Create(o);
  ASSERT_TRUE(w.ok());
  // step-1 through the real file system, step-2 through the failing Env with keep_last = 1.
  auto good = FileWriter::Create({});
  ASSERT_TRUE(good.ok());
  ASSERT_TRUE(SaveStep(good->get(), tmp.Join("step-1"), 1).ok());
  auto ts = StepState(2, kBig);
  SaveOptions so;
  so.keep_last = 1;
  auto h = SaveCheckpoint(w->get(), tmp.Join("step-2"), Refs(ts), {}, so);
  ASSERT_TRUE(h.ok());
  absl::Status s = (*h)->Wait();
  EXPECT_EQ(s, ErrnoError(EIO, absl::StrCat("fsync directory ", tmp.Join("step-2"))));
  EXPECT_TRUE(VerifyCheckpoint(tmp.Join("step-1"), {}).ok()) << "retention ran after a failed publish";
}

}  // namespace
}  // namespace grist::ckptio
