#include <simdjson.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <functional>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "clean/run_clean.h"
#include "common/config.h"
#include "common/crash_point.h"
#include "common/env.h"
#include "common/hash.h"
#include "common/json_writer.h"
#include "common/progress.h"
#include "common/records.h"
#include "common/status_macros.h"
#include "common/sysinfo.h"
#include "common/version.h"
#include "dedup/dedup.h"
#include "pack/pack.h"
#include "release/release.h"
#include "shard/indexed_dataset.h"
#include "shard/manifest.h"
#include "shard/shard_format.h"
#include "shard/split_writer.h"
#include "tokenize/encode.h"
#include "tokenize/indexed_dataset.h"
#include "tokenize/tokenizer.h"

namespace grist::release {
namespace {

struct BuildConfig {
  Config config;
  std::string release_version;
  uint64_t seed = 0;
  std::vector<std::string> inputs;
  bool clean_enabled = true;
  clean::CleanOptions clean;
  bool dedup_enabled = true;
  dedup::DedupOptions dedup;
  std::string tokenizer_model;  // pretrained model path; empty = train
  tokenize::TrainOptions train;
  tokenize::EncodeStageOptions encode;
  pack::PackOptions pack;
  double validation_fraction = 0.01;
  uint64_t shard_max_bytes = 256ull << 20;
  std::string canonical_json;
  Hash128 hash;
};

absl::Status KeyError(const Config& c, std::string_view key, std::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("config ", c.source(), ": key '", std::string(key), "': ", std::string(what)));
}

absl::StatusOr<BuildConfig> ReadBuildConfig(Env* env, const std::string& path) {
  BuildConfig b;
  ASSIGN_OR_RETURN(b.config, Config::FromFile(env, path));
  const Config& c = b.config;
  ASSIGN_OR_RETURN(b.release_version, c.RequireString("release.version"));
  ASSIGN_OR_RETURN(int64_t seed, c.RequireInt("seed"));
  if (seed < 0) return KeyError(c, "seed", "must be >= 0");
  b.seed = static_cast<uint64_t>(seed);
  ASSIGN_OR_RETURN(b.inputs, c.RequireStringList("inputs.paths"));
  if (b.inputs.empty()) return KeyError(c, "inputs.paths", "must name at least one input");
  ASSIGN_OR_RETURN(b.clean_enabled, c.GetBool("clean.enabled", true));
  if (b.clean_enabled) {
    ASSIGN_OR_RETURN(b.clean, clean::CleanOptions::FromConfig(c));
  }
  ASSIGN_OR_RETURN(b.dedup_enabled, c.GetBool("dedup.enabled", true));
  if (c.Has("dedup.mode")) {  // the switch of earlier configs: "none" turns dedup off
    ASSIGN_OR_RETURN(std::string mode, c.GetString("dedup.mode", ""));
    if (mode != "none") return KeyError(c, "dedup.mode", "only \"none\" (use dedup.enabled)");
    b.dedup_enabled = false;
  }
  if (b.dedup_enabled) {
    ASSIGN_OR_RETURN(b.dedup, dedup::DedupOptions::FromConfig(c));
    RETURN_IF_ERROR(b.dedup.Validate());
  }
  ASSIGN_OR_RETURN(b.tokenizer_model, c.GetString("tokenizer.model", ""));
  if (b.tokenizer_model.empty()) {
    ASSIGN_OR_RETURN(b.train, tokenize::TrainOptions::FromConfig(c));
  }
  ASSIGN_OR_RETURN(b.encode, tokenize::EncodeStageOptions::FromConfig(c));
  ASSIGN_OR_RETURN(b.pack, pack::PackOptions::FromConfig(c));
  ASSIGN_OR_RETURN(b.validation_fraction, c.GetDouble("split.validation_fraction", 0.01));
  if (!(b.validation_fraction >= 0 && b.validation_fraction < 1)) {
    return KeyError(c, "split.validation_fraction", "must be in [0, 1)");
  }
  ASSIGN_OR_RETURN(int64_t smb, c.GetInt("shard.max_bytes", 256ll << 20));
  if (smb <= 0) return KeyError(c, "shard.max_bytes", "must be positive");
  b.shard_max_bytes = static_cast<uint64_t>(smb);
  std::vector<std::string> unused = c.UnusedKeys();
  if (!unused.empty()) {
    return KeyError(c, unused.front(),
                    "unknown key (misspelled, or not used with these settings)");
  }
  b.canonical_json = c.ResolvedJson(0);
  b.hash = Hash128Of(b.canonical_json);
  return b;
}

// ---- Stage completion records ----

struct StageRecord {
  StageSummary summary;
  std::string report_json = "{}";
  std::string outputs_json = "[]";  // StageOutputs() of the completed stage
};

// Where a stage leaves its outputs, relative to the work folder.
std::string StageOutputRoot(const std::string& stage) {
  if (stage == "tokenizer") return "tokenizer.model";
  if (stage == "tokenize") return "tokens";
  return stage;  // clean, dedup: their kept parts (and whatever else they leave in the folder)
}

void ListFilesUnder(Env* env, const std::string& base, const std::string& rel,
                    std::vector<std::string>* out) {
  const std::string path = rel.empty() ? base : JoinPath(base, rel);
  if (!env->IsDirectory(path)) {
    if (env->FileExists(path)) out->push_back(rel);
    return;
  }
  auto names = env->ListDir(path);
  if (!names.ok()) return;
  for (const std::string& n : *names) ListFilesUnder(env, base, rel.empty() ? n : JoinPath(rel, n), out);
}

// One file a stage left under WORK/StageOutputRoot(stage).
struct StageOutput {
  std::string path;  // relative to the work folder
  uint64_t bytes = 0;
  std::string xxh3_128;
  bool operator==(const StageOutput&) const = default;
};

// Every file a stage left under WORK/StageOutputRoot(stage), in path order, with its size and
// XXH3-128: recorded with the stage, checked on resume.
absl::StatusOr<std::vector<StageOutput>> StageOutputs(Env* env, const std::string& work,
                                                      const std::string& stage) {
  const std::string root = JoinPath(work, StageOutputRoot(stage));
  std::vector<std::string> rels;
  ListFilesUnder(env, root, "", &rels);
  std::sort(rels.begin(), rels.end());
  std::vector<StageOutput> out;
  for (const std::string& rel : rels) {
    const std::string path = rel.empty() ? root : JoinPath(root, rel);
    StageOutput o;
    o.path = rel.empty() ? StageOutputRoot(stage) : JoinPath(StageOutputRoot(stage), rel);
    ASSIGN_OR_RETURN(o.bytes, env->GetFileSize(path));
    ASSIGN_OR_RETURN(Hash128 h, HashFile128(env, path));
    o.xxh3_128 = h.ToHex();
    out.push_back(std::move(o));
  }
  return out;
}

std::string StageOutputsJson(const std::vector<StageOutput>& outputs) {
  JsonWriter w(0);
  w.BeginArray();
  for (const StageOutput& o : outputs) {
    w.BeginObject().Field("path", o.path).Field("bytes", o.bytes).Field("xxh3_128", o.xxh3_128);
    w.EndObject();
  }
  w.EndArray();
  return w.Take();
}

// Why `now` differs from `recorded` (the first difference), empty when they are equal.
std::string OutputsDiffer(const std::vector<StageOutput>& recorded, const std::vector<StageOutput>& now) {
  std::map<std::string, const StageOutput*> have;
  for (const StageOutput& o : now) have[o.path] = &o;
  for (const StageOutput& o : recorded) {
    auto it = have.find(o.path);
    if (it == have.end()) return absl::StrCat(o.path, " is missing");
    if (it->second->bytes != o.bytes) {
      return absl::StrCat(o.path, " has ", it->second->bytes, " bytes, the record says ", o.bytes);
    }
    if (it->second->xxh3_128 != o.xxh3_128) return absl::StrCat(o.path, " does not match its checksum");
    have.erase(it);
  }
  if (!have.empty()) return absl::StrCat(have.begin()->first, " is not in the record");
  return "";
}

std::string RecordJson(const Hash128& config_hash, const StageRecord& r) {
  JsonWriter w(2);
  const StageSummary& s = r.summary;
  w.BeginObject();
  w.Field("config_xxh3_128", config_hash.ToHex()).Field("stage", s.name);
  w.Field("docs_in", s.docs_in).Field("docs_out", s.docs_out);
  w.Field("docs_rejected", s.docs_rejected).Field("docs_removed", s.docs_removed);
  w.Field("bytes_in", s.bytes_in).Field("tokens", s.tokens).Field("samples", s.samples);
  w.Field("seconds", s.seconds).Field("note", s.note).Field("report", r.report_json);
  w.Key("outputs").Raw(r.outputs_json);
  w.EndObject();
  return w.Take();
}

// The config hash a record names; nullopt when the record is missing or unreadable (a torn or
// damaged record is not another config's: only its stage runs again).
std::optional<std::string> RecordConfig(Env* env, const std::string& path) {
  auto text = ReadFileToString(env, path);
  if (!text.ok()) return std::nullopt;
  simdjson::dom::parser p;
  simdjson::dom::element e;
  simdjson::padded_string ps(*text);
  std::string_view h;
  if (p.parse(ps).get(e) != simdjson::SUCCESS || e["config_xxh3_128"].get(h) != simdjson::SUCCESS) {
    return std::nullopt;
  }
  return std::string(h);
}

// The stage's record when it completed under this config and its outputs (under `work`) are
// exactly as recorded; nullopt otherwise (missing, torn or damaged record, another config, an
// output missing, added, truncated or changed: the stage runs again, with a note on stderr when
// the record was there).
std::optional<StageRecord> LoadRecord(Env* env, const std::string& path, const Hash128& hash) {
  auto text = ReadFileToString(env, path);
  if (!text.ok()) return std::nullopt;
  const std::string work = DirName(DirName(path));
  auto damaged = [&](const std::string& why) -> std::optional<StageRecord> {
    std::fprintf(stderr, "build: %s: %s; the stage runs again\n", path.c_str(), why.c_str());
    return std::nullopt;
  };
  simdjson::dom::parser p;
  simdjson::dom::element e;
  simdjson::padded_string ps(*text);
  if (p.parse(ps).get(e) != simdjson::SUCCESS) return damaged("not a valid stage record");
  std::string_view h;
  if (e["config_xxh3_128"].get(h) != simdjson::SUCCESS) return damaged("no config hash");
  if (h != hash.ToHex()) return std::nullopt;
  StageRecord r;
  StageSummary& s = r.summary;
  std::string_view sv;
  if (e["stage"].get(sv) != simdjson::SUCCESS) return std::nullopt;
  s.name = std::string(sv);
  for (auto [k, dst] : {std::pair{"docs_in", &s.docs_in}, std::pair{"docs_out", &s.docs_out},
                        std::pair{"docs_rejected", &s.docs_rejected},
                        std::pair{"docs_removed", &s.docs_removed},
                        std::pair{"bytes_in", &s.bytes_in}, std::pair{"tokens", &s.tokens},
                        std::pair{"samples", &s.samples}}) {
    if (e[k].get(*dst) != simdjson::SUCCESS) return std::nullopt;
  }
  if (e["seconds"].get(s.seconds) != simdjson::SUCCESS) return std::nullopt;
  if (e["note"].get(sv) != simdjson::SUCCESS) return std::nullopt;
  s.note = std::string(sv);
  if (e["report"].get(sv) != simdjson::SUCCESS) return std::nullopt;
  r.report_json = std::string(sv);
  simdjson::dom::array outputs;
  if (e["outputs"].get(outputs) != simdjson::SUCCESS) return damaged("no output checksums");
  std::vector<StageOutput> recorded;
  for (simdjson::dom::element o : outputs) {
    StageOutput x;
    std::string_view pth, hx;
    if (o["path"].get(pth) != simdjson::SUCCESS || o["bytes"].get(x.bytes) != simdjson::SUCCESS ||
        o["xxh3_128"].get(hx) != simdjson::SUCCESS) {
      return damaged("a bad entry in 'outputs'");
    }
    x.path = std::string(pth);
    x.xxh3_128 = std::string(hx);
    recorded.push_back(std::move(x));
  }
  auto now = StageOutputs(env, work, s.name);
  if (!now.ok()) return damaged(std::string(now.status().message()));
  if (std::string why = OutputsDiffer(recorded, *now); !why.empty()) return damaged(why);
  r.outputs_json = StageOutputsJson(*now);
  s.resumed = true;
  return r;
}

// The document parts a stage left at the top level of `dir` (*.jsonl.zst), in name order.
absl::StatusOr<std::vector<std::string>> KeptParts(Env* env, const std::string& dir) {
  ASSIGN_OR_RETURN(std::vector<std::string> names, env->ListDir(dir));
  std::vector<std::string> out;
  const std::string ext = ".jsonl.zst";
  for (const std::string& n : names) {
    if (n.size() > ext.size() && n.compare(n.size() - ext.size(), ext.size(), ext) == 0 &&
        !env->IsDirectory(JoinPath(dir, n))) {
      out.push_back(JoinPath(dir, n));
    }
  }
  return out;
}

// Sums the per-task encode reports (tokens-TTTTT-of-NNNNN.json beside each part) into the report
// one task over all inputs would have written: counts add up, the longest document is the maximum.
absl::StatusOr<tokenize::EncodeReport> MergeEncodeReports(Env* env,
                                                          const std::vector<std::string>& parts) {
  tokenize::EncodeReport all;
  for (const std::string& prefix : parts) {
    ASSIGN_OR_RETURN(std::string text, ReadFileToString(env, prefix + ".json"));
    simdjson::dom::parser p;
    simdjson::dom::element e;
    simdjson::padded_string ps(text);
    if (p.parse(ps).get(e) != simdjson::SUCCESS) {
      return absl::DataLossError(absl::StrCat(prefix, ".json: not a valid encode report"));
    }
    uint64_t v[9];
    const char* keys[9] = {"docs_in", "docs_out", "docs_rejected", "docs_removed", "bytes_in",
                           "tokens", "rejected_malformed", "rejected_empty", "max_document_tokens"};
    for (int i = 0; i < 9; ++i) {
      if (e[keys[i]].get(v[i]) != simdjson::SUCCESS) {
        return absl::DataLossError(absl::StrCat(prefix, ".json: no '", keys[i], "'"));
      }
    }
    all.counts.docs_in += v[0];
    all.counts.docs_out += v[1];
    all.counts.docs_rejected += v[2];
    all.counts.docs_removed += v[3];
    all.counts.bytes_in += v[4];
    all.tokens += v[5];
    all.rejected_malformed += v[6];
    all.rejected_empty += v[7];
    all.max_document_tokens = std::max(all.max_document_tokens, v[8]);
    double seconds = 0;
    if (e["seconds"].get(seconds) == simdjson::SUCCESS) all.seconds = std::max(all.seconds, seconds);
  }
  return all;
}

std::string Now() {
  std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

// Appends a document to its split's Megatron document file (docs/formats/release.md,
// "documents/"): the document's tokens as packed, then EOS as Megatron's EOD unless the document
// already ends with it. Documents without tokens are not written. Opens the file at the first one.
absl::Status AddMegatronDocument(Env* env, const std::string& release_dir, const std::string& split,
                                 shard::TokenDtype dtype, int32_t eos_id,
                                 std::vector<int32_t>* doc,
                                 std::unique_ptr<shard::IndexedDatasetWriter>* writer,
                                 uint64_t* eod_appended) {
  if (doc->empty()) return absl::OkStatus();
  if (!*writer) {
    const std::string dir = JoinPath(release_dir, std::string(shard::kDocumentsDir));
    RETURN_IF_ERROR(env->CreateDirs(dir));
    ASSIGN_OR_RETURN(*writer, shard::IndexedDatasetWriter::Open(env, JoinPath(dir, split), dtype));
  }
  const bool append = eos_id >= 0 && doc->back() != eos_id;
  if (append) {
    doc->push_back(eos_id);
    ++*eod_appended;
  }
  absl::Status st = (*writer)->Add(*doc);
  if (append) doc->pop_back();
  return st;
}

// The pack+shard stage: packs the tokenized parts in `tokens_dir` into the release folder and
// publishes it (reports/, then manifest.json last).
absl::StatusOr<BuildReport> PackAndPublish(
    Env* env, const BuildOptions& opts, const BuildConfig& bc, tokenize::Tokenizer* tok,
    const std::string& tokens_dir, const std::vector<shard::FileInfo>& inputs,
    const std::optional<StageRecord>& clean_rec, const std::optional<StageRecord>& dedup_rec,
    const std::optional<StageRecord>& tok_rec, const std::optional<StageRecord>& enc_rec,
    const Stopwatch& total) {
  BuildReport report;
  report.output_dir = opts.output_dir;
  // ---- pack + shard (one stage: its output is the release itself) ----
  Stopwatch pack_sw;
  if (env->IsDirectory(opts.output_dir)) {
    ASSIGN_OR_RETURN(auto names, env->ListDir(opts.output_dir));
    bool ours = names.empty() || env->FileExists(JoinPath(opts.output_dir, "shards")) ||
                env->FileExists(JoinPath(opts.output_dir, std::string(shard::kManifestName)));
    if (!ours) {
      return absl::FailedPreconditionError(absl::StrCat(
          opts.output_dir, ": exists and is not a release; refusing to overwrite it"));
    }
  }
  RETURN_IF_ERROR(env->RemoveAll(opts.output_dir));
  RETURN_IF_ERROR(env->CreateDirs(JoinPath(opts.output_dir, std::string(shard::kShardsDir))));
  pack::PackOptions po = bc.pack;
  po.pad_id = tok->pad_id() >= 0 ? tok->pad_id() : (tok->eos_id() >= 0 ? tok->eos_id() : 0);
  const shard::TokenDtype dtype = shard::DtypeForVocab(static_cast<uint64_t>(tok->vocab_size()));
  const uint32_t st = po.sample_tokens();
  struct SplitState {
    std::string name;
    std::unique_ptr<shard::SplitWriter> writer;
    std::unique_ptr<pack::Packer> packer;
    uint64_t documents = 0;
    // The split's Megatron document file (documents/<split>), opened at its first document.
    std::unique_ptr<shard::IndexedDatasetWriter> docs;
    uint64_t eod_appended = 0;
  };
  SplitState splits[2];
  for (int i = 0; i < 2; ++i) {
    SplitState& s = splits[i];
    s.name = std::string(i == 0 ? shard::kTrainSplit : shard::kValidationSplit);
    s.writer = std::make_unique<shard::SplitWriter>(env, opts.output_dir, s.name, st, dtype,
                                                    bc.shard_max_bytes);
    shard::SplitWriter* w = s.writer.get();
    s.packer = std::make_unique<pack::Packer>(po, [w](const pack::PackedSample& p) {
      return w->Append(p.tokens, p.segments);
    });
  }
  ASSIGN_OR_RETURN(std::vector<std::string> parts, tokenize::ListTokenParts(env, tokens_dir));
  {
    Progress prog("pack", enc_rec->summary.tokens, Progress::Unit::kCount, !opts.run.progress);
    std::vector<int32_t> doc;
    for (const std::string& part : parts) {
      ASSIGN_OR_RETURN(auto reader, tokenize::IndexedDatasetReader::Open(env, part));
      for (uint64_t i = 0; i < reader->sequences(); ++i) {
        doc.clear();
        reader->Read(i, &doc);
        uint64_t h = Hash64(doc.data(), doc.size() * sizeof(int32_t), bc.seed);
        double u = static_cast<double>(h >> 11) * 0x1.0p-53;
        SplitState& s = splits[u < bc.validation_fraction ? 1 : 0];
        ++s.documents;
        RETURN_IF_ERROR(s.packer->Add(doc));
        RETURN_IF_ERROR(AddMegatronDocument(env, opts.output_dir, s.name, dtype, tok->eos_id(),
                                            &doc, &s.docs, &s.eod_appended));
        prog.Add(doc.size());
      }
    }
    prog.Finish();
  }
  shard::Manifest m;
  m.release_version = bc.release_version;
  m.grist_version = GRIST_VERSION;
  m.config_json = bc.canonical_json;
  m.config_xxh3_128 = bc.hash;
  m.inputs = inputs;
  m.seq_len = static_cast<uint32_t>(po.seq_len);
  m.sample_tokens = st;
  m.token_dtype = dtype;
  m.seed = bc.seed;
  m.packing = po.strategy;
  pack::PackStats all;
  JsonWriter pj(0);
  pj.BeginObject();
  for (SplitState& s : splits) {
    RETURN_IF_ERROR(s.packer->Finish());
    ASSIGN_OR_RETURN(shard::SplitInfo info, s.writer->Finish());
    info.documents = s.documents;
    if (s.docs) {
      ASSIGN_OR_RETURN(shard::DatasetInfo d, s.docs->Finish());
      const std::string name = absl::StrCat(std::string(shard::kDocumentsDir), "/", s.name);
      info.documents_file = shard::DocumentsFileInfo{
          name, d.sequences, d.tokens, s.eod_appended, {name + ".bin", d.bin_bytes, d.bin_xxh3_128},
          {name + ".idx", d.idx_bytes, d.idx_xxh3_128}};
    }
    m.splits[s.name] = std::move(info);
    all.Merge(s.packer->stats());
    pj.Key(s.name).Raw(s.packer->stats().ToJson());
  }
  pj.EndObject();
  RETURN_IF_ERROR(crash::Point("build.pack.after_shards"));
  // Tokenizer into the release.
  RETURN_IF_ERROR(WriteFileAtomic(env, JoinPath(opts.output_dir, std::string(shard::kTokenizerName)),
                                  tok->model_bytes()));
  m.tokenizer.file = {std::string(shard::kTokenizerName), tok->model_bytes().size(),
                      Hash128Of(tok->model_bytes())};
  m.tokenizer.vocab_size = static_cast<uint64_t>(tok->vocab_size());
  m.tokenizer.bos_id = tok->bos_id();
  m.tokenizer.eos_id = tok->eos_id();
  m.tokenizer.pad_id = po.pad_id;
  m.tokenizer.model_type = tok->model_type();
  // Counts: documents in = in shards + rejected + removed, per stage.
  const StageSummary& es = enc_rec->summary;
  if (all.documents != es.docs_out ||
      m.splits["train"].documents + m.splits["validation"].documents != es.docs_out) {
    return absl::InternalError("build: pack did not receive every tokenized document");
  }
  JsonWriter cj(0);
  cj.BeginObject();
  if (clean_rec) {
    cj.Key("clean").Raw(clean_rec->report_json);
  } else {
    cj.Key("clean").BeginObject().Field("enabled", false).EndObject();
  }
  if (dedup_rec) {
    cj.Key("dedup").Raw(dedup_rec->report_json);
  } else {
    cj.Key("dedup").BeginObject().Field("enabled", false).EndObject();
  }
  cj.Key("tokenize").Raw(enc_rec->report_json);
  cj.Key("pack").Raw(pj.str());
  cj.Key("shard").BeginObject();
  cj.Field("documents_in", es.docs_out);
  cj.Field("documents_train", m.splits["train"].documents);
  cj.Field("documents_validation", m.splits["validation"].documents);
  cj.Field("samples_train", m.splits["train"].samples);
  cj.Field("samples_validation", m.splits["validation"].samples);
  cj.Field("shards_train", static_cast<uint64_t>(m.splits["train"].shards.size()));
  cj.Field("shards_validation", static_cast<uint64_t>(m.splits["validation"].shards.size()));
  cj.EndObject();
  // Nothing lost: documents in = in shards + rejected (clean, dedup, tokenize) + removed (dedup).
  uint64_t docs_in = es.docs_in, rejected = es.docs_rejected, removed = es.docs_removed;
  for (const auto* rec : {&clean_rec, &dedup_rec}) {
    if (!*rec) continue;
    rejected += (*rec)->summary.docs_rejected;
    removed += (*rec)->summary.docs_removed;
  }
  if (clean_rec) {
    docs_in = clean_rec->summary.docs_in;
  } else if (dedup_rec) {
    docs_in = dedup_rec->summary.docs_in;
  }
  if (docs_in != es.docs_out + rejected + removed) {
    return absl::InternalError(absl::StrCat("build: documents in (", docs_in,
                                            ") != in shards + rejected + removed (", es.docs_out,
                                            " + ", rejected, " + ", removed, ")"));
  }
  cj.Key("total").BeginObject();
  cj.Field("documents_in", docs_in).Field("documents_in_shards", es.docs_out);
  cj.Field("documents_rejected", rejected).Field("documents_removed", removed);
  cj.EndObject();
  cj.EndObject();
  m.counts_json = cj.Take();
  m.release_id = shard::ComputeReleaseId(m);

  StageSummary ps{.name = "pack+shard"};
  ps.docs_in = all.documents;
  ps.docs_out = all.documents - all.empty_documents;
  ps.tokens = all.tokens_out;
  ps.samples = all.samples;
  ps.bytes_in = es.tokens * shard::TokenDtypeSize(dtype);
  ps.note = absl::StrFormat("%s, %.1f%% padding", po.strategy, 100 * all.padding_fraction());
  ps.seconds = pack_sw.Seconds();

  StageSummary clean_s{.name = "clean"}, dedup_s{.name = "dedup"};
  if (clean_rec) {
    clean_s = clean_rec->summary;
  } else {
    clean_s.note = "disabled";
  }
  if (dedup_rec) {
    dedup_s = dedup_rec->summary;
  } else {
    dedup_s.note = "disabled";
  }
  report.stages = {clean_s, dedup_s, tok_rec->summary, enc_rec->summary, ps};
  report.release_id = m.release_id;
  report.seconds = total.Seconds();
  report.peak_rss_bytes = PeakRssBytes();
  // reports/ (not reproducible, not in the manifest), then the manifest last.
  const std::string reports = JoinPath(opts.output_dir, std::string(shard::kReportsDir));
  RETURN_IF_ERROR(env->CreateDirs(reports));
  JsonWriter bj(2);
  bj.BeginObject().Key("build").Raw(report.ToJson());
  bj.Field("threads", static_cast<int64_t>(opts.run.threads)).Field("config", opts.config_path);
  bj.EndObject();
  RETURN_IF_ERROR(WriteFileAtomic(env, JoinPath(reports, "build.json"), bj.str() + "\n"));
  RETURN_IF_ERROR(WriteFileAtomic(env, JoinPath(reports, "summary.md"), report.Table()));
  RETURN_IF_ERROR(crash::Point("build.pack.before_manifest"));
  RETURN_IF_ERROR(shard::WriteManifest(env, opts.output_dir, m));
  RETURN_IF_ERROR(crash::Point("build.pack.after_manifest"));
  RETURN_IF_ERROR(env->SyncDir(DirName(opts.output_dir)));
  return report;
}

absl::StatusOr<std::vector<shard::FileInfo>> HashInputs(Env* env, const std::vector<std::string>& paths) {
  ASSIGN_OR_RETURN(std::vector<InputFile> files, ListInputs(env, paths));
  std::vector<shard::FileInfo> inputs;
  for (const InputFile& f : files) {
    ASSIGN_OR_RETURN(Hash128 h, HashFile128(env, f.path));
    inputs.push_back({f.path, f.size, h});
  }
  return inputs;
}

}  // namespace

std::string BuildReport::Table() const {
  std::string out =
      "| stage | docs in | docs out | rejected | removed | tokens | samples | seconds | MB/s |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const StageSummary& s : stages) {
    std::string secs = s.resumed ? absl::StrFormat("%.2f (earlier run)", s.seconds)
                                 : absl::StrFormat("%.2f", s.seconds);
    std::string mbs = s.seconds > 0 && s.bytes_in > 0
                          ? absl::StrFormat("%.1f", s.bytes_in / s.seconds / 1e6)
                          : std::string("-");
    out += absl::StrFormat("| %s%s | %d | %d | %d | %d | %d | %d | %s | %s |\n", s.name,
                           s.note.empty() ? "" : " (" + s.note + ")", s.docs_in, s.docs_out,
                           s.docs_rejected, s.docs_removed, s.tokens, s.samples, secs, mbs);
  }
  out += absl::StrFormat("\nrelease %s in %s, total %.2f s, peak RSS %.0f MiB\n", release_id,
                         output_dir, seconds, peak_rss_bytes / 1048576.0);
  return out;
}

