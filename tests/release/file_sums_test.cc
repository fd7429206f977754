// The checksums a build remembers in its work folder (release/internal/file_sums.h): served only
// while a file's stat is the one it had when hashed, remembered only once its times have settled.

#include "release/internal/file_sums.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/env.h"
#include "tests/test_util.h"

namespace grist::release::internal {
namespace {

using ::grist::testing::ForwardingEnv;
using ::grist::testing::TempDir;

constexpr int64_t kSecond = 1'000'000'000;

// The real file system, with every file's times reported ten seconds earlier: as a file written
// long before the build looks (its times settled).
class OldTimesEnv : public ForwardingEnv {
 public:
  absl::StatusOr<FileStat> Stat(const std::string& p) override {
    absl::StatusOr<FileStat> st = base()->Stat(p);
    if (st.ok()) {
      st->mtime_ns -= 10 * kSecond;
      st->ctime_ns -= 10 * kSecond;
    }
    return st;
  }
};

TEST(FileSums, ASettledFileIsServedWhileItsStatHoldsAndHashedAgainOnceWritten) {
  TempDir t;
  OldTimesEnv env;
  const std::string f = t.Join("a.jsonl"), cache = t.Join("sums.json");
  ASSERT_TRUE(WriteFileAtomic(&env, f, "one\n").ok());
  auto sums = FileSums::Load(&env, cache);
  FileSums::Seen seen;
  EXPECT_EQ(sums->Find("xxh3_128", f, &seen), "");
  ASSERT_TRUE(seen.stat.has_value());
  EXPECT_EQ(seen.stat->size, 4u);
  sums->Remember("xxh3_128", f, seen, "aa");
  EXPECT_EQ(sums->remembered(), 1u);
  EXPECT_EQ(sums->Find("xxh3_128", f, &seen), "aa");
  EXPECT_EQ(sums->Find("xxh3_128_of_4mib_pieces", f, &seen), "") << "kinds are apart";
  ASSERT_TRUE(sums->Save().ok());

  // Another process: served from the file, and not once the file is written again in place (the
  // same bytes, the same inode: new times).
  auto again = FileSums::Load(&env, cache);
  EXPECT_EQ(again->Find("xxh3_128", f, &seen), "aa");
  EXPECT_EQ(again->served(), 1u);
  const FileStat before = *seen.stat;
  grist::testing::OverwriteInPlace(f, 0, "one\n");
  EXPECT_EQ(again->Find("xxh3_128", f, &seen), "");
  EXPECT_EQ(seen.stat->inode, before.inode);
  EXPECT_EQ(seen.stat->size, before.size);
  ASSERT_TRUE(again->Save().ok());
  EXPECT_EQ(FileSums::Load(&env, cache)->Find("xxh3_128", f, &seen), "") << "the entry went";
}

TEST(FileSums, AFileJustWrittenOrChangedWhileHashedIsNotRemembered) {
  TempDir t;
  const std::string f = t.Join("a.jsonl");
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), f, "one\n").ok());
  // Its times are now: a write later in the same timestamp tick could leave them as they are.
  auto sums = FileSums::Load(Env::Default(), t.Join("sums.json"));
  FileSums::Seen seen;
  EXPECT_EQ(sums->Find("xxh3_128", f, &seen), "");
  sums->Remember("xxh3_128", f, seen, "aa");
  EXPECT_EQ(sums->remembered(), 0u);
  // Settled, but written between the stat and the end of the hashing.
  OldTimesEnv env;
  auto old = FileSums::Load(&env, t.Join("sums.json"));
  EXPECT_EQ(old->Find("xxh3_128", f, &seen), "");
  ASSERT_TRUE(WriteFileAtomic(&env, f, "two\n").ok());
  old->Remember("xxh3_128", f, seen, "aa");
  EXPECT_EQ(old->remembered(), 0u);
  // The Env without file times remembers nothing.
  MemEnv mem;
  ASSERT_TRUE(WriteFileAtomic(&mem, "/a", "one\n").ok());
  auto none = FileSums::Load(&mem, "/sums.json");
  EXPECT_EQ(none->Find("xxh3_128", "/a", &seen), "");
  EXPECT_FALSE(seen.stat.has_value());
  none->Remember("xxh3_128", "/a", seen, "aa");
  EXPECT_EQ(none->remembered(), 0u);
}

