// shard/indexed_dataset.h: grist's one MMIDIDX reader and writer (docs/formats/mmidx.md).
#include "shard/indexed_dataset.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/env.h"
#include "shard/mmidx_format.h"
#include "tests/test_util.h"

namespace grist::shard {
namespace {

using grist::testing::TempDir;

template <typename T>
void Put(std::string* s, T v) {
  s->append(reinterpret_cast<const char*>(&v), sizeof(v));
}

// TokenBytes: every id's bytes in one checked pass; the first id that does not fit is found
// wherever it is (a vectorized loop's body, its tail), negative or too large.
TEST(IndexedDatasetTest, TokenBytesNarrowsAndFindsTheFirstIdThatDoesNotFit) {
  std::vector<int32_t> ids(1000);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i * 65 % 65536);
  std::string buf;
  std::string_view bytes;
  ASSERT_EQ(TokenBytes(TokenDtype::kUint16, ids, &buf, &bytes), ids.size());
  ASSERT_EQ(bytes.size(), ids.size() * 2);
  for (size_t i = 0; i < ids.size(); ++i) {
    uint16_t v;
    std::memcpy(&v, bytes.data() + 2 * i, 2);
    ASSERT_EQ(v, ids[i]) << i;
  }
  std::string_view wide;
  ASSERT_EQ(TokenBytes(TokenDtype::kInt32, ids, &buf, &wide), ids.size());
  EXPECT_EQ(wide.data(), reinterpret_cast<const char*>(ids.data()));
  EXPECT_EQ(wide.size(), ids.size() * 4);
  for (size_t at : {size_t{0}, size_t{7}, size_t{500}, size_t{999}}) {
    for (int32_t v : {65536, -1, INT32_MIN, INT32_MAX}) {
      std::vector<int32_t> b = ids;
      b[at] = v;
      if (at + 3 < b.size()) b[at + 3] = -5;  // a later one does not count
      std::string_view none;
      EXPECT_EQ(TokenBytes(TokenDtype::kUint16, b, &buf, &none), at) << at << " " << v;
      EXPECT_TRUE(none.empty());
      const size_t want32 = v < 0 ? at : (at + 3 < b.size() ? at + 3 : b.size());
      EXPECT_EQ(TokenBytes(TokenDtype::kInt32, b, &buf, &none), want32) << at << " " << v;
    }
  }
  std::string_view empty;
  EXPECT_EQ(TokenBytes(TokenDtype::kUint16, {}, &buf, &empty), 0u);
}

TEST(IndexedDatasetTest, IndexBytesAreExactlyMegatrons) {
  // Two sequences of 3 and 2 uint16 tokens, written field by field from docs/formats/mmidx.md.
  std::string want("MMIDIDX\0\0", 9);
  Put<uint64_t>(&want, 1);
  Put<uint8_t>(&want, 8);
  Put<uint64_t>(&want, 2);
  Put<uint64_t>(&want, 3);
  Put<int32_t>(&want, 3);
  Put<int32_t>(&want, 2);
  Put<int64_t>(&want, 0);
  Put<int64_t>(&want, 6);
  for (int64_t k : {0, 1, 2}) Put<int64_t>(&want, k);
  EXPECT_EQ(EncodeIdx(TokenDtype::kUint16, std::vector<int32_t>{3, 2}), want);
  EXPECT_EQ(want.size(), IdxSize(2, 3));
  auto v = ParseIdx(want, "x.idx");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->sequences, 2u);
  EXPECT_EQ(v->tokens, 5u);
  EXPECT_EQ(v->length(1), 2);
  EXPECT_EQ(v->dtype, TokenDtype::kUint16);
  // int32: code 4, pointers in 4-byte units.
  std::string i32 = EncodeIdx(TokenDtype::kInt32, std::vector<int32_t>{3, 2});
  EXPECT_EQ(static_cast<uint8_t>(i32[kIdxDtypeOffset]), 4);
  int64_t p1;
  std::memcpy(&p1, i32.data() + kIdxHeaderSize + 8 + 8, 8);
  EXPECT_EQ(p1, 12);
  // Empty: a valid index of no sequences.
  auto e = ParseIdx(EncodeIdx(TokenDtype::kUint16, {}), "e.idx");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->sequences, 0u);
}

