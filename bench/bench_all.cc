// `grist bench all`: every registered bench, one after another, each in its own process (so a
// crash or hang in one is reported and the rest still run), with small sizes (--quick) unless
// --full. Writes one report folder:
//
//   DIR/index.md         summary table (status, time, report, log) and every bench's tables and
//                        plots inline, ready to paste into a lab report
//   DIR/index.json       the same summary, machine-readable, with the environment record
//   DIR/<bench>/         that bench's own output (<bench>-0.json, <bench>.md, *.svg) and log.txt
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "bench/harness.h"
#include "bench/registry.h"
#include "common/env.h"
#include "common/json_writer.h"
#include "common/status_macros.h"
#include "common/sysinfo.h"

namespace grist::bench {
namespace {

struct AllFlags {
  Options options;
  std::vector<std::string> only;
  std::vector<std::string> skip;
  int timeout_s = 900;
  bool full = false;
};

struct Outcome {
  std::string name;
  std::string status;  // "ok", "failed", "crashed", "timed out", "skipped"
  std::string detail;
  double seconds = 0;
  int exit_code = 0;
};

std::string LastLines(const std::string& text, int n) {
  std::vector<std::string> lines =
      absl::StrSplit(absl::StripTrailingAsciiWhitespace(text), '\n', absl::SkipEmpty());
  if (static_cast<int>(lines.size()) > n) lines.erase(lines.begin(), lines.end() - n);
  return absl::StrJoin(lines, "\n");
}

// Runs `args` (argv[0] = this binary) with stdout and stderr into `log_path`, killing its process
// group after `timeout_s`.
Outcome RunChild(const std::string& name, const std::vector<std::string>& args,
                 const std::string& log_path, int timeout_s) {
  Outcome out;
  out.name = name;
  Stopwatch sw;
  int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    out.status = "failed";
    out.detail = absl::StrCat("cannot create ", log_path);
    return out;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv("/proc/self/exe", argv.data());
    std::perror("execv /proc/self/exe");
    ::_exit(127);
  }
  ::close(fd);
  if (pid < 0) {
    out.status = "failed";
    out.detail = "fork failed";
    return out;
  }
  ::setpgid(pid, pid);
  int st = 0;
  bool timed_out = false;
  for (;;) {
    pid_t r = ::waitpid(pid, &st, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) break;
    if (!timed_out && sw.Seconds() > timeout_s) {
      timed_out = true;
      ::kill(-pid, SIGTERM);
      for (int i = 0; i < 50 && ::waitpid(pid, &st, WNOHANG) == 0; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &st, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  out.seconds = sw.Seconds();
  auto log = ReadFileToString(Env::Default(), log_path);
  std::string tail = log.ok() ? LastLines(*log, 3) : "";
  if (timed_out) {
    out.status = "timed out";
    out.detail = absl::StrCat("killed after ", timeout_s, " s (--timeout)");
  } else if (WIFSIGNALED(st)) {
    out.status = "crashed";
    out.exit_code = 128 + WTERMSIG(st);
    out.detail = absl::StrCat("signal ", WTERMSIG(st), " (", strsignal(WTERMSIG(st)), ")");
  } else if (WEXITSTATUS(st) != 0) {
    out.status = "failed";
    out.exit_code = WEXITSTATUS(st);
    // The bench's own one-line error is the last line of its output.
    out.detail = absl::StrCat("exit ", out.exit_code, ": ", LastLines(tail, 1));
  } else {
    out.status = "ok";
  }
  return out;
}

// A bench's Markdown, with its links made relative to the report folder.
std::string InlineMarkdown(const std::string& name, const std::string& md) {
  std::string s = absl::StrReplaceAll(md, {{absl::StrCat("](", name), absl::StrCat("](", name, "/", name)}});
  // Demote headings one level under index.md's "## <bench>".
  s = absl::StrReplaceAll(s, {{"\n### ", "\n#### "}});
  if (absl::StartsWith(s, "### ")) s = "#" + s;
  return s;
}

absl::Status RunAll(const AllFlags& flags) {
  const Options& o = flags.options;
  if (o.output_dir.empty()) {
    return FlagError("grist bench all needs --output DIR for its report folder");
  }
  Env* env = Env::Default();
  RETURN_IF_ERROR(CheckOutputDir(env, o.output_dir));
  std::set<std::string> known;
  for (const auto& b : BenchRegistry()) known.insert(b.name);
  for (const auto& n : flags.only) {
    if (!known.count(n) || n == "all") {
      return FlagError(absl::StrCat("--only: no bench named '", n, "'"));
    }
  }
  for (const auto& n : flags.skip) {
    if (!known.count(n)) return FlagError(absl::StrCat("--skip: no bench named '", n, "'"));
  }
  std::vector<std::string> names;
  for (const auto& b : BenchRegistry()) {
    if (b.name == "all") continue;
    if (!flags.only.empty() &&
        std::find(flags.only.begin(), flags.only.end(), b.name) == flags.only.end()) {
      continue;
    }
    names.push_back(b.name);
  }
  std::sort(names.begin(), names.end());
  std::vector<Outcome> outcomes;
  Stopwatch total;
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string& name = names[i];
    if (std::find(flags.skip.begin(), flags.skip.end(), name) != flags.skip.end()) {
      outcomes.push_back({name, "skipped", "--skip", 0, 0});
      continue;
    }
    std::string dir = JoinPath(o.output_dir, name);
    RETURN_IF_ERROR(env->RemoveAll(dir));
    RETURN_IF_ERROR(env->CreateDirs(dir));
    std::vector<std::string> args = {"grist", "bench", name, "--output", dir,
                                      "--repetitions", absl::StrCat(o.repetitions),
                                      "--warmup", absl::StrCat(o.warmup), "--quiet"};
    if (!flags.full) args.push_back("--quick");
    // A bench that needs a directory to work in (--dir) gets one inside its report folder, so its
    // file system is the one --output is on.
    for (const auto& b : BenchRegistry()) {
      if (b.name != name) continue;
      CLI::App probe;
      try {
        (void)b.setup(&probe);
      } catch (const CLI::Error&) {
        break;  // the child reports the clash itself
      }
      if (probe.get_option_no_throw("--dir") != nullptr) {
        std::string work = JoinPath(dir, "work");
        RETURN_IF_ERROR(env->CreateDirs(work));
        args.insert(args.end(), {"--dir", work});
      }
    }
    std::printf("[%zu/%zu] grist bench %s ...", i + 1, names.size(), name.c_str());
    std::fflush(stdout);
    Outcome out = RunChild(name, args, JoinPath(dir, "log.txt"), flags.timeout_s);
    (void)env->RemoveAll(JoinPath(dir, "work"));
    std::printf(" %s (%.1f s)%s%s\n", out.status.c_str(), out.seconds,
                out.detail.empty() ? "" : ": ", out.detail.c_str());
    std::fflush(stdout);
    outcomes.push_back(std::move(out));
  }

  // index.md
  std::string md = "# grist bench all\n\n";
  absl::StrAppend(&md, flags.full ? "Full sizes" : "Quick sizes (--quick)", ", ", o.repetitions,
                  " measured runs after ", o.warmup,
                  " warm-up run(s) per figure; every figure is the median with [min, max], beside "
                  "its peer or ceiling measured in the same run. Total ",
                  absl::StrFormat("%.0f", total.Seconds()), " s.\n\n");
  md += "| bench | status | time | report | log |\n|---|---|---|---|---|\n";
  for (const auto& out : outcomes) {
    bool has_md = env->FileExists(JoinPath(o.output_dir, absl::StrCat(out.name, "/", out.name, ".md")));
    absl::StrAppend(&md, "| ", out.name, " | ", out.status,
                    out.detail.empty() ? "" : absl::StrCat(": ", absl::StrReplaceAll(out.detail, {{"|", "\\|"}, {"\n", " "}})),
                    " | ", absl::StrFormat("%.1f s", out.seconds), " | ",
                    has_md ? absl::StrCat("[", out.name, ".md](", out.name, "/", out.name, ".md)") : "-",
                    " | ", out.status == "skipped" ? "-" : absl::StrCat("[log](", out.name, "/log.txt)"),
                    " |\n");
  }
  // Every figure of every bench in one table, each beside its peer (the rows of the benches'
  // own tables, with the bench named).
  md += "\n## Every figure and its peer\n\n"
        "| bench | figure | grist (median [min, max]) | peer / ceiling | peer (median) | ratio | "
        "target |\n|---|---|---|---|---|---|---|\n";
  for (const auto& out : outcomes) {
    if (out.status == "skipped") continue;
    auto bench_md = ReadFileToString(env, JoinPath(o.output_dir, absl::StrCat(out.name, "/", out.name, ".md")));
    if (!bench_md.ok()) continue;
    for (absl::string_view line : absl::StrSplit(*bench_md, '\n')) {
      if (!absl::StartsWith(line, "| ") || absl::StartsWith(line, "| figure ") ||
          absl::StartsWith(line, "|---")) {
        continue;
      }
      absl::StrAppend(&md, "| ", out.name, " ", line, "\n");
    }
  }
  for (const auto& out : outcomes) {
    if (out.status == "skipped") continue;
    absl::StrAppend(&md, "\n## ", out.name, "\n\n");
    auto bench_md = ReadFileToString(env, JoinPath(o.output_dir, absl::StrCat(out.name, "/", out.name, ".md")));
    if (bench_md.ok()) {
      md += InlineMarkdown(out.name, *bench_md);
    }
    if (out.status != "ok") {
      auto log = ReadFileToString(env, JoinPath(o.output_dir, absl::StrCat(out.name, "/log.txt")));
      absl::StrAppend(&md, "\n**", out.status, "**", out.detail.empty() ? "" : ": ",
                      out.detail.empty() ? "" : LastLines(out.detail, 1), "\n\n```\n",
                      log.ok() && !LastLines(*log, 15).empty() ? LastLines(*log, 15)
                                                               : "(the log is empty)",
                      "\n```\n");
    }
  }
  RETURN_IF_ERROR(WriteFileAtomic(env, JoinPath(o.output_dir, "index.md"), md));

  JsonWriter w(2);
  w.BeginObject().Field("bench", "all").Field("quick", !flags.full);
  w.Key("environment").Raw(EnvironmentJson(o.output_dir));
  w.Key("benches").BeginArray();
  for (const auto& out : outcomes) {
    w.BeginObject().Field("name", out.name).Field("status", out.status).Field("detail", out.detail);
    w.Field("exit_code", out.exit_code).Field("seconds", out.seconds);
    w.Field("report", absl::StrCat(out.name, "/", out.name, ".md"));
    w.EndObject();
  }
  w.EndArray().EndObject();
  RETURN_IF_ERROR(WriteFileAtomic(env, JoinPath(o.output_dir, "index.json"), w.Take()));

  std::vector<std::string> bad;
  for (const auto& out : outcomes) {
    if (out.status != "ok" && out.status != "skipped") bad.push_back(out.name);
  }
  std::printf("report: %s\n", JoinPath(o.output_dir, "index.md").c_str());
  if (names.empty()) {
    return absl::FailedPreconditionError("no benches are registered besides 'all'");
  }
  if (!bad.empty()) {
    return absl::InternalError(absl::StrCat(bad.size(), " of ", outcomes.size(),
                                            " benches did not succeed (", absl::StrJoin(bad, ", "),
                                            "); the others' results are in ",
                                            JoinPath(o.output_dir, "index.md")));
  }
  return absl::OkStatus();
}

BenchRunner Setup(CLI::App* app) {
  auto flags = std::make_shared<AllFlags>();
  AddBenchFlags(app, &flags->options);
  app->add_option("--only", flags->only, "Run only these benches (comma-separated)")->delimiter(',');
  app->add_option("--skip", flags->skip, "Leave these benches out (comma-separated)")->delimiter(',');
  app->add_option("--timeout", flags->timeout_s, "Seconds after which one bench is stopped and reported as timed out")
      ->check(CLI::PositiveNumber);
  app->add_flag("--full", flags->full, "Each bench's default sizes instead of --quick");
  // Every bench runs at its own sizes here: a sweep belongs to one bench.
  app->get_option("--sweep")->check(CLI::Validator(
      [](std::string&) { return std::string("--sweep applies to one bench, not to `grist bench all`"); },
      ""));
  return [flags]() -> absl::Status { return RunAll(*flags); };
}

GRIST_REGISTER_BENCH(all, "all",
                     "Every bench with small sizes, one report folder (index.md with each table and plot)",
                     Setup);

}  // namespace
}  // namespace grist::bench
