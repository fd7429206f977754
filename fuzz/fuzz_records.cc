// Fuzzes the record readers: the first byte picks the input format (JSONL, .jsonl.gz, .jsonl.zst,
// text file, text blocks, compressed text), the rest is the file's content, held in a MemEnv and
// read through every split PlanSplits makes. Any crash, sanitizer report, or a document that breaks
// the reader's contract (a bad record whose error does not name the file) is a finding.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/env.h"
#include "common/records.h"

namespace {

const char* kNames[] = {"in.jsonl", "in.jsonl.gz", "in.jsonl.zst", "in.txt",
                        "in.txt",   "in.txt.gz",   "in.txt.zst",   "in.ndjson"};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t selector = data[0];
  const std::string name = std::string("/fuzz/") + kNames[selector & 7];
  grist::MemEnv env;
  if (!env.CreateDirs("/fuzz").ok()) __builtin_trap();
  if (!grist::WriteFileAtomic(&env, name,
                              std::string_view(reinterpret_cast<const char*>(data + 1), size - 1))
           .ok()) {
    __builtin_trap();  // the in-memory file system must accept any content
  }
  grist::InputOptions options;
  options.txt_mode = (selector & 7) == 4 ? "blocks" : "file";
  options.max_record_bytes = 1 << 20;
  auto files = grist::ListInputs(&env, {name});
  if (!files.ok()) return 0;
  // Small splits so that byte-range splitting of JSONL is exercised too.
  auto splits = grist::PlanSplits(&env, *files, (selector & 8) ? 64 : (32u << 20));
  if (!splits.ok()) return 0;
  for (const auto& split : *splits) {
    auto reader = grist::OpenRecordReader(&env, (*files)[split.file_index], split, options);
    if (!reader.ok()) continue;
    grist::Document doc;
    for (int i = 0; i < 100000; ++i) {
      auto more = (*reader)->Next(&doc);
      if (!more.ok() || !*more) break;
      if (!doc.error.empty() && doc.error.find(name) == std::string::npos) __builtin_trap();
      (void)grist::SerializeRecord(doc, "\"reasons\":[\"x\"]");
    }
  }
  return 0;
}
