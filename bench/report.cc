#include "bench/report.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/machine.h"
#include "bench/plot.h"
#include "bench/sweep.h"
#include "common/env.h"
#include "common/json_writer.h"
#include "common/status_macros.h"

namespace grist::bench {

namespace {
constexpr char kFlagErrorPayload[] = "grist/bench/flag-error";
}  // namespace

absl::Status FlagError(const std::string& message) {
  absl::Status s = absl::InvalidArgumentError(message);
  s.SetPayload(kFlagErrorPayload, absl::Cord("1"));
  return s;
}

bool IsFlagError(const absl::Status& status) {
  return !status.ok() && status.GetPayload(kFlagErrorPayload).has_value();
}

Stats Stats::Of(std::vector<double> samples) {
  Stats s;
  s.samples = samples;
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  size_t n = samples.size();
  s.median = n % 2 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2;
  s.min = samples.front();
  s.max = samples.back();
  return s;
}

double Figure::Ratio() const {
  if (!peer || peer->median == 0) return std::nan("");
  return ours.median / peer->median;
}

absl::Status CheckOutputDir(Env* env, const std::string& dir) {
  auto explain = [&](const absl::Status& s) {
    std::string msg(s.message());
    if (msg.find("Read-only file system") != std::string::npos) {
      return absl::FailedPreconditionError(
          absl::StrCat("output directory ", dir, " is on a read-only file system (", msg, ")"));
    }
    if (absl::IsResourceExhausted(s) || msg.find("No space left") != std::string::npos) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "output directory ", dir, " has no space left for results (", msg, ")"));
    }
    if (absl::IsPermissionDenied(s)) {
      return absl::PermissionDeniedError(
          absl::StrCat("output directory ", dir, " is not writable (", msg, ")"));
    }
    return absl::Status(s.code(), absl::StrCat("output directory ", dir, ": ", msg));
  };
  if (env->FileExists(dir) && !env->IsDirectory(dir)) {
    return absl::FailedPreconditionError(
        absl::StrCat("output directory ", dir, " exists and is not a directory"));
  }
  absl::Status s = env->CreateDirs(dir);
  if (!s.ok()) return explain(s);
  std::string probe = JoinPath(dir, absl::StrCat(".grist-bench-probe.", ::getpid()));
  {
    auto f = env->NewWritableFile(probe);
    if (!f.ok()) return explain(f.status());
    std::string chunk(64 << 10, 'x');
    for (int i = 0; i < 16 && s.ok(); ++i) s = (*f)->Append(chunk);
    if (s.ok()) s = (*f)->Sync();
    absl::Status c = (*f)->Close();
    if (s.ok()) s = c;
  }
  absl::Status r = env->RemoveFile(probe);
  if (!s.ok()) return explain(s);
  if (!r.ok()) return explain(r);
  return absl::OkStatus();
}

Report::Report(std::string bench_name, Options options)
    : name_(std::move(bench_name)), options_(std::move(options)) {}

void Report::SetParam(const std::string& key, const std::string& value) {
  params_.emplace_back(key, value);
}
void Report::AddFigure(Figure figure) { figures_.push_back(std::move(figure)); }
void Report::AddNote(const std::string& note) { notes_.push_back(note); }

void Report::SetSweepParam(const std::string& param) { sweep_param_ = param; }

namespace {

std::string Num(double v) {
  if (std::isnan(v)) return "n/a";
  if (std::fabs(v) >= 100) return absl::StrFormat("%.0f", v);
  if (std::fabs(v) >= 10) return absl::StrFormat("%.1f", v);
  return absl::StrFormat("%.3g", v);
}

// File-name-safe form of a figure name: "encode MB/s (8 thr)" -> "encode-mb-s-8-thr".
std::string Slug(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (!out.empty() && out.back() != '-') {
      out += '-';
    }
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.empty() ? "figure" : out;
}

std::string TableRow(const std::string& first, const Figure& f) {
  std::string peer = f.peer ? absl::StrCat(Num(f.peer->median), " ", f.unit)
                            : absl::StrCat("unavailable", f.peer_note.empty() ? "" : ": ",
                                           f.peer_note);
  return absl::StrCat("| ", first, " | ", Num(f.ours.median), " ", f.unit, " [", Num(f.ours.min),
                      ", ", Num(f.ours.max), "] | ", f.peer_name.empty() ? "-" : f.peer_name,
                      " | ", peer, " | ", f.peer ? absl::StrCat(Num(f.Ratio()), "x") : "-", " | ",
                      f.target.empty() ? "-" : f.target, " |\n");
}

// Figure names in first-appearance order.
std::vector<std::string> FigureNames(const std::vector<Figure>& figures) {
  std::vector<std::string> names;
  for (const auto& f : figures) {
    if (std::find(names.begin(), names.end(), f.name) == names.end()) names.push_back(f.name);
  }
  return names;
}

}  // namespace

