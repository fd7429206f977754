// Per-stage scaling of `grist bench build --sweep threads=...`: the sweep it accepts, the Amdahl fit
// on stage times (exact on times that follow the model), and the table that flags stages below
// 0.8x linear.
#include "bench/scaling.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "bench/harness.h"

namespace grist::bench {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ThreadSweepTest, ParsesTheThreadCountsAsIntegers) {
  Options o;
  o.sweep = "threads=1,2,4,8,16";
  auto sweep = SweepFromOptions(o, {"threads"});
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  ASSERT_TRUE(sweep->has_value());
  EXPECT_EQ((*sweep)->param, "threads");
  std::vector<int64_t> n;
  for (const auto& v : (*sweep)->values) n.push_back(*SweepInt(**sweep, v));
  EXPECT_THAT(n, ElementsAre(1, 2, 4, 8, 16));
  // Errors are command-line errors (grist bench exits 2 for them).
  auto zero = SweepInt(**sweep, "0");
  EXPECT_TRUE(IsFlagError(zero.status())) << zero.status();
  EXPECT_EQ(zero.status().message(), "--sweep threads: value '0' is not a positive integer");
  o.sweep = "tasks=1,2";
  auto other = SweepFromOptions(o, {"threads"});
  EXPECT_TRUE(IsFlagError(other.status()));
  EXPECT_EQ(other.status().message(), "--sweep tasks: this bench cannot sweep 'tasks'; it sweeps: threads");
  EXPECT_TRUE(IsFlagError(Sweep::Parse("threads=1,1").status()));
}

TEST(AmdahlSecondsTest, FitsTimesThatFollowTheModelExactly) {
  // T(n) = 2 + 8/n: serial 2 s, parallel 8 s on one thread.
  std::vector<double> n = {1, 2, 4, 8, 16}, t;
  for (double x : n) t.push_back(2 + 8 / x);
  auto fit = FitAmdahlSeconds(n, t);
  ASSERT_TRUE(fit.has_value());
  EXPECT_NEAR(fit->a, 2.0, 1e-12);
  EXPECT_NEAR(fit->b, 8.0, 1e-12);
  EXPECT_NEAR(fit->serial_fraction, 0.2, 1e-12);
  // Two points determine the model: a + b = 3, a + b/2 = 2.
  auto two = FitAmdahlSeconds({1, 2}, {3, 2});
  ASSERT_TRUE(two.has_value());
  EXPECT_NEAR(two->a, 1.0, 1e-12);
  EXPECT_NEAR(two->b, 2.0, 1e-12);
  // Faster than linear is clamped to no serial part; no speedup at all to a serial stage.
  auto super = FitAmdahlSeconds({1, 2, 4}, {8, 3, 1});
  ASSERT_TRUE(super.has_value());
  EXPECT_EQ(super->a, 0.0);
  EXPECT_EQ(super->serial_fraction, 0.0);
  auto flat = FitAmdahlSeconds({1, 2, 4}, {5, 5, 5});
  ASSERT_TRUE(flat.has_value());
  EXPECT_NEAR(flat->serial_fraction, 1.0, 1e-12);
  EXPECT_FALSE(FitAmdahlSeconds({4, 4}, {1, 2}).has_value());  // one distinct count
  EXPECT_FALSE(FitAmdahlSeconds({1, 2}, {1, 0}).has_value());  // a time of 0
  EXPECT_FALSE(FitAmdahlSeconds({1, 2, 4}, {1, 2}).has_value());
}

