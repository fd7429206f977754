// grist's own encoder for SentencePiece BPE models, giving exactly SentencePiece's ids.
//
// What it reproduces (SentencePiece 0.1.97 to 0.2.x, which agree on all of it):
// - the normalizer (normalizer.h);
// - bpe_model.cc's segmentation: the normalized text is cut into characters (a user-defined
//   symbol, longest byte-prefix match, is one frozen symbol that never merges); then, over and
//   over, the adjacent pair whose concatenation is a vocabulary piece (NORMAL or USER_DEFINED)
//   with the highest score is merged, ties going to the leftmost pair;
// - the id of each final symbol: its piece; a character outside the vocabulary is <unk>, which
//   byte fallback writes as its UTF-8 bytes (<0xNN>, one id per byte) and which, without byte
//   fallback, is merged with an <unk> right before it (sentencepiece_processor.cc).
//
// Create() refuses (nullptr, with the reason) every model where an exact result is not assured:
// not BPE; escape_whitespaces off (SentencePiece's BPE trainer refuses it); UNUSED pieces (SentencePiece resegments them through a map whose last writer wins);
// a piece given twice; a reserved piece (control, unknown, byte) that is one character (the
// model would return it for that character); a piece that merges from a character outside the
// vocabulary; a NaN score; a precompiled charsmap that is malformed. The caller then encodes with
// SentencePiece.
//
// Chunk cache: when no vocabulary piece holds a whitespace symbol right after another character,
// no piece can span the start of a whitespace run, so the text splits there into chunks that
// encode independently; then the encoder keeps one direct-mapped cache of chunk -> ids shared by
// every thread that encodes with it (kCacheSlots slots of 64 bytes: 16 MiB per encoder, allocated
// at the first Encode; chunks of at most 24 bytes and 8 ids; lock-free, each slot a seqlock).
// Shared rather than per thread, each distinct chunk is encoded about once however many threads
// there are, where per-thread caches paid every cold miss once per thread (the encode then
// scaled to 0.65x linear at 16 threads). In front of it each thread keeps a small direct-mapped
// copy (kFrontSlots slots, 256 KiB, in the core's own cache) of the entries it used last, so the
// frequent chunks are found without reading the shared table; it is cleared when the thread
// switches to another encoder. A cached entry is the exact ids of its key, so the ids never depend
// on what either cache holds or on the threads: output is deterministic.
//
// Thread safety: immutable after Create except for the cache; Encode may be called concurrently
// (per-thread scratch, the cache synchronized as above).
#ifndef GRIST_TOKENIZE_INTERNAL_BPE_H_
#define GRIST_TOKENIZE_INTERNAL_BPE_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenize/internal/model_proto.h"
#include "tokenize/internal/normalizer.h"

namespace grist::tokenize::internal {

class BpeEncoder {
 public:
  static constexpr size_t kCacheSlots = size_t{1} << 18;
  static constexpr size_t kFrontSlots = size_t{1} << 12;
  static constexpr size_t kCacheSlotBytes = 64;

  // nullptr and *why_not when the model is outside what this encoder reproduces exactly.
  static std::unique_ptr<BpeEncoder> Create(std::string_view serialized_model,
                                            std::string* why_not);
  ~BpeEncoder();

  // Appends SentencePiece's ids for `text` to *ids. False (with *ids as it was) when the text
  // meets a case SentencePiece leaves undefined (see Normalizer::Normalize): encode it with
  // SentencePiece then.
  bool Encode(std::string_view text, std::vector<int>* ids) const;

  // Whether the chunk cache is in use (see the file comment).
  bool chunk_cache() const { return chunk_cache_; }
  // Set false to encode without the cache (tests compare both ways).
  void set_use_cache(bool use) { use_cache_ = use && chunk_cache_; }

 private:
  struct Pair;
  class PairTable;
  class CharTable;
  class ChunkCache;
  struct Scratch;
  BpeEncoder();
  // The ids of the normalized span `s`, appended; *prev_unk carries the <unk> merge state.
  void EncodeSpan(std::string_view s, Scratch* sc, std::vector<int>* ids, bool* prev_unk) const;
  // The merges of sc->syms (bpe.cc): by scanning, for spans of at most kScanSymbols symbols, else
  // by a heap; the same merges either way.
  static constexpr size_t kScanSymbols = 32;
  void MergeByScan(Scratch* sc) const;
  void MergeByHeap(Scratch* sc) const;
  int SymbolId(std::string_view ch) const;

  std::unique_ptr<UserSymbols> users_;
  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PairTable> pairs_;
  std::unique_ptr<CharTable> chars_;
  std::vector<bool> is_user_;  // by id
  std::unordered_map<std::string, int> user_ids_;
  int byte_id_[256] = {};      // <0xNN> ids for byte fallback
  int ascii_id_[128] = {};     // id of each one-byte character, -1 outside the vocabulary
  int unk_id_ = 0;
  bool byte_fallback_ = false;
  bool chunk_cache_ = false;
  bool use_cache_ = false;
  bool scan_ok_ = true;  // every merge scores above -inf: MergeByScan may run (bpe.cc)
  std::string_view space_;  // U+2581, or ' ' without escape_whitespaces
  uint64_t serial_ = 0;     // tells this encoder's front caches from another's (never 0)
  mutable std::once_flag cache_once_;
  mutable std::unique_ptr<ChunkCache> cache_;
};

}  // namespace grist::tokenize::internal

#endif  // GRIST_TOKENIZE_INTERNAL_BPE_H_
