#include "common/json_writer.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <simdjson.h>

#include "common/check.h"
#include "common/internal/json_scan.h"
#include "common/utf8.h"

namespace grist {

namespace {

constexpr uint64_t kOnes = 0x0101010101010101ull, kHighs = 0x8080808080808080ull;

// Whether none of the 8 bytes of `w` needs more than a copy: all in [0x20, 0x7e] and none '"' or
// '\\'. May answer false for a plain word (the caller then looks byte by byte), never true for
// one that is not.
inline bool AllPlain(uint64_t w) {
  const uint64_t below_space = (w - kOnes * 0x20) & ~w & kHighs;
  const uint64_t from_del = ((w + kOnes) | w) & kHighs;  // 0x7f, or the high bit set
  const uint64_t q = w ^ (kOnes * '"'), b = w ^ (kOnes * '\\');
  const uint64_t quote = (q - kOnes) & ~q & kHighs, backslash = (b - kOnes) & ~b & kHighs;
  return (below_space | from_del | quote | backslash) == 0;
}

// Whether any of the 8 bytes of `w` is below 0x20, 0x7f, '"' or '\\' (bytes from 0x80 count as
// plain: the caller has validated the UTF-8). May answer true for a plain word (the caller then
// looks byte by byte), never false for one that is not.
inline bool MaybeSpecial(uint64_t w) {
  const uint64_t below_space = (w - kOnes * 0x20) & ~w & kHighs;
  const uint64_t d = w ^ (kOnes * 0x7f), q = w ^ (kOnes * '"'), b = w ^ (kOnes * '\\');
  const uint64_t del = (d - kOnes) & ~d & kHighs;
  const uint64_t quote = (q - kOnes) & ~q & kHighs, backslash = (b - kOnes) & ~b & kHighs;
  return (below_space | del | quote | backslash) != 0;
}

inline bool IsSpecialByte(unsigned char c) {
  return c < 0x20 || c == 0x7f || c == '"' || c == '\\';
}

}  // namespace

namespace internal {

size_t NextSpecialByWords(const unsigned char* p, size_t i, size_t n) {
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    if (MaybeSpecial(w)) break;
  }
  while (i < n && !IsSpecialByte(p[i])) ++i;
  return i;
}

#if defined(__SSE2__)
size_t NextSpecialBy16(const unsigned char* p, size_t i, size_t n) {
  const __m128i flip = _mm_set1_epi8(static_cast<char>(0x80));
  const __m128i space = _mm_set1_epi8(static_cast<char>(0x20 ^ 0x80));
  const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\');
  const __m128i del = _mm_set1_epi8(0x7f);
  for (; i + 16 <= n; i += 16) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
    // Unsigned x < 0x20 as a signed comparison of both with their high bits flipped.
    const __m128i below = _mm_cmplt_epi8(_mm_xor_si128(x, flip), space);
    const __m128i eq = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, quote),
                                                 _mm_cmpeq_epi8(x, backslash)),
                                    _mm_cmpeq_epi8(x, del));
    const int mask = _mm_movemask_epi8(_mm_or_si128(below, eq));
    if (mask != 0) return i + static_cast<size_t>(__builtin_ctz(static_cast<unsigned>(mask)));
  }
  while (i < n && !IsSpecialByte(p[i])) ++i;
  return i;
}
#endif

}  // namespace internal

namespace {

// The first byte at or after `i` of `p[0, n)` that IsSpecialByte, or n: 16 bytes at a time with
// SSE2, else 8 (both in common/internal/json_scan.h, tested against the byte-by-byte definition).
inline size_t NextSpecial(const unsigned char* p, size_t i, size_t n) {
#if defined(__SSE2__)
  return internal::NextSpecialBy16(p, i, n);
#else
  return internal::NextSpecialByWords(p, i, n);
#endif
}

// Appends the escape of one byte < 0x80 that IsSpecialByte.
inline void AppendEscape(std::string* out, unsigned char c) {
  switch (c) {
    case '"': out->append("\\\""); break;
    case '\\': out->append("\\\\"); break;
    case '\n': out->append("\\n"); break;
    case '\r': out->append("\\r"); break;
    case '\t': out->append("\\t"); break;
    case '\b': out->append("\\b"); break;
    case '\f': out->append("\\f"); break;
    default: {  // the other controls and DEL
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out->append(buf);
    }
  }
}

// Strings at least this long are checked for valid UTF-8 first (simdjson's validator, tens of
// bytes a cycle) and then escaped by looking only for the bytes that need it, 16 at a time; shorter
// ones (ids, keys) go byte by byte, where the check would cost more than it saves.
constexpr size_t kValidateFirstBytes = 64;

}  // namespace

// Copies runs of bytes that need no escaping in one append, and escapes or replaces byte by byte
// only where needed. The bytes written are those of the byte-by-byte definition
// (tests/common/json_writer_test.cc checks both agree).
void AppendJsonString(std::string* out, std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  out->reserve(out->size() + n + 2);
  out->push_back('"');
  size_t run = 0;  // start of the bytes not yet appended, all to be copied as they are
  if (n >= kValidateFirstBytes && simdjson::validate_utf8(s.data(), n)) {
    for (size_t i = NextSpecial(p, 0, n); i < n; i = NextSpecial(p, i, n)) {
      out->append(s.data() + run, i - run);
      AppendEscape(out, p[i]);
      run = ++i;
    }
    out->append(s.data() + run, n - run);
    out->push_back('"');
    return;
  }
  size_t i = 0;
  while (i < n) {
    if (i + 8 <= n) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      if (AllPlain(w)) {
        i += 8;
        continue;
      }
    }
    const unsigned char c = p[i];
    if (c < 0x80 && !IsSpecialByte(c)) {
      ++i;
      continue;
    }
    if (c >= 0x80) {
      const int len = Utf8SequenceLength(p + i, n - i);
      if (len > 0) {
        i += static_cast<size_t>(len);
        continue;
      }
    }
    out->append(s.data() + run, i - run);
    if (c < 0x80) {
      AppendEscape(out, c);
    } else {  // an invalid UTF-8 byte
      out->append("\xEF\xBF\xBD");
    }
    ++i;
    run = i;
  }
  out->append(s.data() + run, n - run);
  out->push_back('"');
}

