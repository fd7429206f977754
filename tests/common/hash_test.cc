#include "common/hash.h"

#include <gtest/gtest.h>

#include "common/env.h"

namespace grist {
namespace {

TEST(HashTest, KnownXxh3Values) {
  // Published XXH3 digests of the empty input (xxHash's canonical values).
  EXPECT_EQ(Hash64(""), 0x2D06800538D394C2ULL);
  EXPECT_EQ(Hash128Of("").ToHex(), "99aa06d3014798d86001c324468d497f");
}

TEST(HashTest, StreamingEqualsOneShot) {
  std::string data;
  for (int i = 0; i < 10000; ++i) data += static_cast<char>(i * 7 + 3);
  Hasher128 h;
  for (size_t i = 0; i < data.size(); i += 333) h.Update(data.substr(i, 333));
  EXPECT_EQ(h.Digest(), Hash128Of(data));
  Hasher64 h64;
  h64.Update(data.substr(0, 5000));
  h64.Update(data.substr(5000));
  EXPECT_EQ(h64.Digest(), Hash64(data));
}

TEST(HashTest, HexRoundTrip) {
  Hash128 h = Hash128Of("grist");
  auto back = Hash128::FromHex(h.ToHex());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, h);
  EXPECT_FALSE(Hash128::FromHex("xyz").ok());
  EXPECT_FALSE(Hash128::FromHex(std::string(32, 'g')).ok());
  EXPECT_EQ(Hex64(0xabcULL), "0000000000000abc");
}

TEST(HashTest, HashFileMatchesBytes) {
  MemEnv env;
  ASSERT_TRUE(env.CreateDirs("/d").ok());
  std::string data(3 << 20, 'x');
  data[12345] = 'y';
  ASSERT_TRUE(WriteFileAtomic(&env, "/d/f", data).ok());
  auto h = HashFile128(&env, "/d/f");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(*h, Hash128Of(data));
  EXPECT_EQ(HashFile128(&env, "/d/missing").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace grist
