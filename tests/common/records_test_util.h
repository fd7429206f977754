// Helpers shared by the record readers' and the record writer's tests: reading a path back whole.
#ifndef GRIST_TESTS_COMMON_RECORDS_TEST_UTIL_H_
#define GRIST_TESTS_COMMON_RECORDS_TEST_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/document.h"
#include "common/env.h"
#include "common/input_plan.h"
#include "common/record_reader.h"

namespace grist::testing {

// Every document read from `path` (a file or a folder), split by split in order, and the first
// error of listing, planning, opening or reading (the documents read before it are kept).
struct ReadResult {
  std::vector<Document> docs;
  absl::Status status;
};

inline ReadResult ReadAll(const std::string& path, InputOptions opts = {},
                          uint64_t split_bytes = 1 << 30) {
  ReadResult r;
  auto files = ListInputs(Env::Default(), {path});
  if (!files.ok()) {
    r.status = files.status();
    return r;
  }
  auto splits = PlanSplits(Env::Default(), *files, split_bytes);
  if (!splits.ok()) {
    r.status = splits.status();
    return r;
  }
  for (const auto& s : *splits) {
    auto reader = OpenRecordReader(Env::Default(), (*files)[s.file_index], s, opts);
    if (!reader.ok()) {
      r.status = reader.status();
      return r;
    }
    Document d;
    while (true) {
      auto more = (*reader)->Next(&d);
      if (!more.ok()) {
        r.status = more.status();
        return r;
      }
      if (!*more) break;
      r.docs.push_back(d);
    }
  }
  return r;
}

}  // namespace grist::testing

#endif  // GRIST_TESTS_COMMON_RECORDS_TEST_UTIL_H_
