// The peers of `grist bench dedup` beside grist on the same documents
// (bench/python/bench_dedup_peers.py: datasketch MinHash.update_batch + MinHashLSH, rensa RMinHash +
// RMinHashLSH, datatrove's MinHash dedup stages), with each one's precision and recall against the
// exact Jaccard of the sample's pairs; and the MinHash throughput measurement that the bench's own
// figures use too. Kept out of bench_dedup.cc, which calls AddDedupPeerFigures once.
#ifndef GRIST_BENCH_DEDUP_PEERS_H_
#define GRIST_BENCH_DEDUP_PEERS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "bench/harness.h"

namespace grist::bench {

// The sample sizes of the peer figures, in MB of text.
struct DedupPeerSizes {
  double sample_mb = 24;    // grist's sample (Wikinews with near copies)
  double peer_mb = 4;       // the prefix of it datasketch and rensa run on
  double datatrove_mb = 1;  // the prefix of it datatrove runs on
  // The sizes under --quick, whatever the flags say.
  static DedupPeerSizes Quick() { return {4, 1, 0.25}; }
};

// MB/s of shingling + signatures over `docs` on `threads` threads (documents dealt round-robin),
// by the wall clock; with `per_cpu_second`, by the CPU time the threads used (what one core does
// per second of its time, independent of other load on a shared machine). `scalar`: the
// in-project scalar MinHash loop; `shingles_only`: shingling and hashing alone.
double SignatureMBps(const std::vector<std::string>& docs, int threads, bool scalar,
                     bool shingles_only = false, bool per_cpu_second = false);

// datasketch, rensa and datatrove beside grist (see the file comment). grist runs on the whole
// sample (`--sample-mb` of Wikinews with near copies), and again on the prefix the peers run on
// (`--peer-mb`; datatrove, the slowest, on `--datatrove-mb` of it): per-core rates of different
// sizes are comparable, and the same input is there too. Precision and recall are scored on the
// documents each peer saw, grist's on the same documents.
// A missing or failing peer is recorded as unavailable with the reason; `tmp` is scratch space.
absl::Status AddDedupPeerFigures(Report* report, const Options& options,
                                 const DedupPeerSizes& sizes, const std::vector<std::string>& docs,
                                 const std::string& tmp);

}  // namespace grist::bench

#endif  // GRIST_BENCH_DEDUP_PEERS_H_
