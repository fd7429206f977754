// No Abseil header may be included here (see spm.h).
#include "tokenize/internal/spm.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <unordered_map>

namespace grist::tokenize::internal {
namespace {

SpmStatus Convert(const sentencepiece::util::Status& s) {
  SpmStatus out;
  if (!s.ok()) {
    out.code = static_cast<int>(s.code());
    out.message = s.error_message();
  }
  return out;
}

class VectorIterator : public sentencepiece::SentenceIterator {
 public:
  explicit VectorIterator(const std::vector<std::string>* v) : v_(v) {}
  bool done() const override { return i_ >= v_->size(); }
  void Next() override { ++i_; }
  const std::string& value() const override { return (*v_)[i_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::vector<std::string>* v_;
  size_t i_ = 0;
};

}  // namespace

struct Spm::Impl {
  sentencepiece::SentencePieceProcessor sp;
};

Spm::Spm() : impl_(std::make_unique<Impl>()) {}
Spm::~Spm() = default;

SpmStatus Spm::Load(std::string_view serialized_model) {
  return Convert(impl_->sp.LoadFromSerializedProto(serialized_model));
}
SpmStatus Spm::Encode(std::string_view text, std::vector<int>* ids) const {
  return Convert(impl_->sp.Encode(text, ids));
}
SpmStatus Spm::Decode(const std::vector<int>& ids, std::string* text) const {
  return Convert(impl_->sp.Decode(ids, text));
}
int Spm::PieceSize() const { return impl_->sp.GetPieceSize(); }
std::string Spm::IdToPiece(int id) const { return impl_->sp.IdToPiece(id); }
int Spm::bos_id() const { return impl_->sp.bos_id(); }
int Spm::eos_id() const { return impl_->sp.eos_id(); }
int Spm::pad_id() const { return impl_->sp.pad_id(); }
int Spm::unk_id() const { return impl_->sp.unk_id(); }

SpmStatus SpmTrain(const std::vector<std::pair<std::string, std::string>>& kwargs,
                   const std::vector<std::string>& sentences, unsigned int seed,
                   const std::string& log_path, std::string* model) {
  std::unordered_map<std::string, std::string> kw(kwargs.begin(), kwargs.end());
  sentencepiece::SetRandomGeneratorSeed(seed);
  VectorIterator it(&sentences);
  // SentencePiece's trainer logs hundreds of lines to stderr; send them to `log_path` instead.
  int saved = -1;
  if (!log_path.empty()) {
    int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
      std::fflush(stderr);
      saved = ::dup(2);
      ::dup2(fd, 2);
      ::close(fd);
    }
  }
  SpmStatus s = Convert(sentencepiece::SentencePieceTrainer::Train(kw, &it, model));
  if (saved >= 0) {
    std::fflush(stderr);
    ::dup2(saved, 2);
    ::close(saved);
  }
  return s;
}

}  // namespace grist::tokenize::internal
