#include "bench/registry.h"

#include <chrono>
#include <cstdlib>
#include <map>
#include <thread>

#include "common/env.h"

namespace grist::bench {

std::vector<BenchInfo>& BenchRegistry() {
  static auto* r = new std::vector<BenchInfo>();
  return *r;
}

namespace {
std::map<const CLI::App*, std::vector<std::string>>& OwnSweepTable() {
  static auto* t = new std::map<const CLI::App*, std::vector<std::string>>();
  return *t;
}
}  // namespace

void SweepsItself(CLI::App* app, std::vector<std::string> params) {
  OwnSweepTable()[app] = std::move(params);
}

std::vector<std::string> OwnSweeps(const CLI::App* app) {
  auto it = OwnSweepTable().find(app);
  return it == OwnSweepTable().end() ? std::vector<std::string>() : it->second;
}

#if GRIST_TEST_HOOKS
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
bool FaultInjectionEnabled() { return true; }
#else   // !GRIST_TEST_HOOKS
absl::Status MaybeInjectFault(const std::string&) { return absl::OkStatus(); }
bool FaultInjectionEnabled() { return false; }
#endif  // GRIST_TEST_HOOKS

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
                  "plotted against it")
      ->check(CLI::Validator(
          [](std::string& spec) -> std::string {
            absl::StatusOr<Sweep> s = Sweep::Parse(spec);
            return s.ok() ? std::string() : std::string(s.status().message());
          },
          "PARAM=v1,v2,...", "sweep"));
  app->add_flag("--quick", o->quick, "Small sizes that finish in seconds (as `grist bench all` runs)");
}

}  // namespace grist::bench
