// grist::dedup: exact (XXH3-128) and near-duplicate (MinHash LSH) deduplication at corpus scale.
//
// Single machine:  RunDedup(env, inputs, output_dir, options, run)
// Slurm arrays:    RunDedupStage(stage, ...) for each stage in order, each as --task I --tasks N:
//
//   signatures  (N tasks) reads the task's input splits; writes per document its exact hash,
//               MinHash signature and id, and (line dedup) its distinct line hashes
//   buckets     (N tasks) each task takes a hash partition of the exact / band / line keys of every
//               signatures output, sorts it externally within --memory-limit and writes the
//               candidate pairs and the duplicated lines
//   clusters    (N tasks) each task takes a hash partition of the candidate pairs and verifies them
//               by true Jaccard (the sets of the documents involved, recomputed from the input and
//               spilled to disk, read back through a bounded cache), writing verified edges
//   merge       (1 task)  connected components of all edges (union-find in memory when the edges
//               fit half the budget, else rounds of hooking and pointer jumping over sorted files):
//               the removed documents, their clusters and the ids they point to, sorted by document
//   filter      (N tasks) re-reads the task's splits, writes kept documents to output_dir/ and
//               removed ones to output_dir/removed/ with reason, cluster, duplicate and similarity
//               (merge's files streamed beside the task's documents in input order)
//   report      (1 task)  combines the tasks' counters, checks in == kept + removed (+ rejected),
//               writes output_dir/dedup_report.json
//
// Each stage reads the previous stage's outputs from the work directory and refuses an incomplete
// set, naming the missing task. Intermediate files carry a magic, version and checksum
// (docs/formats/dedup.md) and are verified when read back.
//
// Determinism: documents are keyed by their position in the input (split index, ordinal), every
// decision is a function of keys and hashes, and outputs are written in key order, so the kept and
// removed documents are byte-identical for any thread count; for any task count the records are the
// same and in the same order (split over per-task part files, see docs/dedup.md).
//
// Memory: bounded by --memory-limit in every stage, whatever the corpus size and the number of
// duplicates (clusters spills the candidates' shingle sets and verifies the pairs through a bounded
// cache; merge goes external beyond half the budget; filter streams merge's sorted files;
// docs/dedup.md). Only line dedup's set of duplicated lines, held by filter, grows with the data.
#ifndef GRIST_DEDUP_DEDUP_H_
#define GRIST_DEDUP_DEDUP_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/option_table.h"
#include "common/records.h"
#include "common/stage.h"
#include "dedup/minhash.h"

namespace grist {

class Config;
class Env;

namespace dedup {

// How the text is normalized before the exact hash.
enum class ExactNormalize {
  kNone,        // the bytes as they are
  kWhitespace,  // trim, collapse every run of ASCII whitespace to one space (default)
  kLower,       // kWhitespace and ASCII lowercase
};

struct DedupOptions {
  bool exact = true;  // remove exact duplicates (XXH3-128 of the normalized text)
  ExactNormalize exact_normalize = ExactNormalize::kWhitespace;
  bool near = true;  // remove near duplicates (MinHash LSH)
  ShingleOptions shingle;
  int num_perm = 112;
  // bands * rows <= num_perm. 0 and 0: chosen from `threshold` by OptimalLshParams.
  int bands = 14;
  int rows = 8;
  // Jaccard similarity at or above which a verified candidate pair is a duplicate.
  double threshold = 0.8;
  // Verify each candidate pair by its true Jaccard over the shingle sets. Off: every candidate
  // pair is a duplicate, reported with its MinHash estimate.
  bool verify = true;
  uint64_t seed = 0x6772697374646470ull;
  // Remove every line that occurs in more than one document (CS336's exact line dedup); a
  // document left empty is removed with reason "lines".
  bool line_dedup = false;
  // All stages in one process (RunDedup) with verification: whether the signatures stage keeps
  // every document's shingle hashes in memory (an eighth of the budget) so that the clusters stage
  // makes the candidates' sets from them instead of reading their splits again. It pays where
  // many splits hold candidates and costs where few do (about 1.3 bytes of fresh memory per input
  // byte). kDecide, the default, keeps them while a trial over the first splits decides
  // (KeepTrial, dedup/internal/shingle_cache.h): on the dev VM, one thread, the peer sample of
  // `grist bench dedup` 0.36 -> 0.33 s (kept), 52 MB of Wikipedia-2015 with 4 candidate pairs
  // 0.49 -> 0.50 s (abandoned; always keeping: 0.525 s, peak RSS 17 -> 81 MB) (docs/dedup.md).
  // kAlways and kNever are for tests and the bench. Output identical in every case. Not read
  // from the config (a new key would change every release id).
  enum class KeepShingles { kNever, kDecide, kAlways };
  KeepShingles keep_shingles = KeepShingles::kDecide;
  // Budget of one task: sort buffers, verification cache, splits in flight (docs/dedup.md).
  uint64_t memory_limit = 1ull << 30;
  // Run the merge stage's external path (rounds of hooking and pointer jumping over sorted files)
  // even when the edges fit the budget in memory. Both paths give the same output; tests and
  // `grist bench dedup` compare them. Not read from the config.
  bool force_external_merge = false;
  // Write the candidates' sets to the clusters stage's sets file even when they fit its eighth of
  // the budget in memory. Both give the same output; tests compare them. Not read from the config.
  bool force_spilled_sets = false;
  // Intermediate files; empty = output_dir/.dedup-work. Removed after a successful RunDedup
  // unless keep_work.
  std::string work_dir;
  bool keep_work = false;
  // The largest input split (capped at memory_limit / 32, at least 64 KB, by Resolved()); inputs
  // are cut finer, into about kSplitsPerTask splits in all (common/input_plan.h), when that is
  // smaller. Outputs do not depend on it.
  uint64_t split_bytes = 16ull << 20;
  InputOptions input;
  OutputOptions output;

