// SentencePiece's normalizer (normalizer.cc), re-implemented to give the same bytes: the
// precompiled character map (a Darts-clone double-array trie over the input bytes, longest rule
// wins, whose values index NUL-terminated replacement strings), user-defined symbols passed
// through untouched, malformed UTF-8 replaced by U+FFFD one byte at a time, remove_extra_whitespaces
// (leading, trailing and repeated spaces dropped, after the character map), add_dummy_prefix (one
// space in front, or behind with treat_whitespace_as_suffix), and escape_whitespaces (' ' written
// as U+2581).
//
// Thread safety: immutable after construction; Normalize may be called concurrently.
#ifndef GRIST_TOKENIZE_INTERNAL_NORMALIZER_H_
#define GRIST_TOKENIZE_INTERNAL_NORMALIZER_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenize/internal/model_proto.h"

namespace grist::tokenize::internal {

inline constexpr std::string_view kSpaceSymbol = "\xe2\x96\x81";  // U+2581

// SentencePiece's string_util::OneCharLen: the length of a UTF-8 sequence from its lead byte
// (continuation bytes count 1, 0xF8..0xFF count 4), not validated.
inline size_t OneCharLen(unsigned char lead) {
  return static_cast<size_t>("\1\1\1\1\1\1\1\1\1\1\1\1\2\2\3\4"[lead >> 4]);
}

// UTF-8 validity is common/utf8.h's (Utf8SequenceLength, IsValidUtf8), which judges a character
// as SentencePiece's IsValidDecodeUTF8 does: no overlong forms, no surrogates, at most U+10FFFF.

// The user-defined symbols as SentencePiece's PrefixMatcher matches them: the longest symbol that
// is a byte prefix of the text.
class UserSymbols {
 public:
  explicit UserSymbols(std::vector<std::string> symbols);
  bool empty() const { return symbols_.empty(); }
  // Length of the longest symbol that `w` starts with; 0 when none.
  size_t Match(std::string_view w) const {
    if (symbols_.empty() || w.empty() || !first_[static_cast<unsigned char>(w[0])]) return 0;
    return MatchSlow(w);
  }
  // The most symbols that are prefixes of one string (SentencePiece keeps 64 trie results).
  size_t MaxNested() const;

 private:
  size_t MatchSlow(std::string_view w) const;
  std::vector<std::string> symbols_;  // longest first
  std::array<bool, 256> first_{};
};

class Normalizer {
 public:
  // nullptr and *why_not when the spec holds something this class does not reproduce exactly.
  // `users` must outlive the Normalizer.
  static std::unique_ptr<Normalizer> Create(const ModelFacts& facts, const UserSymbols* users,
                                            std::string* why_not);

  // SentencePiece's normalized form of `input` into *out (replaced). False when the input reaches
  // a case where SentencePiece's behaviour is undefined (a trie lookup outside the map, more
  // than 32 rules matching one position): then the caller must use SentencePiece.
  bool Normalize(std::string_view input, std::string* out) const;

  bool escape_whitespaces() const { return escape_; }

 private:
  Normalizer() = default;
  // SentencePiece's NormalizePrefix: the replacement for the start of `input` and how many input
  // bytes it consumes.
  bool Prefix(std::string_view input, std::string_view* out, size_t* consumed) const;
  // Longest charsmap rule at the start of `input`: *len 0 when none.
  bool Lookup(std::string_view input, size_t* len, uint32_t* value) const;
  bool NormalizeFast(std::string_view input, std::string* out) const;

  const UserSymbols* users_ = nullptr;
  bool add_dummy_prefix_ = true;
  bool remove_extra_ = true;
  bool escape_ = true;
  bool suffix_ = false;
  // The precompiled charsmap: double-array units and the replacement strings.
  std::vector<uint32_t> units_;
  std::string replacements_;
  std::array<bool, 256> first_byte_rule_{};  // a rule may start with this byte
};

}  // namespace grist::tokenize::internal

#endif  // GRIST_TOKENIZE_INTERNAL_NORMALIZER_H_
