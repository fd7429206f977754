#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/env.h"
#include "common/hash.h"
#include "common/status_macros.h"
#include "common/thread_pool.h"
#include "release/release.h"
#include "shard/indexed_dataset.h"
#include "shard/manifest.h"
#include "shard/shard_format.h"
#include "tokenize/tokenizer.h"

namespace grist::release {

absl::StatusOr<VerifyReport> VerifyRelease(Env* env, const std::string& dir, int threads) {
  ASSIGN_OR_RETURN(auto rel, shard::Release::Open(env, dir));
  const shard::Manifest& m = rel->manifest();
  // One check per file group (the tokenizer, each shard, each document file), each with a report
  // of its own; they run on the pool and their reports are joined in this order, so the report
  // does not depend on the thread count. An error Status (a file that cannot be read) from the
  // first check that has one, by this order.
  std::vector<std::function<absl::Status(VerifyReport&)>> checks;
  // Tokenizer: size, checksum, loads, vocabulary as recorded.
  checks.push_back([&](VerifyReport& rep) -> absl::Status {
    const std::string path = rel->TokenizerPath();
    auto bytes = ReadFileToString(env, path);
    if (!bytes.ok()) {
      rep.problems.push_back(absl::StrCat(path, ": ", std::string(bytes.status().message())));
    } else {
      ++rep.files_checked;
      rep.bytes_checked += bytes->size();
      if (bytes->size() != m.tokenizer.file.bytes) {
        rep.problems.push_back(absl::StrCat(path, ": size ", bytes->size(),
                                            " bytes, manifest says ", m.tokenizer.file.bytes));
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
    return absl::OkStatus();
  });
  // Shards: structure, sizes, checksums, token ids in the vocabulary.
  for (std::string_view split : {shard::kTrainSplit, shard::kValidationSplit}) {
    const std::vector<shard::ShardInfo>* list = &rel->shards(split);
    for (size_t i = 0; i < list->size(); ++i) {
      checks.push_back([&, split, i, list](VerifyReport& rep) -> absl::Status {
        const std::vector<shard::ShardInfo>& shards = *list;
        auto r = rel->OpenShard(split, i);
        if (!r.ok()) {
          // Name the file when the reader's message does not start with one.
          std::string msg(r.status().message());
          if (msg.find(shards[i].name) == std::string::npos) msg = shards[i].name + ": " + msg;
          rep.problems.push_back(msg);
          return absl::OkStatus();
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
        return absl::OkStatus();
      });
    }
  }
  // Megatron document files: structure and size (the reader), checksums, counts as recorded, ids
  // in the vocabulary, every sequence ending in EOD.
  for (std::string_view split : {shard::kTrainSplit, shard::kValidationSplit}) {
    if (m.split(split) == nullptr) continue;
    checks.push_back([&, split](VerifyReport& rep) -> absl::Status {
      const shard::SplitInfo* s = m.split(split);
      if (!s->documents_file) {
        if (s->tokens > s->padding_tokens) {
          rep.problems.push_back(absl::StrCat(dir, ": split '", std::string(split),
                                              "' has documents but no Megatron document file "
                                              "(documents_file)"));
        }
        return absl::OkStatus();
      }
      const shard::DocumentsFileInfo& d = *s->documents_file;
      const std::string prefix = JoinPath(dir, d.name);
      bool sums_ok = true;
      for (const shard::FileInfo* f : {&d.bin, &d.idx}) {
        auto h = HashFile128(env, JoinPath(dir, f->path));
        if (!h.ok()) {
          rep.problems.push_back(absl::StrCat(JoinPath(dir, f->path), ": ",
                                              std::string(h.status().message())));
          sums_ok = false;
          continue;
        }
        ++rep.files_checked;
        rep.bytes_checked += f->bytes;
        if (*h != f->xxh3_128) {
          rep.problems.push_back(absl::StrCat(JoinPath(dir, f->path), ": XXH3-128 ", h->ToHex(),
                                              " does not match the manifest's ",
                                              f->xxh3_128.ToHex()));
          sums_ok = false;
        }
      }
      if (!sums_ok) return absl::OkStatus();
      auto r = shard::IndexedDatasetReader::Open(env, prefix);
      if (!r.ok()) {
        rep.problems.push_back(std::string(r.status().message()));
        return absl::OkStatus();
      }
      const shard::IndexedDatasetReader& dr = **r;
      if (dr.dtype() != m.token_dtype || dr.sequences() != d.sequences || dr.tokens() != d.tokens) {
        rep.problems.push_back(absl::StrCat(
            prefix, ".idx: ", dr.sequences(), " sequences of ", dr.tokens(), " ",
            std::string(shard::TokenDtypeName(dr.dtype())), " tokens, manifest says ", d.sequences,
            " of ", d.tokens, " ", std::string(shard::TokenDtypeName(m.token_dtype))));
        return absl::OkStatus();
      }
      uint64_t bad = 0, no_eod = 0;
      std::vector<int32_t> seq;
      for (uint64_t k = 0; k < dr.sequences(); ++k) {
        seq.clear();
        dr.Read(k, &seq);
        for (int32_t t : seq) {
          if (t < 0 || static_cast<uint64_t>(t) >= m.tokenizer.vocab_size) ++bad;
        }
        if (seq.empty() || (m.tokenizer.eos_id >= 0 && seq.back() != m.tokenizer.eos_id)) ++no_eod;
      }
      if (bad > 0) {
        rep.problems.push_back(
            absl::StrCat(prefix, ".bin: ", bad, " token ids outside the vocabulary"));
      }
      if (no_eod > 0) {
        rep.problems.push_back(absl::StrCat(prefix, ".bin: ", no_eod,
                                            " sequences do not end with EOD (eos_id ",
                                            m.tokenizer.eos_id, ")"));
      }
      return absl::OkStatus();
    });
  }
  std::vector<VerifyReport> parts(checks.size());
  RETURN_IF_ERROR(ParallelForThreads(threads, checks.size(),
                                     [&](size_t i) { return checks[i](parts[i]); }));
  VerifyReport rep;
  for (VerifyReport& p : parts) {
    rep.files_checked += p.files_checked;
    rep.bytes_checked += p.bytes_checked;
    for (std::string& problem : p.problems) rep.problems.push_back(std::move(problem));
  }
  return rep;
}

absl::StatusOr<std::string> MegatronArguments(Env* env, const std::string& dir) {
  ASSIGN_OR_RETURN(auto rel, shard::Release::Open(env, dir));
  const shard::Manifest& m = rel->manifest();
  std::error_code ec;
  std::string abs = std::filesystem::absolute(dir, ec).lexically_normal().string();
  if (ec) abs = dir;
  while (abs.size() > 1 && abs.back() == '/') abs.pop_back();
  auto path_of = [&](std::string_view split) -> std::string {
    const shard::SplitInfo* s = m.split(split);
    return s != nullptr && s->documents_file ? JoinPath(abs, s->documents_file->name) : "";
  };
  const std::string train = path_of(shard::kTrainSplit), valid = path_of(shard::kValidationSplit);
  if (train.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(dir, ": no Megatron document file for split 'train' (an empty split, or a "
                          "release built before grist wrote them)"));
  }
  std::string out;
  absl::StrAppendFormat(&out,
                        "# Megatron-LM arguments for release %s %s (docs/formats/release.md,\n"
                        "# \"What Megatron reads\"). One sequence per document, ending in EOD.\n",
                        m.release_version, m.release_id);
  absl::StrAppendFormat(&out, "--data-path %s --split 100,0,0\n", train);
  if (!valid.empty()) {
    absl::StrAppendFormat(&out,
                          "# or grist's own validation split (instead of --data-path/--split):\n"
                          "# --train-data-path %s --valid-data-path %s\n",
                          train, valid);
  }
  absl::StrAppendFormat(&out,
                        "--seq-length %d --tokenizer-type GPTSentencePieceTokenizer "
                        "--tokenizer-model %s\n",
                        m.seq_len, JoinPath(abs, m.tokenizer.file.path));
  return out;
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
