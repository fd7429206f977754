#include "bench/sweep_driver.h"

#include <simdjson.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/registry.h"
#include "common/env.h"
#include "common/status_macros.h"

namespace grist::bench {
namespace {

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

// `args` without `flag VALUE` / `flag=VALUE` (every occurrence).
std::vector<std::string> Without(const std::vector<std::string>& args, const std::string& flag) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == flag) {
      ++i;
      continue;
    }
    if (args[i].rfind(flag + "=", 0) == 0) continue;
    out.push_back(args[i]);
  }
  return out;
}

absl::StatusOr<Stats> StatsOf(simdjson::dom::element e, const std::string& what) {
  simdjson::dom::array samples;
  if (e["samples"].get(samples) != simdjson::SUCCESS) {
    return absl::DataLossError(absl::StrCat("bench record: ", what, " has no samples"));
  }
  std::vector<double> v;
  for (simdjson::dom::element x : samples) {
    double d;
    if (x.get(d) != simdjson::SUCCESS) {
      return absl::DataLossError(absl::StrCat("bench record: ", what, ": a sample is not a number"));
    }
    v.push_back(d);
  }
  return Stats::Of(std::move(v));
}

std::string Str(simdjson::dom::element e, const char* key) {
  std::string_view sv;
  if (e[key].get(sv) != simdjson::SUCCESS) return "";
  return std::string(sv);
}

}  // namespace

std::string SweepFlag(const std::string& param) {
  std::string f = "--" + param;
  for (char& c : f) {
    if (c == '_') c = '-';
  }
  return f;
}

std::vector<std::string> BenchArgsOfThisProcess(const std::string& name) {
  std::ifstream f("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<std::string> args = absl::StrSplit(all, '\0', absl::SkipEmpty());
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == "bench" && args[i + 1] == name) {
      return std::vector<std::string>(args.begin() + i + 2, args.end());
    }
  }
  return {};
}

absl::StatusOr<std::vector<Figure>> FiguresFromJson(
    const std::string& json, std::vector<std::pair<std::string, std::string>>* params,
    std::vector<std::string>* notes) {
  simdjson::dom::parser parser;
  simdjson::padded_string ps(json);
  simdjson::dom::element root;
  if (parser.parse(ps).get(root) != simdjson::SUCCESS) {
    return absl::DataLossError("bench record: not valid JSON");
  }
  simdjson::dom::object po;
  if (params && root["params"].get(po) == simdjson::SUCCESS) {
    for (auto [k, v] : po) {
      std::string_view sv;
      if (v.get(sv) == simdjson::SUCCESS) params->emplace_back(std::string(k), std::string(sv));
    }
  }
  simdjson::dom::array na;
  if (notes && root["notes"].get(na) == simdjson::SUCCESS) {
    for (simdjson::dom::element n : na) {
      std::string_view sv;
      if (n.get(sv) == simdjson::SUCCESS) notes->emplace_back(sv);
    }
  }
  simdjson::dom::array figs;
  if (root["figures"].get(figs) != simdjson::SUCCESS) {
    return absl::DataLossError("bench record: no figures");
  }
  std::vector<Figure> out;
  for (simdjson::dom::element fe : figs) {
    Figure f;
    f.name = Str(fe, "name");
    f.unit = Str(fe, "unit");
    ASSIGN_OR_RETURN(f.ours, StatsOf(fe["ours"], f.name));
    f.peer_name = Str(fe, "peer_name");
    f.peer_note = Str(fe, "peer_note");
    f.target = Str(fe, "target");
    bool b;
    if (fe["higher_is_better"].get(b) == simdjson::SUCCESS) f.higher_is_better = b;
    if (fe["peer_is_ceiling"].get(b) == simdjson::SUCCESS) f.peer_is_ceiling = b;
    simdjson::dom::element pe;
    if (fe["peer"].get(pe) == simdjson::SUCCESS && !pe.is_null()) {
      ASSIGN_OR_RETURN(Stats s, StatsOf(pe, f.name + " peer"));
      f.peer = s;
    }
    out.push_back(std::move(f));
  }
  return out;
}

