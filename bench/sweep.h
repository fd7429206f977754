// Sweeps of one parameter over values (`--sweep threads=1,2,4,8`): parsing, the integer values,
// running a measurement once per value into a Report, and the Amdahl fit drawn for worker counts.
// Benches that sweep a parameter themselves use these; bench/sweep_driver.h sweeps any bench over
// one of its own flags from outside.
#ifndef GRIST_BENCH_SWEEP_H_
#define GRIST_BENCH_SWEEP_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bench/report.h"

namespace grist::bench {

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
// a and b of T(n) = a + b / n by least squares over the points (n[i], seconds[i]), both clamped to
// >= 0 (no superlinear term): an AmdahlFit whose a, b are seconds (Predict(n) is then 1 / T(n)).
// Exact for two points or for times that follow the model. nullopt with fewer than 2 distinct
// thread counts, a mismatch in sizes, or a non-positive value.
std::optional<AmdahlFit> FitAmdahlSeconds(const std::vector<double>& threads,
                                          const std::vector<double>& seconds);

// A sweep value as a number, with binary K/M/G suffixes ("64K" -> 65536); nullopt otherwise.
std::optional<double> NumericValue(const std::string& value);
// Whether `param` counts workers (threads, tasks, ranks, ...): its sweeps get linear-scaling and
// Amdahl reference curves.
bool IsWorkerParam(const std::string& param);
// "Amdahl fit: serial fraction 0.120 (at most 8.3x with unlimited threads)".
std::string AmdahlSentence(const AmdahlFit& fit, const std::string& param);

}  // namespace grist::bench

#endif  // GRIST_BENCH_SWEEP_H_