bool ScanJsonStringAsWritten(std::string_view s, size_t pos, size_t* end, size_t* decoded_bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  if (pos >= n || p[pos] != '"') return false;
  size_t decoded = 0;
  size_t i = pos + 1;
  while (true) {
    const size_t j = NextSpecial(p, i, n);
    decoded += j - i;
    if (j == n) return false;  // no closing quote
    if (p[j] == '"') {
      *end = j + 1;
      *decoded_bytes = decoded;
      return true;
    }
    if (p[j] != '\\' || j + 1 >= n) return false;  // a byte AppendJsonString escapes, left raw
    const unsigned char e = p[j + 1];
    if (e == '"' || e == '\\' || e == 'n' || e == 'r' || e == 't' || e == 'b' || e == 'f') {
      i = j + 2;
    } else if (e == 'u' && j + 6 <= n && p[j + 2] == '0' && p[j + 3] == '0' &&
               ((p[j + 4] == '0' || p[j + 4] == '1') || (p[j + 4] == '7' && p[j + 5] == 'f'))) {
      // \u00xx: what AppendEscape writes for a control without a short escape, and for DEL.
      int low = -1;
      const unsigned char h = p[j + 5];
      if (h >= '0' && h <= '9') low = h - '0';
      if (h >= 'a' && h <= 'f') low = h - 'a' + 10;
      if (low < 0) return false;
      const int c = p[j + 4] == '7' ? 0x7f : (p[j + 4] - '0') * 16 + low;
      if (c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t') return false;
      i = j + 6;
    } else {
      return false;
    }
    ++decoded;
  }
}

std::string JsonDouble(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

void JsonWriter::Newline() {
  if (indent_ <= 0) return;
  out_.push_back('\n');
  out_.append(stack_.size() * indent_, ' ');
}

void JsonWriter::BeforeValue() {
  if (stack_.empty()) return;
  Level& top = stack_.back();
  if (top.is_object) {
    GRIST_CHECK(top.after_key, "JsonWriter: value inside an object without a key");
    top.after_key = false;
    return;
  }
  if (!top.empty) out_.push_back(',');
  top.empty = false;
  Newline();
}

JsonWriter& JsonWriter::Key(std::string_view key) {
  GRIST_CHECK(!stack_.empty() && stack_.back().is_object, "JsonWriter: key outside an object");
  Level& top = stack_.back();
  GRIST_CHECK(!top.after_key, "JsonWriter: two keys in a row");
  if (!top.empty) out_.push_back(',');
  top.empty = false;
  Newline();
  AppendJsonString(&out_, key);
  out_.append(indent_ > 0 ? ": " : ":");
  top.after_key = true;
  return *this;
}

JsonWriter& JsonWriter::BeginObject() {
  BeforeValue();
  out_.push_back('{');
  stack_.push_back(Level{true});
  return *this;
}

JsonWriter& JsonWriter::EndObject() {
  GRIST_CHECK(!stack_.empty() && stack_.back().is_object && !stack_.back().after_key, "JsonWriter: unbalanced EndObject");
  bool empty = stack_.back().empty;
  stack_.pop_back();
  if (!empty) Newline();
  out_.push_back('}');
  if (stack_.empty() && indent_ > 0) out_.push_back('\n');
  return *this;
}

JsonWriter& JsonWriter::BeginArray() {
  BeforeValue();
  out_.push_back('[');
  stack_.push_back(Level{false});
  return *this;
}

JsonWriter& JsonWriter::EndArray() {
  GRIST_CHECK(!stack_.empty() && !stack_.back().is_object, "JsonWriter: unbalanced EndArray");
  bool empty = stack_.back().empty;
  stack_.pop_back();
  if (!empty) Newline();
  out_.push_back(']');
  if (stack_.empty() && indent_ > 0) out_.push_back('\n');
  return *this;
}

JsonWriter& JsonWriter::String(std::string_view s) {
  BeforeValue();
  AppendJsonString(&out_, s);
  return *this;
}
JsonWriter& JsonWriter::Int(int64_t v) {
  BeforeValue();
  out_.append(std::to_string(v));
  return *this;
}
JsonWriter& JsonWriter::Uint(uint64_t v) {
  BeforeValue();
  out_.append(std::to_string(v));
  return *this;
}
JsonWriter& JsonWriter::Double(double v) {
  BeforeValue();
  out_.append(JsonDouble(v));
  return *this;
}
JsonWriter& JsonWriter::Bool(bool v) {
  BeforeValue();
  out_.append(v ? "true" : "false");
  return *this;
}
JsonWriter& JsonWriter::Null() {
  BeforeValue();
  out_.append("null");
  return *this;
}
JsonWriter& JsonWriter::Raw(std::string_view json) {
  BeforeValue();
  out_.append(json);
  return *this;
}

}  // namespace grist
