#include "bench/machine.h"

#include <sched.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "bench/build_info.h"
#include "bench/git_commit.h"
#include "bench/harness.h"
#include "common/env.h"
#include "common/json_writer.h"
#include "common/sysinfo.h"
#include "common/version.h"

namespace grist::bench {
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

}  // namespace grist::bench
