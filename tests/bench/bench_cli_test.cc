// `grist bench` through the binary: bad sweeps, a read-only or full --output, and `grist bench all`
// carrying on past a bench that fails, crashes or hangs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bench/registry.h"
#include "common/env.h"
#include "tests/test_util.h"

namespace grist {
namespace {

using ::testing::HasSubstr;

using ::grist::testing::CliRun;
using ::grist::testing::RunGrist;

// A small tmpfs mounted at `dir` (root only); unmounted by the destructor.
class TmpfsMount {
 public:
  TmpfsMount(const std::string& dir, const std::string& options) : dir_(dir) {
    (void)Env::Default()->CreateDirs(dir);
    mounted_ = std::system(("mount -t tmpfs -o " + options + " grist-test " + dir + " 2>/dev/null").c_str()) == 0;
  }
  ~TmpfsMount() {
    if (mounted_) (void)std::system(("umount " + dir_).c_str());
  }
  bool mounted() const { return mounted_; }

 private:
  std::string dir_;
  bool mounted_ = false;
};

// --quick caps the checkpoint at 64 MiB; every figure of the JSON record has its own name.
TEST(BenchCliTest, CkptQuickRecordsUniqueFigureNames) {
  testing::TempDir tmp;
  CliRun r = RunGrist("bench ckpt --quick --async --no-peers --repetitions 1 --warmup 0 --quiet --dir " +
                   tmp.Join("d") + " --output " + tmp.Join("out"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("size: 64 MiB"));
  auto json = ReadFileToString(Env::Default(), tmp.Join("out/ckpt-0.json"));
  ASSERT_TRUE(json.ok()) << json.status();
  std::vector<std::string> names;
  for (size_t at = json->find("\"name\""); at != std::string::npos; at = json->find("\"name\"", at + 1)) {
    size_t b = json->find('"', json->find(':', at)) + 1;
    names.push_back(json->substr(b, json->find('"', b) - b));
  }
  const std::vector<std::string> want = {
      "checkpoint write vs plain io_uring writer (ceiling)", "checkpoint write vs fio (ceiling)",
      "checkpoint write vs buffered write()+fsync", "checkpoint write vs torch.save",
      "checkpoint write in place (caller's memory) vs staged",
      "write amplification (device sectors / logical)", "write amplification (/proc/self/io)",
      "caller blocked (--async, snapshot)", "ratio: caller blocked / memcpy",
      "caller blocked (--async, in place: no snapshot)"};
  EXPECT_EQ(names, want);
}

TEST(BenchCliTest, SweepWithNoValuesIsAUsageError) {
  testing::TempDir tmp;
  CliRun r = RunGrist("bench fs --quick --output " + tmp.path() + " --sweep block_size=");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, HasSubstr("--sweep block_size: no values given"));
  // fs sweeps block_size itself, the harness any of its flags: threads is neither.
  r = RunGrist("bench fs --quick --output " + tmp.path() + " --sweep threads=1,2");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, HasSubstr("this bench cannot sweep 'threads'; it sweeps: block_size, "));
  EXPECT_THAT(r.output, HasSubstr(", size_mib"));
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr("MB/s")));  // refused before measuring
}

TEST(BenchCliTest, ReadOnlyOutputIsAClearErrorBeforeAnyWork) {
  testing::TempDir tmp;
  TmpfsMount ro(tmp.Join("ro"), "ro,size=1m");
  if (!ro.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here (needs root); skipped";
  CliRun r = RunGrist("bench fs --quick --output " + tmp.Join("ro/results"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("output directory " + tmp.Join("ro/results") +
                                  " is on a read-only file system"));
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr("MB/s")));  // stopped before measuring
}

