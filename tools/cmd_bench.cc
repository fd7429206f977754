// `grist bench <name>`: every registered benchmark as a sub-subcommand.
#include <algorithm>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"

#include "bench/registry.h"
#include "bench/sweep_driver.h"
#include "tools/command.h"

namespace grist::tools {
namespace {

Runner Setup(CLI::App* app) {
  app->require_subcommand(1);
  auto& reg = bench::BenchRegistry();
  std::sort(reg.begin(), reg.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  auto runners = std::make_shared<std::vector<std::pair<CLI::App*, bench::BenchRunner>>>();
  for (auto& b : reg) {
    CLI::App* sub = app->add_subcommand(b.name, b.description);
    // A bench whose flags clash (e.g. one of its own named like a shared flag) must not take the
    // whole `grist` binary down: it alone fails, saying why.
    try {
      runners->emplace_back(sub, b.setup(sub));
    } catch (const CLI::Error& e) {
      std::string why = absl::StrCat("grist bench ", b.name, " could not set up its flags: ", e.what());
      sub->allow_extras();
      runners->emplace_back(sub, [why]() { return absl::InternalError(why); });
    }
  }
  // A bench's own check of its flags (bench::FlagError) is a usage error like CLI11's.
  auto exit_status = [](absl::Status s) {
    return bench::IsFlagError(s) ? UsageError(std::string(s.message())) : s;
  };
  return [runners, exit_status]() -> absl::Status {
    for (auto& [sub, run] : *runners) {
      if (sub->parsed()) {
        absl::Status fault = bench::MaybeInjectFault(sub->get_name());
        if (!fault.ok()) return fault;
        // --sweep over one of the bench's own flags: the harness re-runs it per value.
        if (auto driven = bench::MaybeDriveSweep(
                sub, bench::BenchArgsOfThisProcess(sub->get_name()))) {
          return exit_status(*driven);
        }
        return exit_status(run());
      }
    }
    return UsageError("no benchmark named; see grist bench --help");
  };
}

GRIST_REGISTER_COMMAND(bench, "bench", "Benchmarks with peers and ceilings measured in the same run",
                       Setup);

}  // namespace
}  // namespace grist::tools
