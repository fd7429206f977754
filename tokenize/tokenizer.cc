#include "tokenize/tokenizer.h"

#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/config.h"
#include "common/env.h"
#include "common/json_writer.h"
#include "common/progress.h"
#include "common/records.h"
#include "common/rng.h"
#include "common/status_macros.h"
#include "tokenize/internal/bpe.h"
#include "tokenize/internal/model_proto.h"
#include "tokenize/internal/spm.h"

namespace grist::tokenize {
namespace {

// SentencePiece's util::Status uses absl's canonical codes; convert code for code.
absl::Status FromSpm(const internal::SpmStatus& s, std::string_view context) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.code),
                      absl::StrCat(std::string(context), ": ", s.message));
}

bool IsPrintableAscii(char c) { return c > ' ' && c < 0x7f; }

}  // namespace

absl::StatusOr<Engine> ParseEngine(std::string_view name) {
  if (name == "grist") return Engine::kGrist;
  if (name == "sentencepiece") return Engine::kSentencePiece;
  return absl::InvalidArgumentError(
      absl::StrCat("tokenizer engine '", std::string(name), "': expected grist|sentencepiece"));
}

std::string_view EngineName(Engine e) {
  return e == Engine::kGrist ? "grist" : "sentencepiece";
}

size_t FindCut(std::string_view text, size_t target) {
  auto ok = [&](size_t i) {
    return i > 0 && i + 1 < text.size() && text[i] == ' ' && IsPrintableAscii(text[i - 1]) &&
           IsPrintableAscii(text[i + 1]);
  };
  if (target >= text.size()) return std::string_view::npos;
  for (size_t i = target; i > target / 2; --i) {
    if (ok(i)) return i;
  }
  size_t hi = std::min(text.size(), target * 4);
  for (size_t i = target + 1; i < hi; ++i) {
    if (ok(i)) return i;
  }
  return std::string_view::npos;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromBytes(std::string model_bytes,
                                                                std::string source,
                                                                bool build_native) {
  auto t = std::unique_ptr<Tokenizer>(new Tokenizer());
  t->model_bytes_ = std::move(model_bytes);
  // grist's encoder's tables, if asked for now, on a thread of their own while SentencePiece
  // parses the model here (each ~10 ms for a 32k model: they were the serial start of every
  // `grist tokenize encode`, one after the other). Declared after `t`, so joined before `t` goes
  // (an error) and after the result has taken it: the thread holds the object, not `t`.
  std::jthread native;
  if (build_native) native = std::jthread([raw = t.get()] { (void)raw->Bpe(); });
  t->sp_ = std::make_unique<internal::Spm>();
  internal::SpmStatus s = t->sp_->Load(t->model_bytes_);
  if (!s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": not a loadable SentencePiece model (", s.message, ")"));
  }
  if (t->sp_->PieceSize() <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": SentencePiece model has no pieces"));
  }
  internal::ModelFacts f;
  if (!internal::ParseModelFacts(t->model_bytes_, &f) ||
      f.pieces.size() != static_cast<size_t>(t->sp_->PieceSize())) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": model protobuf does not parse"));
  }
  static const char* const kTypes[] = {"unknown", "unigram", "bpe", "word", "char"};
  t->model_type_ = (f.model_type >= 1 && f.model_type <= 4) ? kTypes[f.model_type] : "unknown";
  bool cut = f.add_dummy_prefix && f.escape_whitespaces && !f.treat_whitespace_as_suffix;
  const std::string_view kSpace = "\xe2\x96\x81";  // U+2581
  // The pieces as the model holds them (SentencePiece's IdToPiece gives the same strings, copied).
  for (size_t id = 0; cut && id < f.pieces.size(); ++id) {
    const std::string_view p = f.pieces[id].piece;
    for (size_t pos = p.find(kSpace, 1); pos != std::string_view::npos;
         pos = p.find(kSpace, pos + 3)) {
      if (pos < 3 || p.compare(pos - 3, 3, kSpace) != 0) {
        cut = false;
        break;
      }
    }
  }
  t->can_cut_ = cut;
  return t;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Load(Env* env, const std::string& path,
                                                           bool build_native) {
  auto bytes = ReadFileToString(env, path);
  if (!bytes.ok()) {
    return Annotate(bytes.status(), absl::StrCat("tokenizer model ", path));
  }
  return FromBytes(std::move(*bytes), path, build_native);
}

Tokenizer::~Tokenizer() = default;

internal::BpeEncoder* Tokenizer::Bpe() const {
  std::call_once(bpe_once_,
                 [this] { bpe_ = internal::BpeEncoder::Create(model_bytes_, &native_why_not_); });
  return bpe_.get();
}

bool Tokenizer::native_chunk_cache() const { return Bpe() != nullptr && bpe_->chunk_cache(); }
void Tokenizer::DisableChunkCacheForTesting() {
  if (Bpe() != nullptr) bpe_->set_use_cache(false);
}

