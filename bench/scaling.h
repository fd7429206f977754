// Per-stage scaling over thread counts (`grist bench build --sweep threads=1,2,4,8,16`): each
// stage's time at each count, Amdahl's law fitted to it, the speedup the fit predicts at the largest
// count and the efficiency there (speedup / threads), against a target fraction of linear scaling
// (issue 14: no stage below 0.8x linear from 1 to 16 threads).
//
// The model: a stage taking T(n) seconds on n threads has a serial part a and a parallel part b,
// T(n) = a + b / n. Its serial fraction is s = a / (a + b), its speedup over one thread
// S(n) = T(1) / T(n) = (a + b) / (a + b / n), its efficiency E(n) = S(n) / n. The fit is
// FitAmdahlSeconds (bench/sweep.h).
#ifndef GRIST_BENCH_SCALING_H_
#define GRIST_BENCH_SCALING_H_

#include <optional>
#include <string>
#include <vector>

#include "bench/sweep.h"

namespace grist::bench {

struct StageScaling {
  std::string stage;
  std::vector<double> threads;  // ascending
  std::vector<double> seconds;  // the stage's (median) time at each count
  std::optional<AmdahlFit> fit;
  double max_threads = 0;
  // Measured: time at the smallest count / time at the largest, and that over the linear
  // speedup between the two (max / min threads).
  double measured_speedup = 0;
  double measured_efficiency = 0;
  // From the fit, relative to one thread: S(max_threads) and S(max_threads) / max_threads.
  double predicted_speedup = 0;
  double predicted_efficiency = 0;
  // The fit's efficiency at max_threads is below the target (or there is no fit).
  bool below_target = false;
  // Non-empty: the stage is not judged against the target, for this reason (e.g. it takes too
  // small a share of the whole to time); the table says so instead of a verdict.
  std::string not_judged;

  double SerialFraction() const { return fit ? fit->serial_fraction : 1.0; }
};

// Fits one stage. `threads` and `seconds` pair up (any order; sorted here by thread count).
StageScaling FitStageScaling(const std::string& stage, std::vector<double> threads,
                             std::vector<double> seconds, double target_efficiency);

// The Markdown table of `stages`: stage | seconds at the smallest and the largest count | measured
// speedup | serial fraction | predicted speedup at the largest count | efficiency | target and a
// flag for each stage below it (or why it is not judged), then one line naming the stages below the
// target (or saying none is).
std::string ScalingTable(const std::vector<StageScaling>& stages, double target_efficiency);

}  // namespace grist::bench

#endif  // GRIST_BENCH_SCALING_H_
