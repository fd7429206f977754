// `grist build`, `grist verify`, `grist inspect`: the release builder and its checks. Thin: flags ->
// release/ API.
#include <cstdio>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/json_writer.h"
#include "common/status_macros.h"
#include "pack/pack.h"
#include "release/release.h"
#include "shard/split_policy.h"
#include "shard/split_writer.h"
#include "tools/command.h"
#include "tools/option_flags.h"

namespace grist::tools {
namespace {

Runner SetupBuild(CLI::App* app) {
  struct F {
    CommonFlags common;
    release::BuildOptions o;
  };
  auto f = std::make_shared<F>();
  app->add_option("--config", f->o.config_path, "Release config (e.g. configs/v1.0.toml)")
      ->required();
  app->add_option("--output,-o", f->o.output_dir, "Release folder to write")->required();
  app->add_flag("--restart", f->o.restart, "Discard completed stages and rebuild everything");
  app->add_option("--stage", f->o.stage,
                  "Run one step only (clean, clean-merge, dedup-*, tokenizer, tokenize, "
                  "tokenize-merge, pack), for job arrays: "
                  "see scripts/slurm/ and docs/slurm.md")
      ->check(CLI::IsMember(release::BuildStages()));
  AddCommonFlags(app, &f->common, /*with_tasks=*/true);
  return [f]() -> absl::Status {
    if (release::StageTakesTasks(f->o.stage)) {
      RETURN_IF_ERROR(ResolveTasks(&f->common));
    } else if (f->common.task >= 0 || f->common.tasks >= 0) {
      return UsageError(
          "--task/--tasks go with the job-array stages only (clean, dedup-signatures, "
          "dedup-buckets, dedup-clusters, dedup-filter, tokenize)");
    }
    f->o.run = StageRun(f->common);
    ASSIGN_OR_RETURN(auto rep, release::BuildRelease(Env::Default(), f->o));
    if (!f->o.stage.empty() && f->o.stage != "pack") {
      const release::StageSummary& s = rep.stages.back();
      std::printf("stage %s done%s%s: %llu documents in, %llu out, %llu tokens, %.2f s\n",
                  f->o.stage.c_str(), s.note.empty() ? "" : " ", s.note.c_str(),
                  static_cast<unsigned long long>(s.docs_in),
                  static_cast<unsigned long long>(s.docs_out),
                  static_cast<unsigned long long>(s.tokens), rep.seconds);
      return MaybeWriteJson(f->common, rep.ToJson());
    }
    std::printf("%s", rep.Table().c_str());
    return MaybeWriteJson(f->common, rep.ToJson());
  };
}

Runner SetupVerify(CLI::App* app) {
  struct F {
    CommonFlags common;
    std::string dir;
  };
  auto f = std::make_shared<F>();
  app->add_option("dir", f->dir, "Release folder")->required();
  AddJsonFlag(app, &f->common.json_path, "the result");
  app->add_option("--threads", f->common.threads,
                  "Files checked at once (0 = all CPUs; the report is the same for any count)")
      ->check(CLI::NonNegativeNumber);
  return [f]() -> absl::Status {
    if (!Env::Default()->IsDirectory(f->dir)) {
      return absl::NotFoundError(absl::StrCat(f->dir, ": no such release folder"));
    }
    // A release whose manifest cannot be read as one is bad data (exit status 3), as is every
    // problem the check lists; failures of the machine itself (permissions, I/O) are not.
    auto verified = release::VerifyRelease(Env::Default(), f->dir, f->common.threads);
    if (!verified.ok()) {
      return IsEnvironmentError(verified.status()) ? verified.status()
                                                   : BadDataError(verified.status());
    }
    auto& rep = *verified;
    JsonWriter w(2);
    w.BeginObject().Field("ok", rep.ok()).Field("files_checked", rep.files_checked);
    w.Field("bytes_checked", rep.bytes_checked).Key("problems").BeginArray();
    for (const auto& p : rep.problems) w.String(p);
    w.EndArray().EndObject();
    RETURN_IF_ERROR(MaybeWriteJson(f->common, w.str()));
    for (const auto& p : rep.problems) std::fprintf(stderr, "BAD %s\n", p.c_str());
    if (!rep.ok()) {
      return BadDataError(absl::DataLossError(absl::StrCat(
          f->dir, ": ", rep.problems.size(), " problem(s); first: ", rep.problems.front())));
    }
    std::printf("OK %s: %llu files, %llu bytes, every checksum matches\n", f->dir.c_str(),
                static_cast<unsigned long long>(rep.files_checked),
                static_cast<unsigned long long>(rep.bytes_checked));
    return absl::OkStatus();
  };
}

Runner SetupInspect(CLI::App* app) {
  struct F {
    std::string dir;
    bool megatron = false;
    release::InspectOptions o;
  };
  auto f = std::make_shared<F>();
  app->add_option("dir", f->dir, "Release folder")->required();
  app->add_option("--sample", f->o.sample, "Decode this sample (split-global index) to text")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--split", f->o.split, "train or validation (default train)")
      ->check(CLI::IsMember({"train", "validation"}));
  app->add_option("--top", f->o.top_tokens, "How many frequent tokens to list")
      ->check(CLI::NonNegativeNumber);
  app->add_flag("--megatron", f->megatron,
                "Print only the Megatron-LM arguments (--data-path, --split, --seq-length, "
                "tokenizer) that train on the release's document files");
  return [f]() -> absl::Status {
    if (f->megatron) {
      ASSIGN_OR_RETURN(std::string args, release::MegatronArguments(Env::Default(), f->dir));
      std::fwrite(args.data(), 1, args.size(), stdout);
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(std::string text, release::InspectRelease(Env::Default(), f->dir, f->o));
    std::fwrite(text.data(), 1, text.size(), stdout);
    return absl::OkStatus();
  };
}

Runner SetupPack(CLI::App* app) {
  struct F {
    CommonFlags common;
    release::PackReleaseOptions o;
    ConfigFlags options;  // one per key of the [pack], [split] and [shard] tables
  };
  auto f = std::make_shared<F>();
  app->add_option("--config", f->o.config_path,
                  "Release config ([pack], [split], [shard], seed, release, inputs; see "
                  "docs/pack.md); the flags below override it")
      ->required();
  app->add_option("--tokens", f->o.tokens_dir, "Output folder of grist tokenize encode (all tasks)")
      ->required();
  app->add_option("--model", f->o.model_path, "The tokenizer model the tokens were made with")
      ->required();
  app->add_option("--output,-o", f->o.output_dir, "Release folder to write")->required();
  f->options.Add(app, pack::PackOptions::Table().Describe());
  f->options.Add(app, shard::SplitPolicy::Table().Describe());
  f->options.Add(app, shard::ShardOptions::Table().Describe());
  AddCommonFlags(app, &f->common, /*with_tasks=*/false);
  return [f]() -> absl::Status {
    f->o.config_overrides = [f](Config* config) { f->options.ApplyTo(config); };
    f->o.run = StageRun(f->common);
    ASSIGN_OR_RETURN(auto rep, release::PackRelease(Env::Default(), f->o));
    std::printf("%s", rep.Table().c_str());
    return MaybeWriteJson(f->common, rep.ToJson());
  };
}

GRIST_REGISTER_COMMAND(pack, "pack",
                       "Pack tokenized documents into a release (the pack+shard stage alone)",
                       SetupPack);
GRIST_REGISTER_COMMAND(build, "build",
                       "Build a release: clean -> dedup -> tokenize -> pack -> shard", SetupBuild);
GRIST_REGISTER_COMMAND(verify, "verify", "Check a release's structure, sizes and checksums",
                       SetupVerify);
GRIST_REGISTER_COMMAND(inspect, "inspect",
                       "Summarize a release: manifest, histograms, decode a sample", SetupInspect);

}  // namespace
}  // namespace grist::tools
