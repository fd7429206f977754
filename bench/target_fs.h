// What `grist bench fs --target DIR` and `grist bench ckpt --target DIR` need to know about the
// file system under a target directory that may be a network or parallel file system: its mount,
// and, for a GlusterFS FUSE mount whose bricks are local (scripts/gluster.sh), the block devices
// under the bricks, so that write amplification can be counted where the bytes land; and a switch
// for GlusterFS's client metadata caches.
//
// Thread safety: none needed; each call stands alone. The cache switch changes a volume's options
// for every client of it (root only, through the `gluster` CLI).
#ifndef GRIST_BENCH_TARGET_FS_H_
#define GRIST_BENCH_TARGET_FS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace grist::bench {

struct TargetFs {
  std::string dir;
  std::string mount_point;    // from /proc/self/mounts, longest prefix; "" when none is listed
  std::string fs_type;        // the mount's type: "ext4", "fuse.glusterfs", "nfs4", ...
  std::string source;         // "host:/volume", "/dev/vda", ...
  std::string gluster_volume; // non-empty for a fuse.glusterfs mount
  std::string gluster_type;   // "Distribute", "Replicate", ... (gluster volume info)
  // Block devices holding the data: for a local block-device file system, the one device; for
  // GlusterFS, the devices under each local brick ("loop2", "loop3"); empty when unknown (remote
  // bricks, NFS). Each appears once.
  std::vector<std::string> devices;
  std::string Describe() const;  // "fuse.glusterfs grist-rep2 (Replicate) on loop2,loop3"
};

// Finds the mount of `dir` and, for GlusterFS, the volume and the devices under its bricks (bricks
// on other hosts are skipped: their devices cannot be read here). When no mount listed in
// /proc/self/mounts holds `dir` (a chroot whose root is not a mount point), mount_point and source
// are empty and fs_type comes from statfs. NotFound when `dir` cannot be resolved. `mounts` is the
// mount table to read (tests give their own).
absl::StatusOr<TargetFs> DescribeTargetFs(const std::string& dir,
                                          const std::string& mounts = "/proc/self/mounts");

// Bytes written to a set of block devices (sectors-written field of /sys/block/<dev>/stat x 512),
// after a sync() at Start and at Stop so that data the file systems hold in memory is counted.
// Whole-device counters: anything else writing to these devices adds to them.
class DeviceSetMeter {
 public:
  explicit DeviceSetMeter(std::vector<std::string> devices) : devices_(std::move(devices)) {}
  bool empty() const { return devices_.empty(); }
  void Start();
  // Bytes written since Start, summed over the devices; nullopt when a counter is unreadable.
  std::optional<uint64_t> Stop() const;

 private:
  std::vector<std::string> devices_;
  std::vector<uint64_t> start_;
  bool ok_ = false;
};

// GlusterFS's client-side metadata caching on one volume: md-cache (performance.stat-prefetch,
// with upcall cache invalidation, features.cache-invalidation + performance.cache-invalidation,
// and 600 s timeouts, as GlusterFS's "metadata-cache" option group sets it) and the negative
// lookup cache (performance.nl-cache). Off means every one of them off (stat-prefetch is on by
// default, with a 1 s md-cache timeout). Set() records the volume's previous values the first time and Restore()
// puts them back (the destructor does too).
class GlusterMetadataCache {
 public:
  explicit GlusterMetadataCache(std::string volume) : volume_(std::move(volume)) {}
  ~GlusterMetadataCache();
  GlusterMetadataCache(const GlusterMetadataCache&) = delete;
  GlusterMetadataCache& operator=(const GlusterMetadataCache&) = delete;
  // `on`: every cache on with long timeouts; off: every cache off. Waits for the FUSE client to
  // take the new graph (a probe stat of `mount_point`, then one second).
  absl::Status Set(bool on, const std::string& mount_point);
  absl::Status Restore();
  // The options Set() changes, in order.
  static const std::vector<std::string>& Keys();

 private:
  std::string volume_;
  // Key and value before the first Set; an empty value: it was the default (restored by a reset).
  std::vector<std::pair<std::string, std::string>> saved_;
};

}  // namespace grist::bench

#endif  // GRIST_BENCH_TARGET_FS_H_
