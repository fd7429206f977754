// Plots for `grist bench` reports, written directly as SVG 1.1 (no plotting package needed; any
// browser, Markdown viewer or `rsvg-convert` renders them).
//
// Two kinds:
//   - LinePlot: a swept figure against its parameter. grist's medians as a solid line with min-max
//     error bars, the peer as a dashed line, a ceiling as a horizontal line, optional reference
//     curves (ideal linear scaling, an Amdahl fit) dotted. Axis labels carry units; a legend names
//     every series.
//   - RatioBars: one horizontal bar per figure of a single (unswept) run, the length being grist's
//     advantage over its peer (ours/peer, or peer/ours where lower is better) with the parity line
//     at 1.0 and both values printed beside the bar.
//
// Output is deterministic (fixed number formatting, no timestamps), so tests compare it exactly.
// Thread safety: pure functions.
#ifndef GRIST_BENCH_PLOT_H_
#define GRIST_BENCH_PLOT_H_

#include <string>
#include <utility>
#include <vector>

namespace grist::bench {

enum class LineStyle { kSolid, kDashed, kDotted };

struct Series {
  std::string label;
  std::vector<double> x;
  std::vector<double> y;
  // Optional error bars (same length as y, or empty).
  std::vector<double> y_low;
  std::vector<double> y_high;
  LineStyle style = LineStyle::kSolid;
  std::string color = "#1f77b4";
  bool markers = true;
};

struct HorizontalLine {
  std::string label;
  double y = 0;
  std::string color = "#2ca02c";
};

struct LinePlot {
  std::string title;
  std::string x_label;  // with unit, e.g. "threads" or "block size (KiB)"
  std::string y_label;  // with unit, e.g. "encode throughput (MB/s)"
  // Base-2 logarithmic x axis (for 1, 2, 4, ... sweeps). Requires x > 0.
  bool log2_x = false;
  // When non-empty, x values are positions 0..n-1 and these are the tick labels (a categorical
  // parameter such as "buffered,odirect").
  std::vector<std::string> x_categories;
  // Explicit x ticks (value, label) for a numeric axis, e.g. (65536, "64K"); default: automatic.
  std::vector<std::pair<double, std::string>> x_ticks;
  std::vector<Series> series;
  std::vector<HorizontalLine> lines;
  std::vector<std::string> footnotes;  // printed under the plot (e.g. the Amdahl fit)
};

struct RatioBar {
  std::string label;      // figure name
  double advantage = 0;   // > 1: grist better than the peer; NaN: no peer (bar omitted)
  std::string detail;     // e.g. "412 MB/s vs 390 MB/s (spm_encode)" or "no peer: fio not installed"
};

struct RatioBars {
  std::string title;
  std::vector<RatioBar> bars;
};

std::string RenderLinePlot(const LinePlot& plot);
std::string RenderRatioBars(const RatioBars& bars);

// Tick positions for a linear axis covering [lo, hi]: about `target` "nice" steps (1, 2, 2.5, 5 x
// 10^k). Exposed for tests.
std::vector<double> NiceTicks(double lo, double hi, int target);
// Compact tick text: "0", "2.5", "1200", "1.5e+06".
std::string TickText(double v);
// XML-escapes text for an SVG text node or attribute.
std::string XmlEscape(const std::string& s);

}  // namespace grist::bench

#endif  // GRIST_BENCH_PLOT_H_
