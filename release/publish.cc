#include "release/internal/publish.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/crash_point.h"
#include "common/hash.h"
#include "common/input_plan.h"
#include "common/json_writer.h"
#include "common/progress.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "pack/pack.h"
#include "release/internal/stages.h"
#include "shard/indexed_dataset.h"
#include "shard/shard_format.h"
#include "shard/split_writer.h"
#include "tokenize/encode.h"
#include "tokenize/indexed_dataset.h"

namespace grist::release::internal {
namespace {

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

// Moves the whole release at `staging` to `output`. An earlier release at `output` stays in place
// until the new one takes its name: with Env::Default() the two are swapped atomically
// (renameat2(RENAME_EXCHANGE); a reader of `output` sees the old release or the new one, never
// neither), elsewhere (other Envs, file systems without the exchange) the old one is renamed aside
// just before (a kill between the two renames leaves no release at `output` until a rerun).
// Returns the path now holding the earlier release (to remove once the new name is durable), or "".
absl::StatusOr<std::string> Publish(Env* env, const std::string& staging, const std::string& output) {
  RETURN_IF_ERROR(env->CreateDirs(DirName(output)));
  if (!env->IsDirectory(output)) {
    RETURN_IF_ERROR(env->RemoveAll(output));
    RETURN_IF_ERROR(env->RenameFile(staging, output));
    return std::string();
  }
#if defined(SYS_renameat2) && defined(RENAME_EXCHANGE)
  if (env == Env::Default()) {
    if (::syscall(SYS_renameat2, AT_FDCWD, staging.c_str(), AT_FDCWD, output.c_str(),
                  RENAME_EXCHANGE) == 0) {
      return staging;
    }
    const int e = errno;
    if (e != EINVAL && e != ENOSYS && e != ENOTSUP) {  // else: not supported here, rename instead
      return absl::Status(absl::ErrnoToStatusCode(e),
                          absl::StrCat("renameat2(RENAME_EXCHANGE) ", staging, " <-> ", output,
                                       ": ", std::strerror(e)));
    }
  }
#endif
  const std::string previous = staging + ".previous";
  RETURN_IF_ERROR(env->RemoveAll(previous));
  RETURN_IF_ERROR(env->RenameFile(output, previous));
  RETURN_IF_ERROR(env->RenameFile(staging, output));
  return previous;
}

}  // namespace

absl::StatusOr<std::vector<shard::FileInfo>> HashInputs(Env* env, const std::vector<InputFile>& files) {
  std::vector<shard::FileInfo> inputs;
  for (const InputFile& f : files) {
    ASSIGN_OR_RETURN(Hash128 h, HashInput(env, f));
    inputs.push_back({f.path, f.size, h});
  }
  return inputs;
}

absl::StatusOr<BuildReport> PackAndPublish(Env* env, const PublishOptions& o) {
  const BuildConfig& bc = *o.config;
  tokenize::Tokenizer* tok = o.tokenizer;
  auto record = [&](const std::string& name) -> const StageRecord* {
    auto it = o.records.find(name);
    return it == o.records.end() ? nullptr : &it->second;
  };
  const StageRecord* enc_rec = record("tokenize");
  const StageRecord* tok_rec = record("tokenizer");
  if (!enc_rec || !tok_rec) return absl::InternalError("build: pack before tokenize");
  BuildReport report;
  report.output_dir = o.output_dir;
  // ---- pack + shard (one stage: its output is the release itself) ----
  Stopwatch pack_sw;
  if (env->IsDirectory(o.output_dir)) {
    ASSIGN_OR_RETURN(auto names, env->ListDir(o.output_dir));
    bool ours = names.empty() || env->FileExists(JoinPath(o.output_dir, "shards")) ||
                env->FileExists(JoinPath(o.output_dir, std::string(shard::kManifestName)));
    if (!ours) {
      return absl::FailedPreconditionError(absl::StrCat(
          o.output_dir, ": exists and is not a release; refusing to overwrite it"));
    }
  }
  // The new release is written into the staging folder and moved to --output only when whole, so
  // an earlier release there stays published (and valid) until the new one replaces it at once.
  const std::string& dir = o.staging_dir;
  RETURN_IF_ERROR(env->RemoveAll(dir));
  RETURN_IF_ERROR(env->CreateDirs(JoinPath(dir, std::string(shard::kShardsDir))));
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
    s.writer = std::make_unique<shard::SplitWriter>(env, dir, s.name, st, dtype,
                                                    bc.shard_max_bytes);
    shard::SplitWriter* w = s.writer.get();
    s.packer = std::make_unique<pack::Packer>(po, [w](const pack::PackedSample& p) {
      return w->Append(p.tokens, p.segments);
    });
  }
  ASSIGN_OR_RETURN(std::vector<std::string> parts, tokenize::ListTokenParts(env, o.tokens_dir));
  {
    Progress prog("pack", enc_rec->summary.tokens, Progress::Unit::kCount, !o.run.progress);
    std::vector<int32_t> doc;
    for (const std::string& part : parts) {
      ASSIGN_OR_RETURN(auto reader, tokenize::IndexedDatasetReader::Open(env, part));
      for (uint64_t i = 0; i < reader->sequences(); ++i) {
        doc.clear();
        reader->Read(i, &doc);
        SplitState& s = splits[bc.split.SplitOf(doc)];
        ++s.documents;
        RETURN_IF_ERROR(s.packer->Add(doc));
        RETURN_IF_ERROR(AddMegatronDocument(env, dir, s.name, dtype, tok->eos_id(),
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
  m.inputs = o.inputs;
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
  RETURN_IF_ERROR(WriteFileAtomic(env, JoinPath(dir, std::string(shard::kTokenizerName)),
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
  // Nothing lost: documents in = in shards + rejected + removed, summed over the counted stages
  // (clean, dedup, tokenize); documents in are those of the first counted stage that ran.
  JsonWriter cj(0);
  cj.BeginObject();
  uint64_t rejected = 0, removed = 0;
  std::optional<uint64_t> docs_in;
  for (const StageDef& s : Stages()) {
    if (!s.counted) continue;
    const StageRecord* r = record(s.name);
    if (!r) {
      cj.Key(s.name).BeginObject().Field("enabled", false).EndObject();
      continue;
    }
    cj.Key(s.name).Raw(r->report_json);
    if (!docs_in) docs_in = r->summary.docs_in;
    rejected += r->summary.docs_rejected;
    removed += r->summary.docs_removed;
  }
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
  if (*docs_in != es.docs_out + rejected + removed) {
    return absl::InternalError(absl::StrCat("build: documents in (", *docs_in,
                                            ") != in shards + rejected + removed (", es.docs_out,
                                            " + ", rejected, " + ", removed, ")"));
  }
  cj.Key("total").BeginObject();
  cj.Field("documents_in", *docs_in).Field("documents_in_shards", es.docs_out);
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

  for (const StageDef& s : Stages()) {
    const StageRecord* r = record(s.name);
    report.stages.push_back(r ? r->summary : StageSummary{.name = s.name, .note = "disabled"});
  }
  report.stages.push_back(ps);
  report.release_id = m.release_id;
  report.seconds = o.total->Seconds();
  report.peak_rss_bytes = PeakRssBytes();
  // reports/ (not reproducible, not in the manifest), then the manifest last.
  const std::string reports = JoinPath(dir, std::string(shard::kReportsDir));
  RETURN_IF_ERROR(env->CreateDirs(reports));
  JsonWriter bj(2);
  bj.BeginObject().Key("build").Raw(report.ToJson());
  bj.Field("threads", static_cast<int64_t>(o.run.threads)).Field("config", o.config_path);
  bj.EndObject();
  RETURN_IF_ERROR(WriteFileAtomic(env, JoinPath(reports, "build.json"), bj.str() + "\n"));
  RETURN_IF_ERROR(WriteFileAtomic(env, JoinPath(reports, "summary.md"), report.Table()));
  RETURN_IF_ERROR(crash::Point("build.pack.before_manifest"));
  RETURN_IF_ERROR(shard::WriteManifest(env, dir, m));
  ASSIGN_OR_RETURN(std::string previous, Publish(env, dir, o.output_dir));
  RETURN_IF_ERROR(crash::Point("build.pack.after_manifest"));
  RETURN_IF_ERROR(env->SyncDir(DirName(o.output_dir)));
  if (!previous.empty()) RETURN_IF_ERROR(env->RemoveAll(previous));
  return report;
}

}  // namespace grist::release::internal
