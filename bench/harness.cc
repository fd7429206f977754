#include "bench/harness.h"

#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/status_macros.h"

namespace grist::bench {

absl::StatusOr<Stats> Repeat(const Options& options,
                             const std::function<absl::StatusOr<double>()>& fn) {
  for (int i = 0; i < options.warmup; ++i) RETURN_IF_ERROR(fn().status());
  std::vector<double> v;
  for (int i = 0; i < std::max(1, options.repetitions); ++i) {
    ASSIGN_OR_RETURN(double x, fn());
    v.push_back(x);
  }
  return Stats::Of(std::move(v));
}

absl::StatusOr<CommandResult> RunCommand(const std::string& command, bool merge_stderr) {
  std::string cmd = command + (merge_stderr ? " 2>&1" : " 2>/dev/null");
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return ErrnoError(errno, absl::StrCat("popen ", command));
  CommandResult r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) r.output.append(buf, n);
  int st = ::pclose(p);
  r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  return r;
}

bool HaveProgram(const std::string& program) {
  auto r = RunCommand(absl::StrCat("command -v ", program, " >/dev/null"));
  return r.ok() && r->exit_code == 0;
}

std::string FindPython(const std::string& given, const std::string& modules) {
  if (!given.empty()) return given;
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("GRIST_PYTHON"); env != nullptr && *env != '\0') {
    candidates.push_back(env);
  }
  candidates.push_back("python3");
  candidates.push_back("/usr/bin/python3");
  for (const std::string& candidate : candidates) {
    auto r = RunCommand(absl::StrCat(candidate, " -c 'import ", modules, "' >/dev/null 2>&1"));
    if (r.ok() && r->exit_code == 0) return candidate;
  }
  return "python3";
}

}  // namespace grist::bench