std::string BuildReport::ToJson() const {
  JsonWriter w(2);
  w.BeginObject();
  w.Field("output_dir", output_dir).Field("release_id", release_id);
  w.Field("seconds", seconds).Field("peak_rss_bytes", peak_rss_bytes);
  w.Field("host", HostName()).Field("date", Now()).Field("cpu", CpuModel());
  w.Key("stages").BeginArray();
  for (const StageSummary& s : stages) {
    w.BeginObject().Field("name", s.name).Field("note", s.note).Field("resumed", s.resumed);
    w.Field("docs_in", s.docs_in).Field("docs_out", s.docs_out);
    w.Field("docs_rejected", s.docs_rejected).Field("docs_removed", s.docs_removed);
    w.Field("bytes_in", s.bytes_in).Field("tokens", s.tokens).Field("samples", s.samples);
    w.Field("seconds", s.seconds);
    w.Field("mb_per_s", s.seconds > 0 ? s.bytes_in / s.seconds / 1e6 : 0.0);
    w.EndObject();
  }
  w.EndArray().EndObject();
  return w.Take();
}

const std::vector<std::string>& BuildStages() {
  static const auto* stages =
      new std::vector<std::string>{"tokenizer", "tokenize", "tokenize-merge", "pack"};
  return *stages;
}

