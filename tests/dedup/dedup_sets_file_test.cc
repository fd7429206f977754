// Tests of dedup's shingle-sets file (kShingleSets, dedup/internal/files.h): round trip, damage.
#include "dedup/internal/files.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/env.h"
#include "dedup/dedup_format.h"
#include "tests/test_util.h"

namespace grist::dedup {
namespace {

using ::grist::testing::TempDir;

TEST(SetsFile, RoundTripAndCorruption) {
  TempDir tmp;
  const std::string path = tmp.Join("sets.bin");
  internal::FileHeader h;
  h.kind = format::Kind::kShingleSets;
  {
    auto w = internal::FileWriter::Open(Env::Default(), path, h);
    ASSERT_TRUE(w.ok());
    std::string data;
    internal::AppendSetRecord(&data, 7, {1, 2, 3});
    internal::AppendSetRecord(&data, 9, {});
    internal::AppendSetRecord(&data, 12, {5});
    ASSERT_TRUE((*w)->AddSerialized(data, 3).ok());
    ASSERT_TRUE((*w)->Finish().ok());
  }
  auto read_all = [&]() -> absl::Status {
    auto r = internal::FileReader::Open(Env::Default(), path, format::Kind::kShingleSets, 0);
    if (!r.ok()) return r.status();
    uint64_t key;
    std::vector<uint64_t> v;
    std::vector<std::pair<uint64_t, std::vector<uint64_t>>> got;
    while (true) {
      auto more = (*r)->NextSet(&key, &v);
      if (!more.ok()) return more.status();
      if (!*more) break;
      got.emplace_back(key, v);
    }
    using Sets = std::vector<std::pair<uint64_t, std::vector<uint64_t>>>;
    EXPECT_EQ(got, (Sets{{7, {1, 2, 3}}, {9, {}}, {12, {5}}}));
    return absl::OkStatus();
  };
  ASSERT_TRUE(read_all().ok());
  const std::string good = *ReadFileToString(Env::Default(), path);
  const size_t body = format::kHeaderSize;
  // A value flipped: checksum. A count that runs past the end: named as such. Truncated: footer.
  std::string bad = good;
  bad[body + 16 + 8] ^= 1;
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), path, bad).ok());
  absl::Status s = read_all();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(std::string(s.message()).find("checksum mismatch"), std::string::npos) << s;
  bad = good;
  bad[body + 8] = 100;
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), path, bad).ok());
  s = read_all();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(std::string(s.message()).find("set record of 100 values"), std::string::npos) << s;
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), path, good.substr(0, good.size() - 9)).ok());
  EXPECT_EQ(read_all().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace grist::dedup
