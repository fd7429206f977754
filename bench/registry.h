// Registration of `grist bench <name>` benchmarks. Each bench/bench_<name>.cc registers itself with
// GRIST_REGISTER_BENCH; tools/cmd_bench.cc adds each as a sub-subcommand of `grist bench`.
#ifndef GRIST_BENCH_REGISTRY_H_
#define GRIST_BENCH_REGISTRY_H_

#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/status/status.h"
#include "bench/harness.h"

namespace grist::bench {

// Flags every bench shares: --output DIR, --repetitions, --warmup, --quiet.
void AddBenchFlags(CLI::App* app, Options* options);

// Declares that the bench set up on `app` sweeps `params` itself (SweepFromOptions + RunSweep in
// its runner): `--sweep` over one of them is left to the bench, never driven from outside by
// bench/sweep_driver.h, even where the bench has a flag of that name. Call from the bench's setup.
void SweepsItself(CLI::App* app, std::vector<std::string> params);
// The parameters declared for `app` by SweepsItself (empty when none were).
std::vector<std::string> OwnSweeps(const CLI::App* app);

using BenchRunner = std::function<absl::Status()>;
using BenchSetup = std::function<BenchRunner(CLI::App*)>;

struct BenchInfo {
  std::string name;
  std::string description;
  BenchSetup setup;
};

std::vector<BenchInfo>& BenchRegistry();

// Test hook for `grist bench all`'s handling of a bench that fails, crashes or hangs: when the
// environment has GRIST_BENCH_INJECT_FAULT=<bench>:fail|crash|hang and <bench> is `name`, returns
// an Internal error, aborts, or sleeps forever. Otherwise OK. Called before each bench runs.
// Compiled in only with GRIST_TEST_HOOKS (as common/crash_point.h; default off): a plain build
// ignores the variable and always returns OK.
absl::Status MaybeInjectFault(const std::string& name);
// Whether MaybeInjectFault honours GRIST_BENCH_INJECT_FAULT in this build.
bool FaultInjectionEnabled();

struct BenchRegistrar {
  BenchRegistrar(std::string name, std::string description, BenchSetup setup) {
    BenchRegistry().push_back({std::move(name), std::move(description), std::move(setup)});
  }
};

#define GRIST_REGISTER_BENCH(ident, name, description, setup) \
  static ::grist::bench::BenchRegistrar grist_bench_registrar_##ident(name, description, setup)

}  // namespace grist::bench

#endif  // GRIST_BENCH_REGISTRY_H_