  // Every option of section "dedup.*" (key, flag of `grist dedup`, default: the initializers
  // above, help, range), declared once in dedup_options.cc (common/option_table.h).
  static const OptionTable<DedupOptions>& Table();
  // Reads "dedup.*" (the keys of Table()), then Validate(). A threshold without bands/rows
  // selects bands x rows automatically.
  static absl::StatusOr<DedupOptions> FromConfig(const Config& config);
  // InvalidArgument naming the bad option.
  absl::Status Validate() const;
  // bands/rows resolved (automatic choice applied), split_bytes capped by the budget.
  DedupOptions Resolved() const;
};

struct StageTiming {
  std::string stage;
  int tasks = 1;
  double seconds = 0;          // longest task
  double cpu_seconds = 0;      // sum over tasks of their wall time
  uint64_t input_bytes = 0;    // bytes the stage read (documents or intermediate records)
  uint64_t peak_rss_bytes = 0; // highest over tasks
};

struct DedupReport {
  DocCounts counts;
  uint64_t removed_exact = 0;
  uint64_t removed_near = 0;
  uint64_t removed_lines = 0;  // documents left empty by line dedup
  uint64_t lines_removed = 0;  // lines removed from kept documents
  uint64_t clusters = 0;       // clusters of 2 or more documents
  std::map<uint64_t, uint64_t> cluster_sizes;  // size -> number of clusters
  uint64_t candidate_pairs = 0;  // distinct pairs from equal band hashes
  uint64_t exact_pairs = 0;      // distinct pairs from equal exact hashes
  uint64_t verified_pairs = 0;   // candidate pairs at or above the threshold (all when !verify)
  uint64_t duplicated_lines = 0; // distinct lines found in more than one document
  // Clusters stage: scans of the candidates' sets (one per block of pairs; more blocks than one
  // pass over the pairs means the candidates did not fit the budget), and the size of the file
  // they were spilled to (0 when they fit an eighth of the budget in memory).
  uint64_t verify_passes = 0;
  uint64_t spilled_set_bytes = 0;
  // Candidate documents whose sets the clusters stage made by reading their split of the input
  // again: those whose shingles the signatures stage did not keep (a stage run on its own, a
  // cache the trial abandoned, or beyond its eighth of the budget). Depends on timing; no output
  // does.
  uint64_t sets_from_input = 0;
  // Signatures stage, when it could keep the shingles (RunDedup with verification): the splits of
  // its trial, those among them that held a candidate document, whether it kept (1) or abandoned
  // (0) the shingles, and the splits whose shingles were kept. All 0 otherwise.
  uint64_t trial_splits = 0;
  uint64_t trial_candidate_splits = 0;
  uint64_t shingles_kept = 0;
  uint64_t splits_kept = 0;
  // Merge stage: 0 when the edges fit its share of the budget (union-find in memory), else the
  // rounds of the external connected components (docs/dedup.md).
  uint64_t merge_rounds = 0;
  uint64_t memory_limit = 0;  // --memory-limit of the run, bytes
  int bands = 0, rows = 0, num_perm = 0;
  double threshold = 0;
  std::vector<StageTiming> stages;
  uint64_t peak_rss_bytes = 0;
  std::string simd_target;
  std::string ToJson() const;
  // The reproducible counts and parameters alone (no timings), compact: what a release manifest
  // records for the dedup stage (docs/formats/release.md, counts.dedup).
  std::string CountsJson() const;
};

absl::StatusOr<DedupReport> RunDedup(Env* env, const std::vector<std::string>& inputs,
                                     const std::string& output_dir, const DedupOptions& options,
                                     const RunOptions& run);

enum class DedupStage { kSignatures, kBuckets, kClusters, kMerge, kFilter, kReport };
// Every stage, in the order they run.
inline constexpr DedupStage kDedupStages[] = {DedupStage::kSignatures, DedupStage::kBuckets,
                                              DedupStage::kClusters,   DedupStage::kMerge,
                                              DedupStage::kFilter,     DedupStage::kReport};
// A stage's name: "signatures", "buckets", "clusters", "merge", "filter", "report" (--stage,
// the stats files, the report's "stages").
const char* DedupStageName(DedupStage stage);
// The names of kDedupStages, in order (the choices of `grist dedup --stage`).
std::vector<std::string> DedupStageNames();
// InvalidArgument naming the choices for a name that is none of DedupStageNames().
absl::StatusOr<DedupStage> ParseDedupStage(const std::string& name);
// Whether a stage runs as many tasks (merge and report run as one).
bool StageIsParallel(DedupStage stage);

// Runs one stage as task run.task of run.tasks. Every task of a stage must be given the same
// inputs, output_dir and options. Returns the report so far (complete after kReport).
absl::StatusOr<DedupReport> RunDedupStage(Env* env, DedupStage stage,
                                          const std::vector<std::string>& inputs,
                                          const std::string& output_dir,
                                          const DedupOptions& options, const RunOptions& run);

// The exact-dedup normalization of `text` (see ExactNormalize).
std::string NormalizeForExact(std::string_view text, ExactNormalize mode);

}  // namespace dedup
}  // namespace grist

#endif  // GRIST_DEDUP_DEDUP_H_
