#include "bench/sweep.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace grist::bench {

absl::StatusOr<Sweep> Sweep::Parse(const std::string& spec) {
  auto eq = spec.find('=');
  if (eq == std::string::npos) {
    return FlagError(absl::StrCat(
        "--sweep '", spec, "': expected PARAM=v1,v2,... (e.g. threads=1,2,4,8)"));
  }
  Sweep sw;
  sw.param = std::string(absl::StripAsciiWhitespace(spec.substr(0, eq)));
  if (sw.param.empty()) {
    return FlagError(absl::StrCat("--sweep '", spec, "': no parameter name"));
  }
  std::string rest(absl::StripAsciiWhitespace(spec.substr(eq + 1)));
  if (rest.empty()) {
    return FlagError(
        absl::StrCat("--sweep ", sw.param, ": no values given (expected ", sw.param, "=v1,v2,...)"));
  }
  std::set<std::string> seen;
  for (absl::string_view part : absl::StrSplit(rest, ',')) {
    std::string v(absl::StripAsciiWhitespace(part));
    if (v.empty()) {
      return FlagError(
          absl::StrCat("--sweep ", sw.param, ": empty value in '", rest, "'"));
    }
    if (!seen.insert(v).second) {
      return FlagError(
          absl::StrCat("--sweep ", sw.param, ": value '", v, "' given twice"));
    }
    sw.values.push_back(v);
  }
  return sw;
}

bool Sweep::Numeric() const {
  for (const auto& v : values) {
    double d;
    if (!absl::SimpleAtod(v, &d)) return false;
  }
  return !values.empty();
}

absl::StatusOr<std::optional<Sweep>> SweepFromOptions(const Options& options,
                                                      const std::vector<std::string>& supported) {
  if (options.sweep.empty()) return std::optional<Sweep>();
  ASSIGN_OR_RETURN(Sweep sw, Sweep::Parse(options.sweep));
  if (std::find(supported.begin(), supported.end(), sw.param) == supported.end()) {
    return FlagError(absl::StrCat(
        "--sweep ", sw.param, ": this bench cannot sweep '", sw.param, "'",
        supported.empty() ? "; it supports no sweep"
                          : absl::StrCat("; it sweeps: ", absl::StrJoin(supported, ", "))));
  }
  return std::optional<Sweep>(std::move(sw));
}

absl::StatusOr<int64_t> SweepInt(const Sweep& sweep, const std::string& value) {
  std::string v = value;
  int64_t mult = 1;
  if (!v.empty()) {
    char c = static_cast<char>(std::toupper(static_cast<unsigned char>(v.back())));
    if (c == 'K' || c == 'M' || c == 'G') {
      mult = c == 'K' ? (1 << 10) : c == 'M' ? (1 << 20) : (1 << 30);
      v.pop_back();
    }
  }
  int64_t n = 0;
  if (!absl::SimpleAtoi(v, &n) || n < 1 || n > (int64_t{1} << 50) / mult) {
    return FlagError(absl::StrCat("--sweep ", sweep.param, ": value '", value,
                                                   "' is not a positive integer"));
  }
  return n * mult;
}

std::optional<double> NumericValue(const std::string& v) {
  double d;
  if (absl::SimpleAtod(v, &d)) return d;
  if (v.size() < 2) return std::nullopt;
  char c = static_cast<char>(std::toupper(static_cast<unsigned char>(v.back())));
  double mult = c == 'K' ? 1024.0 : c == 'M' ? 1048576.0 : c == 'G' ? 1073741824.0 : 0;
  if (mult == 0 || !absl::SimpleAtod(v.substr(0, v.size() - 1), &d)) return std::nullopt;
  return d * mult;
}

bool IsWorkerParam(const std::string& p) {
  return p == "threads" || p == "tasks" || p == "workers" || p == "jobs" || p == "ranks" ||
         p == "num_workers";
}

std::string AmdahlSentence(const AmdahlFit& fit, const std::string& param) {
  std::string best = fit.serial_fraction > 0
                         ? absl::StrFormat("at most %.1fx with unlimited %s",
                                           1.0 / fit.serial_fraction, param)
                         : std::string("no serial limit visible");
  return absl::StrFormat("Amdahl fit: serial fraction %.3f (%s)", fit.serial_fraction, best);
}

absl::Status RunSweep(
    Report* report, const Sweep& sweep,
    const std::function<absl::StatusOr<std::vector<Figure>>(const std::string&)>& point) {
  report->SetSweepParam(sweep.param);
  absl::Status last;
  int ok = 0;
  for (const std::string& v : sweep.values) {
    absl::StatusOr<std::vector<Figure>> figs = point(v);
    if (!figs.ok()) {
      last = figs.status();
      report->AddNote(absl::StrCat("Point ", sweep.param, "=", v, " failed: ",
                                   std::string(figs.status().message())));
      std::fprintf(stderr, "grist bench %s: %s=%s failed: %s\n", report->name().c_str(),
                   sweep.param.c_str(), v.c_str(), std::string(figs.status().message()).c_str());
      continue;
    }
    ++ok;
    for (Figure& f : *figs) {
      f.sweep_value = v;
      report->AddFigure(std::move(f));
    }
  }
  if (ok == 0 && !sweep.values.empty()) {
    return absl::Status(last.code(), absl::StrCat("every point of the sweep over ", sweep.param,
                                                  " failed; last: ", std::string(last.message())));
  }
  return absl::OkStatus();
}

namespace {

// Least squares of v = a + b u with u = 1/n over the points, a and b clamped to >= 0; nullopt with
// fewer than `min_distinct` distinct n or a non-positive n or v.
std::optional<AmdahlFit> FitInverseLinear(const std::vector<double>& n, const std::vector<double>& v,
                                          size_t min_distinct) {
  if (n.size() != v.size() || n.size() < min_distinct) return std::nullopt;
  double su = 0, sv = 0, suu = 0, suv = 0;
  std::set<double> distinct;
  for (size_t i = 0; i < n.size(); ++i) {
    if (!(n[i] > 0) || !(v[i] > 0)) return std::nullopt;
    double u = 1.0 / n[i];
    su += u, sv += v[i], suu += u * u, suv += u * v[i];
    distinct.insert(n[i]);
  }
  if (distinct.size() < min_distinct) return std::nullopt;
  double k = static_cast<double>(n.size());
  double den = k * suu - su * su;
  if (den == 0) return std::nullopt;
  AmdahlFit fit;
  fit.b = (k * suv - su * sv) / den;
  fit.a = (sv - fit.b * su) / k;
  // Keep the model physical: a >= 0 (no superlinear term), b >= 0.
  if (fit.a < 0) {
    fit.a = 0;
    fit.b = suv / suu;
  }
  if (fit.b < 0) {
    fit.b = 0;
    fit.a = sv / k;
  }
  if (fit.a + fit.b <= 0) return std::nullopt;
  fit.serial_fraction = std::clamp(fit.a / (fit.a + fit.b), 0.0, 1.0);
  return fit;
}

}  // namespace

std::optional<AmdahlFit> FitAmdahl(const std::vector<double>& n, const std::vector<double>& y) {
  std::vector<double> v;
  for (double x : y) v.push_back(x > 0 ? 1.0 / x : 0.0);
  return FitInverseLinear(n, v, 3);
}

std::optional<AmdahlFit> FitAmdahlSeconds(const std::vector<double>& threads,
                                          const std::vector<double>& seconds) {
  return FitInverseLinear(threads, seconds, 2);
}

}  // namespace grist::bench
