#include "bench/registry.h"

#include <chrono>
#include <cstdlib>
#include <thread>

#include "common/env.h"

namespace grist::bench {

std::vector<BenchInfo>& BenchRegistry() {
  static auto* r = new std::vector<BenchInfo>();
  return *r;
}

absl::Status MaybeInjectFault(const std::string& name) {
  const char* spec = std::getenv("GRIST_BENCH_INJECT_FAULT");
  if (spec == nullptr) return absl::OkStatus();
  std::string s(spec);
  if (s == name + ":fail") return absl::InternalError("injected failure (GRIST_BENCH_INJECT_FAULT)");
  if (s == name + ":crash") std::abort();
  if (s == name + ":hang") {
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  return absl::OkStatus();
}

void AddBenchFlags(CLI::App* app, Options* o) {
  app->add_option("--output", o->output_dir,
                  "Write JSON records (one file per run), a Markdown table and SVG plots to DIR")
      ->check(CLI::Validator(
          [](std::string& dir) -> std::string {
            absl::Status s = CheckOutputDir(Env::Default(), dir);
            return s.ok() ? std::string() : std::string(s.message());
          },
          "DIR", "writable directory"));
  app->add_option("--repetitions", o->repetitions, "Measured runs per figure")->check(CLI::PositiveNumber);
  app->add_option("--warmup", o->warmup, "Unmeasured warm-up runs per figure")->check(CLI::NonNegativeNumber);
  app->add_flag("--quiet", o->quiet, "No progress display");
  app->add_option("--sweep", o->sweep,
                  "Sweep one parameter: PARAM=v1,v2,... (e.g. threads=1,2,4,8); the figures are "
                  "plotted against it");
  app->add_flag("--quick", o->quick, "Small sizes that finish in seconds (as `grist bench all` runs)");
}

}  // namespace grist::bench
