// `grist dedup`: exact and near-duplicate removal (see dedup/dedup.h and docs/dedup.md).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/config.h"
#include "common/env.h"
#include "common/input_plan.h"
#include "common/progress.h"
#include "common/status_macros.h"
#include "dedup/dedup.h"
#include "tools/command.h"
#include "tools/option_flags.h"

namespace grist::tools {
namespace {

struct DedupFlags {
  CommonFlags common;
  std::vector<std::string> inputs;
  std::string output;
  std::string config;
  std::string stage;
  ConfigFlags options;  // one per key of DedupOptions::Table()
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
    const std::string where =
        r.spilled_set_bytes > 0
            ? HumanBytes(static_cast<double>(r.spilled_set_bytes)) + " of candidate sets spilled"
            : std::string("candidate sets in memory");
    std::printf("verification: %s, %llu pass(es) within --memory-limit %s; %llu set(s) read again "
                "from the input\n",
                where.c_str(), (unsigned long long)r.verify_passes,
                HumanBytes(static_cast<double>(r.memory_limit)).c_str(),
                (unsigned long long)r.sets_from_input);
  }
  if (r.trial_splits > 0) {
    std::printf("shingles for verification: %s (%llu of the trial's first %llu split(s) held "
                "candidates)\n",
                r.shingles_kept ? "kept in memory" : "not kept, candidates' splits read again",
                (unsigned long long)r.trial_candidate_splits, (unsigned long long)r.trial_splits);
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
  app->add_option("--config", f->config,
                  "TOML config; its [dedup] section sets the defaults, the flags below override it");
  app->add_option("--stage", f->stage,
                  "Run one stage as --task I --tasks N; default: all stages on this machine")
      ->check(CLI::IsMember(dedup::DedupStageNames()));
  f->options.Add(app, dedup::DedupOptions::Table().Describe());
  AddCommonFlags(app, &f->common);
  return [f]() -> absl::Status {
    RETURN_IF_ERROR(ResolveTasks(&f->common));
    Config config;
    if (!f->config.empty()) {
      ASSIGN_OR_RETURN(config, Config::FromFile(Env::Default(), f->config));
    }
    f->options.ApplyTo(&config);
    ASSIGN_OR_RETURN(dedup::DedupOptions o, dedup::DedupOptions::FromConfig(config));

    RETURN_IF_ERROR(CheckOutputOutsideInputs(Env::Default(), f->inputs, f->output, "--input"));
    const RunOptions run = StageRun(f->common);
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
