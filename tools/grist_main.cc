// The `grist` command line: one binary, one subcommand per stage.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/version.h"
#include "tools/command.h"

namespace grist::tools {

std::vector<CommandInfo>& Registry() {
  static auto* r = new std::vector<CommandInfo>();
  return *r;
}

void AddCommonFlags(CLI::App* app, CommonFlags* f, bool with_tasks) {
  app->add_option("--json", f->json_path, "Write machine-readable results (JSON) to FILE");
  app->add_option("--threads", f->threads, "Worker threads (0 = all CPUs)")->check(CLI::NonNegativeNumber);
  app->add_flag("--quiet", f->quiet, "No progress display");
  if (with_tasks) {
    app->add_option("--task", f->task,
                    "Process slice I of the inputs (default: $SLURM_ARRAY_TASK_ID, else 0)");
    app->add_option("--tasks", f->tasks,
                    "Number of slices (default: $SLURM_ARRAY_TASK_COUNT, else 1)");
  }
}

static absl::Status EnvInt(const char* name, int* out) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return absl::OkStatus();
  if (!absl::SimpleAtoi(v, out)) {
    return absl::InvalidArgumentError(absl::StrCat("environment ", name, "='", v, "' is not an integer"));
  }
  return absl::OkStatus();
}

absl::Status ResolveTasks(CommonFlags* f) {
  if (f->task < 0) {
    f->task = 0;
    absl::Status s = EnvInt("SLURM_ARRAY_TASK_ID", &f->task);
    if (!s.ok()) return s;
    // Slurm arrays may start at an offset (e.g. --array=1-4).
    int min = 0;
    s = EnvInt("SLURM_ARRAY_TASK_MIN", &min);
    if (!s.ok()) return s;
    if (std::getenv("SLURM_ARRAY_TASK_ID")) f->task -= min;
  }
  if (f->tasks < 0) {
    f->tasks = 1;
    absl::Status s = EnvInt("SLURM_ARRAY_TASK_COUNT", &f->tasks);
    if (!s.ok()) return s;
  }
  if (f->tasks < 1) return absl::InvalidArgumentError(absl::StrCat("--tasks must be >= 1, got ", f->tasks));
  if (f->task < 0 || f->task >= f->tasks) {
    return absl::InvalidArgumentError(
        absl::StrCat("--task must be in [0, ", f->tasks, "), got ", f->task));
  }
  return absl::OkStatus();
}

absl::Status MaybeWriteJson(const CommonFlags& f, const std::string& json) {
  if (f.json_path.empty()) return absl::OkStatus();
  return WriteFileAtomic(Env::Default(), f.json_path, json);
}

}  // namespace grist::tools

int main(int argc, char** argv) {
  using grist::tools::Registry;
  CLI::App app{"grist: data releases, loading and checkpoints for LLM training"};
  app.name("grist");
  app.set_version_flag("--version", std::string("grist ") + GRIST_VERSION);
  app.require_subcommand(1);
  app.fallthrough(false);
  auto& reg = Registry();
  std::sort(reg.begin(), reg.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  std::vector<std::pair<CLI::App*, grist::tools::Runner>> runners;
  for (auto& cmd : reg) {
    CLI::App* sub = app.add_subcommand(cmd.name, cmd.description);
    runners.emplace_back(sub, cmd.setup(sub));
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (auto& [sub, run] : runners) {
    if (sub->parsed()) {
      absl::Status s = run();
      if (!s.ok()) {
        std::fprintf(stderr, "grist %s: error: %s\n", sub->get_name().c_str(),
                     std::string(s.message()).c_str());
        return 1;
      }
      return 0;
    }
  }
  return 2;
}