absl::StatusOr<BuildReport> BuildRelease(Env* env, const BuildOptions& opts) {
  Stopwatch total;
  if (opts.output_dir.empty()) return absl::InvalidArgumentError("--output is required");
  const std::string& stage = opts.stage;
  const bool staged = !stage.empty();
  if (staged && std::find(BuildStages().begin(), BuildStages().end(), stage) == BuildStages().end()) {
    return absl::InvalidArgumentError(absl::StrCat("--stage ", stage,
                                                   ": unknown; stages are tokenizer, tokenize, "
                                                   "tokenize-merge, pack"));
  }
  if (staged && stage != "tokenize" && opts.run.tasks != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--stage ", stage, " runs once; only --stage tokenize takes --task/--tasks"));
  }
  if (staged && opts.restart) {
    return absl::InvalidArgumentError("--restart rebuilds every stage; it cannot go with --stage");
  }
  // A staged report (one stage's summary) for the stages that stop early.
  auto stage_report = [&](std::vector<StageSummary> stages) {
    BuildReport r;
    r.output_dir = opts.output_dir;
    r.stages = std::move(stages);
    r.seconds = total.Seconds();
    r.peak_rss_bytes = PeakRssBytes();
    return r;
  };
  ASSIGN_OR_RETURN(BuildConfig bc, ReadBuildConfig(env, opts.config_path));
  if (!bc.tokenizer_model.empty()) {  // fail before any stage runs
    auto bytes = ReadFileToString(env, bc.tokenizer_model);
    if (!bytes.ok()) return Annotate(bytes.status(), "config key 'tokenizer.model'");
    RETURN_IF_ERROR(tokenize::Tokenizer::FromBytes(*bytes, bc.tokenizer_model).status());
  }
  const std::string work = opts.output_dir + ".work";
  const std::string stages_dir = JoinPath(work, "stages");
  // A work folder from another config (or --restart) is discarded.
  if (opts.restart) RETURN_IF_ERROR(env->RemoveAll(work));
  if (env->IsDirectory(stages_dir)) {
    ASSIGN_OR_RETURN(auto names, env->ListDir(stages_dir));
    for (const std::string& n : names) {
      std::optional<std::string> h;
      if (n.size() > 5 && n.substr(n.size() - 5) == ".json") h = RecordConfig(env, JoinPath(stages_dir, n));
      if (h && *h != bc.hash.ToHex()) {
        if (staged) {
          return absl::FailedPreconditionError(absl::StrCat(
              work, " was made with another config; remove it before a staged build"));
        }
        if (opts.run.progress) {
          std::fprintf(stderr, "build: %s was made with another config; starting over\n",
                       work.c_str());
        }
        RETURN_IF_ERROR(env->RemoveAll(work));
        break;
      }
    }
  }
  RETURN_IF_ERROR(env->CreateDirs(stages_dir));

  auto record_path = [&](const std::string& stage) { return JoinPath(stages_dir, stage + ".json"); };
  // Called once a stage's outputs are written and synced: hashes them into the record, then
  // writes the record (atomically), with the crash points of release/crash_points.h between.
  auto complete = [&](StageRecord& r) -> absl::Status {
    const std::string point = absl::StrCat("build.", r.summary.name, ".");
    RETURN_IF_ERROR(crash::Point(point + "after_outputs"));
    ASSIGN_OR_RETURN(std::vector<StageOutput> outputs, StageOutputs(env, work, r.summary.name));
    r.outputs_json = StageOutputsJson(outputs);
    RETURN_IF_ERROR(crash::Point(point + "before_record"));
    RETURN_IF_ERROR(WriteFileAtomic(env, record_path(r.summary.name), RecordJson(bc.hash, r)));
    return crash::Point(point + "after_record");
  };

  // Manifest inputs: every input file with its size and XXH3-128 (not needed by encode tasks).
  ASSIGN_OR_RETURN(std::vector<InputFile> files, ListInputs(env, bc.inputs));
  std::vector<shard::FileInfo> inputs;
  for (const InputFile& f : files) {
    if (stage == "tokenize" || stage == "tokenize-merge") {
      inputs.push_back({f.path, f.size, Hash128{}});
      continue;
    }
    ASSIGN_OR_RETURN(Hash128 h, HashFile128(env, f.path));
    inputs.push_back({f.path, f.size, h});
  }
  auto needs = [&](const std::string& before, const std::string& run_first) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--stage ", stage, ": stage ", before, " has not completed under this config (no ",
        JoinPath(stages_dir, before + ".json"), "); run --stage ", run_first, " first"));
  };
  // In a staged build, clean and dedup run as part of --stage tokenizer (each is one process;
  // `grist clean` / `grist dedup` spread them over tasks on their own).
  const bool may_run_early = !staged || stage == "tokenizer";
  uint64_t input_bytes = 0;
  for (const auto& f : inputs) input_bytes += f.bytes;

  // ---- clean, dedup ----
  // Each reads `docs` and leaves its kept parts in WORK/<name>; a completed stage is not run again.
  std::vector<std::string> docs = bc.inputs;  // what the next stage reads
  using StageRun = std::function<absl::StatusOr<StageRecord>(const std::string& dir, const RunOptions&)>;
  auto doc_stage = [&](const std::string& name, bool enabled,
                       const StageRun& run_stage) -> absl::StatusOr<std::optional<StageRecord>> {
    std::optional<StageRecord> rec;
    if (!enabled) return rec;
    const std::string dir = JoinPath(work, name);
    rec = LoadRecord(env, record_path(name), bc.hash);
    if (!rec && !may_run_early) return needs(name, "tokenizer");
    if (!rec) {
      RETURN_IF_ERROR(env->RemoveAll(dir));
      RunOptions run = opts.run;
      run.task = 0;
      run.tasks = 1;
      ASSIGN_OR_RETURN(StageRecord r, run_stage(dir, run));
      r.summary.name = name;
      RETURN_IF_ERROR(complete(r));
      rec = std::move(r);
    }
    ASSIGN_OR_RETURN(docs, KeptParts(env, dir));
    return rec;
  };
  auto counts_summary = [](const DocCounts& c, StageSummary* s) {
    s->docs_in = c.docs_in;
    s->docs_out = c.docs_out;
    s->docs_rejected = c.docs_rejected;
    s->docs_removed = c.docs_removed;
  };
  auto run_clean = [&](const std::string& dir, const RunOptions& run) -> absl::StatusOr<StageRecord> {
    ASSIGN_OR_RETURN(auto cr, clean::RunClean(env, bc.inputs, dir, bc.clean, run));
    StageRecord r;
    counts_summary(cr.counts, &r.summary);
    r.summary.bytes_in = cr.record_bytes;
    r.summary.seconds = cr.seconds;
    JsonWriter w(0);
    w.BeginObject().Field("docs_in", cr.counts.docs_in).Field("docs_out", cr.counts.docs_out);
    w.Field("docs_rejected", cr.counts.docs_rejected);
    w.Field("docs_removed", cr.counts.docs_removed);
    w.Field("bytes_in", cr.counts.bytes_in).Field("bytes_out", cr.counts.bytes_out);
    w.Field("bad_records", cr.bad_records).Key("reasons").BeginObject();
    for (const auto& [reason, n] : cr.reasons) w.Field(reason, n);
    w.EndObject().EndObject();
    r.report_json = w.Take();
    return r;
  };
  auto run_dedup = [&](const std::string& dir, const RunOptions& run) -> absl::StatusOr<StageRecord> {
    if (docs.empty()) return absl::FailedPreconditionError("build: the clean stage kept no documents");
    ASSIGN_OR_RETURN(auto dr, dedup::RunDedup(env, docs, dir, bc.dedup, run));
    StageRecord r;
    counts_summary(dr.counts, &r.summary);
    r.summary.bytes_in = dr.counts.bytes_in;
    for (const auto& st : dr.stages) r.summary.seconds += st.seconds;
    JsonWriter w(0);
    w.BeginObject().Field("docs_in", dr.counts.docs_in).Field("docs_out", dr.counts.docs_out);
    w.Field("docs_rejected", dr.counts.docs_rejected);
    w.Field("docs_removed", dr.counts.docs_removed);
    w.Field("removed_exact", dr.removed_exact).Field("removed_near", dr.removed_near);
    w.Field("removed_lines", dr.removed_lines).Field("clusters", dr.clusters);
    w.Field("bands", static_cast<int64_t>(dr.bands)).Field("rows", static_cast<int64_t>(dr.rows));
    w.Field("threshold", dr.threshold).EndObject();
    r.report_json = w.Take();
    return r;
  };
  ASSIGN_OR_RETURN(std::optional<StageRecord> clean_rec, doc_stage("clean", bc.clean_enabled, run_clean));
  ASSIGN_OR_RETURN(std::optional<StageRecord> dedup_rec, doc_stage("dedup", bc.dedup_enabled, run_dedup));
  if (docs.empty()) {
    return absl::FailedPreconditionError("build: no documents left after clean and dedup");
  }

  // ---- tokenizer ----
  const std::string model_path = JoinPath(work, "tokenizer.model");
  std::optional<StageRecord> tok_rec = LoadRecord(env, record_path("tokenizer"), bc.hash);
  if (!tok_rec && staged && stage != "tokenizer") return needs("tokenizer", "tokenizer");
  if (!tok_rec) {
    Stopwatch sw;
    StageRecord r;
    r.summary.name = "tokenizer";
    if (!bc.tokenizer_model.empty()) {
      auto bytes = ReadFileToString(env, bc.tokenizer_model);
      if (!bytes.ok()) {
        return Annotate(bytes.status(), absl::StrCat("config key 'tokenizer.model'"));
      }
      auto t = tokenize::Tokenizer::FromBytes(*bytes, bc.tokenizer_model);
      if (!t.ok()) return t.status();
      RETURN_IF_ERROR(WriteFileAtomic(env, model_path, *bytes));
      r.summary.note = "pretrained";
      r.report_json = absl::StrCat("{\"pretrained\":true,\"model_bytes\":", bytes->size(), "}");
    } else {
      ASSIGN_OR_RETURN(auto tr, tokenize::TrainTokenizer(env, docs, model_path, bc.train,
                                                         opts.run.progress));
      r.summary.docs_in = tr.documents;
      r.summary.docs_out = tr.documents - tr.documents_rejected;
      r.summary.docs_rejected = tr.documents_rejected;
      r.summary.bytes_in = input_bytes;
      r.summary.note = "trained";
      r.report_json = tr.ToJson();
    }
    r.summary.seconds = sw.Seconds();
    RETURN_IF_ERROR(complete(r));
    tok_rec = r;
  }
  if (stage == "tokenizer") return stage_report({tok_rec->summary});
  ASSIGN_OR_RETURN(auto tok, tokenize::Tokenizer::Load(env, model_path));

  // ---- tokenize ----
  const std::string tokens_dir = JoinPath(work, "tokens");
  std::optional<StageRecord> enc_rec = LoadRecord(env, record_path("tokenize"), bc.hash);
  if (stage == "tokenize") {
    // One task of many: its part goes beside the others'; tokenize-merge completes the stage.
    if (enc_rec) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--stage tokenize: the stage is already complete (", record_path("tokenize"), ")"));
    }
    tokenize::EncodeStageOptions eo = bc.encode;
    eo.model_path = model_path;
    ASSIGN_OR_RETURN(auto er, tokenize::RunEncode(env, docs, tokens_dir, eo, opts.run));
    StageSummary s{.name = "tokenize"};
    s.docs_in = er.counts.docs_in;
    s.docs_out = er.counts.docs_out;
    s.docs_rejected = er.counts.docs_rejected;
    s.bytes_in = er.counts.bytes_in;
    s.tokens = er.tokens;
    s.seconds = er.seconds;
    s.note = absl::StrCat("task ", opts.run.task, " of ", opts.run.tasks);
    return stage_report({tok_rec->summary, s});
  }
  if (!enc_rec && stage == "tokenize-merge") {
    Stopwatch sw;
    ASSIGN_OR_RETURN(std::vector<std::string> parts, tokenize::ListTokenParts(env, tokens_dir));
    ASSIGN_OR_RETURN(tokenize::EncodeReport er, MergeEncodeReports(env, parts));
    StageRecord r;
    r.summary.name = "tokenize";
    r.summary.docs_in = er.counts.docs_in;
    r.summary.docs_out = er.counts.docs_out;
    r.summary.docs_rejected = er.counts.docs_rejected;
    r.summary.bytes_in = er.counts.bytes_in;
    r.summary.tokens = er.tokens;
    // The stage took as long as its slowest task (they run at once) plus this merge.
    r.summary.seconds = er.seconds + sw.Seconds();
    r.summary.note = absl::StrCat("merged ", parts.size(), " task(s); slowest ",
                                  absl::StrFormat("%.2f", er.seconds), " s");
    r.report_json = er.ToJson();
    RETURN_IF_ERROR(complete(r));
    enc_rec = r;
  }
  if (stage == "tokenize-merge") return stage_report({tok_rec->summary, enc_rec->summary});
  if (!enc_rec && staged) return needs("tokenize", "tokenize (every task) and tokenize-merge");
  if (!enc_rec) {
    RETURN_IF_ERROR(env->RemoveAll(tokens_dir));
    tokenize::EncodeStageOptions eo = bc.encode;
    eo.model_path = model_path;
    RunOptions run = opts.run;
    run.task = 0;
    run.tasks = 1;
    ASSIGN_OR_RETURN(auto er, tokenize::RunEncode(env, docs, tokens_dir, eo, run));
    StageRecord r;
    r.summary.name = "tokenize";
    r.summary.docs_in = er.counts.docs_in;
    r.summary.docs_out = er.counts.docs_out;
    r.summary.docs_rejected = er.counts.docs_rejected;
    r.summary.bytes_in = er.counts.bytes_in;
    r.summary.tokens = er.tokens;
    r.summary.seconds = er.seconds;
    r.report_json = er.ToJson();
    RETURN_IF_ERROR(complete(r));
    enc_rec = r;
  }

  return PackAndPublish(env, opts, bc, tok.get(), tokens_dir, inputs, clean_rec, dedup_rec,
                        tok_rec, enc_rec, total);
}

