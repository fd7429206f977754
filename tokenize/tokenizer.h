// The locked tokenizer: SentencePiece models, loaded and trained through SentencePiece's
// Status-returning API, encoded by one of two engines.
//
// Encoding is bit-exact with SentencePiece's own encoder (spm_encode, the Python module): the ids of
// Encode(text) are exactly SentencePieceProcessor::Encode(text), with BOS/EOS added by grist's policy
// rather than by SentencePiece options.
//
// Engines. `grist` (the default) is grist's own BPE encoder (tokenize/internal/bpe.h): used for a
// BPE model when the checks at load find nothing it does not reproduce exactly (native() true;
// native_why_not() says why not otherwise), and then the whole document is encoded at once. Any
// other model (unigram, word, char, a BPE model with UNUSED pieces, ...), any document that
// reaches a case SentencePiece leaves undefined, and the engine `sentencepiece` go through the
// library. With the library, long documents are encoded in pieces of about
// `piece_bytes` cut at a single ASCII space between two printable ASCII characters, and only when
// the model makes that exact: it adds a dummy prefix and escapes whitespace, and no vocabulary piece
// has U+2581 after another character (so no piece can span the cut). Then the concatenated ids equal
// the whole-document ids (tested on real text); otherwise, or when no such space is found within
// 4 x piece_bytes, the text is encoded whole.
//
// The native encoder's tables are built at the first call that needs them (an encode, native(),
// native_why_not(), native_chunk_cache()), once, whatever the thread: loading a model to read its
// ids, vocabulary size or bytes (validation, pack, verify) does not pay for them.
//
// Thread safety: a loaded Tokenizer is immutable; Encode/Decode may be called concurrently.
#ifndef GRIST_TOKENIZE_TOKENIZER_H_
#define GRIST_TOKENIZE_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/option_table.h"

namespace grist::tokenize::internal {
class BpeEncoder;
class Spm;
}

namespace grist {
class Config;
class Env;
}  // namespace grist

namespace grist::tokenize {

enum class Engine {
  kGrist,          // grist's BPE encoder where exact, else SentencePiece
  kSentencePiece,  // always the SentencePiece library
};
// "grist" | "sentencepiece"; InvalidArgument otherwise.
absl::StatusOr<Engine> ParseEngine(std::string_view name);
std::string_view EngineName(Engine e);

struct EncodeOptions {
  Engine engine = Engine::kGrist;
  bool add_bos = false;
  bool add_eos = true;
  // Target size of the pieces a long document is encoded in (see above). 0 = never cut.
  uint64_t piece_bytes = 1 << 20;
  // Read from the config with the stage's other options: EncodeStageOptions (encode.h).
};

class Tokenizer {
 public:
  // Loads a serialized SentencePiece model. InvalidArgument naming `source` when it does not parse.
  // With `build_native`, grist's encoder's tables (native()) are built as well, beside
  // SentencePiece's parse, on a thread of their own; otherwise at the first call that needs them.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromBytes(std::string model_bytes,
                                                              std::string source,
                                                              bool build_native = false);
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Load(Env* env, const std::string& path,
                                                         bool build_native = false);
  ~Tokenizer();

  // SentencePiece's ids for `text` (no BOS/EOS), appended to *ids. Errors from SentencePiece are
  // converted code for code.
  absl::Status EncodeRaw(std::string_view text, std::vector<int>* ids,
                        Engine engine = Engine::kGrist) const;
  // EncodeRaw in bounded pieces (see the file comment), with BOS/EOS per `options`; *ids replaced.
  absl::Status Encode(std::string_view text, const EncodeOptions& options,
                      std::vector<int>* ids) const;
  absl::StatusOr<std::string> Decode(const std::vector<int>& ids) const;

  int vocab_size() const;
  int bos_id() const;  // -1 when the model has none
  int eos_id() const;
  int pad_id() const;
  int unk_id() const;
  // "unigram", "bpe", "word", "char".
  const std::string& model_type() const { return model_type_; }
  const std::string& model_bytes() const { return model_bytes_; }
  // Whether long documents can be cut exactly (see the file comment).
  bool can_cut() const { return can_cut_; }
  // Whether grist's own encoder handles this model (see the file comment), and if not, why.
  bool native() const { return Bpe() != nullptr; }
  const std::string& native_why_not() const {
    Bpe();
    return native_why_not_;
  }
  // Whether the native encoder caches chunk encodings (tokenize/internal/bpe.h).
  bool native_chunk_cache() const;
  // Tests: encode natively without the chunk cache.
  void DisableChunkCacheForTesting();

 private:
  Tokenizer() = default;
  std::unique_ptr<internal::Spm> sp_;
  // The native encoder, built at the first call (nullptr when the model is not encoded natively).
  internal::BpeEncoder* Bpe() const;
  mutable std::once_flag bpe_once_;
  mutable std::unique_ptr<internal::BpeEncoder> bpe_;
  mutable std::string native_why_not_;
  std::string model_bytes_;
  std::string model_type_;
  bool can_cut_ = false;
};

// Where `text` may be cut for exact piecewise encoding: returns the index of a single ASCII space
// between two printable non-space ASCII characters, searching backwards from `target` to target/2
// and then forwards to 4 x target; npos when none.
size_t FindCut(std::string_view text, size_t target);

struct TrainOptions {
  std::string model_type = "bpe";        // bpe | unigram | word | char
  int vocab_size = 32000;
  double character_coverage = 0.9995;
  bool byte_fallback = true;
  std::vector<std::string> user_defined_symbols;
  std::vector<std::string> control_symbols;
  std::string normalization_rule_name = "identity";
  bool add_dummy_prefix = true;
  bool split_digits = true;
  // Sentences (non-empty lines of the documents) sampled for training with grist's PRNG from `seed`
  // (reservoir sampling over the input in its deterministic order). 0 = all.
  uint64_t input_sentence_size = 2000000;
  uint64_t max_sentence_length = 16384;
  uint64_t seed = 0;
  int bos_id = 1, eos_id = 2, unk_id = 0, pad_id = -1;
  // Every option of the "tokenizer.*" section and the top-level "seed" (key, flag of `grist
  // tokenize train`, default: the initializers above, help, range), declared once in tokenizer.cc.
  // tokenizer.vocab_size is required, and FromConfig requires seed.
  static const OptionTable<TrainOptions>& Table();
  // Reads the keys of Table(); ids must be below vocab_size.
  static absl::StatusOr<TrainOptions> FromConfig(const Config& config);
};

struct TrainReport {
  uint64_t documents = 0;
  uint64_t documents_rejected = 0;  // unreadable records (counted, not trained on)
  uint64_t sentences_seen = 0;
  uint64_t sentences_used = 0;
  uint64_t model_bytes = 0;
  std::string ToJson() const;
};

// Trains a SentencePiece model on the documents of `inputs` (any format common/records.h reads) and
// writes it to `model_path` crash-safely. SentencePiece trains with num_threads=1: its trainers use
// threads in ways whose floating-point reduction order varies, and the model must be identical for
// identical inputs. Identical inputs and options give a byte-identical model. SentencePiece's
// training log goes to `model_path`.train.log.
absl::StatusOr<TrainReport> TrainTokenizer(Env* env, const std::vector<std::string>& inputs,
                                           const std::string& model_path,
                                           const TrainOptions& options, bool progress = false);

}  // namespace grist::tokenize

#endif  // GRIST_TOKENIZE_TOKENIZER_H_