absl::Status Tokenizer::EncodeRaw(std::string_view text, std::vector<int>* ids,
                                  Engine engine) const {
  if (engine == Engine::kGrist && Bpe() != nullptr && bpe_->Encode(text, ids)) {
    return absl::OkStatus();
  }
  std::vector<int> out;
  RETURN_IF_ERROR(FromSpm(sp_->Encode(text, &out), "SentencePiece Encode"));
  ids->insert(ids->end(), out.begin(), out.end());
  return absl::OkStatus();
}

absl::Status Tokenizer::Encode(std::string_view text, const EncodeOptions& options,
                               std::vector<int>* ids) const {
  ids->clear();
  if (options.add_bos && bos_id() >= 0) ids->push_back(bos_id());
  if (options.engine == Engine::kGrist && Bpe() != nullptr && bpe_->Encode(text, ids)) {
    // The native encoder takes any length at once.
  } else if (!can_cut_ || options.piece_bytes == 0 || text.size() <= options.piece_bytes) {
    RETURN_IF_ERROR(EncodeRaw(text, ids, Engine::kSentencePiece));
  } else {
    std::string_view rest = text;
    while (true) {
      size_t cut = rest.size() > options.piece_bytes ? FindCut(rest, options.piece_bytes)
                                                      : std::string_view::npos;
      if (cut == std::string_view::npos) {
        RETURN_IF_ERROR(EncodeRaw(rest, ids, Engine::kSentencePiece));
        break;
      }
      RETURN_IF_ERROR(EncodeRaw(rest.substr(0, cut), ids, Engine::kSentencePiece));
      rest.remove_prefix(cut + 1);  // the dummy prefix stands for the space
    }
  }
  if (options.add_eos && eos_id() >= 0) ids->push_back(eos_id());
  return absl::OkStatus();
}

absl::StatusOr<std::string> Tokenizer::Decode(const std::vector<int>& ids) const {
  for (int id : ids) {
    if (id < 0 || id >= vocab_size()) {
      return absl::InvalidArgumentError(absl::StrCat("token id ", id, " outside the vocabulary"));
    }
  }
  std::string out;
  RETURN_IF_ERROR(FromSpm(sp_->Decode(ids, &out), "SentencePiece Decode"));
  return out;
}

int Tokenizer::vocab_size() const { return sp_->PieceSize(); }
int Tokenizer::bos_id() const { return sp_->bos_id(); }
int Tokenizer::eos_id() const { return sp_->eos_id(); }
int Tokenizer::pad_id() const { return sp_->pad_id(); }
int Tokenizer::unk_id() const { return sp_->unk_id(); }

// ---------------------------------------------------------------------------------------------
// Training

const OptionTable<TrainOptions>& TrainOptions::Table() {
  static const auto* table = [] {
    auto* t = new OptionTable<TrainOptions>("tokenizer.");
    t->Enum("tokenizer.model_type", GRIST_OPTION_FIELD(model_type), "SentencePiece model type",
            std::vector<std::pair<std::string, std::string>>{
                {"bpe", "bpe"}, {"unigram", "unigram"}, {"word", "word"}, {"char", "char"}});
    t->Int("tokenizer.vocab_size", GRIST_OPTION_FIELD(vocab_size), "Vocabulary size",
           {8, 1 << 24})
        .Required();
    t->Double("tokenizer.character_coverage", GRIST_OPTION_FIELD(character_coverage),
              "Characters covered by the vocabulary, in (0, 1]", {0, 1});
    t->Bool("tokenizer.byte_fallback", GRIST_OPTION_FIELD(byte_fallback),
            "Bytes for characters outside the vocabulary");
    t->StringList("tokenizer.user_defined_symbols", GRIST_OPTION_FIELD(user_defined_symbols),
                  "Pieces always kept whole, comma-separated");
    t->StringList("tokenizer.control_symbols", GRIST_OPTION_FIELD(control_symbols),
                  "Control pieces, comma-separated");
    t->String("tokenizer.normalization", GRIST_OPTION_FIELD(normalization_rule_name),
              "SentencePiece normalization rule");
    t->Bool("tokenizer.add_dummy_prefix", GRIST_OPTION_FIELD(add_dummy_prefix),
            "Add a space before the text");
    t->Bool("tokenizer.split_digits", GRIST_OPTION_FIELD(split_digits), "Split numbers into digits");
    t->Int("tokenizer.input_sentence_size", GRIST_OPTION_FIELD(input_sentence_size),
           "Sentences sampled for training (0: all)", {0});
    t->Int("tokenizer.max_sentence_length", GRIST_OPTION_FIELD(max_sentence_length),
           "Longest sentence, in bytes", {1});
    t->Int("seed", GRIST_OPTION_FIELD(seed), "Seed of the sentence sample (the release's seed)", {0});
    t->Int("tokenizer.bos_id", GRIST_OPTION_FIELD(bos_id), "Id of BOS (-1: none)", {-1});
    t->Int("tokenizer.eos_id", GRIST_OPTION_FIELD(eos_id), "Id of EOS (-1: none)", {-1});
    t->Int("tokenizer.unk_id", GRIST_OPTION_FIELD(unk_id), "Id of UNK", {-1});
    t->Int("tokenizer.pad_id", GRIST_OPTION_FIELD(pad_id), "Id of PAD (-1: none)", {-1});
    return t;
  }();
  return *table;
}

