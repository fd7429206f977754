#include "shard/manifest.h"

#include <gtest/gtest.h>

#include <vector>

#include "absl/strings/str_replace.h"
#include "common/env.h"
#include "shard/indexed_dataset.h"
#include "shard/shard_format.h"
#include "tests/shard/release_fixture.h"
#include "tests/test_util.h"

namespace grist::shard {
namespace {

using grist::testing::TempDir;

// A complete one-shard release in `dir` (tests/shard/release_fixture.h).
Manifest MakeRelease(Env* env, const std::string& dir) {
  auto m = grist::testing::WriteTestRelease(env, dir);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *m : Manifest{};
}

TEST(ManifestTest, RoundTripIsByteExact) {
  MemEnv env;
  Manifest m = MakeRelease(&env, "/r");
  std::string json = ManifestToJson(m);
  auto parsed = ParseManifest(json, "manifest.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->config_json, m.config_json);
  EXPECT_EQ(parsed->counts_json, m.counts_json);
  EXPECT_EQ(parsed->split("train")->shards[0].bin.xxh3_128, m.splits["train"].shards[0].bin.xxh3_128);
  EXPECT_EQ(parsed->split("validation")->samples, 0u);
  ASSERT_TRUE(parsed->split("train")->documents_file.has_value());
  EXPECT_EQ(parsed->split("train")->documents_file->tokens, 7u);
  EXPECT_EQ(parsed->split("train")->documents_file->eod_appended, 1u);
  EXPECT_FALSE(parsed->split("validation")->documents_file.has_value());
  // The document files are part of the release id.
  Manifest other = *parsed;
  other.splits["train"].documents_file->bin.xxh3_128 = Hash128Of("x");
  EXPECT_NE(ComputeReleaseId(other), parsed->release_id);
  other.splits["train"].documents_file.reset();
  EXPECT_NE(ComputeReleaseId(other), parsed->release_id);
  EXPECT_EQ(ManifestToJson(*parsed), json);
  EXPECT_EQ(json.find("\"format\": \"grist-release\""), 4u);
}

TEST(ManifestTest, ReleaseOpensAndReadsSamples) {
  MemEnv env;
  MakeRelease(&env, "/r");
  auto r = Release::Open(&env, "/r", {true});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->shards("train").size(), 1u);
  EXPECT_EQ((*r)->shards("validation").size(), 0u);
  EXPECT_EQ((*r)->shards("nope").size(), 0u);
  auto s = (*r)->OpenShard("train", 0);
  ASSERT_TRUE(s.ok()) << s.status();
  SampleView v = (*s)->sample(1);
  EXPECT_EQ(v.token(1), 9);
  EXPECT_EQ(v.segments.size(), 2u);
  EXPECT_EQ((*r)->OpenShard("train", 1).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ((*r)->TokenizerPath(), "/r/tokenizer.model");
}

TEST(ManifestTest, NoManifestIsNotARelease) {
  MemEnv env;
  ASSERT_TRUE(env.CreateDirs("/empty").ok());
  auto r = Release::Open(&env, "/empty");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(std::string(r.status().message()).find("not a release"), std::string::npos);
}

TEST(ManifestTest, PathTraversalIsRejected) {
  MemEnv env;
  Manifest m = MakeRelease(&env, "/r");
  std::string json = ManifestToJson(m);
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"\"name\": \"shards/train-00000\"", "\"name\": \"../outside\""},
           {"\"path\": \"shards/train-00000.bin\"", "\"path\": \"../../etc/passwd\""},
           {"\"path\": \"shards/train-00000.idx\"", "\"path\": \"/etc/passwd\""},
           {"\"path\": \"tokenizer.model\"", "\"path\": \"../tokenizer.model\""},
           {"\"name\": \"documents/train\"", "\"name\": \"../documents/train\""},
           {"\"path\": \"documents/train.bin\"", "\"path\": \"/documents/train.bin\""}}) {
    std::string bad = absl::StrReplaceAll(json, {{from, to}});
    ASSERT_NE(bad, json);
    auto p = ParseManifest(bad, "m.json");
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << to << p.status();
    EXPECT_NE(std::string(p.status().message()).find("unsafe path"), std::string::npos);
  }
}

TEST(ManifestTest, TamperedOrMalformedManifestsAreRejected) {
  MemEnv env;
  Manifest m = MakeRelease(&env, "/r");
  std::string json = ManifestToJson(m);
  struct Case {
    std::string from, to, field;
  };
  std::vector<Case> cases = {
      {"\"seed\":7", "\"seed\":8", "config_xxh3_128"},
      {"\"samples\": 2,\n      \"tokens\": 8", "\"samples\": 3,\n      \"tokens\": 8", "splits.train.samples"},
      {"\"sample_tokens\": 4", "\"sample_tokens\": 5", "sample_tokens"},
      {"\"seq_len\": 3", "\"seq_len\": 0", "seq_len"},
      {"\"token_dtype\": \"uint16\"", "\"token_dtype\": \"float\"", "token_dtype"},
      {"\"format_version\": 1", "\"format_version\": \"1\"", "format_version"},
      {"\"release_id\": \"", "\"release_id\": \"0", "release_id"},
      {"\"vocab_size\": 10", "\"vocab_size\": -1", "tokenizer.vocab_size"},
      {"\"eod_appended\": 1", "\"eod_appended\": 0", "splits.train.documents_file.tokens"},
      {"\"sequences\": 2", "\"sequences\": 3", "splits.train.documents_file.sequences"},
      {"\"path\": \"documents/train.idx\"", "\"path\": \"documents/x.idx\"",
       "splits.train.documents_file"},
      {"\"bytes\": 14", "\"bytes\": 16", "splits.train.documents_file.bin.bytes"},
  };
  for (const Case& c : cases) {
    std::string bad = absl::StrReplaceAll(json, {{c.from, c.to}});
    ASSERT_NE(bad, json) << c.from;
    auto p = ParseManifest(bad, "m.json");
    EXPECT_FALSE(p.ok()) << c.field;
    EXPECT_NE(std::string(p.status().message()).find(c.field), std::string::npos) << p.status();
  }
  EXPECT_EQ(ParseManifest("{\"format\": ", "m.json").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(ParseManifest("[]", "m.json").status().code(), absl::StatusCode::kDataLoss);
  std::string v2 = absl::StrReplaceAll(json, {{"\"format_version\": 1", "\"format_version\": 2"}});
  EXPECT_EQ(ParseManifest(v2, "m.json").status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace grist::shard
