#include "bench/scaling.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace grist::bench {

StageScaling FitStageScaling(const std::string& stage, std::vector<double> threads,
                             std::vector<double> seconds, double target_efficiency) {
  StageScaling s;
  s.stage = stage;
  std::vector<size_t> order(std::min(threads.size(), seconds.size()));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return threads[x] < threads[y]; });
  for (size_t i : order) {
    s.threads.push_back(threads[i]);
    s.seconds.push_back(seconds[i]);
  }
  if (s.threads.empty()) {
    s.below_target = true;
    return s;
  }
  const double lo = s.threads.front(), hi = s.threads.back();
  s.max_threads = hi;
  if (s.seconds.back() > 0 && hi > lo) {
    s.measured_speedup = s.seconds.front() / s.seconds.back();
    s.measured_efficiency = s.measured_speedup / (hi / lo);
  }
  s.fit = FitAmdahlSeconds(s.threads, s.seconds);
  if (s.fit) {
    const double t1 = s.fit->a + s.fit->b;
    s.predicted_speedup = t1 / (s.fit->a + s.fit->b / hi);
    s.predicted_efficiency = s.predicted_speedup / hi;
  }
  s.below_target = !s.fit || s.predicted_efficiency < target_efficiency;
  return s;
}

std::string ScalingTable(const std::vector<StageScaling>& stages, double target_efficiency) {
  if (stages.empty()) return "";
  const StageScaling& first = stages.front();
  const std::string lo = first.threads.empty() ? "?" : absl::StrCat(first.threads.front());
  const std::string hi = absl::StrCat(first.max_threads);
  std::string out = absl::StrCat(
      "Scaling per stage, threads ", lo, " to ", hi, " (Amdahl's law T(n) = a + b/n fitted to each "
      "stage's median times; speedup and efficiency relative to one thread):\n\n| stage | s at ", lo,
      " | s at ", hi, " | measured speedup ", lo, "->", hi, " | serial fraction | predicted speedup at ",
      hi, " | efficiency at ", hi, " | target |\n|---|---:|---:|---:|---:|---:|---:|---|\n");
  std::vector<std::string> below;
  for (const StageScaling& s : stages) {
    const std::string target = absl::StrFormat(">= %.1fx linear", target_efficiency);
    std::string verdict = s.below_target ? ": **below**" : ": ok";
    if (!s.not_judged.empty()) verdict = absl::StrCat(": not judged (", s.not_judged, ")");
    if (!s.fit) {
      absl::StrAppend(&out, "| ", s.stage, " | ",
                      s.seconds.empty() ? "-" : absl::StrFormat("%.3f", s.seconds.front()),
                      " | ", s.seconds.empty() ? "-" : absl::StrFormat("%.3f", s.seconds.back()),
                      " | - | - | - | - | ", target,
                      s.not_judged.empty() ? ": **no fit** (a time of 0 or one count)" : verdict,
                      " |\n");
      if (s.not_judged.empty()) below.push_back(s.stage);
      continue;
    }
    absl::StrAppend(
        &out, "| ", s.stage, " | ", absl::StrFormat("%.3f", s.seconds.front()), " | ",
        absl::StrFormat("%.3f", s.seconds.back()), " | ",
        absl::StrFormat("%.2fx", s.measured_speedup), " | ",
        absl::StrFormat("%.3f", s.fit->serial_fraction), " | ",
        absl::StrFormat("%.2fx", s.predicted_speedup), " | ",
        absl::StrFormat("%.2f", s.predicted_efficiency), " | ", target, verdict, " |\n");
    if (s.below_target && s.not_judged.empty()) below.push_back(s.stage);
  }
  absl::StrAppend(&out, "\n",
                  below.empty()
                      ? absl::StrFormat("No stage below %.1fx linear at %s threads.",
                                        target_efficiency, hi)
                      : absl::StrFormat("Below %.1fx linear at %s threads: %s.", target_efficiency,
                                        hi, absl::StrJoin(below, ", ")),
                  "\n");
  return out;
}

}  // namespace grist::bench
