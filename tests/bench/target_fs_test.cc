// The description of a bench target's file system (bench/target_fs.h): the longest listed mount
// that holds the folder, and what is left when no listed mount holds it (a chroot).
#include "bench/target_fs.h"

#include <gtest/gtest.h>

#include "common/env.h"
#include "tests/test_util.h"

namespace grist::bench {
namespace {

using ::grist::testing::TempDir;

TEST(TargetFsTest, TheLongestListedMountHoldingTheFolderWins) {
  TempDir t;
  ASSERT_TRUE(Env::Default()->CreateDirs(t.Join("a b/c")).ok());
  // Mount points as /proc/self/mounts escapes them (a space is \040).
  std::string tmp = t.path();
  std::string escaped = t.Join("a\\040b");
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), t.Join("mounts"),
                              "/dev/vda1 / ext4 rw 0 0\n"
                              "tmpfs " + tmp + " tmpfs rw 0 0\n"
                              "server:/vol " + escaped + " fuse.sshfs rw 0 0\n"
                              "other " + tmp + "/a tmpfs rw 0 0\n")
                  .ok());
  auto fs = DescribeTargetFs(t.Join("a b/c"), t.Join("mounts"));
  ASSERT_TRUE(fs.ok()) << fs.status();
  EXPECT_EQ(fs->mount_point, t.Join("a b"));
  EXPECT_EQ(fs->source, "server:/vol");
  EXPECT_EQ(fs->fs_type, "fuse.sshfs");
  EXPECT_EQ(fs->dir, t.Join("a b/c"));
}

// In a chroot whose root is not a mount point, /proc/self/mounts lists no mount holding the
// folder: the description still names the file system (from statfs), with no mount point.
TEST(TargetFsTest, AFolderOnNoListedMountIsDescribedFromTheFileSystem) {
  TempDir t;
  ASSERT_TRUE(WriteFileAtomic(Env::Default(), t.Join("mounts"),
                              "proc /proc proc rw 0 0\nsysfs /sys sysfs rw 0 0\n")
                  .ok());
  auto fs = DescribeTargetFs(t.path(), t.Join("mounts"));
  ASSERT_TRUE(fs.ok()) << fs.status();
  EXPECT_EQ(fs->mount_point, "");
  EXPECT_EQ(fs->source, "");
  EXPECT_FALSE(fs->fs_type.empty());
  EXPECT_FALSE(fs->Describe().empty());
  // The same type as the listed mount that really holds it reports, where that is a type the
  // fallback names (ext4, xfs, btrfs, tmpfs, overlay, ...).
  auto listed = DescribeTargetFs(t.path());
  ASSERT_TRUE(listed.ok()) << listed.status();
  for (const char* known : {"ext4", "xfs", "btrfs", "tmpfs", "overlay"}) {
    if (listed->fs_type == known) {
      EXPECT_EQ(fs->fs_type, known);
    }
  }
  auto missing = DescribeTargetFs(t.Join("no/such/folder"), t.Join("mounts"));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();
}

}  // namespace
}  // namespace grist::bench
