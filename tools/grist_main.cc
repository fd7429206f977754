// The `grist` command line: one binary, one subcommand per stage.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include <unistd.h>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/output_file.h"
#include "common/thread_pool.h"
#include "common/version.h"
#include "tools/command.h"

namespace grist::tools {
namespace {

constexpr char kUsagePayload[] = "grist/exit/usage";
constexpr char kBadDataPayload[] = "grist/exit/bad-data";
// Where `--json -` writes: the standard output as main found it (main points fd 1 at standard
// error then, so the human-readable summary does not mix into the JSON).
int g_json_stdout_fd = STDOUT_FILENO;

}  // namespace

absl::Status UsageError(const std::string& message) {
  absl::Status s = absl::InvalidArgumentError(message);
  s.SetPayload(kUsagePayload, absl::Cord("1"));
  return s;
}

absl::Status BadDataError(absl::Status s) {
  if (!s.ok()) s.SetPayload(kBadDataPayload, absl::Cord("1"));
  return s;
}

bool IsEnvironmentError(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kDeadlineExceeded:
      return true;
    default:
      return false;
  }
}

int ExitCodeFor(const absl::Status& s) {
  if (s.ok()) return kExitOk;
  if (s.GetPayload(kUsagePayload).has_value()) return kExitUsage;
  if (s.GetPayload(kBadDataPayload).has_value()) return kExitBadData;
  return kExitFailure;
}

std::vector<CommandInfo>& Registry() {
  static auto* r = new std::vector<CommandInfo>();
  return *r;
}

void AddCommonFlags(CLI::App* app, CommonFlags* f, bool with_tasks) {
  AddJsonFlag(app, &f->json_path, "machine-readable results");
  app->add_option("--threads", f->threads, "Worker threads (0 = all CPUs)")->check(CLI::NonNegativeNumber);
  app->add_flag("--quiet", f->quiet, "No progress display");
  if (with_tasks) {
    app->add_option("--task", f->task,
                    "Process slice I of the inputs (default: $SLURM_ARRAY_TASK_ID, else 0)")
        ->check(CLI::NonNegativeNumber);
    app->add_option("--tasks", f->tasks,
                    "Number of slices (default: $SLURM_ARRAY_TASK_COUNT, else 1)")
        ->check(CLI::PositiveNumber);
  }
}

void AddJsonFlag(CLI::App* app, std::string* path, const std::string& what) {
  app->add_option("--json", *path,
                  absl::StrCat("Write ", what,
                               " as JSON to FILE (- for the standard output; the summary then "
                               "goes to standard error)"));
}

static absl::Status EnvInt(const char* name, int* out) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return absl::OkStatus();
  if (!absl::SimpleAtoi(v, out)) {
    return UsageError(absl::StrCat("environment ", name, "='", v, "' is not an integer"));
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
  if (f->tasks < 1) return UsageError(absl::StrCat("--tasks must be >= 1, got ", f->tasks));
  if (f->task < 0 || f->task >= f->tasks) {
    return UsageError(
        absl::StrCat("--task must be in [0, ", f->tasks, "), got ", f->task));
  }
  return absl::OkStatus();
}

RunOptions StageRun(const CommonFlags& f) {
  RunOptions run;
  run.threads = f.threads;
  run.task = f.task < 0 ? 0 : f.task;
  run.tasks = f.tasks < 0 ? 1 : f.tasks;
  run.progress = !f.quiet;
  return run;
}

absl::Status MaybeWriteJson(const CommonFlags& f, const std::string& json) {
  if (f.json_path.empty()) return absl::OkStatus();
  std::fflush(stdout);  // what the command printed comes first where both go to one file
  return WriteOutputFile(f.json_path, json, g_json_stdout_fd);
}