TEST(StageScalingTest, PredictsSpeedupAndEfficiencyAtTheLargestCount) {
  // Given out of order: sorted by thread count.
  StageScaling s = FitStageScaling("dedup: merge", {16, 1, 4, 2, 8},
                                   {2.5, 10, 4, 6, 3}, 0.8);
  EXPECT_THAT(s.threads, ElementsAre(1, 2, 4, 8, 16));
  EXPECT_THAT(s.seconds, ElementsAre(10, 6, 4, 3, 2.5));
  ASSERT_TRUE(s.fit.has_value());
  EXPECT_NEAR(s.fit->serial_fraction, 0.2, 1e-12);
  EXPECT_EQ(s.max_threads, 16);
  EXPECT_NEAR(s.measured_speedup, 4.0, 1e-12);
  EXPECT_NEAR(s.measured_efficiency, 0.25, 1e-12);
  EXPECT_NEAR(s.predicted_speedup, 10.0 / 2.5, 1e-12);
  EXPECT_NEAR(s.predicted_efficiency, 0.25, 1e-12);
  EXPECT_TRUE(s.below_target);

  // 2% serial: S(16) = 1 / (0.02 + 0.98/16) = 12.31, efficiency 0.77: just below 0.8.
  std::vector<double> n = {1, 2, 4, 8, 16}, t;
  for (double x : n) t.push_back(0.02 + 0.98 / x);
  StageScaling near = FitStageScaling("tokenize", n, t, 0.8);
  EXPECT_NEAR(near.predicted_speedup, 1.0 / (0.02 + 0.98 / 16), 1e-9);
  EXPECT_TRUE(near.below_target);
  // 1% serial: S(16) = 13.91, efficiency 0.87.
  t.clear();
  for (double x : n) t.push_back(0.01 + 0.99 / x);
  StageScaling ok = FitStageScaling("tokenize", n, t, 0.8);
  EXPECT_NEAR(ok.predicted_efficiency, 1.0 / (0.01 + 0.99 / 16) / 16, 1e-9);
  EXPECT_FALSE(ok.below_target);
  // A stage measured at one count only has no fit and counts as below the target.
  StageScaling one = FitStageScaling("pack+shard", {4}, {1}, 0.8);
  EXPECT_FALSE(one.fit.has_value());
  EXPECT_TRUE(one.below_target);
}

TEST(StageScalingTest, TableFlagsTheStagesBelowTheTarget) {
  std::vector<double> n = {1, 2, 4};
  std::vector<StageScaling> stages = {
      FitStageScaling("clean", n, {4, 2, 1}, 0.8),      // linear
      FitStageScaling("tokenizer", n, {3, 3, 3}, 0.8),  // serial
  };
  const std::string table = ScalingTable(stages, 0.8);
  EXPECT_THAT(table, HasSubstr("| stage | s at 1 | s at 4 | measured speedup 1->4 | serial fraction | "
                               "predicted speedup at 4 | efficiency at 4 | target |\n"));
  EXPECT_THAT(table, HasSubstr("\n| clean | 4.000 | 1.000 | 4.00x | 0.000 | 4.00x | 1.00 | "
                               ">= 0.8x linear: ok |\n"));
  EXPECT_THAT(table, HasSubstr("\n| tokenizer | 3.000 | 3.000 | 1.00x | 1.000 | 1.00x | 0.25 | "
                               ">= 0.8x linear: **below** |\n"));
  EXPECT_THAT(table, HasSubstr("\nBelow 0.8x linear at 4 threads: tokenizer.\n"));
  // A stage too small to time is shown but not judged.
  StageScaling tiny = FitStageScaling("tokenizer", n, {0.01, 0.01, 0.01}, 0.8);
  tiny.not_judged = "0.3% of the build";
  const std::string all_ok = ScalingTable({stages[0], tiny}, 0.8);
  EXPECT_THAT(all_ok, HasSubstr("\n| tokenizer | 0.010 | 0.010 | 1.00x | 1.000 | 1.00x | 0.25 | "
                                ">= 0.8x linear: not judged (0.3% of the build) |\n"));
  EXPECT_THAT(all_ok, HasSubstr("\nNo stage below 0.8x linear at 4 threads.\n"));
}

}  // namespace
}  // namespace grist::bench
