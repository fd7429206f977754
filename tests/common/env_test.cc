#include "common/env.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstdlib>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "tests/test_util.h"

namespace grist {
namespace {

TEST(ErrnoError, TheCodeOfTheErrnoAndItsTextOnce) {
  absl::Status s = ErrnoError(ENOSPC, "writing /x/y at offset 4096");
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(), "writing /x/y at offset 4096: No space left on device");
  EXPECT_EQ(ErrnoError(ENOENT, "open /x").message(), "open /x: No such file or directory");
  EXPECT_EQ(ErrnoError(ENOENT, "open /x").code(), absl::StatusCode::kNotFound);
}

absl::StatusOr<int> Half(int x) {
  if (x % 2) return absl::InvalidArgumentError("odd");
  return x / 2;
}
absl::Status UseMacros(int x, int* out) {
  ASSIGN_OR_RETURN(int h, Half(x));
  RETURN_IF_ERROR(Half(h).status());
  *out = h;
  return absl::OkStatus();
}

TEST(StatusMacrosTest, PropagateErrors) {
  int out = 0;
  EXPECT_TRUE(UseMacros(8, &out).ok());
  EXPECT_EQ(out, 4);
  EXPECT_EQ(UseMacros(7, &out).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(UseMacros(6, &out).message(), "odd");
  EXPECT_EQ(Annotate(absl::NotFoundError("x"), "reading f").message(), "reading f: x");
  EXPECT_TRUE(Annotate(absl::OkStatus(), "c").ok());
}

std::string TempDir() {
  char tmpl[] = "/tmp/grist_env_test_XXXXXX";
  char* d = mkdtemp(tmpl);
  return d ? std::string(d) : std::string();
}

void ExerciseEnv(Env* env, const std::string& root) {
  ASSERT_TRUE(env->CreateDirs(JoinPath(root, "a/b")).ok());
  EXPECT_TRUE(env->IsDirectory(JoinPath(root, "a/b")));
  ASSERT_TRUE(WriteFileAtomic(env, JoinPath(root, "a/b/f.txt"), "hello").ok());
  ASSERT_TRUE(WriteFileAtomic(env, JoinPath(root, "a/g.txt"), "world!").ok());
  auto s = ReadFileToString(env, JoinPath(root, "a/b/f.txt"));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s, "hello");
  EXPECT_EQ(*env->GetFileSize(JoinPath(root, "a/g.txt")), 6u);
  auto names = env->ListDir(JoinPath(root, "a"));
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(*names, (std::vector<std::string>{"b", "g.txt"}));  // no leftover .tmp files
  auto raf = env->NewRandomAccessFile(JoinPath(root, "a/g.txt"));
  ASSERT_TRUE(raf.ok());
  char buf[8];
  auto n = (*raf)->ReadAt(2, buf, 8);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(std::string(buf, *n), "rld!");
  ASSERT_TRUE(env->RenameFile(JoinPath(root, "a/g.txt"), JoinPath(root, "a/h.txt")).ok());
  EXPECT_FALSE(env->FileExists(JoinPath(root, "a/g.txt")));
  EXPECT_TRUE(env->FileExists(JoinPath(root, "a/h.txt")));
  EXPECT_EQ(env->NewSequentialFile(JoinPath(root, "nope")).status().code(),
            absl::StatusCode::kNotFound);
  ASSERT_TRUE(env->RemoveAll(JoinPath(root, "a")).ok());
  EXPECT_FALSE(env->FileExists(JoinPath(root, "a")));
  EXPECT_TRUE(env->RemoveAll(JoinPath(root, "a")).ok());
}

TEST(EnvTest, Posix) {
  std::string root = TempDir();
  ASSERT_FALSE(root.empty());
  ExerciseEnv(Env::Default(), root);
  EXPECT_TRUE(Env::Default()->RemoveAll(root).ok());
}

// Write-back started every 64 KiB while appending (writes of every size, through the 1 MiB
// buffer and past it): the file holds exactly the bytes appended and syncs; the fault-injecting
// Env passes the setting through to the file it wraps.
TEST(EnvTest, WritebackWhileAppendingKeepsTheBytes) {
  std::string root = TempDir();
  ASSERT_FALSE(root.empty());
  FaultInjectionEnv faulty(Env::Default());
  for (Env* env : {Env::Default(), static_cast<Env*>(&faulty)}) {
    const std::string path = JoinPath(root, "wb.bin");
    auto f = env->NewWritableFile(path);
    ASSERT_TRUE(f.ok()) << f.status();
    (*f)->SetWritebackBytes(64 << 10);
    std::string expected;
    uint64_t x = 1;
    for (size_t n : {size_t{1}, size_t{100}, size_t{70000}, size_t{3} << 20, size_t{5}, size_t{1} << 20,
                     size_t{200000}}) {
      std::string piece(n, '\0');
      for (char& c : piece) c = static_cast<char>((x = x * 6364136223846793005ull + 1) >> 56);
      ASSERT_TRUE((*f)->Append(piece).ok());
      expected += piece;
    }
    ASSERT_TRUE((*f)->Sync().ok());
    ASSERT_TRUE((*f)->Close().ok());
    auto got = ReadFileToString(env, path);
    ASSERT_TRUE(got.ok());
    EXPECT_TRUE(*got == expected) << got->size() << " bytes, expected " << expected.size();
  }
  EXPECT_TRUE(Env::Default()->RemoveAll(root).ok());
}

TEST(EnvTest, PosixErrorNamesPath) {
  auto r = Env::Default()->NewSequentialFile("/nonexistent/grist/file.jsonl");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/nonexistent/grist/file.jsonl"), std::string::npos);
}

TEST(EnvTest, Mem) {
  MemEnv env;
  ExerciseEnv(&env, "/root");
}

TEST(EnvTest, MemDropUnsynced) {
  MemEnv env;
  ASSERT_TRUE(env.CreateDirs("/d").ok());
  auto f = env.NewWritableFile("/d/x");
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE((*f)->Append("durable").ok());
  ASSERT_TRUE((*f)->Sync().ok());
  ASSERT_TRUE((*f)->Append(" lost").ok());
  env.DropUnsyncedData();
  EXPECT_EQ(*ReadFileToString(&env, "/d/x"), "durable");
}

TEST(EnvTest, FaultInjection) {
  MemEnv mem;
  FaultInjectionEnv env(&mem);
  ASSERT_TRUE(env.CreateDirs("/d").ok());
  ASSERT_TRUE(WriteFileAtomic(&env, "/d/old", "v1").ok());

  env.FailNthAppend(1);
  absl::Status s = WriteFileAtomic(&env, "/d/old", "v2");
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(*ReadFileToString(&env, "/d/old"), "v1");  // previous version intact
  env.FailNthAppend(0);

  env.SetDiskSpace(3);
  s = WriteFileAtomic(&env, "/d/old", "too long");
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("No space left"), std::string::npos);
  EXPECT_EQ(*ReadFileToString(&env, "/d/old"), "v1");
  env.SetDiskSpace(-1);