// CLI11 converts integers with strtoll/strtoull and keeps a saturated result: "99999999999999999999"
// would become INT64_MAX and "-1" for an unsigned flag 2^64 - 1. Every integer flag of every
// command gets this check (no help text of its own), so such values are usage errors.
static void RejectOutOfRangeIntegers(CLI::App* app) {
  for (CLI::Option* opt : app->get_options()) {
    const std::string type = opt->get_type_name();
    const bool is_unsigned = type.rfind("UINT", 0) == 0;
    if (!is_unsigned && type.rfind("INT", 0) != 0) continue;
    opt->check(CLI::Validator(
        [is_unsigned](std::string& v) -> std::string {
          if (is_unsigned && v.find('-') != std::string::npos) {
            return "value " + v + " is negative; this flag takes an unsigned integer";
          }
          errno = 0;
          char* end = nullptr;
          if (is_unsigned) {
            (void)std::strtoull(v.c_str(), &end, 0);
          } else {
            (void)std::strtoll(v.c_str(), &end, 0);
          }
          if (errno == ERANGE) return "value " + v + " is out of range";
          return std::string();
        },
        ""));
  }
  for (CLI::App* sub : app->get_subcommands([](CLI::App*) { return true; })) {
    RejectOutOfRangeIntegers(sub);
  }
}

// True when the command line asks for `--json -`.
static bool JsonToStdout(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json=-") == 0) return true;
    if (std::strcmp(argv[i], "--json") == 0 && i + 1 < argc && std::strcmp(argv[i + 1], "-") == 0) {
      return true;
    }
  }
  return false;
}

// One line on standard error for a command-line error, then kExitUsage. Help and --version (CLI11's
// "errors" of code 0) print as usual and exit 0.
static int UsageExit(CLI::App& app, const CLI::ParseError& e) {
  if (e.get_exit_code() == 0) return app.exit(e);
  std::string msg = e.what();
  for (char& c : msg) {
    if (c == '\n') c = ' ';
  }
  while (!msg.empty() && msg.back() == ' ') msg.pop_back();
  std::fprintf(stderr, "grist: usage error: %s (see --help)\n", msg.c_str());
  return kExitUsage;
}

}  // namespace grist::tools

int main(int argc, char** argv) {
  using namespace grist::tools;
  // absl::Mutex's one measurement, off the stages' path; not for --version or --help alone, which
  // end before it would be needed.
  if (argc > 1 && argv[1][0] != '-') grist::StartCycleClockCalibration();
  CLI::App app{"grist: data releases, loading and checkpoints for LLM training"};
  app.name("grist");
  app.set_version_flag("--version", std::string("grist ") + GRIST_VERSION);
  app.require_subcommand(1);
  app.fallthrough(false);
  auto& reg = Registry();
  std::sort(reg.begin(), reg.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  std::vector<std::pair<CLI::App*, Runner>> runners;
  // No exception leaves main: a flag definition that throws is a bug reported as such (exit 1), a
  // command-line error is a usage error (exit 2), anything a command throws exits 1 with its text.
  try {
    for (auto& cmd : reg) {
      CLI::App* sub = app.add_subcommand(cmd.name, cmd.description);
      runners.emplace_back(sub, cmd.setup(sub));
    }
    RejectOutOfRangeIntegers(&app);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "grist: internal error defining the command line: %s\n", e.what());
    return kExitFailure;
  }
  // An unknown command word: CLI11 would only say that a subcommand is required.
  if (argc > 1 && argv[1][0] != '-' &&
      std::none_of(reg.begin(), reg.end(), [&](const CommandInfo& c) { return c.name == argv[1]; })) {
    std::fprintf(stderr, "grist: usage error: unknown command '%s' (see grist --help)\n", argv[1]);
    return kExitUsage;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return UsageExit(app, e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "grist: usage error: %s\n", e.what());
    return kExitUsage;
  }
  if (JsonToStdout(argc, argv)) {
    std::fflush(stdout);
    g_json_stdout_fd = ::dup(STDOUT_FILENO);
    if (g_json_stdout_fd < 0 || ::dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
      std::fprintf(stderr, "grist: cannot set up --json -: %s\n", std::strerror(errno));
      return kExitFailure;
    }
  }
  for (auto& [sub, run] : runners) {
    if (!sub->parsed()) continue;
    absl::Status s;
    try {
      s = run();
    } catch (const CLI::ParseError& e) {
      return UsageExit(app, e);
    } catch (const std::exception& e) {
      s = absl::InternalError(absl::StrCat("unexpected exception: ", e.what()));
    }
    std::fflush(stdout);
    if (!s.ok()) {
      std::fprintf(stderr, "grist %s: error: %s\n", sub->get_name().c_str(),
                   std::string(s.message()).c_str());
    }
    return ExitCodeFor(s);
  }
  return kExitUsage;
}
