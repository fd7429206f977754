// `grist dedup`: exact and near-duplicate removal (see dedup/dedup.h and docs/dedup.md).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/config.h"
#include "common/env.h"
#include "common/progress.h"
#include "common/status_macros.h"
#include "dedup/dedup.h"
#include "tools/command.h"

namespace grist::tools {
namespace {

struct DedupFlags {
  CommonFlags common;
  std::vector<std::string> inputs;
  std::string output;
  std::string config;
  std::string stage;
  double threshold = 0;
  int num_perm = 0, bands = 0, rows = 0, ngram = 0;
  std::string shingle, exact_normalize, work_dir, text_field, txt_mode;
  int64_t memory_limit_mb = 0;
  uint64_t seed = 0;
  bool no_verify = false, no_exact = false, no_near = false, line_dedup = false, keep_work = false;
};

void PrintSummary(const dedup::DedupReport& r) {
  std::printf("documents in %llu, kept %llu, removed %llu (exact %llu, near %llu, lines %llu), "
              "rejected %llu\n",
              (unsigned long long)r.counts.docs_in, (unsigned long long)r.counts.docs_out,
              (unsigned long long)r.counts.docs_removed, (unsigned long long)r.removed_exact,
              (unsigned long long)r.removed_near, (unsigned long long)r.removed_lines,
              (unsigned long long)r.counts.docs_rejected);
  std::printf("clusters %llu, candidate pairs %llu, verified %llu, exact pairs %llu; LSH %d x %d "
              "of %d, threshold %g, SIMD %s\n",
              (unsigned long long)r.clusters, (unsigned long long)r.candidate_pairs,
              (unsigned long long)r.verified_pairs, (unsigned long long)r.exact_pairs, r.bands,
              r.rows, r.num_perm, r.threshold, r.simd_target.c_str());
  if (r.verify_passes > 0) {
    std::printf("verification: %s of candidate sets spilled, %llu pass(es) within --memory-limit "
                "%s\n",
                HumanBytes(static_cast<double>(r.spilled_set_bytes)).c_str(),
                (unsigned long long)r.verify_passes,
                HumanBytes(static_cast<double>(r.memory_limit)).c_str());
  }
  for (const auto& s : r.stages) {
    std::printf("  %-10s %2d task(s) %8.2f s  %s read  peak RSS %s\n", s.stage.c_str(), s.tasks,
                s.seconds, HumanBytes(static_cast<double>(s.input_bytes)).c_str(),
                HumanBytes(static_cast<double>(s.peak_rss_bytes)).c_str());
  }
}

Runner Setup(CLI::App* app) {
  auto f = std::make_shared<DedupFlags>();
  app->add_option("--input,-i", f->inputs, "Input files or folders (JSONL, .gz, .zst, text)")
      ->required();
  app->add_option("--output,-o", f->output,
                  "Output folder: kept documents in DIR/, removed in DIR/removed/, "
                  "DIR/dedup_report.json")
      ->required();
  app->add_option("--config", f->config, "TOML config; its [dedup] section sets the defaults");
  app->add_option("--stage", f->stage,
                  "Run one stage as --task I --tasks N; default: all stages on this machine")
      ->check(CLI::IsMember({"signatures", "buckets", "clusters", "merge", "filter", "report"}));
  app->add_option("--threshold", f->threshold,
                  "Jaccard threshold (default 0.8); without --bands/--rows it also picks "
                  "bands x rows")
      ->check(CLI::Range(0.0, 1.0));
  app->add_option("--num-perm", f->num_perm, "MinHash permutations (default 112)")
      ->check(CLI::PositiveNumber);
  app->add_option("--bands", f->bands, "LSH bands (default 14)")->check(CLI::PositiveNumber);
  app->add_option("--rows", f->rows, "LSH rows per band (default 8)")->check(CLI::PositiveNumber);
  app->add_option("--ngram", f->ngram, "Words (or bytes) per shingle (default 5)")
      ->check(CLI::PositiveNumber);
  app->add_option("--shingle", f->shingle, "Shingle unit (default word)")
      ->check(CLI::IsMember({"word", "char"}));
  app->add_flag("--no-verify", f->no_verify,
                "Do not verify candidate pairs by true Jaccard (faster, less precise)");
  app->add_flag("--no-exact", f->no_exact, "Skip exact (XXH3-128) dedup");
  app->add_flag("--no-near", f->no_near, "Skip near-duplicate (MinHash) dedup");
  app->add_flag("--line-dedup", f->line_dedup,
                "Also remove every line that occurs in more than one document");
  app->add_option("--exact-normalize", f->exact_normalize,
                  "Text normalization before the exact hash (default whitespace)")
      ->check(CLI::IsMember({"none", "whitespace", "lower"}));
  app->add_option("--memory-limit", f->memory_limit_mb,
                  "Memory budget per task in MB: sort buffers and the verification cache (default 1024)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  app->add_option("--work-dir", f->work_dir,
                  "Intermediate files (default DIR/.dedup-work; shared by all tasks)");
  app->add_flag("--keep-work", f->keep_work, "Keep the intermediate files after a full run");
  app->add_option("--seed", f->seed, "Seed of the MinHash permutations");
  app->add_option("--text-field", f->text_field, "JSON field holding the text (default text)");
  app->add_option("--txt-mode", f->txt_mode, "Plain-text files: one document per file (default) or per blank-line block")
      ->check(CLI::IsMember({"file", "blocks"}));
  AddCommonFlags(app, &f->common);
  return [f, app]() -> absl::Status {
    RETURN_IF_ERROR(ResolveTasks(&f->common));
    Config config;
    if (!f->config.empty()) {
      ASSIGN_OR_RETURN(config, Config::FromFile(Env::Default(), f->config));
    }
    ASSIGN_OR_RETURN(dedup::DedupOptions o, dedup::DedupOptions::FromConfig(config));
    auto given = [&](const char* name) { return app->count(name) > 0; };
    if (given("--num-perm")) o.num_perm = f->num_perm;
    if (given("--threshold")) {
      o.threshold = f->threshold;
      if (!given("--bands") && !given("--rows") && !config.Has("dedup.bands") &&
          !config.Has("dedup.rows")) {
        o.bands = o.rows = 0;  // automatic
      }
    }
    if (given("--bands")) o.bands = f->bands;
    if (given("--rows")) o.rows = f->rows;
    if (given("--ngram")) o.shingle.n = f->ngram;
    if (given("--shingle")) {
      if (f->shingle == "word") {
        o.shingle.kind = dedup::ShingleKind::kWord;
      } else if (f->shingle == "char") {
        o.shingle.kind = dedup::ShingleKind::kChar;
      } else {
        return UsageError("--shingle must be word or char, got '" + f->shingle + "'");
      }
    }
    if (f->no_verify) o.verify = false;
    if (f->no_exact) o.exact = false;
    if (f->no_near) o.near = false;
    if (f->line_dedup) o.line_dedup = true;
    if (given("--exact-normalize")) {
      if (f->exact_normalize == "none") {
        o.exact_normalize = dedup::ExactNormalize::kNone;
      } else if (f->exact_normalize == "whitespace") {
        o.exact_normalize = dedup::ExactNormalize::kWhitespace;
      } else if (f->exact_normalize == "lower") {
        o.exact_normalize = dedup::ExactNormalize::kLower;
      } else {
        return UsageError("--exact-normalize must be none, whitespace or lower");
      }
    }
    if (given("--memory-limit")) {
      if (f->memory_limit_mb <= 0) return UsageError("--memory-limit must be > 0");
      o.memory_limit = static_cast<uint64_t>(f->memory_limit_mb) << 20;
    }
    if (given("--work-dir")) o.work_dir = f->work_dir;
    if (f->keep_work) o.keep_work = true;
    if (given("--seed")) o.seed = f->seed;
    if (given("--text-field")) o.input.text_field = f->text_field;
    if (given("--txt-mode")) o.input.txt_mode = f->txt_mode;
    RETURN_IF_ERROR(o.Validate());

    RunOptions run;
    run.threads = f->common.threads;
    run.task = f->common.task;
    run.tasks = f->common.tasks;
    run.progress = !f->common.quiet;
    dedup::DedupReport report;
    if (f->stage.empty()) {
      if (run.tasks != 1) {
        return UsageError("--task/--tasks need --stage (run the stages one by one as a job array)");
      }
      ASSIGN_OR_RETURN(report, dedup::RunDedup(Env::Default(), f->inputs, f->output, o, run));
    } else {
      ASSIGN_OR_RETURN(dedup::DedupStage stage, dedup::ParseDedupStage(f->stage));
      ASSIGN_OR_RETURN(report, dedup::RunDedupStage(Env::Default(), stage, f->inputs, f->output,
                                                    o, run));
      if (stage != dedup::DedupStage::kReport) {
        std::printf("dedup stage %s: task %d of %d done\n", f->stage.c_str(), run.task, run.tasks);
        return absl::OkStatus();
      }
    }
    PrintSummary(report);
    return MaybeWriteJson(f->common, report.ToJson());
  };
}

GRIST_REGISTER_COMMAND(dedup, "dedup",
                       "Remove exact and near-duplicate documents (MinHash LSH)", Setup);

}  // namespace
}  // namespace grist::tools
