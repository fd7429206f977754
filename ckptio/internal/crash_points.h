// The named crash points of a checkpoint save (common/crash_point.h), in the order one save
// reaches them. docs/reliability.md says what each leaves on disk.
#ifndef GRIST_CKPTIO_INTERNAL_CRASH_POINTS_H_
#define GRIST_CKPTIO_INTERNAL_CRASH_POINTS_H_

#include <string_view>

namespace grist::ckptio::internal {

// Every data and header write of a rank file completed, not yet truncated or fsynced.
inline constexpr std::string_view kCrashAfterDataWrites = "ckptio.file.after_data_writes";
// The rank file is fsynced (durable), its fd not yet closed.
inline constexpr std::string_view kCrashAfterFileFsync = "ckptio.file.after_fsync";
// manifest.json.tmp.<pid> written and fsynced, not yet renamed.
inline constexpr std::string_view kCrashBeforeManifestRename = "ckptio.publish.before_rename";
// manifest.json renamed into place; the folder not yet fsynced (the "before the directory
// fsync" point).
inline constexpr std::string_view kCrashAfterManifestRename = "ckptio.publish.after_rename";
// The folder fsynced, its parent not yet.
inline constexpr std::string_view kCrashBeforeParentFsync = "ckptio.publish.before_parent_fsync";
// Retention: an old checkpoint renamed to its hidden ".deleting." name and the parent fsynced
// (unpublished: no reader lists it), nothing deleted yet.
inline constexpr std::string_view kCrashRetentionAfterHide = "ckptio.retention.after_hide";
// Retention: the hidden folder's first file deleted, the rest not.
inline constexpr std::string_view kCrashRetentionDuringRemove = "ckptio.retention.during_remove";
// Retention: every old checkpoint deleted, the parent not yet fsynced.
inline constexpr std::string_view kCrashRetentionBeforeFsync = "ckptio.retention.before_fsync";

inline constexpr std::string_view kCrashPoints[] = {
    kCrashAfterDataWrites,       kCrashAfterFileFsync,     kCrashBeforeManifestRename,
    kCrashAfterManifestRename,   kCrashBeforeParentFsync,  kCrashRetentionAfterHide,
    kCrashRetentionDuringRemove, kCrashRetentionBeforeFsync,
};

}  // namespace grist::ckptio::internal

#endif  // GRIST_CKPTIO_INTERNAL_CRASH_POINTS_H_
