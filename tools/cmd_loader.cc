// `grist loader DIR`: shows the order the loader gives a release: for each step, each
// data-parallel rank's sample numbers (what grist.Loader would deliver with the same settings),
// optionally from a saved state. A way to check the order and resume semantics without torch.
#include <cstdio>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/json_writer.h"
#include "common/status_macros.h"
#include "loader/loader.h"
#include "tools/command.h"

namespace grist::tools {
namespace {

struct LoaderFlags {
  CommonFlags common;
  // The flags set these fields; the rest, and the defaults, are LoaderOptions' own (what
  // grist.Loader does with the same settings).
  loader::LoaderOptions o;
  int64_t steps = 4;
  std::string state_file;
};

// " (default: <v>)", the value a default LoaderOptions holds.
template <typename T>
std::string Default(const T& v) {
  return absl::StrCat(" (default: ", v, ")");
}

Runner Setup(CLI::App* app) {
  auto f = std::make_shared<LoaderFlags>();
  const loader::LoaderOptions d;
  app->add_option("release", f->o.path, "Release folder")->required();
  app->add_option("--split", f->o.split, "Split to read" + Default(d.split))
      ->check(CLI::IsMember({"train", "validation"}));
  app->add_option("--micro-batch", f->o.micro_batch_size, "Samples per micro batch")
      ->required()
      ->check(CLI::PositiveNumber);
  app->add_option("--global-batch", f->o.global_batch_size, "Samples per step over all ranks")
      ->required()
      ->check(CLI::PositiveNumber);
  app->add_option("--dp-size", f->o.dp_size, "Data-parallel ranks" + Default(d.dp_size))
      ->check(CLI::PositiveNumber);
  app->add_option("--steps", f->steps, "Steps to show" + Default(f->steps))
      ->check(CLI::NonNegativeNumber);
  app->add_option("--epochs", f->o.epochs, "Epochs of the run, 0: unlimited" + Default(d.epochs))
      ->check(CLI::NonNegativeNumber);
  app->add_option("--seed", f->o.seed, "Order seed (default: the release's)");
  app->add_option("--state", f->state_file, "Start from this loader state (JSON from state_dict())");
  AddJsonFlag(app, &f->common.json_path, "the order");
  return [f, app]() -> absl::Status {
    std::vector<std::unique_ptr<loader::Loader>> ranks;
    for (int64_t r = 0; r < f->o.dp_size; ++r) {
      loader::LoaderOptions o = f->o;
      o.dp_rank = r;
      o.has_seed = app->count("--seed") > 0;
      o.prefetch = 1;  // the order does not depend on these
      o.num_workers = 1;
      o.fields = loader::kSampleIndex;
      ASSIGN_OR_RETURN(auto l, loader::Loader::Open(o));
      if (!f->state_file.empty()) {
        ASSIGN_OR_RETURN(std::string json, ReadFileToString(Env::Default(), f->state_file));
        ASSIGN_OR_RETURN(loader::LoaderState st, loader::LoaderState::FromJson(json));
        RETURN_IF_ERROR(l->LoadState(st));
      }
      ranks.push_back(std::move(l));
    }
    const loader::Loader& first = *ranks[0];
    std::printf("release %s, split %s: %llu samples, seed %llu; %lld micro batches per step\n",
                first.source().release_id().c_str(), f->o.split.c_str(),
                static_cast<unsigned long long>(first.source().num_samples()),
                static_cast<unsigned long long>(first.schedule().options().seed),
                static_cast<long long>(first.schedule().micro_batches_per_step()));
    JsonWriter w;
    w.BeginObject().Field("release_id", first.source().release_id());
    w.Field("seed", first.schedule().options().seed).Key("steps").BeginArray();
    for (int64_t t = 0; t < f->steps; ++t) {
      loader::LoaderState at = ranks[0]->state();
      std::printf("step at consumed_samples %llu:\n",
                  static_cast<unsigned long long>(at.position.consumed_samples));
      w.BeginObject().Field("consumed_samples", at.position.consumed_samples).Key("ranks").BeginArray();
      bool ended = false;
      for (auto& l : ranks) {
        std::string line;
        w.BeginArray();
        for (int64_t m = 0; m < l->schedule().micro_batches_per_step(); ++m) {
          auto b = l->Next();
          if (absl::IsOutOfRange(b.status())) {
            ended = true;
            break;
          }
          RETURN_IF_ERROR(b.status());
          const loader::TensorInfo* t = (*b)->tensor("sample_index");
          const auto* idx = static_cast<const int64_t*>(t->data);
          for (int64_t i = 0; i < t->shape[0]; ++i) {
            absl::StrAppend(&line, line.empty() ? "" : " ", idx[i]);
            w.Int(idx[i]);
          }
        }
        w.EndArray();
        if (!ended) {
          std::printf("  rank %lld: %s\n", static_cast<long long>(&l - &ranks[0]), line.c_str());
        }
      }
      w.EndArray().EndObject();
      if (ended) {
        std::printf("  (end of the run)\n");
        break;
      }
    }
    w.EndArray().Key("next_state").Raw(ranks[0]->state().ToJson()).EndObject();
    std::printf("state after these steps: %s\n", ranks[0]->state().ToJson().c_str());
    return MaybeWriteJson(f->common, w.str());
  };
}

GRIST_REGISTER_COMMAND(loader, "loader",
                       "Show the loader's order for a release: each rank's samples per step", Setup);

}  // namespace
}  // namespace grist::tools
