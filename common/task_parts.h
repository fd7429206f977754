// The names of the per-task outputs of a job array (DESIGN.md: every offline stage takes --task I
// --tasks N and writes per-task outputs that a merge step combines): "<stem>-IIIII-of-NNNNN",
// task and task count as 5-digit zero-padded decimals, followed by whatever the stage appends
// (".json", ".bin", "-00003.jsonl.zst", ...). One home for the format, its parser and the checks
// every merge makes: the parts agree on N, and none of the N is missing.
//
//   clean     part-IIIII-of-NNNNN-*, clean-report-IIIII-of-NNNNN.json
//   dedup     <stage>-IIIII-of-NNNNN.bin (work files), dedup-IIIII-of-NNNNN-* (kept documents)
//   tokenize  tokens-IIIII-of-NNNNN.{bin,idx,json}
//
// Thread safety: pure functions.
#ifndef GRIST_COMMON_TASK_PARTS_H_
#define GRIST_COMMON_TASK_PARTS_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace grist {

// "<stem>-IIIII-of-NNNNN" for task `task` of `tasks` (0 <= task < tasks <= 99999).
std::string TaskPartName(std::string_view stem, int task, int tasks);

struct TaskPart {
  int task = 0;
  int tasks = 0;
  std::string_view rest;  // what follows "<stem>-IIIII-of-NNNNN" in the name
};

// Parses `name` as TaskPartName(stem, I, N) followed by anything: exactly 5 digits each, and
// 0 <= I < N. nullopt for any other name.
std::optional<TaskPart> ParseTaskPart(std::string_view name, std::string_view stem);

// The parts among `names` (file names in one folder) that are TaskPartName(stem, I, N) + suffix
// exactly.
struct TaskParts {
  int tasks = 0;                      // N; 0 when there is no such part
  std::map<int, std::string> names;   // task -> file name, for the tasks present
  // The first task in [0, tasks) without a part, or -1 when every one is there.
  int FirstMissing() const;
};
// FailedPrecondition "<dir>: <stem>-IIIII-of-NNNNN<suffix> parts of different task counts (A and
// B): remove the stale ones" when the parts disagree on N.
absl::StatusOr<TaskParts> FindTaskParts(const std::vector<std::string>& names,
                                        std::string_view stem, std::string_view suffix,
                                        std::string_view dir);

}  // namespace grist

#endif  // GRIST_COMMON_TASK_PARTS_H_