TEST(FileSums, TimesInWholeSecondsSettleAfterTwoSeconds) {
  FileStat fine{.size = 1, .mtime_ns = 100 * kSecond + 5, .ctime_ns = 100 * kSecond + 7};
  EXPECT_TRUE(SettledBefore(fine, 100 * kSecond + 7 + kSettledNs + 1));
  EXPECT_FALSE(SettledBefore(fine, 100 * kSecond + 7 + kSettledNs));
  FileStat coarse{.size = 1, .mtime_ns = 100 * kSecond, .ctime_ns = 101 * kSecond};
  EXPECT_FALSE(SettledBefore(coarse, 101 * kSecond + kSecond));
  EXPECT_FALSE(SettledBefore(coarse, 101 * kSecond + kSettledCoarseNs));
  EXPECT_TRUE(SettledBefore(coarse, 101 * kSecond + kSettledCoarseNs + 1));
  // The newer of the two times counts (ctime after a chmod, say).
  FileStat changed{.size = 1, .mtime_ns = 1 * kSecond + 3, .ctime_ns = 50 * kSecond + 3};
  EXPECT_FALSE(SettledBefore(changed, 50 * kSecond));
}

TEST(FileSums, ADamagedCacheIsEmptyAndRewrittenAndGoneFilesAreDropped) {
  TempDir t;
  OldTimesEnv env;
  const std::string cache = t.Join("sums.json");
  for (const char* bad :
       {"{not json", "{\"format\":\"grist-file-sums\",\"version\":2,\"files\":[]}",
        "{\"format\":\"grist-file-sums\",\"version\":1,\"files\":[{\"kind\":1}]}"}) {
    ASSERT_TRUE(WriteFileAtomic(&env, cache, bad).ok());
    auto sums = FileSums::Load(&env, cache);
    ASSERT_TRUE(sums->Save().ok()) << bad;
    EXPECT_EQ(ReadFileToString(&env, cache).value(),
              "{\"format\":\"grist-file-sums\",\"version\":1,\"files\":[]}\n")
        << bad;
  }
  const std::string a = t.Join("a"), b = t.Join("b");
  ASSERT_TRUE(WriteFileAtomic(&env, a, "a").ok());
  ASSERT_TRUE(WriteFileAtomic(&env, b, "b").ok());
  auto sums = FileSums::Load(&env, cache);
  FileSums::Seen seen;
  for (const std::string& f : {a, b}) {
    sums->Find("xxh3_128", f, &seen);
    sums->Remember("xxh3_128", f, seen, f == a ? "aa" : "bb");
  }
  ASSERT_TRUE(env.RemoveFile(b).ok());
  ASSERT_TRUE(sums->Save().ok());
  const std::string text = ReadFileToString(&env, cache).value();
  EXPECT_NE(text.find("\"sum\":\"aa\""), std::string::npos) << text;
  EXPECT_EQ(text.find("\"sum\":\"bb\""), std::string::npos) << text;
  EXPECT_EQ(FileSums::Load(&env, cache)->Find("xxh3_128", a, &seen), "aa");
}

TEST(FileSums, ASaveThatFailsSaysSoAndLeavesNoTemporaryFile) {
  TempDir t;
  OldTimesEnv settled;
  FaultInjectionEnv env(&settled);
  const std::string f = t.Join("a"), cache = t.Join("sums.json");
  ASSERT_TRUE(WriteFileAtomic(&env, f, "a").ok());
  auto sums = FileSums::Load(&env, cache);
  FileSums::Seen seen;
  sums->Find("xxh3_128", f, &seen);
  sums->Remember("xxh3_128", f, seen, "aa");
  ASSERT_EQ(sums->remembered(), 1u);
  env.SetFailRename(true);
  const absl::Status s = sums->Save();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(std::string(s.message()).find("sums.json"), std::string::npos) << s;
  env.SetFailRename(false);
  auto names = env.ListDir(t.path());
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(*names, std::vector<std::string>{"a"}) << "no sums.json, no temporary file";
  ASSERT_TRUE(sums->Save().ok()) << "still to be saved";
  EXPECT_EQ(FileSums::Load(&env, cache)->Find("xxh3_128", f, &seen), "aa");
}

}  // namespace
}  // namespace grist::release::internal
