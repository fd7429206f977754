// `--sweep PARAM=...` for any bench that has a flag --PARAM (underscores as dashes, e.g.
// threads -> --threads, queue_depth -> --queue-depth): the harness runs the bench once per value as
// a child process (`grist bench X <the same flags> --PARAM v --output DIR/.sweep/<i>`), reads each
// run's JSON record back and writes one sweep report (tables per figure, plots against PARAM,
// Amdahl fit for threads) into --output. So every component's bench can be swept over its own
// flags without code of its own. A bench that sweeps a parameter itself (SweepFromOptions) declares
// it with SweepsItself (bench/registry.h) and is left alone for it; any other parameter is a usage
// error (FlagError) before the bench runs.
#ifndef GRIST_BENCH_SWEEP_DRIVER_H_
#define GRIST_BENCH_SWEEP_DRIVER_H_

#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bench/harness.h"

namespace grist::bench {

// The flag a sweep over `param` drives: "--" + param with '_' -> '-'.
std::string SweepFlag(const std::string& param);

// When `bench_app` (the parsed `grist bench X` subcommand) was given --sweep over a parameter it
// has a flag for, runs the sweep as described above and returns its status; returns nullopt when
// the bench should run itself (no --sweep, or a parameter it declared with SweepsItself); a
// FlagError when it can sweep the parameter neither way. `args` are the bench's own arguments
// as given (after `grist bench X`).
std::optional<absl::Status> MaybeDriveSweep(CLI::App* bench_app, const std::vector<std::string>& args);

// Figures of a bench JSON record (Report::Json), for the driver and for tests.
absl::StatusOr<std::vector<Figure>> FiguresFromJson(const std::string& json,
                                                    std::vector<std::pair<std::string, std::string>>* params,
                                                    std::vector<std::string>* notes);

// This process's arguments after "bench <name>" (from /proc/self/cmdline).
std::vector<std::string> BenchArgsOfThisProcess(const std::string& name);

}  // namespace grist::bench

#endif  // GRIST_BENCH_SWEEP_DRIVER_H_
