// The benchmark harness behind `grist bench`: repeated runs with a warm-up, median/min/max, each
// figure printed beside a peer or ceiling measured in the same run with their ratio, the machine and
// configuration recorded, and results written as JSON records and a Markdown table.
//
//   bench::Report report("ckpt", options);          // options: output dir, repetitions, warm-up
//   report.SetParam("size", "4 GiB");
//   auto ours = bench::Repeat(options, [&] { return WriteOnce(); });     // each call returns a figure
//   auto fio  = bench::Repeat(options, [&] { return RunFio(); });
//   report.AddFigure({"write GB/s", "GB/s", *ours, "fio O_DIRECT io_uring", *fio});
//   RETURN_IF_ERROR(report.Finish());               // prints the table, writes DIR/*.json, DIR/*.md
//
// A missing peer (fio or torch absent) is recorded as unavailable with the reason, and the run goes
// on. Thread safety: none; one Report per thread.
#ifndef GRIST_BENCH_HARNESS_H_
#define GRIST_BENCH_HARNESS_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace grist::bench {

struct Options {
  std::string output_dir;     // empty: print only
  int repetitions = 3;        // measured runs
  int warmup = 1;             // unmeasured runs first
  std::string target_dir;     // directory whose file system and block device are recorded
  bool quiet = false;
};

struct Stats {
  std::vector<double> samples;
  double median = 0, min = 0, max = 0;
  static Stats Of(std::vector<double> samples);
};

struct Figure {
  std::string name;          // "encode throughput"
  std::string unit;          // "MB/s"
  Stats ours;
  std::string peer_name;     // "spm_encode x threads"; empty when there is no peer
  std::optional<Stats> peer; // nullopt: peer unavailable (peer_note says why)
  std::string peer_note;
  bool higher_is_better = true;
  std::string target;        // e.g. ">= 0.9 x peer"; informational
  // ours.median / peer.median (or NaN when no peer).
  double Ratio() const;
};

// Runs `fn` warmup times unmeasured, then repetitions times; each call returns one figure (e.g.
// MB/s). Stops at the first error.
absl::StatusOr<Stats> Repeat(const Options& options, const std::function<absl::StatusOr<double>()>& fn);

// Facts about this machine and build: CPU model and count, memory, kernel, file system type and
// mount point of `target_dir` and its block device, GPU and driver when nvidia-smi answers,
// grist's version and build type. As a JSON object.
std::string EnvironmentJson(const std::string& target_dir);

class Report {
 public:
  Report(std::string bench_name, Options options);
  void SetParam(const std::string& key, const std::string& value);
  void AddFigure(Figure figure);
  void AddNote(const std::string& note);
  // The Markdown table of the figures (figure | ours | peer | ratio | target).
  std::string Markdown() const;
  std::string Json() const;
  // Prints the table to stdout and, when output_dir is set, writes <bench>-<n>.json and
  // <bench>.md there (crash-safely).
  absl::Status Finish();
  const std::vector<Figure>& figures() const { return figures_; }

 private:
  std::string name_;
  Options options_;
  std::vector<std::pair<std::string, std::string>> params_;
  std::vector<Figure> figures_;
  std::vector<std::string> notes_;
};

// Runs a shell command, returning its exit status and stdout (stderr is discarded unless
// `merge_stderr`). Used to run peers (fio, spm_encode, python3 -c ...).
struct CommandResult {
  int exit_code = -1;
  std::string output;
};
absl::StatusOr<CommandResult> RunCommand(const std::string& command, bool merge_stderr = false);
// True when `program` is on PATH.
bool HaveProgram(const std::string& program);

}  // namespace grist::bench

#endif  // GRIST_BENCH_HARNESS_H_
