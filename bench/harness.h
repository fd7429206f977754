// The benchmark harness behind `grist bench`: repeated runs with a warm-up, median/min/max, each
// figure printed beside a peer or ceiling measured in the same run with their ratio, the machine and
// configuration recorded, and results written as JSON records and a Markdown table.
//
//   bench::Report report("ckpt", options);          // options: output dir, repetitions, warm-up
//   report.SetParam("size", "4 GiB");
//   auto ours = bench::Repeat(options, [&] { return WriteOnce(); });     // each call returns a figure
//   auto fio  = bench::Repeat(options, [&] { return RunFio(); });
//   report.AddFigure({"write GB/s", "GB/s", *ours, "fio O_DIRECT io_uring", *fio});
//   RETURN_IF_ERROR(report.Finish());               // prints the table, writes DIR/*.json, DIR/*.md,
//                                                   // DIR/*.svg
//
// A sweep (`--sweep threads=1,2,4,8`) runs the same measurement once per value:
//
//   ASSIGN_OR_RETURN(auto sweep, bench::SweepFromOptions(options, {"threads", "batch_size"}));
//   if (sweep) {
//     RETURN_IF_ERROR(bench::RunSweep(&report, *sweep, [&](const std::string& v) {
//       ASSIGN_OR_RETURN(int threads, bench::SweepInt(*sweep, v));
//       ... return std::vector<bench::Figure>{...};   // the figures at this value
//     }));
//   }
//
// and Finish() then draws each swept figure against the parameter (peer dashed, a constant
// ceiling as a horizontal line; for threads/tasks also linear scaling and an Amdahl fit). An
// unswept report gets one bar chart of grist's ratio to each peer.
//
// A missing peer (fio or torch absent) is recorded as unavailable with the reason, and the run goes
// on. The pieces: bench/report.h (figures, the report and its files), bench/sweep.h (sweeps and
// the Amdahl fit), bench/machine.h (the machine facts of every record); this header includes them
// and adds the repetition loop and the runner of peer commands.
#ifndef GRIST_BENCH_HARNESS_H_
#define GRIST_BENCH_HARNESS_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bench/machine.h"
#include "bench/report.h"
#include "bench/sweep.h"

namespace grist::bench {

// Runs `fn` warmup times unmeasured, then repetitions times; each call returns one figure (e.g.
// MB/s). Stops at the first error.
absl::StatusOr<Stats> Repeat(const Options& options, const std::function<absl::StatusOr<double>()>& fn);

// Runs a shell command, returning its exit status and stdout (stderr is discarded unless
// `merge_stderr`). Used to run peers (fio, spm_encode, python3 -c ...).
struct CommandResult {
  int exit_code = -1;
  std::string output;
};
absl::StatusOr<CommandResult> RunCommand(const std::string& command, bool merge_stderr = false);
// True when `program` is on PATH.
bool HaveProgram(const std::string& program);
// The interpreter for a Python peer: `given` when set, else the first of /usr/bin/python3 (Debian's,
// which has python3-torch) and python3 on PATH that can import every module in `modules` (comma
// separated, e.g. "torch,numpy"); "python3" when none can (the peer then reports why it failed).
std::string FindPython(const std::string& given, const std::string& modules);

}  // namespace grist::bench

#endif  // GRIST_BENCH_HARNESS_H_
