#include "ckptio/write_amp.h"

#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace grist::ckptio {

double WriteAmp::process_ratio() const {
  return logical_bytes ? static_cast<double>(process_write_bytes) / static_cast<double>(logical_bytes)
                       : std::numeric_limits<double>::quiet_NaN();
}
double WriteAmp::device_ratio() const {
  if (!device_write_bytes || logical_bytes == 0) return std::numeric_limits<double>::quiet_NaN();
  return static_cast<double>(*device_write_bytes) / static_cast<double>(logical_bytes);
}

std::string FileSystemTypeName(int64_t t) {
  switch (static_cast<uint64_t>(t) & 0xffffffffu) {
    case 0xEF53: return "ext4";
    case 0x58465342: return "xfs";
    case 0x9123683E: return "btrfs";
    case 0x01021994: return "tmpfs";
    case 0x6969: return "nfs";
    case 0xFF534D42: return "cifs";
    case 0x0BD00BD0: return "lustre";
    case 0x47504653: return "gpfs";
    case 0x794C7630: return "overlayfs";
    case 0x65735546: return "fuse";
    case 0x2FC12FC1: return "zfs";
    case 0x00C36400: return "ceph";
    case 0x19830326: return "beegfs";
    case 0xF2F52010: return "f2fs";
    default: return absl::StrFormat("0x%x", static_cast<uint64_t>(t) & 0xffffffffu);
  }
}

uint64_t ProcessWriteBytes() {
  std::ifstream in("/proc/self/io");
  std::string key;
  uint64_t v;
  while (in >> key >> v) {
    if (key == "write_bytes:") return v;
  }
  return 0;
}

std::optional<uint64_t> DeviceWriteBytes(const std::string& stat_path) {
  if (stat_path.empty()) return std::nullopt;
  std::ifstream in(stat_path);
  uint64_t f[7];
  for (uint64_t& x : f) {
    if (!(in >> x)) return std::nullopt;
  }
  return f[6] * 512;  // field 7: sectors written, always 512-byte units
}

absl::StatusOr<WriteAmpMeter> WriteAmpMeter::ForDirectory(const std::string& dir) {
  WriteAmpMeter m;
  struct statfs sf;
  if (::statfs(dir.c_str(), &sf) != 0) return ErrnoError(errno, absl::StrCat("statfs ", dir));
  m.fs_type_ = FileSystemTypeName(static_cast<int64_t>(sf.f_type));
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return ErrnoError(errno, absl::StrCat("stat ", dir));
  const std::string sys = absl::StrCat("/sys/dev/block/", major(st.st_dev), ":", minor(st.st_dev));
  if (::access((sys + "/stat").c_str(), R_OK) == 0) {
    m.stat_path_ = sys + "/stat";
    char buf[4096];
    ssize_t n = ::readlink(sys.c_str(), buf, sizeof(buf) - 1);
    if (n > 0) {
      buf[n] = '\0';
      std::string target(buf);
      m.device_ = target.substr(target.rfind('/') + 1);
    }
  }
  return m;
}

void WriteAmpMeter::Start() {
  ::sync();  // earlier dirty data of anyone must not be counted against this checkpoint
  proc_start_ = ProcessWriteBytes();
  dev_start_ = DeviceWriteBytes(stat_path_);
}

WriteAmp WriteAmpMeter::Stop(uint64_t logical_bytes) const {
  WriteAmp w;
  w.logical_bytes = logical_bytes;
  w.process_write_bytes = ProcessWriteBytes() - proc_start_;
  auto dev = DeviceWriteBytes(stat_path_);
  if (dev && dev_start_) w.device_write_bytes = *dev - *dev_start_;
  return w;
}

}  // namespace grist::ckptio
