#include "bench/harness.h"

#include <sys/statfs.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <sched.h>
#include <sys/wait.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "bench/build_info.h"
#include "bench/plot.h"
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
void MountOf(const std::string& path, std::string* mount, std::string* device, std::string* fstype,
             std::string* options) {
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
    *options = parts[5];
  }
}
}  // namespace

namespace {

std::string ReadSmallFile(const std::string& path) {
  std::ifstream f(path);
  if (!f) return "";
  std::stringstream ss;
  ss << f.rdbuf();
  return std::string(absl::StripTrailingAsciiWhitespace(ss.str()));
}

// "PRETTY_NAME" from /etc/os-release.
std::string OsName() {
  std::ifstream f("/etc/os-release");
  std::string line;
  while (std::getline(f, line)) {
    if (absl::StartsWith(line, "PRETTY_NAME=")) {
      std::string v = line.substr(12);
      if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
      return v;
    }
  }
  return "unknown";
}

struct CpuFacts {
  int physical_cores = 0;
  int sockets = 0;
  std::string simd = "none";
};

CpuFacts CpuInfo() {
  CpuFacts c;
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  std::set<std::pair<std::string, std::string>> cores;  // (physical id, core id)
  std::set<std::string> sockets;
  std::string phys;
  std::string flags;
  while (std::getline(f, line)) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key(absl::StripAsciiWhitespace(line.substr(0, colon)));
    std::string val(absl::StripAsciiWhitespace(line.substr(colon + 1)));
    if (key == "physical id") {
      phys = val;
      sockets.insert(val);
    } else if (key == "core id") {
      cores.insert({phys, val});
    } else if (key == "flags" && flags.empty()) {
      flags = " " + val + " ";
    }
  }
  c.physical_cores = static_cast<int>(cores.size());
  c.sockets = static_cast<int>(sockets.size());
  if (flags.find(" avx512f ") != std::string::npos) {
    c.simd = "avx512";
  } else if (flags.find(" avx2 ") != std::string::npos) {
    c.simd = "avx2";
  } else if (flags.find(" sse4_2 ") != std::string::npos) {
    c.simd = "sse4.2";
  } else if (flags.find(" asimd ") != std::string::npos) {
    c.simd = "neon";
  }
  return c;
}

uint64_t MemAvailableBytes() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  uint64_t kb = 0;
  std::string unit;
  while (f >> key >> kb >> unit) {
    if (key == "MemAvailable:") return kb * 1024;
  }
  return 0;
}

// The bracketed choice of a sysfs multiple-choice file ("always [madvise] never" -> "madvise").
std::string Bracketed(const std::string& text) {
  auto a = text.find('['), b = text.find(']');
  if (a == std::string::npos || b == std::string::npos || b < a) return text;
  return text.substr(a + 1, b - a - 1);
}