TEST(IndexedDatasetTest, CorruptIndexesAreDataLossNamingTheFile) {
  const std::string good = EncodeIdx(TokenDtype::kUint16, std::vector<int32_t>{3, 2});
  auto corrupt = [&](size_t at, char value) {
    std::string s = good;
    s[at] = value;
    return s;
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {good.substr(0, 20), "shorter than its header"},
      {corrupt(0, 'X'), "bad magic"},
      {corrupt(kIdxVersionOffset, 2), "unsupported version"},
      {corrupt(kIdxDtypeOffset, 1), "dtype code 1"},
      {corrupt(kIdxSequenceCountOffset, 3), "document_count"},
      {corrupt(kIdxDocumentCountOffset, 4), "document_count 4"},
      {good.substr(0, good.size() - 1), "header implies"},
      {corrupt(kIdxHeaderSize + 3, '\x80'), "negative length of sequence 0"},
      {corrupt(kIdxHeaderSize + 8 + 8, 7), "pointer of sequence 1"},
      {corrupt(kIdxHeaderSize + 8 + 16 + 8, 5), "document index 1"},
  };
  for (const auto& [bytes, what] : cases) {
    auto v = ParseIdx(bytes, "/r/d.idx");
    EXPECT_EQ(v.status().code(), absl::StatusCode::kDataLoss) << what;
    EXPECT_NE(std::string(v.status().message()).find("/r/d.idx: corrupt index: "),
              std::string::npos) << v.status();
    EXPECT_NE(std::string(v.status().message()).find(what), std::string::npos) << v.status();
  }
}

TEST(IndexedDatasetTest, WriteReadBothDtypesWithChecksums) {
  TempDir tmp;
  Env* env = Env::Default();
  for (TokenDtype dt : {TokenDtype::kUint16, TokenDtype::kInt32}) {
    const std::string prefix = tmp.Join(dt == TokenDtype::kUint16 ? "u16" : "i32");
    auto w = IndexedDatasetWriter::Open(env, prefix, dt);
    ASSERT_TRUE(w.ok());
    const int32_t big = dt == TokenDtype::kUint16 ? 65535 : 1 << 30;
    std::vector<std::vector<int32_t>> docs = {{1, 2, 3}, {}, {big, 0}};
    for (const auto& d : docs) ASSERT_TRUE((*w)->Add(d).ok());
    // Out of the dtype's range: rejected, nothing written.
    EXPECT_EQ((*w)->Add(std::vector<int32_t>{1, -1}).code(), absl::StatusCode::kInvalidArgument);
    if (dt == TokenDtype::kUint16) {
      EXPECT_EQ((*w)->Add(std::vector<int32_t>{65536}).code(), absl::StatusCode::kInvalidArgument);
    }
    // Nothing under the final names before Finish.
    EXPECT_FALSE(env->FileExists(prefix + ".bin"));
    EXPECT_FALSE(env->FileExists(prefix + ".idx"));
    auto info = (*w)->Finish();
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(info->sequences, 3u);
    EXPECT_EQ(info->tokens, 5u);
    EXPECT_EQ(info->bin_bytes, 5 * TokenDtypeSize(dt));
    EXPECT_EQ(info->idx_bytes, IdxSize(3, 4));
    std::string bin = *ReadFileToString(env, prefix + ".bin");
    std::string idx = *ReadFileToString(env, prefix + ".idx");
    EXPECT_EQ(info->bin_xxh3_128, Hash128Of(bin));
    EXPECT_EQ(info->idx_xxh3_128, Hash128Of(idx));
    EXPECT_EQ(idx, EncodeIdx(dt, std::vector<int32_t>{3, 0, 2}));
    EXPECT_FALSE(env->FileExists(prefix + ".bin.tmp"));
    auto r = IndexedDatasetReader::Open(env, prefix);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ((*r)->dtype(), dt);
    EXPECT_EQ((*r)->sequences(), 3u);
    EXPECT_EQ((*r)->tokens(), 5u);
    for (size_t i = 0; i < docs.size(); ++i) {
      std::vector<int32_t> got;
      (*r)->Read(i, &got);
      EXPECT_EQ(got, docs[i]);
      EXPECT_EQ((*r)->length(i), docs[i].size());
    }
    // A .bin of the wrong size is DataLoss naming it, before mapping.
    ASSERT_TRUE(WriteFileAtomic(env, prefix + ".bin", bin.substr(0, bin.size() - 1)).ok());
    auto t = IndexedDatasetReader::Open(env, prefix);
    EXPECT_EQ(t.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_NE(std::string(t.status().message()).find(prefix + ".bin"), std::string::npos);
  }
}

TEST(IndexedDatasetTest, AnAbandonedWriterLeavesNothing) {
  TempDir tmp;
  Env* env = Env::Default();
  {
    auto w = IndexedDatasetWriter::Open(env, tmp.Join("d"), 2);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Add(std::vector<int32_t>{1, 2}).ok());
  }
  EXPECT_FALSE(env->FileExists(tmp.Join("d.bin.tmp")));
  EXPECT_FALSE(env->FileExists(tmp.Join("d.bin")));
  EXPECT_EQ(IndexedDatasetWriter::Open(env, tmp.Join("d"), 3).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace grist::shard