  env.SetFailSync(true);
  EXPECT_FALSE(WriteFileAtomic(&env, "/d/old", "v3").ok());
  EXPECT_EQ(*ReadFileToString(&env, "/d/old"), "v1");
  env.SetFailSync(false);
  EXPECT_EQ(*env.ListDir("/d"), std::vector<std::string>{"old"});  // temp files cleaned up

  EXPECT_TRUE(WriteFileAtomic(&env, "/d/old", "v4").ok());
  EXPECT_EQ(*ReadFileToString(&env, "/d/old"), "v4");
}

// An Env that logs the syncs that reach it ("file P" / "dir D"), in order.
class SyncLog : public grist::testing::ForwardingEnv {
 public:
  explicit SyncLog(Env* base) : ForwardingEnv(base) {}
  absl::Status SyncFile(const std::string& p) override {
    Log("file " + p);
    return base()->SyncFile(p);
  }
  absl::Status SyncDir(const std::string& d) override {
    Log("dir " + d);
    return base()->SyncDir(d);
  }
  std::vector<std::string> Take() {
    absl::MutexLock l(&mu_);
    return std::exchange(log_, {});
  }

 private:
  void Log(std::string s) {
    absl::MutexLock l(&mu_);
    log_.push_back(std::move(s));
  }
  absl::Mutex mu_;
  std::vector<std::string> log_;
};

TEST(DeferredSyncEnvTest, SyncsWhatWritersSyncedAtTheirNamesWhenAsked) {
  MemEnv mem;
  SyncLog log(&mem);
  DeferredSyncEnv env(&log);
  ASSERT_TRUE(mem.CreateDirs("/w").ok());
  ASSERT_TRUE(env.CreateDirs("/w/out/sub").ok());  // two new directories: /w and /w/out noted
  EXPECT_EQ(env.pending_dirs(), 2u);
  // Written, synced and renamed (WriteFileAtomic): nothing reaches the device yet.
  ASSERT_TRUE(WriteFileAtomic(&env, "/w/out/sub/a", "alpha").ok());
  ASSERT_TRUE(WriteFileAtomic(&env, "/w/out/b", "beta").ok());
  {  // written and closed without a sync: not the writer's to make durable
    auto f = env.NewWritableFile("/w/out/scratch");
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE((*f)->Append("tmp").ok());
    ASSERT_TRUE((*f)->Close().ok());
  }
  {  // synced, then removed
    auto f = env.NewWritableFile("/w/out/gone");
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE((*f)->Append("x").ok());
    ASSERT_TRUE((*f)->Sync().ok());
    ASSERT_TRUE(env.RemoveFile("/w/out/gone").ok());
  }
  EXPECT_TRUE(log.Take().empty());
  EXPECT_EQ(env.pending_files(), 2u);
  ASSERT_TRUE(env.SyncAll(4).ok());
  std::vector<std::string> got = log.Take();
  ASSERT_EQ(got.size(), 5u);
  // The files (in any order: several threads), then the directories, deepest first.
  std::vector<std::string> files(got.begin(), got.begin() + 2);
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"file /w/out/b", "file /w/out/sub/a"}));
  EXPECT_EQ(std::vector<std::string>(got.begin() + 2, got.end()),
            (std::vector<std::string>{"dir /w/out/sub", "dir /w/out", "dir /w"}));
  mem.DropUnsyncedData();
  EXPECT_EQ(*ReadFileToString(&mem, "/w/out/sub/a"), "alpha");
  EXPECT_EQ(*ReadFileToString(&mem, "/w/out/b"), "beta");
  EXPECT_EQ(*ReadFileToString(&mem, "/w/out/scratch"), "");
  // Nothing left: a second call syncs nothing.
  EXPECT_EQ(env.pending_files() + env.pending_dirs(), 0u);
  ASSERT_TRUE(env.SyncAll(4).ok());
  EXPECT_TRUE(log.Take().empty());
}

