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
absl::Status MaybeInjectFault(const std::string& name);

struct BenchRegistrar {
  BenchRegistrar(std::string name, std::string description, BenchSetup setup) {
    BenchRegistry().push_back({std::move(name), std::move(description), std::move(setup)});
  }
};

#define GRIST_REGISTER_BENCH(ident, name, description, setup) \
  static ::grist::bench::BenchRegistrar grist_bench_registrar_##ident(name, description, setup)

}  // namespace grist::bench

#endif  // GRIST_BENCH_REGISTRY_H_