std::string Report::Markdown() const {
  std::string s = absl::StrCat("### grist bench ", name_,
                               sweep_param_.empty() ? "" : absl::StrCat(": sweep over ", sweep_param_),
                               "\n\n");
  if (!params_.empty()) {
    for (const auto& [k, v] : params_) absl::StrAppend(&s, "- ", k, ": ", v, "\n");
    s += "\n";
  }
  if (sweep_param_.empty()) {
    s += "| figure | grist (median [min, max]) | peer / ceiling | peer (median) | ratio | target |\n";
    s += "|---|---|---|---|---|---|\n";
    for (const auto& f : figures_) s += TableRow(f.name, f);
    if (std::any_of(figures_.begin(), figures_.end(), [](const Figure& f) { return f.peer; })) {
      absl::StrAppend(&s, "\n![grist ", name_, " relative to its peers](", name_, ".svg)\n");
    }
  } else {
    for (const std::string& fname : FigureNames(figures_)) {
      std::string unit;
      std::vector<double> n, y;
      bool numeric = true, higher = true;
      std::string rows;
      for (const auto& f : figures_) {
        if (f.name != fname) continue;
        unit = f.unit;
        higher = f.higher_is_better;
        rows += TableRow(f.sweep_value, f);
        auto x = NumericValue(f.sweep_value);
        if (!x) numeric = false;
        else n.push_back(*x), y.push_back(f.ours.median);
      }
      absl::StrAppend(&s, "#### ", fname, unit.empty() ? "" : absl::StrCat(" (", unit, ")"),
                      "\n\n| ", sweep_param_,
                      " | grist (median [min, max]) | peer / ceiling | peer (median) | ratio | target |\n",
                      "|---|---|---|---|---|---|\n", rows);
      absl::StrAppend(&s, "\n![", fname, " against ", sweep_param_, "](", name_, "-", Slug(fname),
                      ".svg)\n");
      if (numeric && higher && IsWorkerParam(sweep_param_)) {
        if (auto fit = FitAmdahl(n, y)) {
          absl::StrAppend(&s, "\n", AmdahlSentence(*fit, sweep_param_), "; measured speedup ",
                          absl::StrFormat("%.2fx", y.back() / y.front()), " from ",
                          TickText(n.front()), " to ", TickText(n.back()), " ", sweep_param_,
                          ".\n");
        }
      }
      s += "\n";
    }
  }
  for (const auto& n : notes_) absl::StrAppend(&s, "\n", n, "\n");
  return s;
}

