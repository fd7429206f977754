// A bench's report: its figures (grist's median [min, max] beside a peer or ceiling measured in
// the same run, and their ratio), parameters and notes, printed as a Markdown table and written as
// a JSON record (with the machine facts of bench/machine.h), a Markdown file and SVG plots. For a
// sweep (bench/sweep.h), one table and one plot per figure against the swept parameter.
// Thread safety: none; one Report per thread.
#ifndef GRIST_BENCH_REPORT_H_
#define GRIST_BENCH_REPORT_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

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

// A command-line error a bench finds after parsing (a flag's value it checks itself, flags that do
// not go together, a sweep it cannot run): InvalidArgument marked so that `grist bench` exits 2,
// like CLI11's own usage errors.
absl::Status FlagError(const std::string& message);
bool IsFlagError(const absl::Status& status);

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

}  // namespace grist::bench

#endif  // GRIST_BENCH_REPORT_H_
