#include "bench/python_peer.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bench/harness.h"
#include "common/env.h"
#include "common/status_macros.h"

namespace grist::bench {
namespace {

std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''"; else out.push_back(c);
  }
  return out + "'";
}

}  // namespace

std::string PeerScriptPath(const std::string& name) {
  std::vector<std::string> dirs;
  if (const char* d = std::getenv("GRIST_BENCH_PYTHON_DIR"); d && *d) dirs.push_back(d);
#ifdef GRIST_BENCH_PYTHON_SOURCE_DIR
  dirs.push_back(GRIST_BENCH_PYTHON_SOURCE_DIR);
#endif
  dirs.push_back("bench/python");
  for (const auto& d : dirs) {
    std::string p = JoinPath(d, name);
    if (Env::Default()->FileExists(p)) return p;
  }
  return "";
}

absl::StatusOr<PeerRun> RunPythonPeer(const std::string& script, const std::string& modules,
                                      const std::vector<std::string>& args) {
  const std::string path = PeerScriptPath(script);
  if (path.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("bench/python/", script, " not found (set GRIST_BENCH_PYTHON_DIR)"));
  }
  PeerRun run;
  run.python = FindPython("", modules);
  auto probe = RunCommand(absl::StrCat(run.python, " -c 'import ", modules, "'"), true);
  if (!probe.ok() || probe->exit_code != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no Python with ", modules, " (set GRIST_PYTHON to an interpreter that has them; "
        "scripts/setup.sh installs them into .venv)"));
  }
  std::string cmd = absl::StrCat(run.python, " ", Quote(path));
  for (const auto& a : args) absl::StrAppend(&cmd, " ", Quote(a));
  ASSIGN_OR_RETURN(CommandResult r, RunCommand(cmd, true));
  if (r.exit_code != 0) {
    std::string tail = r.output.size() > 2000 ? r.output.substr(r.output.size() - 2000) : r.output;
    return absl::InternalError(absl::StrCat(script, " failed (exit ", r.exit_code, "): ", tail));
  }
  size_t end = r.output.find_last_not_of("\n\r ");
  if (end == std::string::npos) return absl::InternalError(absl::StrCat(script, " printed nothing"));
  size_t begin = r.output.rfind('\n', end);
  run.json = r.output.substr(begin == std::string::npos ? 0 : begin + 1, end + 1 - (begin == std::string::npos ? 0 : begin + 1));
  return run;
}

double PeerJsonNumber(const std::string& json, const std::string& key, double missing) {
  const std::string pat = absl::StrCat("\"", key, "\": ");
  size_t p = json.find(pat);
  if (p == std::string::npos) return missing;
  const char* s = json.c_str() + p + pat.size();
  char* e = nullptr;
  double v = std::strtod(s, &e);
  return e == s ? missing : v;
}

std::vector<double> PeerJsonNumbers(const std::string& json, const std::string& key) {
  std::vector<double> out;
  const std::string pat = absl::StrCat("\"", key, "\": [");
  size_t p = json.find(pat);
  if (p == std::string::npos) return out;
  const char* s = json.c_str() + p + pat.size();
  while (*s && *s != ']') {
    char* e = nullptr;
    double v = std::strtod(s, &e);
    if (e == s) break;
    out.push_back(v);
    s = e;
    while (*s == ',' || *s == ' ') ++s;
  }
  return out;
}

std::string PeerJsonString(const std::string& json, const std::string& key) {
  const std::string pat = absl::StrCat("\"", key, "\": \"");
  size_t p = json.find(pat);
  if (p == std::string::npos) return "";
  size_t b = p + pat.size();
  size_t e = json.find('"', b);
  return e == std::string::npos ? "" : json.substr(b, e - b);
}

}  // namespace grist::bench
