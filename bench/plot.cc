#include "bench/plot.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace grist::bench {
namespace {

constexpr const char* kFont = "DejaVu Sans, Helvetica, Arial, sans-serif";

std::string F(double v) { return absl::StrFormat("%.1f", v); }

std::string DashArray(LineStyle s) {
  switch (s) {
    case LineStyle::kSolid: return "";
    case LineStyle::kDashed: return " stroke-dasharray=\"8,4\"";
    case LineStyle::kDotted: return " stroke-dasharray=\"2,3\"";
  }
  return "";
}

std::string Truncate(const std::string& s, size_t n) {
  if (s.size() <= n) return s;
  // Cut at a UTF-8 character boundary.
  size_t cut = n - 1;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return s.substr(0, cut) + "\u2026";
}

std::string Text(double x, double y, const std::string& s, const std::string& attrs = "") {
  return absl::StrCat("<text x=\"", F(x), "\" y=\"", F(y), "\"", attrs.empty() ? "" : " ", attrs,
                      ">", XmlEscape(s), "</text>\n");
}

std::string Line(double x1, double y1, double x2, double y2, const std::string& stroke,
                 double width, const std::string& extra = "") {
  return absl::StrCat("<line x1=\"", F(x1), "\" y1=\"", F(y1), "\" x2=\"", F(x2), "\" y2=\"",
                      F(y2), "\" stroke=\"", stroke, "\" stroke-width=\"", F(width), "\"", extra,
                      "/>\n");
}

std::string Header(int width, int height) {
  return absl::StrCat(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n",
      "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"", width,
      "\" height=\"", height, "\" viewBox=\"0 0 ", width, " ", height, "\" font-family=\"", kFont,
      "\" font-size=\"12\">\n", "<rect x=\"0\" y=\"0\" width=\"", width, "\" height=\"", height,
      "\" fill=\"#ffffff\"/>\n");
}

std::string Marker(double x, double y, const Series& s) {
  if (!s.markers) return "";
  if (s.style == LineStyle::kSolid) {
    return absl::StrCat("<circle cx=\"", F(x), "\" cy=\"", F(y), "\" r=\"3.5\" fill=\"", s.color,
                        "\"/>\n");
  }
  return absl::StrCat("<rect x=\"", F(x - 3.5), "\" y=\"", F(y - 3.5),
                      "\" width=\"7\" height=\"7\" fill=\"#ffffff\" stroke=\"", s.color,
                      "\" stroke-width=\"1.5\"/>\n");
}

}  // namespace

std::string XmlEscape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // Control characters are not allowed in XML 1.0 text.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n') {
          out += ' ';
        } else {
          out += c;
        }
    }
  }
  return out;
}

std::vector<double> NiceTicks(double lo, double hi, int target) {
  if (!(hi > lo)) hi = lo + 1;
  if (target < 1) target = 1;
  double raw = (hi - lo) / target;
  double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw) break;
  }
  double first = std::floor(lo / step + 1e-9) * step;
  double last = std::ceil(hi / step - 1e-9) * step;
  std::vector<double> ticks;
  for (int i = 0;; ++i) {
    double t = first + i * step;
    if (t > last + step * 1e-6) break;
    // Snap values that should be zero (floating-point residue).
    ticks.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);
  }
  return ticks;
}

std::string TickText(double v) {
  if (v == 0) return "0";
  double a = std::fabs(v);
  if (a >= 1e6 || a < 1e-3) return absl::StrFormat("%.3g", v);
  if (a >= 100 && std::fabs(v - std::round(v)) < 1e-9) return absl::StrFormat("%.0f", v);
  return absl::StrFormat("%.6g", v);
}

