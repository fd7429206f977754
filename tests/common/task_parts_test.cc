#include "common/task_parts.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace grist {
namespace {

TEST(TaskParts, NameIsStemTaskAndCountZeroPadded) {
  EXPECT_EQ(TaskPartName("part", 0, 1), "part-00000-of-00001");
  EXPECT_EQ(TaskPartName("clean-report", 12, 345), "clean-report-00012-of-00345");
  EXPECT_EQ(TaskPartName("tokens", 99998, 99999), "tokens-99998-of-99999");
}

TEST(TaskParts, ParseTakesExactlyFiveDigitsAndATaskBelowTheCount) {
  auto p = ParseTaskPart("part-00002-of-00003-00007.jsonl.zst", "part");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->task, 2);
  EXPECT_EQ(p->tasks, 3);
  EXPECT_EQ(p->rest, "-00007.jsonl.zst");
  auto bare = ParseTaskPart("tokens-00000-of-00001", "tokens");
  ASSERT_TRUE(bare.has_value());
  EXPECT_EQ(bare->rest, "");
  for (const char* bad : {"part-0002-of-00003.json",   // 4 digits
                          "part-00002-of-0003.json",   // 4 digits
                          "part- 0002-of-00003.json",  // what sscanf's %5d would take
                          "part-+0002-of-00003.json",
                          "part-00003-of-00003.json",  // task not below the count
                          "part-00000-of-00000.json",
                          "part-00001_of-00003.json",
                          "parts-00001-of-00003.json",  // another stem
                          "part00001-of-00003.json",
                          "part-00001-of-"}) {
    EXPECT_FALSE(ParseTaskPart(bad, "part").has_value()) << bad;
  }
  EXPECT_FALSE(ParseTaskPart("clean-report-00000-of-00001.json", "part").has_value());
}

TEST(TaskParts, FindTakesTheSuffixExactlyAndNamesTheMissingTask) {
  const std::vector<std::string> names = {"tokens-00002-of-00003.idx", "tokens-00000-of-00003.idx",
                                          "tokens-00000-of-00003.json", "tokens-00001-of-00003.bin",
                                          "notes.txt", "tokens-00001-of-00003.idx.tmp"};
  auto parts = FindTaskParts(names, "tokens", ".idx", "/w/tokens");
  ASSERT_TRUE(parts.ok()) << parts.status();
  EXPECT_EQ(parts->tasks, 3);
  EXPECT_EQ(parts->names, (std::map<int, std::string>{{0, "tokens-00000-of-00003.idx"},
                                                      {2, "tokens-00002-of-00003.idx"}}));
  EXPECT_EQ(parts->FirstMissing(), 1);
  auto none = FindTaskParts(names, "sig", ".bin", "/w");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->tasks, 0);
  EXPECT_EQ(none->FirstMissing(), -1);
}

TEST(TaskParts, PartsOfDifferentTaskCountsAreRefused) {
  auto mixed = FindTaskParts({"sig-00000-of-00002.bin", "sig-00001-of-00002.bin",
                              "sig-00000-of-00003.bin"},
                             "sig", ".bin", "/w/sig");
  EXPECT_EQ(mixed.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(mixed.status().message(),
            "/w/sig: sig-IIIII-of-NNNNN.bin parts of different task counts (2 and 3): remove the "
            "stale ones");
}

}  // namespace
}  // namespace grist