absl::StatusOr<BuildReport> PackRelease(Env* env, const PackReleaseOptions& po) {
  Stopwatch total;
  if (po.output_dir.empty()) return absl::InvalidArgumentError("--output is required");
  ASSIGN_OR_RETURN(BuildConfig bc, ReadBuildConfig(env, po.config_path));
  ASSIGN_OR_RETURN(auto tok, tokenize::Tokenizer::Load(env, po.model_path));
  ASSIGN_OR_RETURN(std::vector<std::string> parts, tokenize::ListTokenParts(env, po.tokens_dir));
  ASSIGN_OR_RETURN(std::vector<shard::FileInfo> inputs, HashInputs(env, bc.inputs));
  // The tokenize stage's counts: the sum over the tasks' reports.
  uint64_t v[9] = {0};
  static const char* const kKeys[9] = {"docs_in", "docs_out", "docs_rejected",
                                       "docs_removed", "bytes_in", "tokens",
                                       "rejected_malformed", "rejected_empty",
                                       "max_document_tokens"};
  for (const std::string& part : parts) {
    ASSIGN_OR_RETURN(std::string text, ReadFileToString(env, part + ".json"));
    simdjson::dom::parser p;
    simdjson::padded_string ps(text);
    simdjson::dom::element e;
    if (p.parse(ps).get(e) != simdjson::SUCCESS) {
      return absl::DataLossError(absl::StrCat(part, ".json: not valid JSON"));
    }
    for (int k = 0; k < 9; ++k) {
      uint64_t x;
      if (e[kKeys[k]].get(x) != simdjson::SUCCESS) {
        return absl::DataLossError(absl::StrCat(part, ".json: missing '", kKeys[k], "'"));
      }
      v[k] = k == 8 ? std::max(v[k], x) : v[k] + x;
    }
  }
  StageRecord enc;
  enc.summary.name = "tokenize";
  enc.summary.note = absl::StrCat(parts.size(), " task(s)");
  enc.summary.docs_in = v[0];
  enc.summary.docs_out = v[1];
  enc.summary.docs_rejected = v[2];
  enc.summary.docs_removed = v[3];
  enc.summary.bytes_in = v[4];
  enc.summary.tokens = v[5];
  enc.summary.resumed = true;
  JsonWriter w(0);
  w.BeginObject();
  for (int k = 0; k < 9; ++k) w.Field(kKeys[k], v[k]);
  w.EndObject();
  enc.report_json = w.Take();
  StageRecord tr;
  tr.summary.name = "tokenizer";
  tr.summary.note = "given";
  tr.summary.resumed = true;
  BuildOptions opts;
  opts.config_path = po.config_path;
  opts.output_dir = po.output_dir;
  opts.run = po.run;
  return PackAndPublish(env, opts, bc, tok.get(), po.tokens_dir, inputs, std::nullopt,
                        std::nullopt, tr, enc, total);
}

}  // namespace grist::release