std::string RenderLinePlot(const LinePlot& plot) {
  const int legend_w = 270;
  const int width = 880;
  const double left = 85, top = 50, right = width - legend_w - 20;
  const double plot_h = 330;
  const double bottom = top + plot_h;
  const int height = static_cast<int>(bottom + 60 + 18 * plot.footnotes.size());

  // X range.
  std::vector<double> xs;
  for (const auto& s : plot.series) xs.insert(xs.end(), s.x.begin(), s.x.end());
  std::sort(xs.begin(), xs.end());
  xs.erase(std::unique(xs.begin(), xs.end()), xs.end());
  const bool categorical = !plot.x_categories.empty();
  const bool log2_x = plot.log2_x && !categorical && !xs.empty() && xs.front() > 0;
  auto xt = [&](double x) { return log2_x ? std::log2(x) : x; };
  double xlo = 0, xhi = 1;
  std::vector<double> xticks;
  std::vector<std::string> xtick_text;
  if (categorical) {
    xlo = -0.5;
    xhi = plot.x_categories.size() - 0.5;
    for (size_t i = 0; i < plot.x_categories.size(); ++i) {
      xticks.push_back(i);
      xtick_text.push_back(Truncate(plot.x_categories[i], 14));
    }
  } else if (!xs.empty()) {
    if (!plot.x_ticks.empty()) {
      std::vector<std::pair<double, std::string>> t = plot.x_ticks;
      std::sort(t.begin(), t.end());
      t.erase(std::unique(t.begin(), t.end(),
                          [](const auto& a, const auto& b) { return a.first == b.first; }),
              t.end());
      for (const auto& [x, label] : t) {
        xticks.push_back(x);
        xtick_text.push_back(Truncate(label, 14));
      }
    }
    if (log2_x) {
      xlo = xt(xs.front()) - 0.3;
      xhi = xt(xs.back()) + 0.3;
      // One tick per measured value: the sweep's own points.
      for (double x : plot.x_ticks.empty() ? xs : std::vector<double>()) {
        xticks.push_back(x);
        xtick_text.push_back(TickText(x));
      }
    } else {
      double span = xs.back() - xs.front();
      if (span <= 0) span = std::max(1.0, std::fabs(xs.front()));
      xlo = xs.front() - 0.05 * span;
      xhi = xs.back() + 0.05 * span;
      for (double t : plot.x_ticks.empty() ? NiceTicks(xs.front(), xs.back() > xs.front() ? xs.back() : xs.front() + 1, 6) : std::vector<double>()) {
        if (t < xlo || t > xhi) continue;
        xticks.push_back(t);
        xtick_text.push_back(TickText(t));
      }
    }
  }
  // Y range: from 0 (or the lowest value when negative) to the highest value, error bar or line.
  double ylo = 0, yhi = 0;
  bool any = false;
  auto see = [&](double v) {
    if (!std::isfinite(v)) return;
    if (!any) ylo = std::min(0.0, v), yhi = v, any = true;
    ylo = std::min(ylo, v);
    yhi = std::max(yhi, v);
  };
  for (const auto& s : plot.series) {
    for (double v : s.y) see(v);
    for (double v : s.y_high) see(v);
    for (double v : s.y_low) see(v);
  }
  for (const auto& l : plot.lines) see(l.y);
  if (!(yhi > ylo)) yhi = ylo + 1;
  std::vector<double> yticks = NiceTicks(ylo, yhi * 1.02, 6);
  ylo = yticks.front();
  yhi = yticks.back();

  auto px = [&](double x) { return left + (xt(x) - xlo) / (xhi - xlo) * (right - left); };
  auto py = [&](double y) { return bottom - (y - ylo) / (yhi - ylo) * plot_h; };

  std::string svg = Header(width, height);
  svg += Text(left, 28, Truncate(plot.title, 90), "font-size=\"15\" font-weight=\"bold\"");
  // Grid and ticks.
  for (double t : yticks) {
    double y = py(t);
    svg += Line(left, y, right, y, "#e0e0e0", 1);
    svg += Text(left - 6, y + 4, TickText(t), "text-anchor=\"end\"");
  }
  for (size_t i = 0; i < xticks.size(); ++i) {
    double x = categorical ? left + (xticks[i] - xlo) / (xhi - xlo) * (right - left) : px(xticks[i]);
    svg += Line(x, top, x, bottom, "#f0f0f0", 1);
    svg += Line(x, bottom, x, bottom + 5, "#333333", 1);
    svg += Text(x, bottom + 19, xtick_text[i], "text-anchor=\"middle\"");
  }
  // Axes.
  svg += Line(left, bottom, right, bottom, "#333333", 1.2);
  svg += Line(left, top, left, bottom, "#333333", 1.2);
  svg += Text((left + right) / 2, bottom + 42, plot.x_label,
              "text-anchor=\"middle\" font-size=\"13\"");
  svg += absl::StrCat("<text x=\"0\" y=\"0\" text-anchor=\"middle\" font-size=\"13\" ",
                      "transform=\"translate(", F(22), ",", F((top + bottom) / 2),
                      ") rotate(-90)\">", XmlEscape(plot.y_label), "</text>\n");
  // Horizontal lines (ceilings).
  for (const auto& l : plot.lines) {
    double y = py(l.y);
    svg += Line(left, y, right, y, l.color, 2, " stroke-dasharray=\"10,3,2,3\"");
  }
  // Series.
  auto sx = [&](const Series& s, size_t i) {
    return categorical ? left + (s.x[i] - xlo) / (xhi - xlo) * (right - left) : px(s.x[i]);
  };
  for (const auto& s : plot.series) {
    size_t n = std::min(s.x.size(), s.y.size());
    if (s.y_low.size() == n && s.y_high.size() == n) {
      for (size_t i = 0; i < n; ++i) {
        if (!std::isfinite(s.y_low[i]) || !std::isfinite(s.y_high[i])) continue;
        double x = sx(s, i);
        svg += Line(x, py(s.y_low[i]), x, py(s.y_high[i]), s.color, 1.2);
        svg += Line(x - 4, py(s.y_low[i]), x + 4, py(s.y_low[i]), s.color, 1.2);
        svg += Line(x - 4, py(s.y_high[i]), x + 4, py(s.y_high[i]), s.color, 1.2);
      }
    }
    std::vector<std::string> pts;
    for (size_t i = 0; i < n; ++i) {
      if (!std::isfinite(s.y[i])) continue;
      pts.push_back(absl::StrCat(F(sx(s, i)), ",", F(py(s.y[i]))));
    }
    if (pts.size() > 1) {
      svg += absl::StrCat("<polyline fill=\"none\" stroke=\"", s.color, "\" stroke-width=\"2\"",
                          DashArray(s.style), " points=\"", absl::StrJoin(pts, " "), "\"/>\n");
    }
    for (size_t i = 0; i < n; ++i) {
      if (std::isfinite(s.y[i])) svg += Marker(sx(s, i), py(s.y[i]), s);
    }
  }
  // Legend.
  double lx = right + 20, ly = top + 8;
  for (const auto& s : plot.series) {
    svg += Line(lx, ly, lx + 28, ly, s.color, 2, DashArray(s.style));
    svg += Marker(lx + 14, ly, s);
    svg += Text(lx + 36, ly + 4, Truncate(s.label, 36));
    ly += 22;
  }
  for (const auto& l : plot.lines) {
    svg += Line(lx, ly, lx + 28, ly, l.color, 2, " stroke-dasharray=\"10,3,2,3\"");
    svg += Text(lx + 36, ly + 4, Truncate(l.label, 36));
    ly += 22;
  }
  double fy = bottom + 62;
  for (const auto& note : plot.footnotes) {
    svg += Text(left, fy, Truncate(note, 110), "font-size=\"11\" fill=\"#444444\"");
    fy += 18;
  }
  svg += "</svg>\n";
  return svg;
}