absl::StatusOr<TrainOptions> TrainOptions::FromConfig(const Config& c) {
  TrainOptions o;
  // A release names its seed: FromConfig requires it (`grist tokenize train` gives 0 when absent).
  if (!c.Has("seed")) return c.RequireInt("seed").status();
  RETURN_IF_ERROR(Table().Read(c, &o));
  if (!(o.character_coverage > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config ", c.source(), ": key 'tokenizer.character_coverage': must be in (0, 1]"));
  }
  for (auto [key, id] : {std::pair{"tokenizer.bos_id", o.bos_id}, std::pair{"tokenizer.eos_id", o.eos_id},
                         std::pair{"tokenizer.unk_id", o.unk_id}, std::pair{"tokenizer.pad_id", o.pad_id}}) {
    if (id >= o.vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("config ", c.source(), ": key '", key, "': out of range"));
    }
  }
  return o;
}

std::string TrainReport::ToJson() const {
  JsonWriter w(0);
  w.BeginObject().Field("documents", documents).Field("documents_rejected", documents_rejected);
  w.Field("sentences_seen", sentences_seen).Field("sentences_used", sentences_used);
  w.Field("model_bytes", model_bytes).EndObject();
  return w.Take();
}


absl::StatusOr<TrainReport> TrainTokenizer(Env* env, const std::vector<std::string>& inputs,
                                           const std::string& model_path,
                                           const TrainOptions& options, bool progress) {
  ASSIGN_OR_RETURN(std::vector<InputFile> files, ListInputs(env, inputs));
  uint64_t total = 0;
  for (const auto& f : files) total += f.size;
  Progress prog("train-tok", total, Progress::Unit::kBytes, !progress);
  TrainReport report;
  Rng rng(options.seed);
  std::vector<std::string> sample;
  const uint64_t cap = options.input_sentence_size;
  for (size_t fi = 0; fi < files.size(); ++fi) {
    InputSplit split;
    split.file_index = fi;
    split.bytes = files[fi].size;
    ASSIGN_OR_RETURN(auto reader, OpenRecordReader(env, files[fi], split, InputOptions{}));
    Document doc;
    uint64_t last = 0;
    while (true) {
      ASSIGN_OR_RETURN(bool more, reader->Next(&doc));
      if (!more) break;
      prog.Add(reader->bytes_consumed() - last);
      last = reader->bytes_consumed();
      ++report.documents;
      if (!doc.error.empty()) {
        ++report.documents_rejected;
        continue;
      }
      std::string_view text = doc.text;
      while (!text.empty()) {
        size_t nl = text.find('\n');
        std::string_view line = text.substr(0, nl);
        text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
        if (line.empty() || line.size() > options.max_sentence_length) continue;
        ++report.sentences_seen;
        if (cap == 0 || sample.size() < cap) {
          sample.emplace_back(line);
        } else {
          uint64_t j = rng.Uniform(report.sentences_seen);
          if (j < cap) sample[j].assign(line);
        }
      }
    }
  }
  prog.Finish();
  if (sample.empty()) {
    return absl::InvalidArgumentError("tokenizer training: the inputs hold no text");
  }
  report.sentences_used = sample.size();
  std::vector<std::pair<std::string, std::string>> kw = {
      {"model_type", options.model_type},
      {"vocab_size", absl::StrCat(options.vocab_size)},
      {"character_coverage", absl::StrCat(options.character_coverage)},
      {"byte_fallback", options.byte_fallback ? "true" : "false"},
      {"normalization_rule_name", options.normalization_rule_name},
      {"add_dummy_prefix", options.add_dummy_prefix ? "true" : "false"},
      {"split_digits", options.split_digits ? "true" : "false"},
      {"input_sentence_size", "0"},
      {"shuffle_input_sentence", "false"},
      {"max_sentence_length", absl::StrCat(options.max_sentence_length)},
      {"num_threads", "1"},
      {"bos_id", absl::StrCat(options.bos_id)},
      {"eos_id", absl::StrCat(options.eos_id)},
      {"unk_id", absl::StrCat(options.unk_id)},
      {"pad_id", absl::StrCat(options.pad_id)},
  };
  if (!options.user_defined_symbols.empty()) {
    kw.emplace_back("user_defined_symbols", absl::StrJoin(options.user_defined_symbols, ","));
  }
  if (!options.control_symbols.empty()) {
    kw.emplace_back("control_symbols", absl::StrJoin(options.control_symbols, ","));
  }
  std::string model;
  RETURN_IF_ERROR(FromSpm(internal::SpmTrain(kw, sample, static_cast<unsigned int>(options.seed),
                                             model_path + ".train.log", &model),
                          "SentencePiece training"));
  report.model_bytes = model.size();
  RETURN_IF_ERROR(WriteFileAtomic(env, model_path, model));
  return report;
}

}  // namespace grist::tokenize
