// `grist clean`: normalize and quality-filter documents (clean/run_clean.h does the work).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "clean/cleaner.h"
#include "clean/run_clean.h"
#include "common/config.h"
#include "common/env.h"
#include "common/input_plan.h"
#include "common/stage.h"
#include "common/status_macros.h"
#include "tools/command.h"
#include "tools/option_flags.h"

namespace grist::tools {
namespace {

struct CleanFlags {
  CommonFlags common;
  std::vector<std::string> inputs;
  std::vector<std::string> hf_datasets;  // NAME[:split], read after the --input paths
  std::string output;
  std::string config;
  ConfigFlags options;  // one per key of CleanOptions::Table()
};

Runner Setup(CLI::App* app) {
  auto f = std::make_shared<CleanFlags>();
  app->add_option("--input,-i", f->inputs,
                  "Input files or folders (JSONL, .jsonl.gz, .jsonl.zst, .txt, .parquet, folders "
                  "of files)")
      ->expected(1, -1);
  app->add_option("--hf-dataset", f->hf_datasets,
                  "A Hugging Face dataset to read after the --input paths: NAME[:split] (Hub name "
                  "or local folder, split default train; needs Python with datasets, docs/hf.md)")
      ->expected(1, -1);
  app->add_option("--output,-o", f->output,
                  "Output folder: kept parts, rejects/ and the report (see docs/clean.md)")
      ->required();
  app->add_option("--config", f->config,
                  "TOML config; section [clean] (see docs/clean.md); the flags below override it");
  f->options.Add(app, clean::CleanOptions::Table().Describe());
  AddCommonFlags(app, &f->common);
  return [f]() -> absl::Status {
    if (f->inputs.empty() && f->hf_datasets.empty()) {
      return UsageError("give --input PATH... or --hf-dataset NAME[:split] (or both)");
    }
    for (const std::string& d : f->hf_datasets) {
      auto in = HfDatasetInput(d);
      if (!in.ok()) return UsageError(std::string(in.status().message()));
      f->inputs.push_back(*std::move(in));
    }
    RETURN_IF_ERROR(ResolveTasks(&f->common));
    Env* env = Env::Default();
    Config config;
    if (!f->config.empty()) {
      ASSIGN_OR_RETURN(config, Config::FromFile(env, f->config));
    }
    f->options.ApplyTo(&config);
    ASSIGN_OR_RETURN(clean::CleanOptions options, clean::CleanOptions::FromConfig(config));
    RETURN_IF_ERROR(CheckOutputOutsideInputs(env, f->inputs, f->output, "--input"));
    ASSIGN_OR_RETURN(clean::CleanReport report,
                     clean::RunClean(env, f->inputs, f->output, options, StageRun(f->common)));
    std::fputs(report.Summary().c_str(), stdout);
    return MaybeWriteJson(f->common, report.ToJson());
  };
}

GRIST_REGISTER_COMMAND(clean, "clean",
                       "Normalize text and apply the Gopher/C4/FineWeb quality filters; every "
                       "rejected document is kept with its reasons",
                       Setup);

}  // namespace
}  // namespace grist::tools