std::string RenderRatioBars(const RatioBars& bars) {
  const int width = 820;
  const double label_right = 330, bar_left = 340, bar_right = width - 70;
  const double top = 76, row = 36;
  const double bottom = top + row * std::max<size_t>(1, bars.bars.size());
  const int height = static_cast<int>(bottom + 50);
  double max_adv = 1.25;
  for (const auto& b : bars.bars) {
    if (std::isfinite(b.advantage)) max_adv = std::max(max_adv, b.advantage * 1.05);
  }
  std::vector<double> ticks = NiceTicks(0, max_adv, 5);
  double hi = ticks.back();
  auto px = [&](double v) { return bar_left + v / hi * (bar_right - bar_left); };

  std::string svg = Header(width, height);
  svg += Text(20, 26, Truncate(bars.title, 100), "font-size=\"15\" font-weight=\"bold\"");
  svg += Text(20, 44,
              "bar: grist's advantage over the peer or ceiling measured in the same run "
              "(> 1 = grist better)",
              "font-size=\"11\" fill=\"#444444\"");
  for (double t : ticks) {
    double x = px(t);
    svg += Line(x, top, x, bottom, "#e8e8e8", 1);
    svg += Text(x, bottom + 16, TickText(t), "text-anchor=\"middle\"");
  }
  svg += Line(bar_left, top, bar_left, bottom, "#333333", 1.2);
  svg += Line(bar_left, bottom, bar_right, bottom, "#333333", 1.2);
  svg += Text((bar_left + bar_right) / 2, bottom + 36, "grist / peer (x)",
              "text-anchor=\"middle\" font-size=\"13\"");
  for (size_t i = 0; i < bars.bars.size(); ++i) {
    const RatioBar& b = bars.bars[i];
    double y = top + row * i;
    svg += Text(label_right, y + 15, Truncate(b.label, 44), "text-anchor=\"end\"");
    svg += Text(label_right, y + 29, Truncate(b.detail, 56),
                "text-anchor=\"end\" font-size=\"10\" fill=\"#555555\"");
    if (std::isfinite(b.advantage)) {
      double w = px(b.advantage) - bar_left;
      const char* color = b.advantage >= 1 ? "#1f77b4" : "#ff7f0e";
      svg += absl::StrCat("<rect x=\"", F(bar_left), "\" y=\"", F(y + 7), "\" width=\"", F(w),
                          "\" height=\"", F(row - 14), "\" fill=\"", color, "\"/>\n");
      svg += Text(px(b.advantage) + 5, y + row / 2 + 4, absl::StrFormat("%.2fx", b.advantage),
                  "stroke=\"#ffffff\" stroke-width=\"3\" paint-order=\"stroke\"");
    } else {
      svg += Text(bar_left + 6, y + row / 2 + 4, "no peer", "fill=\"#888888\"");
    }
  }
  double x1 = px(1.0);
  svg += Line(x1, top - 6, x1, bottom, "#d62728", 2, " stroke-dasharray=\"8,4\"");
  svg += Text(x1, top - 10, "peer = 1.0", "text-anchor=\"middle\" fill=\"#d62728\"");
  svg += "</svg>\n";
  return svg;
}

}  // namespace grist::bench
