// `grist build` and `grist pack` (release/release.h): BuildRelease walks the table of stages
// (release/internal/stages.h), running or resuming each, then packs and publishes the release
// (release/internal/publish.h); PackRelease packs and publishes a tokenize output on its own.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/env.h"
#include "common/hash.h"
#include "common/input_plan.h"
#include "common/records.h"
#include "common/status_macros.h"
#include "common/sysinfo.h"
#include "release/internal/build_config.h"
#include "release/internal/publish.h"
#include "release/internal/stage_record.h"
#include "release/internal/stages.h"
#include "release/release.h"
#include "tokenize/encode.h"
#include "tokenize/tokenizer.h"

namespace grist::release {

using internal::Build;
using internal::BuildConfig;
using internal::EncodeRecord;
using internal::FileSums;
using internal::HashInputs;
using internal::KeptParts;
using internal::kPackStep;
using internal::LoadRecord;
using internal::MergeEncodeReports;
using internal::PackAndPublish;
using internal::PackRecordJson;
using internal::PackRecordRelease;
using internal::PublishOptions;
using internal::ReadBuildConfig;
using internal::ReleaseUpToDate;
using internal::RecordConfig;
using internal::StageDef;
using internal::StageRecord;
using internal::Stages;
using internal::StatInputs;
using internal::Step;

const std::vector<std::string>& BuildStages() {
  static const auto* names = [] {
    auto* v = new std::vector<std::string>();
    for (const StageDef& s : Stages()) {
      for (const Step& step : s.steps) v->push_back(step.name);
    }
    v->push_back(kPackStep);
    return v;
  }();
  return *names;
}

bool StageTakesTasks(const std::string& step) {
  for (const StageDef& s : Stages()) {
    for (const Step& st : s.steps) {
      if (st.name == step) return st.parallel;
    }
  }
  return false;
}

namespace {

// An advisory lock on `<output>.lock` (flock(2)), held while a build or pack writes the output,
// its work folder or its staging folder: two builds of one output would remove and rename each
// other's files (a failed rename at best, a release renamed into place without a file the other
// had just removed at worst). Exclusive, except for the task steps of a staged build, which share
// it (an array's tasks run at once, each writing its own files). A file system without flock
// support (flock fails otherwise than EWOULDBLOCK: ENOSYS, ENOLCK, EOPNOTSUPP...) goes unlocked,
// with a note.
class OutputLock {
 public:
  static absl::StatusOr<OutputLock> Take(const std::string& output, bool shared) {
    OutputLock l;
    l.path_ = output + ".lock";
    RETURN_IF_ERROR(Env::Default()->CreateDirs(DirName(l.path_)));
    l.fd_ = ::open(l.path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (l.fd_ < 0) {
      const int e = errno;
      return absl::ErrnoToStatus(e, absl::StrCat("open ", l.path_));
    }
    int r;
    do {
      r = ::flock(l.fd_, (shared ? LOCK_SH : LOCK_EX) | LOCK_NB);
    } while (r != 0 && errno == EINTR);
    if (r == 0) return l;
    const int e = errno;
    if (e == EWOULDBLOCK) {
      return absl::FailedPreconditionError(absl::StrCat(
          "another grist build or pack is writing ", output, " (it holds ", l.path_,
          "); wait for it to end, or stop it"));
    }
    std::fprintf(stderr, "build: %s: the file system does not lock files (flock: %s); make sure "
                 "no other build writes %s\n", l.path_.c_str(), std::strerror(e), output.c_str());
    return l;
  }
  OutputLock(OutputLock&& o) noexcept : path_(std::move(o.path_)), fd_(std::exchange(o.fd_, -1)) {}
  OutputLock& operator=(OutputLock&&) = delete;
  ~OutputLock() {
    if (fd_ >= 0) ::close(fd_);  // releases the lock; the file stays (removing it would race)
  }

 private:
  OutputLock() = default;
  std::string path_;
  int fd_ = -1;
};

// A work folder being discarded: <work>.discarded-<pid>-<n>, beside it.
constexpr char kDiscarded[] = ".discarded-";

// Discards the work folder `work` (when `current` and it exists) without waiting for its removal:
// renames it at once to a fresh sibling and removes that on `*thread`, with every such sibling an
// earlier build left (killed before its removal finished); the build then runs beside the
// removal. A work folder holds every stage's output, the size of the corpus: removing it before
// the first stage, as the build did, kept every core waiting (52 ms for the 94 MB config on the
// dev VM; on a parallel file system one metadata request per file, for every file of a large
// corpus). A removal that fails is reported on stderr, and tried again by the next build; the
// release does not depend on it.
absl::Status DiscardWork(Env* env, const std::string& work, bool current, std::jthread* thread) {
  const std::string parent = DirName(work);
  const std::string prefix = absl::StrCat(BaseName(work), kDiscarded);
  // The siblings' paths as `work` is written (relative stays relative).
  const std::string at = work.substr(0, work.size() - BaseName(work).size());
  std::vector<std::string> doomed;
  // Leftovers are looked for where the folder can be listed (the build needs no more than to
  // write in it): none found is no reason to fail.
  if (absl::StatusOr<std::vector<std::string>> names = env->ListDir(parent); names.ok()) {
    for (const std::string& n : *names) {
      if (absl::StartsWith(n, prefix)) doomed.push_back(at + n);
    }
  }
  if (current && (env->IsDirectory(work) || env->FileExists(work))) {
    std::string aside;
    for (int k = 0;; ++k) {
      aside = absl::StrCat(at, prefix, ::getpid(), "-", k);
      if (!env->IsDirectory(aside) && !env->FileExists(aside)) break;
    }
    RETURN_IF_ERROR(env->RenameFile(work, aside));
    doomed.push_back(aside);
  }
  if (doomed.empty()) return absl::OkStatus();
  *thread = std::jthread([env, doomed = std::move(doomed)] {
    for (const std::string& d : doomed) {
      if (absl::Status s = env->RemoveAll(d); !s.ok()) {
        std::fprintf(stderr,
                     "build: could not remove %s (a discarded work folder): %s; the next build "
                     "tries again, or remove it by hand\n",
                     d.c_str(), std::string(s.message()).c_str());
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<BuildReport> BuildRelease(Env* env, const BuildOptions& opts) {
  Stopwatch total;
  if (opts.output_dir.empty()) return absl::InvalidArgumentError("--output is required");
  const std::string& stage = opts.stage;
  const bool staged = !stage.empty();
  // The step --stage names, and its stage (nullptr for pack).
  const StageDef* target = nullptr;
  const Step* step = nullptr;
  for (const StageDef& s : Stages()) {
    for (const Step& st : s.steps) {
      if (st.name == stage) target = &s, step = &st;
    }
  }
  if (staged && !step && stage != kPackStep) {
    return absl::InvalidArgumentError(absl::StrCat("--stage ", stage, ": unknown; stages are ",
                                                   absl::StrJoin(BuildStages(), ", ")));
  }
  if (staged && !(step && step->parallel) && opts.run.tasks != 1) {
    std::vector<std::string> arrays;
    for (const std::string& n : BuildStages()) {
      if (StageTakesTasks(n)) arrays.push_back(n);
    }
    return absl::InvalidArgumentError(absl::StrCat("--stage ", stage, " runs once; only --stage ",
                                                   absl::StrJoin(arrays, ", "),
                                                   " take --task/--tasks"));
  }
  if (staged && opts.restart) {
    return absl::InvalidArgumentError("--restart rebuilds every stage; it cannot go with --stage");
  }
  // A staged report (one stage's summary) for the steps that stop early.
  auto stage_report = [&](StageSummary s) {
    BuildReport r;
    r.output_dir = opts.output_dir;
    r.stages = {std::move(s)};
    r.seconds = total.Seconds();
    r.peak_rss_bytes = PeakRssBytes();
    return r;
  };
  ASSIGN_OR_RETURN(BuildConfig bc, ReadBuildConfig(env, opts.config_path));
  RETURN_IF_ERROR(CheckOutputOutsideInputs(env, bc.inputs, opts.output_dir, "inputs.paths"));
  ASSIGN_OR_RETURN(const OutputLock lock,
                   OutputLock::Take(opts.output_dir, staged && step != nullptr && step->parallel));
  Build b{.env = env, .opts = opts, .bc = bc, .work = opts.output_dir + ".work"};
  if (!bc.tokenizer_model.empty()) {  // a missing file fails before any stage runs
    auto bytes = ReadFileToString(env, bc.tokenizer_model);
    if (!bytes.ok()) return Annotate(bytes.status(), "config key 'tokenizer.model'");
    b.given_model_file = shard::FileInfo{bc.tokenizer_model, bytes->size(), Hash128Of(*bytes)};
    b.loading_model.emplace(absl::UnknownError("the tokenizer model was not loaded"));
    b.model_loader = std::jthread([&b, bytes = std::move(*bytes)] {
      *b.loading_model = tokenize::Tokenizer::FromBytes(bytes, b.bc.tokenizer_model);
    });
  }
  // grist's encoder's tables for the given model (tens of ms for a 32k model) are built on a
  // thread of their own while the stages before tokenize run, instead of at its start, on the
  // build's one serial path: started once the model is loaded (join_model). Declared after `b`,
  // which owns the model: joined before it is freed.
  std::jthread encoder_tables;
  auto join_model = [&]() -> absl::Status {
    const bool loaded_now = b.loading_model.has_value();
    RETURN_IF_ERROR(b.JoinGivenModel());
    if (loaded_now && b.given_model != nullptr &&
        bc.encode.encode.engine == tokenize::Engine::kGrist && (!staged || stage == "tokenize")) {
      encoder_tables = std::jthread([m = b.given_model.get()] { (void)m->native(); });
    }
    return absl::OkStatus();
  };
  // A work folder from another config (or --restart) is discarded.
  bool start_over = opts.restart;
  if (!start_over && env->IsDirectory(b.StagesDir())) {
    ASSIGN_OR_RETURN(auto names, env->ListDir(b.StagesDir()));
    for (const std::string& n : names) {
      std::optional<std::string> h;
      if (n.size() > 5 && n.substr(n.size() - 5) == ".json") {
        h = RecordConfig(env, JoinPath(b.StagesDir(), n));
      }
      if (h && *h != bc.hash.ToHex()) {
        if (staged) {
          return absl::FailedPreconditionError(absl::StrCat(
              b.work, " was made with another config; remove it before a staged build"));
        }
        if (opts.run.progress) {
          std::fprintf(stderr, "build: %s was made with another config; starting over\n",
                       b.work.c_str());
        }
        start_over = true;
        break;
      }
    }
  }
  // An unstaged build holds the output's lock alone: it also removes what an earlier one, killed
  // while discarding, left. (A staged step never starts over: --restart and another config are
  // refused above.)
  if (!staged) RETURN_IF_ERROR(DiscardWork(env, b.work, start_over, &b.discarding));
  RETURN_IF_ERROR(env->CreateDirs(b.StagesDir()));
  b.sums = FileSums::Load(env, b.SumsPath());
  ASSIGN_OR_RETURN(b.input_files, ListInputs(env, bc.inputs));
  b.input_stats = StatInputs(env, b.input_files);
  for (const InputFile& f : b.input_files) b.input_bytes += f.size;
  b.docs = bc.inputs;
  // An unstaged build with more than one thread hashes the inputs beside its first stage (which
  // reads them anyway); one thread, or a step of a staged build, only when a record or the
  // stage's completion needs them, on its own threads.
  if (!staged && opts.run.threads != 1) b.StartInputHashing();

  for (const StageDef& s : Stages()) {
    const bool is_target = target == &s;
    if (!s.enabled(bc)) {
      if (is_target) {
        RETURN_IF_ERROR(b.JoinCompletion());
        return stage_report({.name = s.name, .note = "disabled in the config"});
      }
      continue;
    }
    if (s.name != "clean") RETURN_IF_ERROR(join_model());
    std::string upstream;  // what the stage would read now, to check a record against
    if (env->FileExists(b.RecordPath(s.name))) {
      RETURN_IF_ERROR(b.JoinCompletion());  // the records of the stages before it
      ASSIGN_OR_RETURN(upstream, b.Upstream(s));
    }
    std::string stale;  // why a record there does not hold
    std::optional<StageRecord> rec = LoadRecord(env, b.RecordPath(s.name), bc.hash, upstream,
                                                s.output_root, opts.run.threads, &stale,
                                                b.sums.get());
    // In a staged build only the step asked for (and the stages `--stage tokenizer` runs) runs.
    const bool runs_here =
        is_target || !staged || (stage == "tokenizer" && s.runs_before_tokenizer);
    if (!rec && !stale.empty() && runs_here) {
      std::fprintf(stderr, "build: %s: %s; the stage runs again\n", b.RecordPath(s.name).c_str(),
                   stale.c_str());
    }
    if (is_target) {
      if (rec && !step->completes) {
        return absl::FailedPreconditionError(absl::StrCat("--stage ", stage,
                                                          ": the stage is already complete (",
                                                          b.RecordPath(s.name), ")"));
      }
      if (!rec) {
        if (s.keeps_documents) RETURN_IF_ERROR(env->CreateDirs(b.Dir(s.output_root)));
        ASSIGN_OR_RETURN(StageRecord r, step->run(b, opts.run));
        RETURN_IF_ERROR(join_model());
        // The stages `--stage tokenizer` ran before it: recorded first (its Upstream reads them).
        RETURN_IF_ERROR(b.JoinCompletion());
        r.summary.name = s.name;
        if (!step->completes) {
          RETURN_IF_ERROR(b.sums->Save());
          return stage_report(r.summary);
        }
        RETURN_IF_ERROR(b.Complete(s, r));
        rec = std::move(r);
      }
      RETURN_IF_ERROR(b.JoinCompletion());
      RETURN_IF_ERROR(b.sums->Save());
      return stage_report(rec->summary);
    }
    if (!rec) {
      // In a staged build every stage before the one asked for must have completed, except that
      // `--stage tokenizer` runs the stages before it (clean, dedup) in its own process.
      if (!runs_here && !stale.empty()) {
        // Removed with the records of the stages after it (built on what this one will write
        // again), so that the chain submitted again runs them (scripts/slurm/pipeline.sh skips a
        // stage whose record exists); a concurrent task may have removed them already.
        bool from_here = false;
        for (const StageDef& d : Stages()) {
          from_here = from_here || &d == &s;
          if (from_here) (void)env->RemoveFile(b.RecordPath(d.name));
        }
        return absl::FailedPreconditionError(absl::StrCat(
            "--stage ", stage, ": the record of stage ", s.name, " no longer holds (",
            b.RecordPath(s.name), ": ", stale, "); it and the records of the stages after it are "
            "removed: run --stage ", s.HowToRun(), " and the steps after it again (scripts/slurm/"
            "submit_build.sh: submit the chain again)"));
      }
      if (!runs_here) {
        return absl::FailedPreconditionError(absl::StrCat(
            "--stage ", stage, ": stage ", s.name, " has not completed under this config (no ",
            b.RecordPath(s.name), "); run --stage ", s.HowToRun(), " first"));
      }
      RETURN_IF_ERROR(env->RemoveAll(b.Dir(s.output_root)));
      // Its outputs' syncs wait for its completion, which runs beside the next stage.
      auto outputs = std::make_unique<DeferredSyncEnv>(env);
      ASSIGN_OR_RETURN(StageRecord r, s.run(b, outputs.get()));
      RETURN_IF_ERROR(join_model());
      r.summary.name = s.name;
      b.StartCompletion(s, std::move(r), std::move(outputs));  // after the stages' before it
      // One thread asked for: one at a time (the ceiling of the scaling sweep is 16 such builds).
      if (opts.run.threads == 1) RETURN_IF_ERROR(b.JoinCompletion());
    } else {
      b.records[s.name] = std::move(*rec);
    }
    if (s.keeps_documents) {
      ASSIGN_OR_RETURN(b.docs, KeptParts(env, b.Dir(s.output_root)));
    }
    if (s.keeps_documents && b.docs.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("build: no documents left after ", s.name));
    }
  }

  RETURN_IF_ERROR(join_model());
  RETURN_IF_ERROR(b.JoinCompletion());
  // The discarded work folder is gone before the release is packed (on a slow file system, the
  // wait, if any, counts in the build's time rather than after it).
  if (b.discarding.joinable()) b.discarding.join();
  PublishOptions po;
  po.config = &bc;
  po.config_path = opts.config_path;
  po.output_dir = opts.output_dir;
  po.staging_dir = b.Dir("release");
  po.run = opts.run;
  ASSIGN_OR_RETURN(po.tokenizer, b.Tokenizer());
  po.tokens_dir = b.TokensDir();
  ASSIGN_OR_RETURN(const std::vector<shard::FileInfo>* input_sums, b.InputSums());
  po.hashed_inputs = *input_sums;
  po.inputs = b.input_files;
  ASSIGN_OR_RETURN(const std::string pack_upstream, b.PackUpstream());
  po.records = std::move(b.records);
  po.total = &total;
  // The release at --output already packed from exactly these stages' outputs under this config
  // (the pack record), its files as its manifest lists them: nothing to pack or publish.
  const std::string pack_record = b.RecordPath(kPackStep);
  if (std::optional<std::string> id = PackRecordRelease(env, pack_record, bc.hash, pack_upstream)) {
    ASSIGN_OR_RETURN(std::optional<BuildReport> current,
                     ReleaseUpToDate(env, po, *id, b.sums.get()));
    if (current) {
      RETURN_IF_ERROR(b.sums->Save());
      return *std::move(current);
    }
  }
  RETURN_IF_ERROR(b.sums->Save());
  ASSIGN_OR_RETURN(BuildReport report, PackAndPublish(env, po));
  // After the release is published (a kill before leaves the record of an earlier release, or
  // none: pack runs again).
  RETURN_IF_ERROR(
      WriteFileAtomic(env, pack_record, PackRecordJson(bc.hash, pack_upstream, report.release_id)));
  return report;
}

absl::StatusOr<BuildReport> PackRelease(Env* env, const PackReleaseOptions& pro) {
  Stopwatch total;
  if (pro.output_dir.empty()) return absl::InvalidArgumentError("--output is required");
  ASSIGN_OR_RETURN(BuildConfig bc, ReadBuildConfig(env, pro.config_path, pro.config_overrides));
  RETURN_IF_ERROR(CheckOutputOutsideInputs(env, bc.inputs, pro.output_dir, "inputs.paths"));
  ASSIGN_OR_RETURN(const OutputLock lock, OutputLock::Take(pro.output_dir, /*shared=*/false));
  ASSIGN_OR_RETURN(auto tok, tokenize::Tokenizer::Load(env, pro.model_path));
  ASSIGN_OR_RETURN(std::vector<std::string> parts, tokenize::ListTokenParts(env, pro.tokens_dir));
  ASSIGN_OR_RETURN(std::vector<InputFile> files, ListInputs(env, bc.inputs));
  PublishOptions po;
  po.config = &bc;
  po.config_path = pro.config_path;
  po.output_dir = pro.output_dir;
  po.staging_dir = pro.output_dir + ".partial";
  po.run = pro.run;
  po.tokenizer = tok.get();
  po.tokens_dir = pro.tokens_dir;
  po.inputs = std::move(files);
  // The tokenize stage's counts: the sum over the tasks' reports; clean and dedup not run.
  ASSIGN_OR_RETURN(tokenize::EncodeReport er, MergeEncodeReports(env, parts));
  StageRecord enc = EncodeRecord(er);
  enc.summary.seconds = 0;
  enc.summary.note = absl::StrCat(parts.size(), " task(s)");
  enc.summary.resumed = true;
  StageRecord tr;
  tr.summary.name = "tokenizer";
  tr.summary.note = "given";
  tr.summary.resumed = true;
  po.records = {{"tokenizer", std::move(tr)}, {"tokenize", std::move(enc)}};
  po.total = &total;
  return PackAndPublish(env, po);
}

}  // namespace grist::release