std::string CommandLine() {
  std::ifstream f("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<std::string> args = absl::StrSplit(all, '\0', absl::SkipEmpty());
  return absl::StrJoin(args, " ");
}

std::string UtcNow() {
  std::time_t t = std::time(nullptr);
  std::tm tm;
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Facts about the block device behind `device` ("/dev/vda", "/dev/nvme0n1p2"), from sysfs: the
// whole disk's model, rotational flag and I/O scheduler.
void BlockDeviceFacts(const std::string& device, JsonWriter* w) {
  if (!absl::StartsWith(device, "/dev/")) return;
  struct stat st;
  if (::stat(device.c_str(), &st) != 0 || !S_ISBLK(st.st_mode)) return;
  std::string sys = absl::StrFormat("/sys/dev/block/%u:%u", major(st.st_rdev), minor(st.st_rdev));
  char real[4096];
  if (!::realpath(sys.c_str(), real)) return;
  std::string dev_dir = real;
  // A partition's queue/ lives in its parent (the whole disk).
  if (ReadSmallFile(dev_dir + "/partition") != "") dev_dir = DirName(dev_dir);
  std::string model = ReadSmallFile(dev_dir + "/device/model");
  if (!model.empty()) w->Field("block_device_model", model);
  std::string rot = ReadSmallFile(dev_dir + "/queue/rotational");
  if (!rot.empty()) w->Field("block_device_rotational", rot == "1");
  std::string sched = ReadSmallFile(dev_dir + "/queue/scheduler");
  if (!sched.empty()) w->Field("block_device_scheduler", Bracketed(sched));
  std::string lbs = ReadSmallFile(dev_dir + "/queue/logical_block_size");
  if (!lbs.empty()) w->Field("block_device_logical_block_size", lbs);
}

}  // namespace

std::string EnvironmentJson(const std::string& target_dir) {
  JsonWriter w(0);
  w.BeginObject();
  w.Field("time_utc", UtcNow());
  w.Field("host", HostName());
  w.Field("os", OsName());
  w.Field("kernel", KernelRelease());
  w.Field("cpu_model", CpuModel());
  w.Field("cpus", static_cast<int64_t>(sysconf(_SC_NPROCESSORS_ONLN)));
  CpuFacts cpu = CpuInfo();
  if (cpu.physical_cores > 0) w.Field("physical_cores", cpu.physical_cores);
  if (cpu.sockets > 0) w.Field("sockets", cpu.sockets);
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) {
    w.Field("cpus_allowed", static_cast<int64_t>(CPU_COUNT(&set)));
  }
  w.Field("simd", cpu.simd);
  long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (l3 > 0) w.Field("l3_cache_bytes", static_cast<int64_t>(l3));
  std::string gov = ReadSmallFile("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor");
  w.Field("cpu_governor", gov.empty() ? "unknown" : gov);
  w.Field("memory_bytes", TotalMemoryBytes());
  w.Field("memory_available_bytes", MemAvailableBytes());
  std::string thp = ReadSmallFile("/sys/kernel/mm/transparent_hugepage/enabled");
  if (!thp.empty()) w.Field("transparent_hugepages", Bracketed(thp));
  double load[3];
  if (::getloadavg(load, 3) == 3) w.Field("load_average_1min", load[0]);
  w.Field("grist_version", GRIST_VERSION);
  w.Field("git_commit", GRIST_BENCH_GIT_COMMIT);
  w.Field("build_type", GRIST_BUILD_TYPE);
  w.Field("compiler", GRIST_COMPILER);
  w.Field("cxx_flags", GRIST_BENCH_CXX_FLAGS);
  w.Field("sanitizers", std::string(GRIST_BENCH_SANITIZE).empty() ? "none" : GRIST_BENCH_SANITIZE);
  w.Field("cuda_build", GRIST_BENCH_CUDA);
  if (!target_dir.empty()) {
    w.Field("target_dir", target_dir);
    struct statfs sf;
    if (::statfs(target_dir.c_str(), &sf) == 0) {
      w.Field("fs_type", FsTypeName(sf.f_type));
      w.Field("fs_free_bytes", static_cast<uint64_t>(sf.f_bavail) * sf.f_bsize);
      w.Field("fs_block_size", static_cast<int64_t>(sf.f_bsize));
    }
    std::string mount, device, fstype, options;
    MountOf(target_dir, &mount, &device, &fstype, &options);
    w.Field("mount", mount).Field("mount_fs", fstype).Field("mount_options", options);
    w.Field("block_device", device);
    BlockDeviceFacts(device, &w);
  }
  auto gpu = RunCommand(
      "nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader");
  if (gpu.ok() && gpu->exit_code == 0 && !gpu->output.empty()) {
    std::vector<std::string> gpus =
        absl::StrSplit(absl::StripTrailingAsciiWhitespace(gpu->output), '\n');
    w.Field("gpu", gpus.front());
    w.Field("gpu_count", static_cast<int64_t>(gpus.size()));
  } else {
    w.Field("gpu", "none");
  }
  w.Field("command", CommandLine());
  w.EndObject();
  return w.Take();
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

absl::StatusOr<Sweep> Sweep::Parse(const std::string& spec) {
  auto eq = spec.find('=');
  if (eq == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--sweep '", spec, "': expected PARAM=v1,v2,... (e.g. threads=1,2,4,8)"));
  }
  Sweep sw;
  sw.param = std::string(absl::StripAsciiWhitespace(spec.substr(0, eq)));
  if (sw.param.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--sweep '", spec, "': no parameter name"));
  }
  std::string rest(absl::StripAsciiWhitespace(spec.substr(eq + 1)));
  if (rest.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--sweep ", sw.param, ": no values given (expected ", sw.param, "=v1,v2,...)"));
  }
  std::set<std::string> seen;
  for (absl::string_view part : absl::StrSplit(rest, ',')) {
    std::string v(absl::StripAsciiWhitespace(part));
    if (v.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--sweep ", sw.param, ": empty value in '", rest, "'"));
    }
    if (!seen.insert(v).second) {
      return absl::InvalidArgumentError(
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
    return absl::InvalidArgumentError(absl::StrCat(
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
    return absl::InvalidArgumentError(absl::StrCat("--sweep ", sweep.param, ": value '", value,
                                                   "' is not a positive integer"));
  }
  return n * mult;
}

Report::Report(std::string bench_name, Options options)
    : name_(std::move(bench_name)), options_(std::move(options)) {}

void Report::SetParam(const std::string& key, const std::string& value) {
  params_.emplace_back(key, value);
}
void Report::AddFigure(Figure figure) { figures_.push_back(std::move(figure)); }
void Report::AddNote(const std::string& note) { notes_.push_back(note); }

void Report::SetSweepParam(const std::string& param) { sweep_param_ = param; }

static std::string Num(double v) {
  if (std::isnan(v)) return "n/a";
  if (std::fabs(v) >= 100) return absl::StrFormat("%.0f", v);
  if (std::fabs(v) >= 10) return absl::StrFormat("%.1f", v);
  return absl::StrFormat("%.3g", v);
}

namespace {

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

// A sweep value as a number, with binary K/M/G suffixes ("64K" -> 65536); nullopt otherwise.
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

std::string AmdahlSentence(const AmdahlFit& fit, const std::string& param) {
  std::string best = fit.serial_fraction > 0
                         ? absl::StrFormat("at most %.1fx with unlimited %s",
                                           1.0 / fit.serial_fraction, param)
                         : std::string("no serial limit visible");
  return absl::StrFormat("Amdahl fit: serial fraction %.3f (%s)", fit.serial_fraction, best);
}

std::string EnvironmentMarkdown(const std::string& target_dir) {
  std::string s = absl::StrCat(
      "\nMeasured on ", HostName(), ": ", CpuModel(), ", ", sysconf(_SC_NPROCESSORS_ONLN),
      " CPUs, ", absl::StrFormat("%.1f", TotalMemoryBytes() / 1073741824.0), " GiB, ", OsName(),
      ", kernel ", KernelRelease());
  if (!target_dir.empty()) {
    std::string mount, device, fstype, options;
    MountOf(target_dir, &mount, &device, &fstype, &options);
    absl::StrAppend(&s, "; target ", target_dir, " on ", fstype.empty() ? "?" : fstype, " (",
                    device.empty() ? "?" : device, ")");
  }
  absl::StrAppend(&s, "; grist ", GRIST_VERSION, " (", GRIST_BENCH_GIT_COMMIT, ", ",
                  GRIST_BUILD_TYPE, ", ", GRIST_COMPILER, "); ", UtcNow(),
                  ". Full record in the JSON file.\n");
  return s;
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
    return absl::InvalidArgumentError(absl::StrCat(
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

std::optional<AmdahlFit> FitAmdahl(const std::vector<double>& n, const std::vector<double>& y) {
  if (n.size() != y.size() || n.size() < 3) return std::nullopt;
  // Linear least squares of v = 1/y on u = 1/n: v = a + b u.
  double su = 0, sv = 0, suu = 0, suv = 0;
  std::set<double> distinct;
  for (size_t i = 0; i < n.size(); ++i) {
    if (!(n[i] > 0) || !(y[i] > 0)) return std::nullopt;
    double u = 1.0 / n[i], v = 1.0 / y[i];
    su += u, sv += v, suu += u * u, suv += u * v;
    distinct.insert(n[i]);
  }
  if (distinct.size() < 3) return std::nullopt;
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

}  // namespace grist::bench