std::vector<std::pair<std::string, std::string>> Report::Plots() const {
  std::vector<std::pair<std::string, std::string>> out;
  if (sweep_param_.empty()) {
    RatioBars bars;
    bars.title = absl::StrCat("grist bench ", name_, ": grist against its peers");
    bool any_peer = false;
    for (const auto& f : figures_) {
      RatioBar b;
      b.label = f.name;
      if (f.peer && f.peer->median > 0 && f.ours.median > 0) {
        any_peer = true;
        b.advantage = f.higher_is_better ? f.ours.median / f.peer->median
                                         : f.peer->median / f.ours.median;
        b.detail = absl::StrCat(Num(f.ours.median), " vs ", Num(f.peer->median), " ", f.unit,
                                " (", f.peer_name, f.higher_is_better ? "" : "; lower is better",
                                ")");
      } else {
        b.advantage = std::nan("");
        b.detail = f.peer ? "peer measured 0" : absl::StrCat("no peer: ", f.peer_note);
      }
      bars.bars.push_back(std::move(b));
    }
    if (any_peer) out.emplace_back(name_ + ".svg", RenderRatioBars(bars));
    return out;
  }
  for (const std::string& fname : FigureNames(figures_)) {
    std::vector<const Figure*> pts;
    for (const auto& f : figures_) {
      if (f.name == fname) pts.push_back(&f);
    }
    bool numeric = true;
    std::vector<double> xs;
    for (const Figure* f : pts) {
      auto x = NumericValue(f->sweep_value);
      if (!x) numeric = false;
      xs.push_back(x.value_or(0));
    }
    LinePlot plot;
    plot.title = absl::StrCat("grist bench ", name_, ": ", fname, " against ", sweep_param_);
    plot.x_label = sweep_param_;
    plot.y_label = absl::StrCat(fname, pts.front()->unit.empty() ? "" : " (", pts.front()->unit,
                                pts.front()->unit.empty() ? "" : ")");
    if (!numeric) {
      for (size_t i = 0; i < pts.size(); ++i) {
        xs[i] = static_cast<double>(i);
        plot.x_categories.push_back(pts[i]->sweep_value);
      }
    } else {
      double lo = *std::min_element(xs.begin(), xs.end());
      double hi = *std::max_element(xs.begin(), xs.end());
      plot.log2_x = lo > 0 && hi / lo >= 8;
      for (size_t i = 0; i < pts.size(); ++i) plot.x_ticks.emplace_back(xs[i], pts[i]->sweep_value);
    }
    Series ours;
    ours.label = "grist (median, min-max)";
    ours.color = "#1f77b4";
    for (size_t i = 0; i < pts.size(); ++i) {
      ours.x.push_back(xs[i]);
      ours.y.push_back(pts[i]->ours.median);
      ours.y_low.push_back(pts[i]->ours.min);
      ours.y_high.push_back(pts[i]->ours.max);
    }
    // The peer: a constant ceiling is one horizontal line, anything else a dashed series.
    Series peer;
    peer.style = LineStyle::kDashed;
    peer.color = "#d62728";
    std::string peer_name;
    bool ceiling = true;
    for (size_t i = 0; i < pts.size(); ++i) {
      if (!pts[i]->peer) continue;
      peer_name = pts[i]->peer_name;
      ceiling = ceiling && pts[i]->peer_is_ceiling;
      peer.x.push_back(xs[i]);
      peer.y.push_back(pts[i]->peer->median);
    }
    if (!peer.y.empty()) {
      double lo = *std::min_element(peer.y.begin(), peer.y.end());
      double hi = *std::max_element(peer.y.begin(), peer.y.end());
      bool constant = hi <= lo * 1.10 || peer.y.size() == 1;
      if (ceiling && constant) {
        std::vector<double> sorted = peer.y;
        std::sort(sorted.begin(), sorted.end());
        plot.lines.push_back({absl::StrCat(peer_name, " (ceiling)"), sorted[sorted.size() / 2],
                              "#2ca02c"});
      } else {
        peer.label = absl::StrCat(peer_name, ceiling ? " (ceiling)" : " (peer)");
        plot.series.push_back(std::move(peer));
      }
    } else if (!pts.front()->peer_name.empty()) {
      plot.footnotes.push_back(absl::StrCat("peer ", pts.front()->peer_name, " unavailable: ",
                                            pts.front()->peer_note));
    }
    plot.series.insert(plot.series.begin(), ours);
    if (numeric && pts.front()->higher_is_better && IsWorkerParam(sweep_param_) &&
        pts.size() >= 2) {
      // Reference curves, dotted: perfect scaling from the first point, and Amdahl's law fitted.
      std::vector<double> order(xs.size());
      Series ideal;
      ideal.label = "linear scaling (from first)";
      ideal.style = LineStyle::kDotted;
      ideal.color = "#7f7f7f";
      ideal.markers = false;
      size_t first = std::min_element(xs.begin(), xs.end()) - xs.begin();
      std::vector<double> sx = xs;
      std::sort(sx.begin(), sx.end());
      for (double x : sx) {
        ideal.x.push_back(x);
        ideal.y.push_back(ours.y[first] * x / xs[first]);
      }
      plot.series.push_back(std::move(ideal));
      if (auto fit = FitAmdahl(xs, ours.y)) {
        Series amdahl;
        amdahl.label = absl::StrFormat("Amdahl fit, serial %.2f", fit->serial_fraction);
        amdahl.style = LineStyle::kDotted;
        amdahl.color = "#ff7f0e";
        amdahl.markers = false;
        // Sample the curve densely between the first and last value.
        double a = sx.front(), b = sx.back();
        for (int k = 0; k <= 32; ++k) {
          double t = k / 32.0;
          double x = plot.log2_x ? a * std::pow(b / a, t) : a + (b - a) * t;
          amdahl.x.push_back(x);
          amdahl.y.push_back(fit->Predict(x));
        }
        plot.series.push_back(std::move(amdahl));
        plot.footnotes.push_back(AmdahlSentence(*fit, sweep_param_));
      }
    }
    if (!pts.front()->higher_is_better) plot.footnotes.push_back("lower is better");
    out.emplace_back(absl::StrCat(name_, "-", Slug(fname), ".svg"), RenderLinePlot(plot));
  }
  return out;
}

