// A narrow wrapper over SentencePiece, compiled in its own translation unit: SentencePiece's headers
// declare their own `absl::string_view`, which clashes with the real Abseil, so no file that
// includes an Abseil header may include them. This header uses the standard library only; errors
// come back as SentencePiece's status code (absl's canonical numbering) and message.
#ifndef GRIST_TOKENIZE_INTERNAL_SPM_H_
#define GRIST_TOKENIZE_INTERNAL_SPM_H_

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace grist::tokenize::internal {

struct SpmStatus {
  int code = 0;  // 0 = OK
  std::string message;
  bool ok() const { return code == 0; }
};

class Spm {
 public:
  Spm();
  ~Spm();
  SpmStatus Load(std::string_view serialized_model);
  // Thread-safe after Load.
  SpmStatus Encode(std::string_view text, std::vector<int>* ids) const;
  SpmStatus Decode(const std::vector<int>& ids, std::string* text) const;
  int PieceSize() const;
  std::string IdToPiece(int id) const;
  int bos_id() const;
  int eos_id() const;
  int pad_id() const;
  int unk_id() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// SentencePieceTrainer::Train over `sentences` with `kwargs`, after seeding SentencePiece's random
// generator with `seed`. The serialized model goes to *model. SentencePiece's log goes to
// `log_path` (stderr is redirected while training) unless it is empty.
SpmStatus SpmTrain(const std::vector<std::pair<std::string, std::string>>& kwargs,
                   const std::vector<std::string>& sentences, unsigned int seed,
                   const std::string& log_path, std::string* model);

}  // namespace grist::tokenize::internal

#endif  // GRIST_TOKENIZE_INTERNAL_SPM_H_