std::optional<absl::Status> MaybeDriveSweep(CLI::App* app, const std::vector<std::string>& args) {
  CLI::Option* sweep_opt = app->get_option_no_throw("--sweep");
  if (sweep_opt == nullptr || sweep_opt->count() == 0) return std::nullopt;
  auto sweep = Sweep::Parse(sweep_opt->as<std::string>());
  if (!sweep.ok()) return sweep.status();
  const std::vector<std::string> own = OwnSweeps(app);
  if (std::find(own.begin(), own.end(), sweep->param) != own.end()) return std::nullopt;
  const std::string flag = SweepFlag(sweep->param);
  if (app->get_option_no_throw(flag) == nullptr) {
    // Neither the bench nor the harness can sweep it: say so before any work.
    std::vector<std::string> can = own;
    for (const CLI::Option* o : app->get_options()) {
      const std::string n = o->get_name(false, true);
      if (o->get_expected_min() < 1 || n.rfind("--", 0) != 0) continue;
      std::string p = n.substr(2);
      for (char& c : p) {
        if (c == '-') c = '_';
      }
      if (p == "sweep" || p == "output" || p == "repetitions" || p == "warmup") continue;
      if (std::find(can.begin(), can.end(), p) == can.end()) can.push_back(p);
    }
    return FlagError(absl::StrCat(
        "--sweep ", sweep->param, ": this bench cannot sweep '", sweep->param, "'",
        can.empty() ? "; it sweeps nothing" : absl::StrCat("; it sweeps: ", absl::StrJoin(can, ", "))));
  }
  const std::string name = app->get_name();

  Options o;
  if (auto* x = app->get_option_no_throw("--output"); x && x->count()) o.output_dir = x->as<std::string>();
  if (auto* x = app->get_option_no_throw("--repetitions"); x && x->count()) o.repetitions = x->as<int>();
  if (auto* x = app->get_option_no_throw("--warmup"); x && x->count()) o.warmup = x->as<int>();
  if (auto* x = app->get_option_no_throw("--quick"); x && x->count()) o.quick = true;
  if (auto* x = app->get_option_no_throw("--dir"); x && x->count()) o.target_dir = x->as<std::string>();
  // Each point's own report goes to a scratch folder (inside --output when given, so the same file
  // system), and is read back.
  std::string scratch;
  if (!o.output_dir.empty()) {
    scratch = JoinPath(o.output_dir, absl::StrCat(".sweep-", name));
  } else {
    const char* t = std::getenv("TMPDIR");
    scratch = JoinPath(t && *t ? t : "/tmp", absl::StrCat("grist-sweep-", name, "-", ::getpid()));
  }
  Env* env = Env::Default();
  absl::Status st = env->RemoveAll(scratch);
  if (!st.ok()) return st;
  std::vector<std::string> base = Without(Without(Without(args, "--sweep"), "--output"), flag);

  // This binary (the shell that runs the child would read /proc/self/exe as itself).
  char exe[4096];
  ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) return absl::InternalError("cannot read /proc/self/exe");
  const std::string self(exe, static_cast<size_t>(n));

  Report report(name, o);
  report.AddNote(absl::StrCat("Swept by the harness: one `grist bench ", name, " ", flag,
                              " <value>` process per point."));
  std::vector<std::string> seen_notes;
  bool params_set = false;
  absl::Status result = RunSweep(&report, *sweep, [&](const std::string& v)
                                                      -> absl::StatusOr<std::vector<Figure>> {
    std::string dir = JoinPath(scratch, v);
    std::vector<std::string> child = base;
    child.insert(child.end(), {flag, v, "--output", dir});
    std::vector<std::string> quoted;
    for (const auto& a : child) quoted.push_back(ShellQuote(a));
    std::string cmd = absl::StrCat(ShellQuote(self), " bench ", name, " ", absl::StrJoin(quoted, " "));
    std::fprintf(stderr, "grist bench %s: %s=%s ...\n", name.c_str(), sweep->param.c_str(), v.c_str());
    ASSIGN_OR_RETURN(CommandResult r, RunCommand(cmd, /*merge_stderr=*/true));
    if (r.exit_code != 0) {
      std::string last = r.output;
      while (!last.empty() && last.back() == '\n') last.pop_back();
      auto nl = last.rfind('\n');
      if (nl != std::string::npos) last = last.substr(nl + 1);
      return absl::InternalError(absl::StrCat("exit ", r.exit_code, ": ", last));
    }
    ASSIGN_OR_RETURN(std::string json, ReadFileToString(env, JoinPath(dir, name + "-0.json")));
    std::vector<std::pair<std::string, std::string>> params;
    std::vector<std::string> notes;
    ASSIGN_OR_RETURN(std::vector<Figure> figs, FiguresFromJson(json, &params, &notes));
    if (!params_set) {
      for (const auto& [k, val] : params) {
        if (k != sweep->param) report.SetParam(k, val);
      }
      params_set = true;
    }
    for (const auto& n : notes) {
      if (std::find(seen_notes.begin(), seen_notes.end(), n) == seen_notes.end()) {
        seen_notes.push_back(n);
        report.AddNote(n);
      }
    }
    return figs;
  });
  (void)env->RemoveAll(scratch);
  if (!result.ok()) return result;
  return report.Finish();
}

}  // namespace grist::bench
