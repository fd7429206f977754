#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/env.h"
#include "common/hash.h"
#include "common/status_macros.h"
#include "release/release.h"
#include "shard/manifest.h"
#include "shard/shard_format.h"
#include "tokenize/tokenizer.h"

namespace grist::release {

absl::StatusOr<VerifyReport> VerifyRelease(Env* env, const std::string& dir) {
  ASSIGN_OR_RETURN(auto rel, shard::Release::Open(env, dir));
  const shard::Manifest& m = rel->manifest();
  VerifyReport rep;
  // Tokenizer: size, checksum, loads, vocabulary as recorded.
  {
    const std::string path = rel->TokenizerPath();
    auto bytes = ReadFileToString(env, path);
    if (!bytes.ok()) {
      rep.problems.push_back(absl::StrCat(path, ": ", std::string(bytes.status().message())));
    } else {
      ++rep.files_checked;
      rep.bytes_checked += bytes->size();
      if (bytes->size() != m.tokenizer.file.bytes) {
        rep.problems.push_back(absl::StrCat(path, ": size ", bytes->size(), " bytes, manifest says ",
                                            m.tokenizer.file.bytes));
      } else if (Hash128Of(*bytes) != m.tokenizer.file.xxh3_128) {
        rep.problems.push_back(absl::StrCat(path, ": XXH3-128 mismatch"));
      } else {
        auto tok = tokenize::Tokenizer::FromBytes(*bytes, path);
        if (!tok.ok()) {
          rep.problems.push_back(std::string(tok.status().message()));
        } else if (static_cast<uint64_t>((*tok)->vocab_size()) != m.tokenizer.vocab_size) {
          rep.problems.push_back(absl::StrCat(path, ": vocabulary of ", (*tok)->vocab_size(),
                                              ", manifest says ", m.tokenizer.vocab_size));
        }
      }
    }
  }
  // Shards: structure, sizes, checksums, token ids in the vocabulary.
  for (std::string_view split : {shard::kTrainSplit, shard::kValidationSplit}) {
    const auto& shards = rel->shards(split);
    for (size_t i = 0; i < shards.size(); ++i) {
      auto r = rel->OpenShard(split, i);
      if (!r.ok()) {
        // Name the file when the reader's message does not start with one.
        std::string msg(r.status().message());
        if (msg.find(shards[i].name) == std::string::npos) msg = shards[i].name + ": " + msg;
        rep.problems.push_back(msg);
        continue;
      }
      const shard::ShardReader* sr = *r;
      for (const shard::FileInfo* f : {&shards[i].bin, &shards[i].idx, &shards[i].seg}) {
        ASSIGN_OR_RETURN(Hash128 h, HashFile128(env, JoinPath(dir, f->path)));
        ++rep.files_checked;
        rep.bytes_checked += f->bytes;
        if (h != f->xxh3_128) {
          rep.problems.push_back(absl::StrCat(JoinPath(dir, f->path), ": XXH3-128 ", h.ToHex(),
                                              " does not match the manifest's ",
                                              f->xxh3_128.ToHex()));
        }
      }
      uint64_t bad = 0;
      for (uint64_t k = 0; k < sr->samples(); ++k) {
        shard::SampleView v = sr->sample(k);
        for (uint32_t j = 0; j < v.sample_tokens; ++j) {
          int32_t t = v.token(j);
          if (t < 0 || static_cast<uint64_t>(t) >= m.tokenizer.vocab_size) ++bad;
        }
      }
      if (bad > 0) {
        rep.problems.push_back(absl::StrCat(JoinPath(dir, shards[i].bin.path), ": ", bad,
                                            " token ids outside the vocabulary"));
      }
    }
  }
  return rep;
}

absl::StatusOr<std::string> InspectRelease(Env* env, const std::string& dir,
                                           const InspectOptions& o) {
  ASSIGN_OR_RETURN(auto rel, shard::Release::Open(env, dir));
  const shard::Manifest& m = rel->manifest();
  std::string out;
  absl::StrAppendFormat(&out, "release %s (format %d), id %s, built by grist %s\n",
                        m.release_version, m.format_version, m.release_id, m.grist_version);
  absl::StrAppendFormat(&out, "tokenizer: %s, %d pieces, bos %d eos %d pad %d\n",
                        m.tokenizer.model_type, m.tokenizer.vocab_size, m.tokenizer.bos_id,
                        m.tokenizer.eos_id, m.tokenizer.pad_id);
  absl::StrAppendFormat(&out, "seq_len %d (samples of %d %s tokens), packing %s, seed %d\n",
                        m.seq_len, m.sample_tokens, std::string(shard::TokenDtypeName(m.token_dtype)),
                        m.packing, m.seed);
  absl::StrAppendFormat(&out, "inputs: %d files\n", m.inputs.size());
  for (const auto& [name, s] : m.splits) {
    absl::StrAppendFormat(&out,
                          "split %-10s %8d samples %12d tokens %5.2f%% padding %8d documents %d "
                          "shards\n",
                          name, s.samples, s.tokens,
                          s.tokens ? 100.0 * s.padding_tokens / s.tokens : 0.0, s.documents,
                          s.shards.size());
  }
  absl::StrAppendFormat(&out, "counts: %s\n", m.counts_json);
  // Histograms over the chosen split.
  std::map<int, uint64_t> seg_hist;  // log2 bucket of document-segment length
  std::map<int32_t, uint64_t> freq;
  uint64_t segs = 0;
  const auto& shards = rel->shards(o.split);
  for (size_t i = 0; i < shards.size(); ++i) {
    ASSIGN_OR_RETURN(const shard::ShardReader* r, rel->OpenShard(o.split, i));
    for (uint64_t k = 0; k < r->samples(); ++k) {
      shard::SampleView v = r->sample(k);
      size_t pos = 0;
      for (uint32_t w : v.segments) {
        uint32_t len = shard::SegmentLength(w);
        if (!shard::SegmentIsPadding(w)) {
          int b = 0;
          while ((2u << b) <= len) ++b;
          ++seg_hist[b];
          ++segs;
          for (uint32_t j = 0; j < len; ++j) ++freq[v.token(pos + j)];
        }
        pos += len;
      }
    }
  }
  absl::StrAppendFormat(&out, "\n%s: document-segment lengths (%d segments)\n", o.split, segs);
  uint64_t mx = 1;
  for (auto& [b, c] : seg_hist) mx = std::max(mx, c);
  for (auto& [b, c] : seg_hist) {
    absl::StrAppendFormat(&out, "  [%7d, %7d) %8d %s\n", 1u << b, 2u << b, c,
                          std::string(static_cast<size_t>(40.0 * c / mx), '#'));
  }
  std::vector<std::pair<uint64_t, int32_t>> top;
  for (auto& [t, c] : freq) top.push_back({c, t});
  std::sort(top.begin(), top.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  ASSIGN_OR_RETURN(auto tok, tokenize::Tokenizer::Load(env, rel->TokenizerPath()));
  absl::StrAppendFormat(&out, "\n%s: most frequent tokens\n", o.split);
  for (int i = 0; i < o.top_tokens && i < static_cast<int>(top.size()); ++i) {
    auto piece = tok->Decode({top[i].second});
    absl::StrAppendFormat(&out, "  %6d %-16s %d\n", top[i].second,
                          absl::StrCat("'", piece.ok() ? *piece : "?", "'"), top[i].first);
  }
  if (o.sample >= 0) {
    const shard::SplitInfo* s = m.split(o.split);
    if (s == nullptr || static_cast<uint64_t>(o.sample) >= s->samples) {
      return absl::OutOfRangeError(absl::StrCat("split '", o.split, "' has ",
                                                s ? s->samples : 0, " samples, no sample ",
                                                o.sample));
    }
    size_t si = 0;
    while (shards[si].first_sample + shards[si].samples <= static_cast<uint64_t>(o.sample)) ++si;
    ASSIGN_OR_RETURN(const shard::ShardReader* r, rel->OpenShard(o.split, si));
    shard::SampleView v = r->sample(o.sample - shards[si].first_sample);
    absl::StrAppendFormat(&out, "\n%s sample %d (%s, sample %d), segments:", o.split, o.sample,
                          shards[si].name, o.sample - shards[si].first_sample);
    for (uint32_t w : v.segments) {
      absl::StrAppendFormat(&out, " %d%s", shard::SegmentLength(w),
                            shard::SegmentIsPadding(w) ? "(pad)" : "");
    }
    out += "\n";
    size_t pos = 0;
    for (uint32_t w : v.segments) {
      uint32_t len = shard::SegmentLength(w);
      if (!shard::SegmentIsPadding(w)) {
        std::vector<int> ids;
        for (uint32_t j = 0; j < len; ++j) ids.push_back(v.token(pos + j));
        ASSIGN_OR_RETURN(std::string text, tok->Decode(ids));
        absl::StrAppendFormat(&out, "--- segment of %d tokens ---\n%s\n", len, text);
      }
      pos += len;
    }
  }
  return out;
}

}  // namespace grist::release
