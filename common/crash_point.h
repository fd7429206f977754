// Named crash points: a test hook that stops the process with SIGKILL, or makes the operation at
// that point fail, at a named place in a durable write sequence (the checkpoint publish, a build
// stage's record), so that tests can land a kill exactly between two steps instead of after a
// random sleep.
//
//   RETURN_IF_ERROR(crash::Point("ckptio.publish.before_rename"));
//
// Arming: the environment variable GRIST_CRASH_POINT=<name>[@<n>] arms the n-th time (default the
// first) the point is reached in this process; GRIST_CRASH_ACTION=kill (default) raises SIGKILL
// there, GRIST_CRASH_ACTION=fail makes Point() return an Internal error naming the point.
// GRIST_CRASH_TRACE=<file> appends the name of every point reached, one a line, so that a test
// can list the points a run goes through. Tests in the same process use Arm()/Disarm()/Hits().
//
// The hook is compiled in only with the CMake option GRIST_TEST_HOOKS (default off: a plain build
// of `grist` ignores the variables above; scripts/test.sh and the sanitizer scripts turn it on).
// Without it Point() returns OK at once and Enabled() is false. Each
// component lists its points in its crash-point header (ckptio/internal/crash_points.h,
// release/crash_points.h); docs/reliability.md says what a kill at each leaves on disk.
//
// Thread safety: every function may be called from any thread.
#ifndef GRIST_COMMON_CRASH_POINT_H_
#define GRIST_COMMON_CRASH_POINT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace grist::crash {

enum class Action { kKill, kFail };

// Reached `name`: counts the hit, traces it, and kills or fails when armed for this hit.
absl::Status Point(std::string_view name);
// Arms `name` for its `hit`-th arrival (1-based, counted from this call), replacing any earlier
// arming (including the environment's).
void Arm(std::string_view name, int hit, Action action);
void Disarm();
// Times `name` was reached since the process started or ResetHits().
uint64_t Hits(std::string_view name);
// Every point reached since the process started or ResetHits(), in order (one entry per arrival:
// for tests that check a sequence).
std::vector<std::string> Reached();
void ResetHits();
// Whether the hook is compiled in (GRIST_TEST_HOOKS); without it every function above does
// nothing and Point() returns OK.
bool Enabled();

}  // namespace grist::crash

#endif  // GRIST_COMMON_CRASH_POINT_H_
