// Tests of the dedup options (DedupOptions, dedup/dedup.h): read from a config, validated.
#include "dedup/dedup.h"

#include <gtest/gtest.h>

#include <string>

#include "common/config.h"

namespace grist::dedup {
namespace {

TEST(Options, FromConfigAndValidation) {
  auto cfg = Config::FromString("[dedup]\nthreshold = 0.7\nngram = 3\nline_dedup = true\n", "t.toml");
  ASSERT_TRUE(cfg.ok());
  auto o = DedupOptions::FromConfig(*cfg);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->bands, 0);  // a threshold alone: automatic bands x rows
  EXPECT_EQ(o->Resolved().bands, 12);
  EXPECT_EQ(o->Resolved().rows, 9);
  EXPECT_EQ(o->shingle.n, 3);
  EXPECT_TRUE(o->line_dedup);
  auto def = DedupOptions::FromConfig(Config());
  ASSERT_TRUE(def.ok());
  EXPECT_EQ(def->bands, 14);
  EXPECT_EQ(def->rows, 8);
  EXPECT_EQ(def->num_perm, 112);
  auto bad = Config::FromString("[dedup]\nbands = 20\nrows = 8\n", "t.toml");
  auto e = DedupOptions::FromConfig(*bad);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(std::string(e.status().message()).find("exceeds num_perm"), std::string::npos);
  auto badnorm = Config::FromString("[dedup]\nexact_normalize = \"nfkc\"\n", "t.toml");
  EXPECT_FALSE(DedupOptions::FromConfig(*badnorm).ok());
  DedupOptions small;
  small.memory_limit = 1 << 20;
  EXPECT_TRUE(small.Validate().ok());
  small.memory_limit = (1 << 20) - 1;
  EXPECT_NE(std::string(small.Validate().message()).find("at least 1 MB"), std::string::npos);
}

}  // namespace
}  // namespace grist::dedup