std::string Report::Json() const { return JsonWith(EnvironmentJson(options_.target_dir)); }

std::string Report::JsonWith(const std::string& environment_json) const {
  JsonWriter w(2);
  w.BeginObject();
  w.Field("bench", name_);
  w.Key("environment").Raw(environment_json);
  w.Key("params").BeginObject();
  for (const auto& [k, v] : params_) w.Field(k, v);
  w.EndObject();
  w.Field("repetitions", options_.repetitions).Field("warmup", options_.warmup);
  w.Field("quick", options_.quick);
  if (!sweep_param_.empty()) w.Field("sweep_param", sweep_param_);
  w.Key("figures").BeginArray();
  auto stats = [&](const Stats& st) {
    w.BeginObject().Field("median", st.median).Field("min", st.min).Field("max", st.max);
    w.Key("samples").BeginArray();
    for (double x : st.samples) w.Double(x);
    w.EndArray().EndObject();
  };
  for (const auto& f : figures_) {
    w.BeginObject().Field("name", f.name).Field("unit", f.unit);
    if (!sweep_param_.empty()) w.Field("sweep_value", f.sweep_value);
    w.Key("ours");
    stats(f.ours);
    w.Field("peer_name", f.peer_name);
    w.Field("peer_is_ceiling", f.peer_is_ceiling);
    w.Key("peer");
    if (f.peer) stats(*f.peer);
    else w.Null();
    if (!f.peer_note.empty()) w.Field("peer_note", f.peer_note);
    w.Field("ratio", f.Ratio()).Field("higher_is_better", f.higher_is_better);
    w.Field("target", f.target);
    w.EndObject();
  }
  w.EndArray();
  w.Key("notes").BeginArray();
  for (const auto& n : notes_) w.String(n);
  w.EndArray();
  w.EndObject();
  return w.Take();
}

absl::Status Report::Finish() {
  written_.clear();
  if (!options_.sweep.empty() && sweep_param_.empty()) {
    // The bench neither swept nor has a flag the harness could sweep: say so rather than
    // presenting one point as a sweep.
    return FlagError(absl::StrCat(
        "--sweep ", options_.sweep, ": grist bench ", name_,
        " has no flag for this parameter and does not sweep it itself; see grist bench ", name_,
        " --help"));
  }
  std::string md = Markdown();
  std::fputs(md.c_str(), stdout);
  std::fflush(stdout);
  if (options_.output_dir.empty()) return absl::OkStatus();
  Env* env = Env::Default();
  RETURN_IF_ERROR(CheckOutputDir(env, options_.output_dir));
  auto write = [&](const std::string& path, const std::string& data) -> absl::Status {
    absl::Status s = WriteFileAtomic(env, path, data);
    if (!s.ok()) {
      std::string msg(s.message());
      if (msg.find("Read-only file system") != std::string::npos) {
        return absl::FailedPreconditionError(absl::StrCat(
            "output directory ", options_.output_dir, " is on a read-only file system (", msg, ")"));
      }
      if (absl::IsResourceExhausted(s) || msg.find("No space left") != std::string::npos) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "output directory ", options_.output_dir, " has no space left for results (", msg,
            ")"));
      }
      return absl::Status(s.code(), absl::StrCat("writing bench results: ", msg));
    }
    written_.push_back(path);
    return absl::OkStatus();
  };
  int n = 0;
  std::string path;
  do {
    path = JoinPath(options_.output_dir, absl::StrCat(name_, "-", n++, ".json"));
  } while (env->FileExists(path));
  RETURN_IF_ERROR(write(path, JsonWith(EnvironmentJson(options_.target_dir.empty()
                                                           ? options_.output_dir
                                                           : options_.target_dir))));
  for (const auto& [file, svg] : Plots()) {
    RETURN_IF_ERROR(write(JoinPath(options_.output_dir, file), svg));
  }
  md += EnvironmentMarkdown(options_.target_dir.empty() ? options_.output_dir : options_.target_dir);
  return write(JoinPath(options_.output_dir, name_ + ".md"), md);
}

}  // namespace grist::bench
