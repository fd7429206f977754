// Shared decoding of stream splits: one decoder thread per compressed input without a frame index
// hands the record-aligned pieces of its splits (common/input_plan.h, InputSplit) to the readers of
// those splits on every worker thread, so one large .jsonl.zst / .jsonl.gz uses all threads. Part
// of the record I/O of common/records.h.
//
// Use: one SplitDecoders per pass over a list of splits, given that list in the order the pass
// opens them (a task's SelectTaskSplits, or any ascending subset); pass it to OpenRecordReader.
// The first reader opened on a file starts that file's decoder thread, which decodes the file from
// its start once, keeps the pieces of the listed splits, drops the others and ends after the last
// listed split of the file. A split that is not listed, or opened a second time, is still read
// correctly, by decoding the file privately up to it. Records, their bytes, line numbers and
// errors are the same either way, and the same as one reader of the whole file gives.
//
// Tasks: every task of an array decodes each such file from its start up to its own last split,
// dropping the pieces of the splits before its own (the cut is deterministic: every task finds the
// same splits). A task thus pays the decode of the file's prefix; the parsing and cleaning of each
// record happen in one task only.
//
// Memory: per file decoder at most `chunks_in_flight` decoded pieces waiting for readers, plus one
// piece per open reader; pieces are decoded one after another into recycled 1 MiB buffers
// (internal::PieceBuffers), each piece keeping at most one buffer alive. The decoder waits while
// the limit is reached. Default: 8 per thread, at least 16. When a split is claimed, the decoders of the next
// kAheadFiles files (in list order) start too, within the same limit each, so that those files
// decode while the current one is read (a file's decode is serial, about 200 MB/s of text on the
// GPU host's cores: on 16 threads, two files decoding one after the other kept the cleaning
// threads waiting, 0.255 s for Wikipedia-2015's two files against 0.22 s with both decoding at
// once). A large file's decode is a long serial chain wherever it is listed, so the constructor
// starts the decoders of the kAheadFiles largest files that hold at least a kLargeFileShare-th of
// the listed files' compressed bytes (ties in list order): a big file listed after many small
// ones has then decoded ahead by the time its splits are opened, instead of starting only then.
// At most 1 + 2 * kAheadFiles decoders hold pieces at a time beyond those being read.
//
// Deadlock freedom: the pieces come out in split order, and a pass opens its splits in list order
// (the lowest split not yet read completely is always open or about to be: OrderedParallel starts
// items in index order), so the pieces the decoder waits to hand over always belong to a reader
// that is reading. A reader destroyed early drops its split's pieces.
//
// Thread safety: OpenRecordReader may be called with one SplitDecoders from any threads; each
// reader is used by one thread. Every reader must be destroyed before the SplitDecoders.
#ifndef GRIST_COMMON_SPLIT_DECODERS_H_
#define GRIST_COMMON_SPLIT_DECODERS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "common/document.h"
#include "common/input_plan.h"

namespace grist {

class Env;

class SplitDecoders {
 public:
  static size_t DefaultChunksInFlight(int threads);
  static constexpr size_t kAheadFiles = 2;
  static constexpr uint64_t kLargeFileShare = 16;
  // The decoders that may hold pieces at once beyond those being read (see above): a budget for
  // the pieces in flight divides by this.
  static constexpr size_t kMaxHoldingDecoders = 1 + 2 * kAheadFiles;

  // `splits`: the splits this pass reads, in the order it opens them. Only stream splits matter.
  SplitDecoders(Env* env, const std::vector<InputFile>& files, const std::vector<InputSplit>& splits,
                const InputOptions& options, size_t chunks_in_flight);
  ~SplitDecoders();  // stops and joins the decoder threads
  SplitDecoders(const SplitDecoders&) = delete;
  SplitDecoders& operator=(const SplitDecoders&) = delete;

  class FileDecoder;  // internal

  // The decoder that serves `split` of `file`, or null (not listed, or already opened once).
  // Internal: OpenRecordReader's.
  FileDecoder* Claim(const InputSplit& split);

  // For tests: whether the decoder of file `file_index` has started, and the pieces it holds for
  // readers (0 for a file with no decoder).
  bool Started(size_t file_index) const;
  size_t HeldPieces(size_t file_index) const;

 private:
  Env* env_;
  InputOptions options_;
  size_t chunks_in_flight_;
  std::map<size_t, std::unique_ptr<FileDecoder>> decoders_;  // by file index
  std::vector<FileDecoder*> order_;  // the decoders in the order of their files' first splits
  std::map<const FileDecoder*, size_t> position_;  // each one's index in order_
};

}  // namespace grist

#endif  // GRIST_COMMON_SPLIT_DECODERS_H_
