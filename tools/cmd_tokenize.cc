// `grist tokenize train|encode`: train the locked SentencePiece tokenizer; encode documents to
// Megatron MMIDIDX token files. Thin: flags -> tokenize/ API.
#include <cstdio>
#include <memory>

#include "absl/strings/str_format.h"
#include "common/config.h"
#include "common/env.h"
#include "common/input_plan.h"
#include "common/status_macros.h"
#include "tokenize/encode.h"
#include "tokenize/tokenizer.h"
#include "tools/command.h"
#include "tools/option_flags.h"

namespace grist::tools {
namespace {

struct TokenizeFlags {
  CommonFlags common;
  std::string config;
  std::vector<std::string> inputs;
  std::string output;
  std::string model;
  ConfigFlags train_options;  // one per key of TrainOptions::Table()
  ConfigFlags encode_options;  // one per key of EncodeStageOptions::Table()
};

Runner Setup(CLI::App* app) {
  auto f = std::make_shared<TokenizeFlags>();
  app->require_subcommand(1);
  CLI::App* train = app->add_subcommand("train", "Train the SentencePiece tokenizer on documents");
  train->add_option("--config", f->config,
                   "Release config (reads [tokenizer] and seed); the flags below override it");
  train->add_option("--input,-i", f->inputs,
                    "Input files or folders (default: the config's inputs)");
  train->add_option("--output,-o", f->output, "Where to write the model (e.g. tokenizer.model)")
      ->required();
  f->train_options.Add(train, tokenize::TrainOptions::Table().Describe());
  AddCommonFlags(train, &f->common, /*with_tasks=*/false);

  CLI::App* encode = app->add_subcommand(
      "encode", "Encode documents to MMIDIDX .bin/.idx (one sequence per document)");
  encode->add_option("--model", f->model, "SentencePiece model")->required();
  encode->add_option("--input,-i", f->inputs, "Input files or folders")->required();
  encode->add_option("--output,-o", f->output, "Output folder")->required();
  encode->add_option("--config", f->config,
                     "Config for [tokenize]; the flags below override it");
  f->encode_options.Add(encode, tokenize::EncodeStageOptions::Table().Describe());
  AddCommonFlags(encode, &f->common, /*with_tasks=*/true);

  return [f, train]() -> absl::Status {
    Env* env = Env::Default();
    Config config;
    if (!f->config.empty()) {
      ASSIGN_OR_RETURN(config, Config::FromFile(env, f->config));
    }
    if (train->parsed()) {
      f->train_options.ApplyTo(&config);
      if (!config.Has("seed")) config.SetInt("seed", 0);
      ASSIGN_OR_RETURN(auto opts, tokenize::TrainOptions::FromConfig(config));
      std::vector<std::string> inputs = f->inputs;
      if (inputs.empty()) {
        ASSIGN_OR_RETURN(inputs, ConfigInputs(config));  // inputs.paths, inputs.hf_datasets
      }
      ASSIGN_OR_RETURN(auto rep, tokenize::TrainTokenizer(env, inputs, f->output, opts,
                                                          !f->common.quiet));
      std::printf("trained %s tokenizer (%d pieces) on %llu sentences of %llu documents -> %s\n",
                  opts.model_type.c_str(), opts.vocab_size,
                  static_cast<unsigned long long>(rep.sentences_used),
                  static_cast<unsigned long long>(rep.documents), f->output.c_str());
      return MaybeWriteJson(f->common, rep.ToJson());
    }
    RETURN_IF_ERROR(ResolveTasks(&f->common));
    f->encode_options.ApplyTo(&config);
    ASSIGN_OR_RETURN(auto opts, tokenize::EncodeStageOptions::FromConfig(config));
    opts.model_path = f->model;
    RETURN_IF_ERROR(CheckOutputOutsideInputs(env, f->inputs, f->output, "--input"));
    ASSIGN_OR_RETURN(auto rep,
                     tokenize::RunEncode(env, f->inputs, f->output, opts, StageRun(f->common)));
    std::printf("%llu documents -> %llu sequences, %llu tokens (%llu rejected) in %.2f s: %.1f MB/s "
                "[engine %s] -> %s\n",
                static_cast<unsigned long long>(rep.counts.docs_in),
                static_cast<unsigned long long>(rep.counts.docs_out),
                static_cast<unsigned long long>(rep.tokens),
                static_cast<unsigned long long>(rep.counts.docs_rejected), rep.seconds,
                rep.seconds > 0 ? rep.counts.bytes_in / rep.seconds / 1e6 : 0.0,
                rep.engine.c_str(), rep.output_prefix.c_str());
    std::printf("  seconds: start %.3f (model %.3f and inputs %.3f at once), encode %.3f, "
                "finish %.3f\n",
                rep.phase_seconds.start, rep.phase_seconds.model, rep.phase_seconds.plan,
                rep.phase_seconds.encode, rep.phase_seconds.finish);
    return MaybeWriteJson(f->common, rep.ToJson());
  };
}

GRIST_REGISTER_COMMAND(tokenize, "tokenize", "Train the tokenizer or encode documents to tokens",
                       Setup);

}  // namespace
}  // namespace grist::tools
