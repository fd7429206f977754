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

namespace grist {
class Env;
}

namespace grist::bench {

struct Options {
  std::string output_dir;     // empty: print only
  int repetitions = 3;        // measured runs
  int warmup = 1;             // unmeasured runs first
  std::string target_dir;     // directory whose file system and block device are recorded
  bool quiet = false;
  // --sweep PARAM=v1,v2,...: raw text; parse it with SweepFromOptions (benches that support it).
  std::string sweep;
  // --quick: small sizes that finish in seconds (`grist bench all`, CI smoke runs).
  bool quick = false;
};

// A parameter swept over values: "threads=1,2,4,8". Values are kept as written.
struct Sweep {
  std::string param;
  std::vector<std::string> values;
  // Parses "PARAM=v1,v2,...". Errors (InvalidArgument, naming the text): no '=', an empty
  // parameter name, no values ("threads=" is an error, not an empty sweep), an empty value
  // ("1,,4"), a value given twice.
  static absl::StatusOr<Sweep> Parse(const std::string& spec);
  // True when every value is a number (then plots use a numeric x axis).
  bool Numeric() const;
};

// The sweep requested in options.sweep, or nullopt when none was. `supported` lists the parameters
// this bench can sweep; any other is an InvalidArgument error that lists them.
absl::StatusOr<std::optional<Sweep>> SweepFromOptions(const Options& options,
                                                      const std::vector<std::string>& supported);
// `value` of `sweep` as an integer >= 1 (threads, queue depth, batch size); accepts K/M/G suffixes
// (binary: 4K = 4096) for sizes. InvalidArgument naming the parameter otherwise.
absl::StatusOr<int64_t> SweepInt(const Sweep& sweep, const std::string& value);

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
  // The peer is a hardware ceiling (fio, memcpy, pinned copy) rather than another program doing
  // the same work; plots draw a ceiling that does not change over a sweep as a horizontal line.
  bool peer_is_ceiling = false;
  // The sweep value this figure was measured at; empty outside a sweep (RunSweep fills it).
  std::string sweep_value;
  // ours.median / peer.median (or NaN when no peer).
  double Ratio() const;
};

// Runs `fn` warmup times unmeasured, then repetitions times; each call returns one figure (e.g.
// MB/s). Stops at the first error.
absl::StatusOr<Stats> Repeat(const Options& options, const std::function<absl::StatusOr<double>()>& fn);

// Facts about this machine and build, as a JSON object: OS, kernel, CPU model, logical and
// physical cores, the CPUs this process may use (affinity), SIMD level, L3 size, frequency
// governor, memory total and available, transparent huge pages, load average at the time; the file
// system type, mount point, mount options, free space and block device (model, rotational, I/O
// scheduler) of `target_dir`; GPU, driver and memory when nvidia-smi answers; grist's version,
// git commit, build type, compiler, flags and CUDA support; the UTC time and the command line.
std::string EnvironmentJson(const std::string& target_dir);

// Checks that results can be written to `dir` before a long run starts: creates it (mkdir -p),
// writes, syncs and removes a 1 MiB probe file. Errors name the directory and say what is wrong:
// FailedPrecondition "... is on a read-only file system", ResourceExhausted "... no space left",
// PermissionDenied, or the Env's error.
absl::Status CheckOutputDir(Env* env, const std::string& dir);

class Report {
 public:
  Report(std::string bench_name, Options options);
  void SetParam(const std::string& key, const std::string& value);
  void AddFigure(Figure figure);
  void AddNote(const std::string& note);
  // Declares that figures carry sweep values of `param` (RunSweep calls this).
  void SetSweepParam(const std::string& param);
  // The Markdown table of the figures (figure | ours | peer | ratio | target); for a sweep, one
  // table per figure with a row per value, each followed by its plot's image link.
  std::string Markdown() const;
  std::string Json() const;
  // The plots Finish() writes, as (file name, SVG text): for a sweep, one per figure name,
  // "<bench>-<figure>.svg"; otherwise one bar chart "<bench>.svg" when any figure has a peer.
  std::vector<std::pair<std::string, std::string>> Plots() const;
  // Prints the table to stdout and, when output_dir is set, writes <bench>-<n>.json (one file per
  // run, n the first unused number), <bench>.md and the plots there (crash-safely). Clear errors
  // for a read-only or full file system (see CheckOutputDir).
  absl::Status Finish();
  // Files written by the last Finish(), as paths.
  const std::vector<std::string>& written() const { return written_; }
  const std::vector<Figure>& figures() const { return figures_; }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  Options options_;
  std::vector<std::pair<std::string, std::string>> params_;
  std::vector<Figure> figures_;
  std::vector<std::string> notes_;
  std::string JsonWith(const std::string& environment_json) const;

  std::string sweep_param_;
  std::vector<std::string> written_;
};

// Runs `point` once per value of `sweep`, in order, adding the figures it returns to `report` with
// their sweep_value set. A failing point is recorded as a note naming the value and the error, and
// the sweep goes on; the error is returned only when every point failed.
absl::Status RunSweep(Report* report, const Sweep& sweep,
                      const std::function<absl::StatusOr<std::vector<Figure>>(const std::string&)>& point);

// Serial fraction s of Amdahl's law fitted to throughput y(n) = 1 / (a + b / n) over n workers
// (least squares on 1/y), s = a / (a + b) clamped to [0, 1]. nullopt with fewer than 3 points or
// a non-positive value. Exposed for tests.
struct AmdahlFit {
  double serial_fraction = 0;
  double a = 0, b = 0;  // 1/y = a + b/n
  double Predict(double n) const { return 1.0 / (a + b / n); }
};
std::optional<AmdahlFit> FitAmdahl(const std::vector<double>& n, const std::vector<double>& y);

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