TEST(BenchCliTest, FullOutputIsAClearError) {
  testing::TempDir tmp;
  TmpfsMount full(tmp.Join("full"), "size=256k");
  if (!full.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here (needs root); skipped";
  CliRun r = RunGrist("bench fs --quick --output " + tmp.Join("full/results"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("output directory " + tmp.Join("full/results") +
                                  " has no space left for results"));
}

TEST(BenchCliTest, AllWritesAnIndexWithEachBenchsTableAndPlot) {
  testing::TempDir tmp;
  CliRun r = RunGrist("bench all --only fs --repetitions 1 --warmup 0 --output " + tmp.path());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("[1/1] grist bench fs ... ok"));
  auto index = ReadFileToString(Env::Default(), tmp.Join("index.md"));
  ASSERT_TRUE(index.ok());
  EXPECT_THAT(*index, HasSubstr("| fs | ok | "));
  EXPECT_THAT(*index, HasSubstr("[fs.md](fs/fs.md) | [log](fs/log.txt) |"));
  EXPECT_THAT(*index, HasSubstr("\n## fs\n"));
  EXPECT_THAT(*index, HasSubstr("#### grist bench fs\n"));
  EXPECT_THAT(*index, HasSubstr("| sequential write + fsync | "));
  EXPECT_THAT(*index, HasSubstr("](fs/fs.svg)"));
  EXPECT_TRUE(Env::Default()->FileExists(tmp.Join("fs/fs.svg")));
  EXPECT_TRUE(Env::Default()->FileExists(tmp.Join("fs/fs-0.json")));
  auto json = ReadFileToString(Env::Default(), tmp.Join("index.json"));
  EXPECT_THAT(*json, HasSubstr("\"status\": \"ok\""));
}

TEST(BenchCliTest, AllReportsAFailingCrashingOrHangingBenchAndGoesOn) {
  GRIST_NEED_TEST_HOOKS(bench::FaultInjectionEnabled());
  struct Case {
    const char* fault;
    const char* row;
  } cases[] = {
      {"fs:fail", "| fs | failed: exit 1: grist bench: error: injected failure (GRIST_BENCH_INJECT_FAULT) |"},
      {"fs:crash", "| fs | crashed: signal 6 (Aborted) |"},
      {"fs:hang", "| fs | timed out: killed after 1 s (--timeout) |"},
  };
  for (const auto& c : cases) {
    testing::TempDir tmp;
    CliRun r = RunGrist("bench all --only fs --timeout 1 --repetitions 1 --warmup 0 --output " + tmp.path(),
                  std::string("GRIST_BENCH_INJECT_FAULT=") + c.fault);
    EXPECT_EQ(r.exit_code, 1) << c.fault;
    EXPECT_THAT(r.output, HasSubstr("1 of 1 benches did not succeed (fs)")) << c.fault;
    auto index = ReadFileToString(Env::Default(), tmp.Join("index.md"));
    ASSERT_TRUE(index.ok()) << c.fault;
    EXPECT_THAT(*index, HasSubstr(c.row)) << *index;
  }
}

TEST(BenchCliTest, HarnessSweepsABenchOverItsOwnFlag) {
  testing::TempDir tmp;
  // fs has --size-mib but does not sweep it itself: the harness runs one process per value.
  CliRun r = RunGrist("bench fs --quick --repetitions 1 --warmup 0 --sweep size_mib=2,4 --output " +
                   tmp.path());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto md = ReadFileToString(Env::Default(), tmp.Join("fs.md"));
  ASSERT_TRUE(md.ok());
  EXPECT_THAT(*md, HasSubstr("### grist bench fs: sweep over size_mib\n"));
  EXPECT_THAT(*md, HasSubstr("#### sequential write + fsync (MB/s)\n\n| size_mib |"));
  EXPECT_THAT(*md, HasSubstr("\n| 2 | "));
  EXPECT_THAT(*md, HasSubstr("\n| 4 | "));
  EXPECT_THAT(*md, HasSubstr("Swept by the harness: one `grist bench fs --size-mib <value>` process per point."));
  auto names = Env::Default()->ListDir(tmp.path());
  ASSERT_TRUE(names.ok());
  EXPECT_THAT(*names, ::testing::ElementsAre("fs-0.json", "fs-sequential-read-page-cache-warm.svg",
                                             "fs-sequential-write-fsync.svg", "fs.md"));
  auto json = ReadFileToString(Env::Default(), tmp.Join("fs-0.json"));
  EXPECT_THAT(*json, HasSubstr("\"sweep_param\": \"size_mib\""));
  EXPECT_THAT(*json, HasSubstr("\"sweep_value\": \"4\""));
}

TEST(BenchCliTest, AllRejectsUnknownNamesAndSweeps) {
  testing::TempDir tmp;
  CliRun r = RunGrist("bench all --only nosuch --output " + tmp.path());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, HasSubstr("--only: no bench named 'nosuch'"));
  r = RunGrist("bench all --sweep threads=1,2 --output " + tmp.path());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, HasSubstr("--sweep applies to one bench"));
}

}  // namespace
}  // namespace grist
