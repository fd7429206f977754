// A reader of SentencePiece's serialized ModelProto (sentencepiece_model.proto), for the fields
// that decide how text is encoded. It reads the protobuf wire format directly (no protobuf
// library): field numbers and defaults below are those of sentencepiece_model.proto.
//
// Semantics follow proto2 as SentencePiece's generated code applies them: a scalar field given
// twice keeps the last value, a sub-message given twice is merged, unknown fields are skipped.
// An enum value outside the enum (which protobuf would keep as an unknown field, leaving the
// default) is reported through `odd_enum` so the caller can refuse to encode natively.
#ifndef GRIST_TOKENIZE_INTERNAL_MODEL_PROTO_H_
#define GRIST_TOKENIZE_INTERNAL_MODEL_PROTO_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace grist::tokenize::internal {

// ModelProto.SentencePiece.Type.
enum class PieceType : int {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

struct ModelPiece {
  std::string piece;  // field 1
  float score = 0;    // field 2
  PieceType type = PieceType::kNormal;  // field 3
};

struct ModelFacts {
  std::vector<ModelPiece> pieces;  // ModelProto field 1
  // TrainerSpec (field 2).
  int model_type = 1;  // 3: UNIGRAM=1, BPE=2, WORD=3, CHAR=4
  bool treat_whitespace_as_suffix = false;  // 24
  bool byte_fallback = false;               // 35
  // NormalizerSpec (field 3).
  std::string normalizer_name;        // 1
  std::string precompiled_charsmap;   // 2
  bool add_dummy_prefix = true;       // 3
  bool remove_extra_whitespaces = true;  // 4
  bool escape_whitespaces = true;     // 5
  // An enum field held a value its enum does not define.
  bool odd_enum = false;
};

// False when `serialized` is not well-formed protobuf wire data.
bool ParseModelFacts(std::string_view serialized, ModelFacts* facts);

}  // namespace grist::tokenize::internal

#endif  // GRIST_TOKENIZE_INTERNAL_MODEL_PROTO_H_
