#include "loader/synthetic.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/env.h"
#include "common/hash.h"
#include "common/rng.h"
#include "common/status_macros.h"
#include "shard/manifest.h"
#include "shard/shard_format.h"

namespace grist::loader {
namespace {

constexpr int32_t kPadId = 0;
constexpr int32_t kEosId = 2;

absl::Status WriteSplit(Env* env, const std::string& dir, const std::string& split, uint64_t count,
                        const SyntheticReleaseOptions& o, Rng* rng, shard::SplitInfo* out) {
  const uint32_t st = o.seq_len + 1;
  const shard::TokenDtype dtype = shard::DtypeForVocab(o.vocab_size);
  std::vector<int32_t> tokens(st);
  std::vector<uint32_t> segs;
  uint64_t doc_left = 0;  // tokens left of the current document (continues into the next sample)
  uint64_t written = 0;
  for (int shard_no = 0; written < count; ++shard_no) {
    const std::string name = absl::StrFormat("shards/%s-%05d", split, shard_no);
    ASSIGN_OR_RETURN(auto w, shard::ShardWriter::Open(env, dir, name, st, dtype));
    const uint64_t n = std::min(o.samples_per_shard, count - written);
    for (uint64_t k = 0; k < n; ++k) {
      segs.clear();
      uint32_t pad = 0;
      if (rng->UniformDouble() < o.padding_probability) {
        pad = 1 + static_cast<uint32_t>(rng->Uniform(std::max<uint32_t>(st / 4, 1)));
      }
      uint32_t pos = 0;
      while (pos < st - pad) {
        if (doc_left == 0) doc_left = 1 + rng->Uniform(2ull * o.mean_document_tokens);
        uint32_t len = static_cast<uint32_t>(std::min<uint64_t>(doc_left, st - pad - pos));
        for (uint32_t j = 0; j < len; ++j) {
          tokens[pos + j] = (doc_left - j == 1)
                                ? kEosId
                                : 3 + static_cast<int32_t>(rng->Uniform(o.vocab_size - 3));
        }
        segs.push_back(shard::SegmentWord(len, false));
        pos += len;
        doc_left -= len;
      }
      if (pad) {
        for (uint32_t j = pos; j < st; ++j) tokens[j] = kPadId;
        segs.push_back(shard::SegmentWord(pad, true));
        doc_left = 0;  // bestfit-like: a padded sample ends its document
      }
      RETURN_IF_ERROR(w->Append(tokens, segs));
    }
    ASSIGN_OR_RETURN(shard::ShardInfo info, w->Finish());
    info.first_sample = written;
    out->padding_tokens += info.padding_tokens;
    out->shards.push_back(info);
    written += n;
  }
  out->samples = count;
  out->tokens = count * st;
  out->documents = count;
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteSyntheticRelease(Env* env, const std::string& dir,
                                   const SyntheticReleaseOptions& o) {
  if (o.samples == 0 || o.seq_len == 0 || o.samples_per_shard == 0 || o.vocab_size < 4 ||
      o.mean_document_tokens == 0) {
    return absl::InvalidArgumentError("synthetic release: sizes must be positive (vocab >= 4)");
  }
  if (env->FileExists(JoinPath(dir, std::string(shard::kManifestName)))) {
    return absl::AlreadyExistsError(absl::StrCat(dir, ": already holds a release"));
  }
  RETURN_IF_ERROR(env->CreateDirs(JoinPath(dir, std::string(shard::kShardsDir))));
  const std::string model = "grist synthetic release: no tokenizer";
  RETURN_IF_ERROR(WriteFileAtomic(env, JoinPath(dir, std::string(shard::kTokenizerName)), model));
  shard::Manifest m;
  m.release_version = "synthetic";
  m.grist_version = "synthetic";
  m.config_json = absl::StrCat("{\"synthetic\":{\"samples\":", o.samples, ",\"seq_len\":", o.seq_len,
                               ",\"vocab_size\":", o.vocab_size, "},\"seed\":", o.seed, "}");
  m.config_xxh3_128 = Hash128Of(m.config_json);
  m.tokenizer.file = {std::string(shard::kTokenizerName), model.size(), Hash128Of(model)};
  m.tokenizer.vocab_size = o.vocab_size;
  m.tokenizer.bos_id = 1;
  m.tokenizer.eos_id = kEosId;
  m.tokenizer.pad_id = kPadId;
  m.tokenizer.model_type = "synthetic";
  m.seq_len = o.seq_len;
  m.sample_tokens = o.seq_len + 1;
  m.token_dtype = shard::DtypeForVocab(o.vocab_size);
  m.seed = o.seed;
  m.packing = "bestfit";
  Rng rng(o.seed);
  RETURN_IF_ERROR(WriteSplit(env, dir, "train", o.samples, o, &rng, &m.splits["train"]));
  if (o.validation_samples > 0) {
    RETURN_IF_ERROR(
        WriteSplit(env, dir, "validation", o.validation_samples, o, &rng, &m.splits["validation"]));
  } else {
    m.splits["validation"];
  }
  m.release_id = shard::ComputeReleaseId(m);
  return shard::WriteManifest(env, dir, m);
}

}  // namespace grist::loader
