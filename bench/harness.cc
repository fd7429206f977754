#include "bench/harness.h"

#include <sys/statfs.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/env.h"
#include "common/json_writer.h"
#include "common/status_macros.h"
#include "common/sysinfo.h"
#include "common/version.h"

namespace grist::bench {

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

namespace {
std::string FsTypeName(long magic) {
  switch (static_cast<unsigned long>(magic)) {
    case 0xEF53: return "ext4";
    case 0x58465342: return "xfs";
    case 0x9123683E: return "btrfs";
    case 0x01021994: return "tmpfs";
    case 0x6969: return "nfs";
    case 0x0BD00BD0: return "lustre";
    case 0x47504653: return "gpfs";
    case 0x794c7630: return "overlayfs";
    case 0x65735546: return "fuse";
    case 0x2FC12FC1: return "zfs";
    default: return absl::StrFormat("0x%lx", magic);
  }
}

// Mount point and source device of `path` from /proc/self/mountinfo (longest matching mount).
void MountOf(const std::string& path, std::string* mount, std::string* device, std::string* fstype) {
  char real[4096];
  std::string p = ::realpath(path.c_str(), real) ? std::string(real) : path;
  std::ifstream f("/proc/self/mountinfo");
  std::string line;
  size_t best = 0;
  while (std::getline(f, line)) {
    std::vector<std::string> parts = absl::StrSplit(line, ' ');
    if (parts.size() < 10) continue;
    const std::string& mp = parts[4];
    bool match = p == mp || (absl::StartsWith(p, mp) && (mp == "/" || p[mp.size()] == '/'));
    if (!match || mp.size() < best) continue;
    auto dash = std::find(parts.begin(), parts.end(), "-");
    if (dash == parts.end() || dash + 2 >= parts.end()) continue;
    best = mp.size();
    *mount = mp;
    *fstype = *(dash + 1);
    *device = *(dash + 2);
  }
}
}  // namespace

std::string EnvironmentJson(const std::string& target_dir) {
  JsonWriter w(0);
  w.BeginObject();
  w.Field("cpu_model", CpuModel());
  w.Field("cpus", static_cast<int64_t>(sysconf(_SC_NPROCESSORS_ONLN)));
  w.Field("memory_bytes", TotalMemoryBytes());
  w.Field("kernel", KernelRelease());
  w.Field("host", HostName());
  w.Field("grist_version", GRIST_VERSION);
  w.Field("build_type", GRIST_BUILD_TYPE);
  w.Field("compiler", GRIST_COMPILER);
  if (!target_dir.empty()) {
    struct statfs sf;
    w.Field("target_dir", target_dir);
    if (::statfs(target_dir.c_str(), &sf) == 0) w.Field("fs_type", FsTypeName(sf.f_type));
    std::string mount, device, fstype;
    MountOf(target_dir, &mount, &device, &fstype);
    w.Field("mount", mount).Field("mount_fs", fstype).Field("block_device", device);
  }
  auto gpu = RunCommand(
      "nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader");
  if (gpu.ok() && gpu->exit_code == 0 && !gpu->output.empty()) {
    w.Field("gpu", std::string(absl::StripTrailingAsciiWhitespace(gpu->output)));
  } else {
    w.Field("gpu", "none");
  }
  w.EndObject();
  return w.Take();
}

Report::Report(std::string bench_name, Options options)
    : name_(std::move(bench_name)), options_(std::move(options)) {}

void Report::SetParam(const std::string& key, const std::string& value) {
  params_.emplace_back(key, value);
}
void Report::AddFigure(Figure figure) { figures_.push_back(std::move(figure)); }
void Report::AddNote(const std::string& note) { notes_.push_back(note); }

static std::string Num(double v) {
  if (std::isnan(v)) return "n/a";
  if (std::fabs(v) >= 100) return absl::StrFormat("%.0f", v);
  if (std::fabs(v) >= 10) return absl::StrFormat("%.1f", v);
  return absl::StrFormat("%.3g", v);
}

std::string Report::Markdown() const {
  std::string s = absl::StrCat("### grist bench ", name_, "\n\n");
  if (!params_.empty()) {
    for (const auto& [k, v] : params_) absl::StrAppend(&s, "- ", k, ": ", v, "\n");
    s += "\n";
  }
  s += "| figure | grist (median [min, max]) | peer / ceiling | peer (median) | ratio | target |\n";
  s += "|---|---|---|---|---|---|\n";
  for (const auto& f : figures_) {
    std::string peer = f.peer ? absl::StrCat(Num(f.peer->median), " ", f.unit)
                              : absl::StrCat("unavailable", f.peer_note.empty() ? "" : ": ", f.peer_note);
    absl::StrAppend(&s, "| ", f.name, " | ", Num(f.ours.median), " ", f.unit, " [", Num(f.ours.min),
                    ", ", Num(f.ours.max), "] | ", f.peer_name.empty() ? "-" : f.peer_name, " | ",
                    peer, " | ", f.peer ? absl::StrCat(Num(f.Ratio()), "x") : "-", " | ",
                    f.target.empty() ? "-" : f.target, " |\n");
  }
  for (const auto& n : notes_) absl::StrAppend(&s, "\n", n, "\n");
  return s;
}

std::string Report::Json() const {
  JsonWriter w(2);
  w.BeginObject();
  w.Field("bench", name_);
  w.Key("environment").Raw(EnvironmentJson(options_.target_dir));
  w.Key("params").BeginObject();
  for (const auto& [k, v] : params_) w.Field(k, v);
  w.EndObject();
  w.Field("repetitions", options_.repetitions).Field("warmup", options_.warmup);
  w.Key("figures").BeginArray();
  auto stats = [&](const Stats& st) {
    w.BeginObject().Field("median", st.median).Field("min", st.min).Field("max", st.max);
    w.Key("samples").BeginArray();
    for (double x : st.samples) w.Double(x);
    w.EndArray().EndObject();
  };
  for (const auto& f : figures_) {
    w.BeginObject().Field("name", f.name).Field("unit", f.unit);
    w.Key("ours");
    stats(f.ours);
    w.Field("peer_name", f.peer_name);
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
  std::string md = Markdown();
  std::fputs(md.c_str(), stdout);
  std::fflush(stdout);
  if (options_.output_dir.empty()) return absl::OkStatus();
  Env* env = Env::Default();
  RETURN_IF_ERROR(env->CreateDirs(options_.output_dir));
  int n = 0;
  std::string path;
  do {
    path = JoinPath(options_.output_dir, absl::StrCat(name_, "-", n++, ".json"));
  } while (env->FileExists(path));
  RETURN_IF_ERROR(WriteFileAtomic(env, path, Json()));
  return WriteFileAtomic(env, JoinPath(options_.output_dir, name_ + ".md"), md);
}

}  // namespace grist::bench
