// The named crash points of `grist build` (common/crash_point.h), in the order a full build
// reaches them. For each of the stages clean, dedup, tokenizer and tokenize:
//   build.<stage>.after_outputs   the stage's outputs are written, nothing hashed or recorded
//   build.<stage>.before_record   the outputs are hashed, the record not yet written
//   build.<stage>.after_record    WORK/stages/<stage>.json is in place (atomically, synced)
// and for pack+shard, whose output is the release itself, written in WORK/release and then moved
// to --output (an earlier release there stays published until that move):
//   build.pack.after_shards       every shard is written and synced in WORK/release; no tokenizer,
//                                 no manifest; --output untouched
//   build.pack.before_manifest    the tokenizer and reports/ are written; no manifest
//   build.pack.after_manifest     the release with its manifest.json is in place at --output (an
//                                 earlier one moved aside, not yet removed); the parent not synced
// docs/reliability.md says what each leaves on disk and what a rerun does.
#ifndef GRIST_RELEASE_CRASH_POINTS_H_
#define GRIST_RELEASE_CRASH_POINTS_H_

#include <string>
#include <vector>

namespace grist::release {

inline std::vector<std::string> BuildCrashPoints() {
  std::vector<std::string> out;
  for (const char* stage : {"clean", "dedup", "tokenizer", "tokenize"}) {
    for (const char* when : {"after_outputs", "before_record", "after_record"}) {
      out.push_back(std::string("build.") + stage + "." + when);
    }
  }
  for (const char* when : {"after_shards", "before_manifest", "after_manifest"}) {
    out.push_back(std::string("build.pack.") + when);
  }
  return out;
}

}  // namespace grist::release

#endif  // GRIST_RELEASE_CRASH_POINTS_H_
