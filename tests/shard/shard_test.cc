#include "shard/shard.h"

#include <gtest/gtest.h>

#include <vector>

#include "common/env.h"
#include "shard/shard_format.h"
#include "tests/test_util.h"

namespace grist::shard {
namespace {

using grist::testing::TempDir;

// Writes `n` samples of 5 tokens: tokens k*10+j, segments {3, pad 2} for odd k, {2, 3} for even.
ShardInfo WriteShard(Env* env, const std::string& dir, uint64_t n, TokenDtype dtype) {
  EXPECT_TRUE(env->CreateDirs(JoinPath(dir, "shards")).ok());
  auto w = ShardWriter::Open(env, dir, "shards/train-00000", 5, dtype);
  EXPECT_TRUE(w.ok()) << w.status();
  for (uint64_t k = 0; k < n; ++k) {
    std::vector<int32_t> t;
    for (int j = 0; j < 5; ++j) t.push_back(static_cast<int32_t>(k * 10 + j));
    std::vector<uint32_t> s = (k % 2) ? std::vector<uint32_t>{SegmentWord(3, false), SegmentWord(2, true)}
                                      : std::vector<uint32_t>{SegmentWord(2, false), SegmentWord(3, false)};
    EXPECT_TRUE((*w)->Append(t, s).ok());
  }
  auto info = (*w)->Finish();
  EXPECT_TRUE(info.ok()) << info.status();
  return *info;
}

TEST(ShardTest, RoundTripUint16AndExactFileLayout) {
  TempDir tmp;
  Env* env = Env::Default();
  ShardInfo info = WriteShard(env, tmp.path(), 3, TokenDtype::kUint16);
  EXPECT_EQ(info.name, "shards/train-00000");
  EXPECT_EQ(info.samples, 3u);
  EXPECT_EQ(info.tokens, 15u);
  EXPECT_EQ(info.padding_tokens, 2u);
  EXPECT_EQ(info.bin.bytes, 30u);
  EXPECT_EQ(info.idx.bytes, kIdxHeaderSize + 3 * 4 + 3 * 8 + 4 * 8);
  EXPECT_EQ(info.seg.bytes, kSegHeaderSize + 4 * 8 + 6 * 4 + 8);
  EXPECT_FALSE(env->FileExists(tmp.Join("shards/train-00000.bin.tmp")));
  // The .idx header as Megatron reads it.
  std::string idx = *ReadFileToString(env, tmp.Join("shards/train-00000.idx"));
  EXPECT_EQ(idx.substr(0, 9), std::string("MMIDIDX\0\0", 9));
  EXPECT_EQ(idx[17], 8);  // uint16
  EXPECT_EQ(Hash128Of(idx), info.idx.xxh3_128);
  EXPECT_EQ(*HashFile128(env, tmp.Join("shards/train-00000.bin")), info.bin.xxh3_128);

  auto r = ShardReader::Open(env, tmp.path(), info, 5, TokenDtype::kUint16, {true});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ((*r)->samples(), 3u);
  SampleView v = (*r)->sample(1);
  EXPECT_EQ(v.token(0), 10);
  EXPECT_EQ(v.token(4), 14);
  ASSERT_EQ(v.segments.size(), 2u);
  EXPECT_EQ(SegmentLength(v.segments[0]), 3u);
  EXPECT_TRUE(SegmentIsPadding(v.segments[1]));
  EXPECT_EQ((*r)->sample(2).token(3), 23);
}

TEST(ShardTest, RoundTripInt32InMemEnv) {
  MemEnv env;
  ASSERT_TRUE(env.CreateDirs("/r/shards").ok());
  auto w = ShardWriter::Open(&env, "/r", "shards/train-00000", 2, TokenDtype::kInt32);
  ASSERT_TRUE(w.ok());
  std::vector<int32_t> t = {70000, 3};
  std::vector<uint32_t> s = {SegmentWord(2, false)};
  ASSERT_TRUE((*w)->Append(t, s).ok());
  auto info = (*w)->Finish();
  ASSERT_TRUE(info.ok());
  auto r = ShardReader::Open(&env, "/r", *info, 2, TokenDtype::kInt32, {true});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->sample(0).token(0), 70000);
}

TEST(ShardTest, AppendRejectsBadSamples) {
  MemEnv env;
  ASSERT_TRUE(env.CreateDirs("/r/shards").ok());
  auto w = ShardWriter::Open(&env, "/r", "shards/x", 4, TokenDtype::kUint16);
  ASSERT_TRUE(w.ok());
  std::vector<int32_t> t = {1, 2, 3, 4};
  EXPECT_EQ((*w)->Append(t, std::vector<uint32_t>{SegmentWord(3, false)}).code(),
            absl::StatusCode::kInvalidArgument);  // sums to 3
  EXPECT_EQ((*w)->Append(t, std::vector<uint32_t>{SegmentWord(2, true), SegmentWord(2, false)})
                .code(),
            absl::StatusCode::kInvalidArgument);  // padding not last
  EXPECT_EQ((*w)->Append(t, std::vector<uint32_t>{SegmentWord(0, false), SegmentWord(4, false)})
                .code(),
            absl::StatusCode::kInvalidArgument);  // zero length
  std::vector<int32_t> big = {1, 2, 3, 70000};
  EXPECT_EQ((*w)->Append(big, std::vector<uint32_t>{SegmentWord(4, false)}).code(),
            absl::StatusCode::kInvalidArgument);  // does not fit uint16
  std::vector<int32_t> shorter = {1, 2, 3};
  EXPECT_EQ((*w)->Append(shorter, std::vector<uint32_t>{SegmentWord(3, false)}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*w)->samples(), 0u);
  EXPECT_EQ(ShardWriter::Open(&env, "/r", "shards/y", 0, TokenDtype::kUint16).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ShardWriter::Open(&env, "/r", "../y", 4, TokenDtype::kUint16).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ShardTest, TruncatedFilesAreDataLossNotSigbus) {
  TempDir tmp;
  Env* env = Env::Default();
  ShardInfo info = WriteShard(env, tmp.path(), 4, TokenDtype::kUint16);
  for (const char* ext : {".bin", ".idx", ".seg"}) {
    std::string path = tmp.Join(std::string("shards/train-00000") + ext);
    std::string orig = *ReadFileToString(env, path);
    ASSERT_TRUE(WriteFileAtomic(env, path, orig.substr(0, orig.size() - 3)).ok());
    auto r = ShardReader::Open(env, tmp.path(), info, 5, TokenDtype::kUint16);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << ext;
    EXPECT_NE(std::string(r.status().message()).find(path), std::string::npos) << r.status();
    ASSERT_TRUE(WriteFileAtomic(env, path, orig).ok());
  }
  EXPECT_TRUE(ShardReader::Open(env, tmp.path(), info, 5, TokenDtype::kUint16).ok());
}

TEST(ShardTest, CorruptionIsDetected) {
  TempDir tmp;
  Env* env = Env::Default();
  ShardInfo info = WriteShard(env, tmp.path(), 4, TokenDtype::kUint16);
  auto flip = [&](const std::string& ext, size_t pos) {
    std::string path = tmp.Join("shards/train-00000" + ext);
    std::string s = *ReadFileToString(env, path);
    s[pos] ^= 0x01;
    EXPECT_TRUE(WriteFileAtomic(env, path, s).ok());
    return [=] {
      std::string t = *ReadFileToString(Env::Default(), path);
      t[pos] ^= 0x01;
      EXPECT_TRUE(WriteFileAtomic(Env::Default(), path, t).ok());
    };
  };
  // .seg: structural checks plus the footer catch any byte.
  for (size_t pos : {size_t{0}, size_t{13}, size_t{kSegHeaderSize + 8}, info.seg.bytes - 1}) {
    auto undo = flip(".seg", pos);
    auto r = ShardReader::Open(env, tmp.path(), info, 5, TokenDtype::kUint16);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << pos;
    undo();
  }
  // .idx: every byte is determined by the header, so any flip is structural.
  for (size_t pos : {size_t{3}, size_t{17}, size_t{kIdxHeaderSize + 1}, info.idx.bytes - 2}) {
    auto undo = flip(".idx", pos);
    EXPECT_EQ(ShardReader::Open(env, tmp.path(), info, 5, TokenDtype::kUint16).status().code(),
              absl::StatusCode::kDataLoss)
        << pos;
    undo();
  }
  // .bin: only the checksum can tell.
  auto undo = flip(".bin", 7);
  EXPECT_TRUE(ShardReader::Open(env, tmp.path(), info, 5, TokenDtype::kUint16).ok());
  auto r = ShardReader::Open(env, tmp.path(), info, 5, TokenDtype::kUint16, {true});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(std::string(r.status().message()).find("train-00000.bin"), std::string::npos);
  undo();
  // Wrong dtype or sample length against the manifest.
  EXPECT_EQ(ShardReader::Open(env, tmp.path(), info, 5, TokenDtype::kInt32).status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(ShardReader::Open(env, tmp.path(), info, 6, TokenDtype::kUint16).status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(ShardTest, CrashBeforeFinishLeavesNoShard) {
  MemEnv env;
  ASSERT_TRUE(env.CreateDirs("/r/shards").ok());
  {
    auto w = ShardWriter::Open(&env, "/r", "shards/train-00000", 2, TokenDtype::kUint16);
    ASSERT_TRUE(w.ok());
    std::vector<int32_t> t = {1, 2};
    ASSERT_TRUE((*w)->Append(t, std::vector<uint32_t>{SegmentWord(2, false)}).ok());
  }
  EXPECT_FALSE(env.FileExists("/r/shards/train-00000.bin"));
  EXPECT_FALSE(env.FileExists("/r/shards/train-00000.bin.tmp"));
  // Finished shards survive a power loss.
  auto w = ShardWriter::Open(&env, "/r", "shards/train-00000", 2, TokenDtype::kUint16);
  std::vector<int32_t> t = {1, 2};
  ASSERT_TRUE((*w)->Append(t, std::vector<uint32_t>{SegmentWord(2, false)}).ok());
  auto info = (*w)->Finish();
  ASSERT_TRUE(info.ok());
  env.DropUnsyncedData();
  EXPECT_TRUE(ShardReader::Open(&env, "/r", *info, 2, TokenDtype::kUint16, {true}).ok());
}

TEST(ShardTest, FailedWriteIsReported) {
  MemEnv mem;
  FaultInjectionEnv env(&mem);
  ASSERT_TRUE(env.CreateDirs("/r/shards").ok());
  auto w = ShardWriter::Open(&env, "/r", "shards/train-00000", 2, TokenDtype::kUint16);
  ASSERT_TRUE(w.ok());
  env.SetDiskSpace(3);
  std::vector<int32_t> t = {1, 2};
  std::vector<uint32_t> s = {SegmentWord(2, false)};
  absl::Status st = (*w)->Append(t, s);
  if (st.ok()) st = (*w)->Append(t, s);
  if (st.ok()) st = (*w)->Finish().status();
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
}

TEST(ShardTest, RelativePathRules) {
  EXPECT_TRUE(CheckRelativePath("shards/train-00000.bin").ok());
  for (const char* p : {"", "/etc/passwd", "../x", "shards/../../x", "a//b", "./a", "a/.", "a\\b"}) {
    EXPECT_EQ(CheckRelativePath(p).code(), absl::StatusCode::kInvalidArgument) << p;
  }
}

}  // namespace
}  // namespace grist::shard
