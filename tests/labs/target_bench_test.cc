// `grist bench fs --target` and `grist bench ckpt --target`, the commands the week-13 handouts
// (docs/labs/) print beside their distributed-file-system figures: each names the target and the
// baseline it is measured beside and reports every figure the handouts quote, under those exact
// names. Run here with both sides on the local temporary file system (scripts/test_gluster.sh runs
// them on GlusterFS); a target that is not GlusterFS is measured once, with no cache settings.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "common/env.h"
#include "tests/test_util.h"

namespace grist {
namespace {

using ::grist::testing::CliRun;
using ::grist::testing::RunGrist;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(TargetBench, FsReportsStreamingAndMetadataFiguresBesideTheBaseline) {
  testing::TempDir tmp;
  ASSERT_TRUE(Env::Default()->CreateDirs(tmp.Join("target")).ok());
  ASSERT_TRUE(Env::Default()->CreateDirs(tmp.Join("base")).ok());
  CliRun r = RunGrist("bench fs --quiet --quick --size-mib 2 --files 40 --repetitions 1 --warmup 0 --target " +
                      tmp.Join("target") + " --dir " + tmp.Join("base"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("- target: " + tmp.Join("target") + ": "));
  EXPECT_THAT(r.output, HasSubstr("- baseline (peer column): " + tmp.Join("base") + ": "));
  EXPECT_THAT(r.output, HasSubstr("- small files: 40 x 4096 B"));
  for (const char* fig : {"| sequential write + fsync |", "| sequential read (page cache warm) |",
                          "| create+write+close 4096 B files |", "| stat |", "| stat, second pass |",
                          "| open+close |", "| stat of a missing name (negative lookup) |",
                          "| stat of a missing name, second pass |", "| unlink |"}) {
    EXPECT_THAT(r.output, HasSubstr(fig)) << fig;
  }
  EXPECT_THAT(r.output, Not(HasSubstr("metadata cache")));  // not GlusterFS: nothing to switch
  EXPECT_THAT(r.output, HasSubstr("no --release: the loader start-up and verify figures were not measured"));
  // Nothing of the bench is left on either side.
  for (const char* side : {"target", "base"}) {
    auto names = Env::Default()->ListDir(tmp.Join(side));
    ASSERT_TRUE(names.ok());
    EXPECT_TRUE(names->empty()) << side << " holds " << names->front();
  }
}

TEST(TargetBench, CkptReportsEveryModeWithReadAndWriteAmplification) {
  testing::TempDir tmp;
  CliRun r = RunGrist("bench ckpt --quiet --size 4M --repetitions 1 --warmup 0 --target " +
                      tmp.Join("target") + " --dir " + tmp.Join("base"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("- target: " + tmp.Join("target") + ": "));
  EXPECT_THAT(r.output, HasSubstr("- size: 4 MiB"));
  for (const char* how : {"direct sync", "direct async", "buffered sync", "buffered async"}) {
    const std::string h(how);
    EXPECT_THAT(r.output, HasSubstr("| checkpoint write, " + h + " |")) << h;
    EXPECT_THAT(r.output, HasSubstr("| checkpoint read + verify, " + h + " |")) << h;
    EXPECT_THAT(r.output, HasSubstr("write amplification at the devices, " + h)) << h;
  }
  EXPECT_THAT(r.output, HasSubstr("| caller blocked, direct async |"));
  EXPECT_THAT(r.output, Not(HasSubstr("| caller blocked, direct sync |")));
}

TEST(TargetBench, CkptTargetSweepsQueueDepthAndHonoursAGivenMode) {
  testing::TempDir tmp;
  CliRun r = RunGrist("bench ckpt --quiet --size 4M --repetitions 1 --warmup 0 --mode direct --sweep queue_depth=1,4 --target " +
                      tmp.Join("t") + " --dir " + tmp.Join("b"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("#### checkpoint write, direct sync (GB/s)"));
  EXPECT_THAT(r.output, HasSubstr("| 4 | "));
  EXPECT_THAT(r.output, Not(HasSubstr("buffered")));
  CliRun b = RunGrist("bench ckpt --quiet --size 4M --repetitions 1 --warmup 0 --mode buffered --target " +
                      tmp.Join("t") + " --dir " + tmp.Join("b"));
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_THAT(b.output, HasSubstr("| checkpoint write, buffered async |"));
  EXPECT_THAT(b.output, Not(HasSubstr("direct sync")));
}

}  // namespace
}  // namespace grist
