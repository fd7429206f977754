// `grist clean`: normalize and quality-filter documents (clean/run_clean.h does the work).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "clean/cleaner.h"
#include "clean/run_clean.h"
#include "common/config.h"
#include "common/env.h"
#include "common/stage.h"
#include "common/status_macros.h"
#include "tools/command.h"
#include "tools/option_flags.h"

namespace grist::tools {
namespace {

struct CleanFlags {
  CommonFlags common;
  std::vector<std::string> inputs;
  std::string output;
  std::string config;
  ConfigFlags options;  // one per key of CleanOptions::Table()
};

Runner Setup(CLI::App* app) {
  auto f = std::make_shared<CleanFlags>();
  app->add_option("--input", f->inputs,
                  "Input files or folders (JSONL, .jsonl.gz, .jsonl.zst, .txt, folders of files)")
      ->required()
      ->expected(1, -1);
  app->add_option("--output", f->output,
                  "Output folder: kept parts, rejects/ and the report (see docs/clean.md)")
      ->required();
  app->add_option("--config", f->config,
                  "TOML config; section [clean] (see docs/clean.md); the flags below override it");
  f->options.Add(app, clean::CleanOptions::Table().Describe());
  AddCommonFlags(app, &f->common);
  return [f]() -> absl::Status {
    RETURN_IF_ERROR(ResolveTasks(&f->common));
    Env* env = Env::Default();
    Config config;
    if (!f->config.empty()) {
      ASSIGN_OR_RETURN(config, Config::FromFile(env, f->config));
    }
    f->options.ApplyTo(&config);
    ASSIGN_OR_RETURN(clean::CleanOptions options, clean::CleanOptions::FromConfig(config));
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