TEST(DeferredSyncEnvTest, UntilSyncAllTheBytesAreNotDurable) {
  MemEnv mem;
  DeferredSyncEnv env(&mem);
  ASSERT_TRUE(env.CreateDirs("/d").ok());
  ASSERT_TRUE(WriteFileAtomic(&env, "/d/x", "bytes").ok());
  mem.DropUnsyncedData();
  EXPECT_EQ(*ReadFileToString(&mem, "/d/x"), "");
  ASSERT_TRUE(WriteFileAtomic(&env, "/d/x", "bytes").ok());
  ASSERT_TRUE(env.SyncAll(1).ok());
  mem.DropUnsyncedData();
  EXPECT_EQ(*ReadFileToString(&mem, "/d/x"), "bytes");
}

TEST(DeferredSyncEnvTest, FollowsRenamedAndRemovedDirectories) {
  MemEnv mem;
  SyncLog log(&mem);
  DeferredSyncEnv env(&log);
  ASSERT_TRUE(mem.CreateDirs("/r/stage.tmp/p").ok());
  ASSERT_TRUE(mem.CreateDirs("/r/old").ok());
  ASSERT_TRUE(WriteFileAtomic(&env, "/r/stage.tmp/p/f", "1").ok());
  ASSERT_TRUE(env.SyncDir("/r/stage.tmp/p").ok());
  ASSERT_TRUE(WriteFileAtomic(&env, "/r/old/g", "2").ok());
  ASSERT_TRUE(env.RenameFile("/r/stage.tmp", "/r/stage").ok());
  ASSERT_TRUE(env.RemoveAll("/r/old").ok());
  ASSERT_TRUE(env.SyncAll(2).ok());
  EXPECT_EQ(log.Take(),
            (std::vector<std::string>{"file /r/stage/p/f", "dir /r/stage/p", "dir /r"}));
  EXPECT_EQ(env.SyncDir("/r/none").code(), absl::StatusCode::kNotFound);
}

TEST(DeferredSyncEnvTest, AFailedSyncIsReportedNamingThePath) {
  MemEnv mem;
  FaultInjectionEnv faults(&mem);
  DeferredSyncEnv env(&faults);
  ASSERT_TRUE(env.CreateDirs("/d").ok());
  faults.SetFailSync(true);
  ASSERT_TRUE(WriteFileAtomic(&env, "/d/x", "v").ok());  // the device is not asked yet
  absl::Status s = env.SyncAll(2);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(s.message(), "fsync /d/x: Input/output error (injected)");
}

TEST(DeferredSyncEnvTest, PosixSyncFile) {
  grist::testing::TempDir tmp;
  DeferredSyncEnv env(Env::Default());
  ASSERT_TRUE(WriteFileAtomic(&env, tmp.Join("x"), "bytes").ok());
  EXPECT_EQ(env.pending_files(), 1u);
  ASSERT_TRUE(env.SyncAll(2).ok());
  EXPECT_TRUE(Env::Default()->SyncFile(tmp.Join("x")).ok());
  absl::Status s = Env::Default()->SyncFile(tmp.Join("none"));
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "open " + tmp.Join("none") + ": No such file or directory");
}

TEST(EnvTest, PathHelpers) {
  EXPECT_EQ(DirName("a/b/c"), "a/b");
  EXPECT_EQ(DirName("c"), ".");
  EXPECT_EQ(DirName("/c"), "/");
  EXPECT_EQ(BaseName("a/b/c.txt"), "c.txt");
  EXPECT_EQ(JoinPath("a/", "b"), "a/b");
  EXPECT_EQ(JoinPath("a", "b"), "a/b");
  EXPECT_EQ(JoinPath("a", "/abs"), "/abs");
}

}  // namespace
}  // namespace grist
