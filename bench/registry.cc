#include "bench/registry.h"

namespace grist::bench {

std::vector<BenchInfo>& BenchRegistry() {
  static auto* r = new std::vector<BenchInfo>();
  return *r;
}

void AddBenchFlags(CLI::App* app, Options* o) {
  app->add_option("--output", o->output_dir, "Write JSON records and a Markdown table to DIR");
  app->add_option("--repetitions", o->repetitions, "Measured runs per figure")->check(CLI::PositiveNumber);
  app->add_option("--warmup", o->warmup, "Unmeasured warm-up runs per figure")->check(CLI::NonNegativeNumber);
  app->add_flag("--quiet", o->quiet, "No progress display");
}

}  // namespace grist::bench
