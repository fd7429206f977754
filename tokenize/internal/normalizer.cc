#include "tokenize/internal/normalizer.h"

#include <algorithm>
#include <cstring>

#include "common/utf8.h"

namespace grist::tokenize::internal {
namespace {

// SentencePiece's Normalizer::kMaxTrieResultsSize: results past it are undefined behaviour there.
constexpr size_t kMaxTrieResults = 32;


// Darts-clone's DoubleArrayUnit.
inline bool HasLeaf(uint32_t u) { return ((u >> 8) & 1) == 1; }
inline uint32_t Value(uint32_t u) { return u & ((1U << 31) - 1); }
inline uint32_t Label(uint32_t u) { return u & ((1U << 31) | 0xFF); }
inline uint32_t Offset(uint32_t u) { return (u >> 10) << ((u & (1U << 9)) >> 6); }

}  // namespace

UserSymbols::UserSymbols(std::vector<std::string> symbols) : symbols_(std::move(symbols)) {
  std::stable_sort(symbols_.begin(), symbols_.end(),
                   [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  for (const auto& s : symbols_) {
    if (!s.empty()) first_[static_cast<unsigned char>(s[0])] = true;
  }
}

size_t UserSymbols::MatchSlow(std::string_view w) const {
  for (const auto& s : symbols_) {
    if (s.size() <= w.size() && std::memcmp(s.data(), w.data(), s.size()) == 0) return s.size();
  }
  return 0;
}

size_t UserSymbols::MaxNested() const {
  size_t most = 0;
  for (const auto& s : symbols_) {
    size_t n = 0;
    for (const auto& t : symbols_) n += s.compare(0, t.size(), t) == 0 && t.size() <= s.size();
    most = std::max(most, n);
  }
  return most;
}

std::unique_ptr<Normalizer> Normalizer::Create(const ModelFacts& f, const UserSymbols* users,
                                               std::string* why_not) {
  auto n = std::unique_ptr<Normalizer>(new Normalizer());
  n->users_ = users;
  n->add_dummy_prefix_ = f.add_dummy_prefix;
  n->remove_extra_ = f.remove_extra_whitespaces;
  n->escape_ = f.escape_whitespaces;
  n->suffix_ = f.treat_whitespace_as_suffix;
  const std::string& blob = f.precompiled_charsmap;
  if (!blob.empty()) {
    // <trie size: uint32 little-endian><double-array units><NUL-terminated replacements>.
    uint32_t trie_bytes = 0;
    if (blob.size() <= 4) {
      *why_not = "precompiled charsmap is broken";
      return nullptr;
    }
    std::memcpy(&trie_bytes, blob.data(), 4);
    if (trie_bytes >= blob.size() || trie_bytes + 4 > blob.size() || trie_bytes < 4) {
      *why_not = "precompiled charsmap is broken";
      return nullptr;
    }
    n->units_.resize(trie_bytes / 4);
    std::memcpy(n->units_.data(), blob.data() + 4, n->units_.size() * 4);
    n->replacements_.assign(blob, 4 + trie_bytes);
    // Replacements must end in NUL and be UTF-8 as SentencePiece validates it: the model then
    // sees only valid UTF-8.
    if (n->replacements_.empty() || n->replacements_.back() != '\0') {
      *why_not = "precompiled charsmap replacements are not NUL-terminated";
      return nullptr;
    }
    std::string_view rest = n->replacements_;
    while (!rest.empty()) {
      size_t z = rest.find('\0');
      if (!IsValidUtf8(rest.substr(0, z))) {
        *why_not = "precompiled charsmap holds a replacement that is not valid UTF-8";
        return nullptr;
      }
      rest.remove_prefix(z + 1);
    }
    const uint32_t root = Offset(n->units_[0]);
    for (int b = 0; b < 256; ++b) {
      uint32_t pos = root ^ static_cast<uint32_t>(b);
      n->first_byte_rule_[b] = pos < n->units_.size() && Label(n->units_[pos]) == uint32_t(b);
    }
  }
  if (users != nullptr && users->MaxNested() > 32) {
    *why_not = "more than 32 user-defined symbols are prefixes of one another";
    return nullptr;
  }
  return n;
}

bool Normalizer::Lookup(std::string_view input, size_t* len, uint32_t* value) const {
  *len = 0;
  if (!first_byte_rule_[static_cast<unsigned char>(input[0])]) return true;
  const size_t size = units_.size();
  uint32_t pos = Offset(units_[0]);
  size_t results = 0;
  for (size_t i = 0; i < input.size(); ++i) {
    const uint32_t c = static_cast<unsigned char>(input[i]);
    pos ^= c;
    if (pos >= size) return false;
    const uint32_t unit = units_[pos];
    if (Label(unit) != c) break;
    pos ^= Offset(unit);
    if (HasLeaf(unit)) {
      if (pos >= size) return false;
      if (++results > kMaxTrieResults) return false;
      // Results come shortest first; SentencePiece keeps the longest.
      *len = i + 1;
      *value = Value(units_[pos]);
    }
  }
  return true;
}

bool Normalizer::Prefix(std::string_view input, std::string_view* out, size_t* consumed) const {
  if (users_ != nullptr) {
    if (size_t m = users_->Match(input); m > 0) {
      *out = input.substr(0, m);
      *consumed = m;
      return true;
    }
  }
  if (!units_.empty()) {
    size_t len;
    uint32_t value;
    if (!Lookup(input, &len, &value)) return false;
    if (len > 0) {
      if (value >= replacements_.size()) return false;
      const char* r = replacements_.data() + value;
      *out = std::string_view(r, std::strlen(r));  // NUL-terminated: checked at Create
      *consumed = len;
      return true;
    }
  }
  size_t n = Utf8SequenceLength(input.data(), input.size());
  if (n == 0) {
    *out = kReplacementCharacter;
    *consumed = 1;
  } else {
    *out = input.substr(0, n);
    *consumed = n;
  }
  return true;
}

// No charsmap and no user-defined symbols: every prefix is one byte or one character, and only
// ' ' normalizes to a space.
bool Normalizer::NormalizeFast(std::string_view input, std::string* out) const {
  const char* p = input.data();
  const char* end = p + input.size();
  if (remove_extra_) {
    while (p < end && *p == ' ') ++p;
    if (p == end) return true;
  }
  const std::string_view ws = escape_ ? kSpaceSymbol : std::string_view(" ");
  if (!suffix_ && add_dummy_prefix_) out->append(ws);
  bool prev_space = remove_extra_;
  while (p < end) {
    // A run of ASCII other than ' ': copied as is.
    const char* q = p;
    while (q < end && static_cast<unsigned char>(*q) < 0x80 && *q != ' ') ++q;
    if (q != p) {
      out->append(p, q - p);
      prev_space = false;
      p = q;
      continue;
    }
    if (*p == ' ') {
      if (!prev_space) out->append(ws);
      prev_space = remove_extra_;
      ++p;
      continue;
    }
    size_t n = Utf8SequenceLength(p, end - p);
    if (n == 0) {
      out->append(kReplacementCharacter);
      ++p;
    } else {
      out->append(p, n);
      p += n;
    }
    prev_space = false;
  }
  if (remove_extra_) {
    while (out->size() >= ws.size() &&
           out->compare(out->size() - ws.size(), ws.size(), ws) == 0) {
      out->resize(out->size() - ws.size());
    }
  }
  if (suffix_ && add_dummy_prefix_) out->append(ws);
  return true;
}

bool Normalizer::Normalize(std::string_view input, std::string* out) const {
  out->clear();
  if (input.empty()) return true;
  if (units_.empty() && (users_ == nullptr || users_->empty())) {
    return NormalizeFast(input, out);
  }
  std::string_view sp;
  size_t consumed = 0;
  if (remove_extra_) {
    while (!input.empty()) {
      if (!Prefix(input, &sp, &consumed)) return false;
      if (sp != " ") break;
      input.remove_prefix(consumed);
    }
  }
  if (input.empty()) return true;
  const std::string_view ws = escape_ ? kSpaceSymbol : std::string_view(" ");
  if (!suffix_ && add_dummy_prefix_) out->append(ws);
  bool prev_space = remove_extra_;
  while (!input.empty()) {
    if (!Prefix(input, &sp, &consumed)) return false;
    while (prev_space && !sp.empty() && sp[0] == ' ') sp.remove_prefix(1);
    if (!sp.empty()) {
      for (char c : sp) {
        if (escape_ && c == ' ') {
          out->append(kSpaceSymbol);
        } else {
          out->push_back(c);
        }
      }
      prev_space = sp.back() == ' ';
    }
    input.remove_prefix(consumed);
    if (!remove_extra_) prev_space = false;
  }
  if (remove_extra_) {
    while (out->size() >= ws.size() &&
           out->compare(out->size() - ws.size(), ws.size(), ws) == 0) {
      out->resize(out->size() - ws.size());
    }
  }
  if (suffix_ && add_dummy_prefix_) out->append(ws);
  return true;
}

}  // namespace grist::tokenize::internal
