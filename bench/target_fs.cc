#include "bench/target_fs.h"

#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "bench/harness.h"
#include "common/status_macros.h"

namespace grist::bench {
namespace {

// /proc/self/mounts escapes space, tab, newline and backslash as \ooo.
std::string Unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      int v = 0;
      bool ok = true;
      for (int k = 1; k <= 3; ++k) {
        char c = s[i + k];
        if (c < '0' || c > '7') ok = false;
        v = v * 8 + (c - '0');
      }
      if (ok) {
        out.push_back(static_cast<char>(v));
        i += 3;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

// The block device name ("loop2", "vda") holding `path`, or "" when it is not a local block device.
std::string DeviceOf(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return "";
  const std::string sys = absl::StrCat("/sys/dev/block/", major(st.st_dev), ":", minor(st.st_dev));
  char buf[4096];
  ssize_t n = ::readlink(sys.c_str(), buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  buf[n] = '\0';
  std::string target(buf);
  return target.substr(target.rfind('/') + 1);
}

std::optional<uint64_t> SectorsWritten(const std::string& dev) {
  // A partition's counters live under its disk's folder; /sys/class/block/<dev> finds both.
  std::ifstream in(absl::StrCat("/sys/class/block/", dev, "/stat"));
  uint64_t f[7];
  for (uint64_t& x : f) {
    if (!(in >> x)) return std::nullopt;
  }
  return f[6] * 512;
}

absl::StatusOr<std::string> Gluster(const std::string& args) {
  ASSIGN_OR_RETURN(CommandResult r, RunCommand(absl::StrCat("timeout 60 gluster --mode=script ", args), true));
  if (r.exit_code != 0) {
    return absl::UnavailableError(absl::StrCat("gluster ", args, " exited with ", r.exit_code, ": ",
                                               absl::StripAsciiWhitespace(r.output)));
  }
  return r.output;
}

// The name of a file system type from statfs's f_type, for the types a course machine has;
// "statfs 0x<magic>" for others.
std::string FsTypeName(uint64_t magic) {
  switch (magic) {
    case 0xEF53: return "ext4";  // ext2, ext3 and ext4 share the magic
    case 0x58465342: return "xfs";
    case 0x9123683E: return "btrfs";
    case 0x01021994: return "tmpfs";
    case 0x794C7630: return "overlay";
    case 0x6969: return "nfs";
    case 0x65735546: return "fuse";
    case 0x2FC12FC1: return "zfs";
    case 0x0BD00BD0: return "lustre";
    default: {
      std::ostringstream h;
      h << "statfs 0x" << std::hex << magic;
      return h.str();
    }
  }
}

}  // namespace

std::string TargetFs::Describe() const {
  std::string s = fs_type;
  if (!gluster_volume.empty()) {
    absl::StrAppend(&s, " ", gluster_volume, gluster_type.empty() ? "" : " (" + gluster_type + ")");
  }
  if (!devices.empty()) {
    absl::StrAppend(&s, gluster_volume.empty() ? " on " : ", bricks on ", absl::StrJoin(devices, ","));
  }
  return s;
}

absl::StatusOr<TargetFs> DescribeTargetFs(const std::string& dir, const std::string& mounts) {
  TargetFs t;
  t.dir = dir;
  char real[4096];
  if (::realpath(dir.c_str(), real) == nullptr) {
    return absl::NotFoundError(absl::StrCat("cannot resolve ", dir));
  }
  const std::string path(real);
  std::ifstream in(mounts);
  std::string line;
  size_t best = 0;
  while (std::getline(in, line)) {
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    if (f.size() < 3) continue;
    std::string mp = Unescape(f[1]);
    bool under = path == mp || mp == "/" ||
                 (absl::StartsWith(path, mp) && path.size() > mp.size() && path[mp.size()] == '/');
    if (!under || mp.size() < best) continue;
    best = mp.size();
    t.mount_point = mp;
    t.source = Unescape(f[0]);
    t.fs_type = f[2];
  }
  if (t.mount_point.empty()) {
    // No listed mount holds it: a chroot whose root is not a mount point, or a mount namespace
    // that hides it. The file system's type and device are still known from the path itself.
    struct statfs sf;
    if (::statfs(path.c_str(), &sf) != 0) {
      return absl::NotFoundError(absl::StrCat(dir, " is on no listed mount and statfs fails: ",
                                              std::strerror(errno)));
    }
    t.fs_type = FsTypeName(static_cast<uint64_t>(sf.f_type));
  }
  if (t.fs_type == "fuse.glusterfs") {
    size_t colon = t.source.find(":/");
    if (colon != std::string::npos) t.gluster_volume = t.source.substr(colon + 2);
    auto info = Gluster(absl::StrCat("volume info ", t.gluster_volume));
    if (info.ok()) {
      for (absl::string_view l : absl::StrSplit(*info, '\n')) {
        if (absl::ConsumePrefix(&l, "Type: ")) t.gluster_type = std::string(absl::StripAsciiWhitespace(l));
        if (!absl::StartsWith(l, "Brick") || l.find(": ") == absl::string_view::npos) continue;
        if (absl::StartsWith(l, "Bricks:")) continue;
        absl::string_view brick = l.substr(l.find(": ") + 2);  // host:/path
        size_t c = brick.find(":/");
        if (c == absl::string_view::npos) continue;
        std::string dev = DeviceOf(std::string(absl::StripAsciiWhitespace(brick.substr(c + 1))));
        if (!dev.empty() && std::find(t.devices.begin(), t.devices.end(), dev) == t.devices.end()) {
          t.devices.push_back(dev);
        }
      }
    }
  } else {
    std::string dev = DeviceOf(path);
    if (!dev.empty()) t.devices.push_back(dev);
  }
  return t;
}

void DeviceSetMeter::Start() {
  ::sync();
  start_.clear();
  ok_ = true;
  for (const auto& d : devices_) {
    auto v = SectorsWritten(d);
    if (!v) ok_ = false;
    start_.push_back(v.value_or(0));
  }
}

std::optional<uint64_t> DeviceSetMeter::Stop() const {
  ::sync();
  if (!ok_ || devices_.empty()) return std::nullopt;
  uint64_t total = 0;
  for (size_t i = 0; i < devices_.size(); ++i) {
    auto v = SectorsWritten(devices_[i]);
    if (!v) return std::nullopt;
    total += *v - start_[i];
  }
  return total;
}

const std::vector<std::string>& GlusterMetadataCache::Keys() {
  static const std::vector<std::string> keys = {
      "performance.stat-prefetch",    "performance.nl-cache",         "features.cache-invalidation",
      "performance.cache-invalidation", "performance.md-cache-timeout", "performance.nl-cache-timeout",
      "features.cache-invalidation-timeout"};
  return keys;
}

absl::Status GlusterMetadataCache::Set(bool on, const std::string& mount_point) {
  const std::vector<std::string>& keys = Keys();
  if (saved_.empty()) {
    for (const auto& k : keys) {
      ASSIGN_OR_RETURN(std::string out, Gluster(absl::StrCat("volume get ", volume_, " ", k)));
      for (absl::string_view l : absl::StrSplit(out, '\n')) {
        std::vector<std::string> f = absl::StrSplit(l, ' ', absl::SkipEmpty());
        // "performance.md-cache-timeout  1 (DEFAULT)": a default is restored by a reset.
        if (f.size() >= 2 && f[0] == k) saved_.emplace_back(k, f.size() >= 3 && f[2] == "(DEFAULT)" ? "" : f[1]);
      }
    }
  }
  const char* flag = on ? "on" : "off";
  // Off: the caches off and the timeouts at GlusterFS 10's defaults (1, 60, 60 s).
  const std::vector<std::string> values = {flag, flag, flag, flag, on ? "600" : "1",
                                           on ? "600" : "60", on ? "600" : "60"};
  for (size_t i = 0; i < keys.size(); ++i) {
    RETURN_IF_ERROR(Gluster(absl::StrCat("volume set ", volume_, " ", keys[i], " ", values[i])).status());
  }
  struct stat st;
  (void)::stat(mount_point.c_str(), &st);  // the client takes the new graph on its next call
  std::this_thread::sleep_for(std::chrono::seconds(1));
  return absl::OkStatus();
}

absl::Status GlusterMetadataCache::Restore() {
  absl::Status first;
  for (const auto& [k, v] : saved_) {
    absl::Status s = Gluster(v.empty() ? absl::StrCat("volume reset ", volume_, " ", k)
                                       : absl::StrCat("volume set ", volume_, " ", k, " ", v)).status();
    if (first.ok() && !s.ok()) first = s;
  }
  saved_.clear();
  return first;
}

GlusterMetadataCache::~GlusterMetadataCache() { (void)Restore(); }

}  // namespace grist::bench
