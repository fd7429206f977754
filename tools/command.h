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
#include "common/stage.h"

namespace grist::tools {

// Exit statuses of `grist` (README "Exit codes"): every subcommand returns one of these.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // anything not below: I/O, a failed stage, a bad input file
inline constexpr int kExitUsage = 2;    // the command line: unknown flag, malformed or out-of-range value
inline constexpr int kExitBadData = 3;  // `grist verify` / `grist ckpt verify` found bad data

// A usage error found after parsing (a combination of flags, a value from the environment): main
// exits with kExitUsage. The Status is InvalidArgument with a payload that marks it.
absl::Status UsageError(const std::string& message);
// Marks `s` (not OK) as "the data checked is bad": main exits with kExitBadData.
absl::Status BadDataError(absl::Status s);
// Whether `s` is a failure of the machine rather than of the data read (permissions, a full disk,
// I/O errors, interruption): a verify command then exits kExitFailure, not kExitBadData.
bool IsEnvironmentError(const absl::Status& s);
// The exit status for a command's result.
int ExitCodeFor(const absl::Status& s);

// Flags shared by every subcommand that processes data.
struct CommonFlags {
  std::string json_path;  // --json FILE: machine-readable results
  int threads = 0;        // --threads N (0 = all CPUs)
  int task = -1;          // --task I  (default: SLURM_ARRAY_TASK_ID, else 0)
  int tasks = -1;         // --tasks N (default: SLURM_ARRAY_TASK_COUNT, else 1)
  bool quiet = false;     // --quiet: no progress display
};

// Adds `--json FILE` (written by MaybeWriteJson), its help saying "Write <what> as JSON to FILE".
void AddJsonFlag(CLI::App* app, std::string* path, const std::string& what);
// Adds --json, --threads, --quiet; and --task/--tasks when `with_tasks`.
void AddCommonFlags(CLI::App* app, CommonFlags* flags, bool with_tasks = true);
// Fills task/tasks from Slurm's environment where not given, and validates 0 <= task < tasks.
absl::Status ResolveTasks(CommonFlags* flags);
// How a stage runs under these flags: --threads, task I of N (after ResolveTasks; task 0 of 1
// where the command has no --task/--tasks), progress unless --quiet.
RunOptions StageRun(const CommonFlags& flags);
// Writes `json` to flags.json_path when the flag was given (common/output_file.h: "-" is the
// standard output as it was before main moved the human-readable text to standard error; a
// regular file is replaced atomically; a link's target or a device is written through).
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
