// `grist bench build`: the whole pipeline, `grist build` of a config end to end (clean, dedup,
// tokenizer training, tokenize, pack+shard, manifest), every repetition from scratch (--restart),
// in input MB per second, with each stage's time and throughput from the build report.
//
// Peers, measured in the same run on the same inputs:
//   - the clean stage alone (clean::RunClean with the config's [clean] options) (a ceiling: clean
//   is the build's first
//     stage and reads every input byte, so the build cannot be faster than it);
//   - the sum of the stage times the build itself reports (the build's wall time minus this is
//     what is outside the stages: input hashing, the work folder, the manifest).
//
// Config: --config (e.g. configs/v1.0.toml with the demo corpus), else one written here over a
// sample of the default corpus (../shared/corpus/wikinews-en, else .demo/corpus) with clean and
// dedup on, as v1.0 but a smaller vocabulary.
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/corpus_sample.h"
#include "bench/harness.h"
#include "bench/registry.h"
#include "clean/run_clean.h"
#include "common/config.h"
#include "common/env.h"
#include "common/status_macros.h"
#include "common/sysinfo.h"
#include "common/thread_pool.h"
#include "release/release.h"

namespace grist::bench {
namespace {

struct BuildBenchFlags {
  Options options;
  std::string config;
  std::vector<std::string> inputs;
  uint64_t max_bytes = 32ull << 20;
  int threads = 0;
  std::string work;
};

// A release config over `input` like configs/v1.0.toml (clean and dedup on, bestfit 2048).
std::string BenchConfig(const std::string& input, int vocab) {
  return absl::StrCat(
      "seed = 1234\n[release]\nversion = \"bench\"\n[inputs]\npaths = [\"", input, "\"]\n",
      "[clean]\nenabled = true\n[dedup]\nenabled = true\nexact = true\nnear = true\n"
      "threshold = 0.8\n[tokenizer]\nmodel_type = \"bpe\"\nvocab_size = ",
      vocab,
      "\ncharacter_coverage = 0.9995\nbyte_fallback = true\nnormalization = \"identity\"\n"
      "add_dummy_prefix = true\nsplit_digits = true\nuser_defined_symbols = []\n"
      "control_symbols = []\ninput_sentence_size = 200000\nmax_sentence_length = 16384\n"
      "unk_id = 0\nbos_id = 1\neos_id = 2\npad_id = 3\n[tokenize]\nadd_bos = false\n"
      "add_eos = true\npiece_bytes = 1048576\n[pack]\nseq_len = 2048\nstrategy = \"bestfit\"\n"
      "bestfit_window_tokens = 16777216\n[split]\nvalidation_fraction = 0.01\n[shard]\n"
      "max_bytes = 268435456\n");
}

BenchRunner Setup(CLI::App* app) {
  auto f = std::make_shared<BuildBenchFlags>();
  AddBenchFlags(app, &f->options);
  app->add_option("--config", f->config,
                  "Release config to build (default: one like v1.0 over a sample of --input)");
  app->add_option("--input", f->inputs,
                  "Corpus for the default config (default ../shared/corpus/wikinews-en, else "
                  ".demo/corpus)");
  app->add_option("--max-bytes", f->max_bytes,
                  "Text bytes of --input in the default config (default 32 MiB; --quick: 2 MiB)");
  app->add_option("--threads", f->threads, "Threads (0 = all CPUs)");
  app->add_option("--work", f->work, "Scratch folder (default $TMPDIR/grist-bench-build)");
  return [f]() -> absl::Status {
    const Options& o = f->options;
    Env* env = Env::Default();
    ASSIGN_OR_RETURN(f->work, ScratchDir(f->work, "build"));
    if (o.quick && f->max_bytes == (32ull << 20)) f->max_bytes = 2ull << 20;
    std::string what;
    if (f->config.empty()) {
      if (f->inputs.empty()) {
        ASSIGN_OR_RETURN(std::string in, DefaultCorpus());
        f->inputs = {in};
      }
      ASSIGN_OR_RETURN(CorpusSample s,
                       WriteCorpusSample(f->inputs, JoinPath(f->work, "docs.jsonl"), f->max_bytes));
      const int vocab = o.quick ? 2048 : 8192;
      f->config = JoinPath(f->work, "bench.toml");
      RETURN_IF_ERROR(WriteFileAtomic(env, f->config, BenchConfig(s.path, vocab)));
      what = absl::StrFormat(
          "like configs/v1.0.toml (clean, dedup, bestfit 2048) with vocab_size %d over %s: %llu "
          "documents, %.1f MB of text",
          vocab, absl::StrJoin(f->inputs, " "), s.documents, s.text_bytes / 1e6);
    } else {
      what = f->config;
    }
    ASSIGN_OR_RETURN(Config config, Config::FromFile(env, f->config));
    ASSIGN_OR_RETURN(std::vector<std::string> inputs, config.RequireStringList("inputs.paths"));
    ASSIGN_OR_RETURN(bool clean_on, config.GetBool("clean.enabled", true));
    clean::CleanOptions clean_options;
    if (clean_on) {
      ASSIGN_OR_RETURN(clean_options, clean::CleanOptions::FromConfig(config));
    }
    const int threads = f->threads > 0 ? f->threads : ThreadPool(0).size();

    Report report("build", o);
    report.SetParam("config", what);
    report.SetParam("threads", absl::StrCat(threads));

    const std::string out = JoinPath(f->work, "release");
    std::vector<double> build_mbs, build_s, stage_sum_s, clean_mbs;
    std::map<std::string, std::vector<double>> stage_s, stage_mbs;
    std::vector<std::string> stage_order;
    uint64_t bytes_in = 0;
    std::string release_id;
    std::string clean_note = clean_on ? "" : "the config has [clean] off";
    // Interleaved (build, clean, build, clean, ...) so that load changes hit both.
    for (int i = 0; i < o.warmup + o.repetitions; ++i) {
      RETURN_IF_ERROR(env->RemoveAll(out));
      release::BuildOptions bo;
      bo.config_path = f->config;
      bo.output_dir = out;
      bo.restart = true;
      bo.run.threads = threads;
      bo.run.progress = false;
      ASSIGN_OR_RETURN(release::BuildReport r, release::BuildRelease(env, bo));
      release_id = r.release_id;
      bytes_in = r.stages.empty() ? 0 : r.stages.front().bytes_in;
      double clean_v = 0;
      if (clean_on) {
        const std::string peer_out = JoinPath(f->work, "clean-peer");
        RETURN_IF_ERROR(env->RemoveAll(peer_out));
        RunOptions run;
        run.threads = threads;
        run.progress = false;
        Stopwatch sw;
        auto c = clean::RunClean(env, inputs, peer_out, clean_options, run);
        const double secs = sw.Seconds();
        if (!c.ok()) {
          clean_note = absl::StrCat("the clean stage alone failed: ", c.status().message());
          clean_on = false;
        } else {
          clean_v = bytes_in / 1e6 / secs;
        }
        (void)env->RemoveAll(peer_out);
      }
      if (i < o.warmup) continue;
      build_mbs.push_back(bytes_in / 1e6 / r.seconds);
      build_s.push_back(r.seconds);
      double sum = 0;
      for (const release::StageSummary& s : r.stages) {
        sum += s.seconds;
        if (!stage_s.count(s.name)) stage_order.push_back(s.name);
        stage_s[s.name].push_back(s.seconds);
        stage_mbs[s.name].push_back(s.seconds > 0 ? s.bytes_in / 1e6 / s.seconds : 0);
      }
      stage_sum_s.push_back(sum);
      if (clean_on) clean_mbs.push_back(clean_v);
    }
    (void)env->RemoveAll(out);
    (void)env->RemoveAll(out + ".work");

    Figure e2e{"build end to end", "MB/s", Stats::Of(build_mbs)};
    e2e.peer_name =
        "the clean stage alone on the same inputs, same options (ceiling: the build's first stage)";
    if (!clean_mbs.empty() && clean_mbs.size() == build_mbs.size()) {
      e2e.peer = Stats::Of(clean_mbs);
    } else {
      e2e.peer_note = clean_note;
    }
    e2e.peer_is_ceiling = true;
    report.AddFigure(e2e);
    Figure wall{"build wall time", "s", Stats::Of(build_s)};
    wall.peer_name = "sum of the stage times in the build's report";
    wall.peer = Stats::Of(stage_sum_s);
    wall.higher_is_better = false;
    report.AddFigure(wall);

    std::string table =
        absl::StrCat("Per stage at ", threads,
                     " threads (medians of the measured runs, from the build report):\n\n"
                     "| stage | seconds | input MB/s | share of the build |\n|---|---|---|---|\n");
    const double total = Stats::Of(build_s).median;
    for (const std::string& name : stage_order) {
      const double secs = Stats::Of(stage_s[name]).median;
      absl::StrAppend(&table, "| ", name, " | ", absl::StrFormat("%.2f", secs), " | ",
                      absl::StrFormat("%.1f", Stats::Of(stage_mbs[name]).median), " | ",
                      absl::StrFormat("%.0f%%", total > 0 ? 100 * secs / total : 0.0), " |\n");
    }
    report.AddNote(table);
    report.AddNote(absl::StrFormat("input: %.1f MB (the first stage's bytes in); release %s",
                                   bytes_in / 1e6, release_id));
    return report.Finish();
  };
}

GRIST_REGISTER_BENCH(build, "build",
                     "grist build end to end (MB/s, per-stage time) vs the clean stage alone",
                     Setup);

}  // namespace
}  // namespace grist::bench
