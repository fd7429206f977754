// Subcommand registration for the `grist` binary. Each tools/cmd_*.cc registers itself with
// GRIST_REGISTER_COMMAND; main() wires them into CLI11. Commands stay thin: parse flags, call the
// public API, return its Status.
#ifndef GRIST_TOOLS_COMMAND_H_
#define GRIST_TOOLS_COMMAND_H_

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/status/status.h"

namespace grist::tools {

// Flags shared by every subcommand that processes data.
struct CommonFlags {
  std::string json_path;  // --json FILE: machine-readable results
  int threads = 0;        // --threads N (0 = all CPUs)
  int task = -1;          // --task I  (default: SLURM_ARRAY_TASK_ID, else 0)
  int tasks = -1;         // --tasks N (default: SLURM_ARRAY_TASK_COUNT, else 1)
  bool quiet = false;     // --quiet: no progress display
};

// Adds --json, --threads, --quiet; and --task/--tasks when `with_tasks`.
void AddCommonFlags(CLI::App* app, CommonFlags* flags, bool with_tasks = true);
// Fills task/tasks from Slurm's environment where not given, and validates 0 <= task < tasks.
absl::Status ResolveTasks(CommonFlags* flags);
// Writes `json` to flags.json_path (crash-safely) when the flag was given.
absl::Status MaybeWriteJson(const CommonFlags& flags, const std::string& json);

using Runner = std::function<absl::Status()>;
using Setup = std::function<Runner(CLI::App*)>;

struct CommandInfo {
  std::string name;
  std::string description;
  Setup setup;
};

std::vector<CommandInfo>& Registry();

struct Registrar {
  Registrar(std::string name, std::string description, Setup setup) {
    Registry().push_back({std::move(name), std::move(description), std::move(setup)});
  }
};

#define GRIST_REGISTER_COMMAND(ident, name, description, setup) \
  static ::grist::tools::Registrar grist_command_registrar_##ident(name, description, setup)

}  // namespace grist::tools

#endif  // GRIST_TOOLS_COMMAND_H_
