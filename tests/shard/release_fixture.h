// A small complete release, written with shard/'s own writers: the manifest tests' fixture
// (tests/shard/manifest_test.cc) and the manifest fuzz target's seed
// (fuzz/fuzz_release_manifest.cc).
// No gtest: the fuzz target includes it too.
#ifndef GRIST_TESTS_SHARD_RELEASE_FIXTURE_H_
#define GRIST_TESTS_SHARD_RELEASE_FIXTURE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "common/hash.h"
#include "common/status_macros.h"
#include "shard/indexed_dataset.h"
#include "shard/manifest.h"
#include "shard/shard.h"
#include "shard/shard_format.h"

namespace grist::testing {

// Writes into `dir` of `env` a release of one train shard holding 2 samples of 4 tokens (seq_len
// 3; samples {5, 6, 7, 2} and {8, 9, pad, pad}), its documents file ({5, 6, 7, 2} ends in EOS;
// {8, 9} gets its EOD appended), the tokenizer "model-bytes" and an empty validation split, with
// the manifest last. Returns the manifest written.
inline absl::StatusOr<shard::Manifest> WriteTestRelease(Env* env, const std::string& dir) {
  RETURN_IF_ERROR(env->CreateDirs(JoinPath(dir, "shards")));
  ASSIGN_OR_RETURN(auto w, shard::ShardWriter::Open(env, dir, "shards/train-00000", 4,
                                                    shard::TokenDtype::kUint16));
  RETURN_IF_ERROR(w->Append(std::vector<int32_t>{5, 6, 7, 2},
                            std::vector<uint32_t>{shard::SegmentWord(4, false)}));
  RETURN_IF_ERROR(w->Append(std::vector<int32_t>{8, 9, 0, 0},
                            std::vector<uint32_t>{shard::SegmentWord(2, false),
                                                  shard::SegmentWord(2, true)}));
  ASSIGN_OR_RETURN(shard::ShardInfo info, w->Finish());
  RETURN_IF_ERROR(WriteFileAtomic(env, JoinPath(dir, "tokenizer.model"), "model-bytes"));
  shard::Manifest m;
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
  shard::SplitInfo& train = m.splits["train"];
  train.samples = 2;
  train.tokens = 8;
  train.padding_tokens = 2;
  train.documents = 2;
  train.shards.push_back(info);
  RETURN_IF_ERROR(env->CreateDirs(JoinPath(dir, "documents")));
  ASSIGN_OR_RETURN(auto dw, shard::IndexedDatasetWriter::Open(env, JoinPath(dir, "documents/train"),
                                                       shard::TokenDtype::kUint16));
  RETURN_IF_ERROR(dw->Add(std::vector<int32_t>{5, 6, 7, 2}));
  RETURN_IF_ERROR(dw->Add(std::vector<int32_t>{8, 9, 2}));
  ASSIGN_OR_RETURN(auto di, dw->Finish());
  train.documents_file = shard::DocumentsFileInfo{"documents/train", 2, 7, 1,
                                           {"documents/train.bin", di.bin_bytes, di.bin_xxh3_128},
                                           {"documents/train.idx", di.idx_bytes, di.idx_xxh3_128}};
  m.splits["validation"];
  m.counts_json = R"({"tokenize":{"docs_in":2}})";
  m.release_id = shard::ComputeReleaseId(m);
  RETURN_IF_ERROR(shard::WriteManifest(env, dir, m));
  return m;
}

}  // namespace grist::testing

#endif  // GRIST_TESTS_SHARD_RELEASE_FIXTURE_H_
