#include "shard/manifest.h"

#include <gtest/gtest.h>

#include <vector>

#include "absl/strings/str_replace.h"
#include "common/env.h"
#include "shard/indexed_dataset.h"
#include "shard/shard_format.h"
#include "tests/test_util.h"

namespace grist::shard {
namespace {

using grist::testing::TempDir;

// A complete one-shard release in `dir`: 2 train samples of 4 tokens (no validation samples).
Manifest MakeRelease(Env* env, const std::string& dir) {
  EXPECT_TRUE(env->CreateDirs(JoinPath(dir, "shards")).ok());
  auto w = ShardWriter::Open(env, dir, "shards/train-00000", 4, TokenDtype::kUint16);
  EXPECT_TRUE(w.ok());
  std::vector<int32_t> t = {5, 6, 7, 2};
  EXPECT_TRUE((*w)->Append(t, std::vector<uint32_t>{SegmentWord(4, false)}).ok());
  std::vector<int32_t> u = {8, 9, 0, 0};
  EXPECT_TRUE((*w)->Append(u, std::vector<uint32_t>{SegmentWord(2, false), SegmentWord(2, true)})
                  .ok());
  auto info = (*w)->Finish();
  EXPECT_TRUE(info.ok());
  EXPECT_TRUE(WriteFileAtomic(env, JoinPath(dir, "tokenizer.model"), "model-bytes").ok());
  Manifest m;
  m.release_version = "1.0";
  m.grist_version = "0.1.0";
  m.config_json = R"({"pack":{"seq_len":3},"seed":7})";
  m.config_xxh3_128 = Hash128Of(m.config_json);
  m.inputs.push_back({"corpus/a.jsonl", 123, Hash128Of("a")});
  m.tokenizer.file = {"tokenizer.model", 11, Hash128Of("model-bytes")};
  m.tokenizer.vocab_size = 10;
  m.tokenizer.bos_id = 1;
  m.tokenizer.eos_id = 2;
  m.tokenizer.pad_id = 0;
  m.tokenizer.model_type = "bpe";
  m.seq_len = 3;
  m.sample_tokens = 4;
  m.seed = 7;
  m.packing = "bestfit";
  SplitInfo& train = m.splits["train"];
  train.samples = 2;
  train.tokens = 8;
  train.padding_tokens = 2;
  train.documents = 2;
  train.shards.push_back(*info);
  // The documents file: {5, 6, 7, 2} ends in EOS; {8, 9} gets its EOD appended.
  EXPECT_TRUE(env->CreateDirs(JoinPath(dir, "documents")).ok());
  auto dw = IndexedDatasetWriter::Open(env, JoinPath(dir, "documents/train"), TokenDtype::kUint16);
  EXPECT_TRUE(dw.ok());
  EXPECT_TRUE((*dw)->Add(std::vector<int32_t>{5, 6, 7, 2}).ok());
  EXPECT_TRUE((*dw)->Add(std::vector<int32_t>{8, 9, 2}).ok());
  auto di = (*dw)->Finish();
  EXPECT_TRUE(di.ok());
  train.documents_file = DocumentsFileInfo{"documents/train", 2, 7, 1,
                                           {"documents/train.bin", di->bin_bytes, di->bin_xxh3_128},
                                           {"documents/train.idx", di->idx_bytes, di->idx_xxh3_128}};
  m.splits["validation"];
  m.counts_json = R"({"tokenize":{"docs_in":2}})";
  m.release_id = ComputeReleaseId(m);
  EXPECT_TRUE(WriteManifest(env, dir, m).ok());
  return m;
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
