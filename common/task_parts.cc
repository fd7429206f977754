#include "common/task_parts.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace grist {
namespace {

constexpr size_t kDigits = 5;

// The 5-digit number at the start of `s`, or -1.
int Number(std::string_view s) {
  if (s.size() < kDigits) return -1;
  int v = 0;
  for (size_t i = 0; i < kDigits; ++i) {
    if (s[i] < '0' || s[i] > '9') return -1;
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

}  // namespace

std::string TaskPartName(std::string_view stem, int task, int tasks) {
  return absl::StrFormat("%s-%05d-of-%05d", std::string(stem), task, tasks);
}

std::optional<TaskPart> ParseTaskPart(std::string_view name, std::string_view stem) {
  // stem "-" IIIII "-of-" NNNNN rest
  if (name.size() < stem.size() + 1 + kDigits + 4 + kDigits) return std::nullopt;
  if (name.substr(0, stem.size()) != stem) return std::nullopt;
  std::string_view s = name.substr(stem.size());
  if (s[0] != '-') return std::nullopt;
  TaskPart p;
  p.task = Number(s.substr(1));
  if (p.task < 0 || s.substr(1 + kDigits, 4) != "-of-") return std::nullopt;
  p.tasks = Number(s.substr(1 + kDigits + 4));
  if (p.tasks <= p.task) return std::nullopt;  // also rejects a malformed count (-1)
  p.rest = s.substr(1 + kDigits + 4 + kDigits);
  return p;
}

int TaskParts::FirstMissing() const {
  for (int t = 0; t < tasks; ++t) {
    if (!names.count(t)) return t;
  }
  return -1;
}

absl::StatusOr<TaskParts> FindTaskParts(const std::vector<std::string>& names,
                                        std::string_view stem, std::string_view suffix,
                                        std::string_view dir) {
  TaskParts out;
  for (const std::string& n : names) {
    std::optional<TaskPart> p = ParseTaskPart(n, stem);
    if (!p || p->rest != suffix) continue;
    if (out.tasks != 0 && p->tasks != out.tasks) {
      return absl::FailedPreconditionError(absl::StrCat(
          std::string(dir), ": ", std::string(stem), "-IIIII-of-NNNNN", std::string(suffix),
          " parts of different task counts (",
          std::min(out.tasks, p->tasks), " and ", std::max(out.tasks, p->tasks),
          "): remove the stale ones"));
    }
    out.tasks = p->tasks;
    out.names[p->task] = n;
  }
  return out;
}

}  // namespace grist
