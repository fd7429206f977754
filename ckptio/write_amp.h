// The write-amplification meter: how many bytes the file system and the block device actually
// wrote for a checkpoint of a given logical size.
//
//   ASSIGN_OR_RETURN(WriteAmpMeter meter, WriteAmpMeter::ForDirectory(dir));
//   meter.Start();  ... write the checkpoint ...  WriteAmp wa = meter.Stop(logical_bytes);
//
// Sources: /proc/self/io write_bytes (bytes this process caused to be sent to the storage layer,
// buffered or direct) and the sectors-written field of /sys/dev/block/<major>:<minor>/stat for the
// device holding `dir` (whole-device counter: other writers on the same device add noise, so
// measure on a quiet device and compare ratios). The file system type comes from statfs. On
// network or parallel file systems (NFS, Lustre, GPFS) there is no local block device: device
// figures are absent and only the process figure is reported.
//
// Thread safety: one meter per measurement; Start/Stop from one thread.
#ifndef GRIST_CKPTIO_WRITE_AMP_H_
#define GRIST_CKPTIO_WRITE_AMP_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace grist::ckptio {

struct WriteAmp {
  uint64_t logical_bytes = 0;
  uint64_t process_write_bytes = 0;          // /proc/self/io write_bytes delta
  std::optional<uint64_t> device_write_bytes;  // sectors written delta x 512
  double process_ratio() const;
  // device_write_bytes / logical_bytes, or NaN without a device.
  double device_ratio() const;
};

class WriteAmpMeter {
 public:
  // Finds the file system type and block device of `dir`.
  static absl::StatusOr<WriteAmpMeter> ForDirectory(const std::string& dir);
  void Start();
  WriteAmp Stop(uint64_t logical_bytes) const;

  const std::string& fs_type() const { return fs_type_; }       // "ext4", "xfs", "lustre", ...
  const std::string& device() const { return device_; }         // "vda" ("" when none)
  const std::string& device_stat() const { return stat_path_; } // "" when none

 private:
  std::string fs_type_;
  std::string device_;
  std::string stat_path_;
  uint64_t proc_start_ = 0;
  std::optional<uint64_t> dev_start_;
};

// Names the file system type from statfs's f_type ("ext4", "nfs", "lustre", "gpfs", "tmpfs", ...;
// "0x<hex>" when unknown).
std::string FileSystemTypeName(int64_t f_type);
// write_bytes of /proc/self/io (0 when unreadable).
uint64_t ProcessWriteBytes();
// Sectors written (field 7) of a /sys/.../stat file, in bytes.
std::optional<uint64_t> DeviceWriteBytes(const std::string& stat_path);

}  // namespace grist::ckptio

#endif  // GRIST_CKPTIO_WRITE_AMP_H_
