#include "common/config.h"

#include <gtest/gtest.h>

namespace grist {
namespace {

TEST(ConfigTest, TypedAccessAndDefaults) {
  auto c = Config::FromString(R"(
release = "1.0"
[pack]
seq_len = 2048
strategy = "bestfit"
[dedup]
threshold = 0.8
enabled = true
inputs = ["a", "b"]
typo_key = 3
)", "test.toml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(*c->GetInt("pack.seq_len", 0), 2048);
  EXPECT_EQ(*c->GetString("pack.strategy", ""), "bestfit");
  EXPECT_DOUBLE_EQ(*c->GetDouble("dedup.threshold", 0), 0.8);
  EXPECT_TRUE(*c->GetBool("dedup.enabled", false));
  EXPECT_EQ(*c->GetStringList("dedup.inputs", {}), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(*c->GetInt("pack.seed", 42), 42);
  EXPECT_EQ(*c->RequireString("release"), "1.0");
  EXPECT_EQ(c->UnusedKeys(), std::vector<std::string>{"dedup.typo_key"});
  EXPECT_EQ(c->ResolvedJson(0),
            "{\"dedup\":{\"enabled\":true,\"inputs\":[\"a\",\"b\"],\"threshold\":0.8},"
            "\"pack\":{\"seed\":42,\"seq_len\":2048,\"strategy\":\"bestfit\"},\"release\":\"1.0\"}");
}

TEST(ConfigTest, ErrorsNameTheKey) {
  auto c = Config::FromString("[pack]\nseq_len = \"long\"\n", "v.toml");
  ASSERT_TRUE(c.ok());
  auto r = c->GetInt("pack.seq_len", 0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "config v.toml: key 'pack.seq_len': expected an integer, got a string");
  auto m = c->RequireInt("tokenizer.vocab_size");
  EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(m.status().message(), "config v.toml: missing required key 'tokenizer.vocab_size'");
}

TEST(ConfigTest, SyntaxErrorNamesLine) {
  auto c = Config::FromString("a = 1\nb = [\n", "bad.toml");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("bad.toml:"), std::string::npos);
}

TEST(ConfigTest, Overrides) {
  auto c = Config::FromString("[x]\nn = 1\n", "o.toml");
  ASSERT_TRUE(c.ok());
  c->SetInt("x.n", 5);
  EXPECT_EQ(*c->GetInt("x.n", 0), 5);
}

TEST(ConfigTest, TextThatIsNotTomlIsAnErrorBeforeTheParserSeesIt) {
  // Found by fuzz/fuzz_config.cc: toml++ reached __builtin_unreachable on such bytes.
  const std::string nul("a = 1\0\0\\\\\\l\0", 12);
  for (const std::string& text : {nul, std::string("a = 1\nb = \"\xc0\xaf\"\n"),
                                  std::string("a = \"\xed\xa0\x80\"\n"), std::string("a = 1\x01\n"),
                                  std::string("a = \"\xf4\x90\x80\x80\"")}) {
    auto c = Config::FromString(text, "bad.toml");
    ASSERT_FALSE(c.ok()) << text;
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(c.status().message()).find("bad.toml:"), std::string::npos) << c.status();
  }
  auto pos = Config::FromString("a = 1\nb = \"x\x01\"\n", "p.toml");
  EXPECT_NE(std::string(pos.status().message()).find("p.toml:2:7:"), std::string::npos) << pos.status();
  // Non-ASCII outside strings and comments (toml++ has undefined behaviour there).
  auto bare = Config::FromString("a = 1 \xc3\xa9\n", "b.toml");
  EXPECT_NE(std::string(bare.status().message()).find("b.toml:1:7:"), std::string::npos)
      << bare.status();
  EXPECT_FALSE(Config::FromString("rele\xef\xb2\xbf = 1\n", "b.toml").ok());
  const std::string strings =
      "# caf\xc3\xa9\na = '\xc3\xa9'\nb = \"\\\"\xc3\xa9\"\nc = \"\"\"\n\xc3\xa9\"\"\"\n"
      "d = '''\xc3\xa9\n'''\n";
  EXPECT_TRUE(Config::FromString(strings, "s.toml").ok()) << strings;
  // UTF-8 text, tabs and CRLF stay fine.
  EXPECT_TRUE(Config::FromString("a = \"caf\xc3\xa9 \xf0\x9f\x98\x80\"\r\n\tb = 2\n", "ok.toml").ok());
}

}  // namespace
}  // namespace grist
