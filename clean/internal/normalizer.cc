#include "clean/internal/normalizer.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace grist::clean::internal {
namespace {

// ---------------------------------------------------------------------------------------------
// Normalization: one pass over the bytes.

enum ByteClass : uint8_t { kContent = 0, kSpace, kNewline, kCr, kVtFf, kControl, kNonAscii };

struct ByteTable {
  uint8_t cls[256];
  constexpr ByteTable() : cls() {
    for (int i = 0; i < 256; ++i) {
      uint8_t c = kContent;
      if (i >= 0x80) {
        c = kNonAscii;
      } else if (i == ' ' || i == '\t') {
        c = kSpace;
      } else if (i == '\n') {
        c = kNewline;
      } else if (i == '\r') {
        c = kCr;
      } else if (i == 0x0B || i == 0x0C) {
        c = kVtFf;
      } else if (i < 0x20 || i == 0x7F) {
        c = kControl;
      }
      cls[i] = c;
    }
  }
};
constexpr ByteTable kBytes;

// Decodes one UTF-8 sequence at p (p < end, *p >= 0x80). Returns its length and sets *cp, or returns
// the length of the maximal invalid subpart (>= 1) with *cp = -1 (Unicode's "substitution of
// maximal subparts", as Python's errors="replace").
inline size_t DecodeUtf8(const uint8_t* p, const uint8_t* end, int32_t* cp) {
  uint8_t b0 = p[0];
  size_t need;
  uint8_t lo = 0x80, hi = 0xBF;
  int32_t v;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
    v = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2;
    v = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    v = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    *cp = -1;
    return 1;
  }
  size_t i = 1;
  for (; i <= need; ++i) {
    if (p + i >= end) break;
    uint8_t b = p[i];
    if (i == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) break;
    v = (v << 6) | (b & 0x3F);
  }
  if (i <= need) {
    *cp = -1;
    return i;
  }
  *cp = v;
  return need + 1;
}

// Whether the loop over a run of content in Normalizer::Run would pass all 8 bytes of `w` (in
// memory order): each is content (0x21-0x7E) or a space followed by content within the word. May
// answer false when it would (the loop then goes byte by byte), never true when it would not.
inline bool ContentWord(uint64_t w) {
  constexpr uint64_t kOnes = 0x0101010101010101ull, kHighs = 0x8080808080808080ull;
  const uint64_t below = (w - kOnes * 0x20) & ~w & kHighs;  // a byte below 0x20
  const uint64_t high = ((w + kOnes) | w) & kHighs;         // 0x7F, or the high bit set
  const uint64_t x = w ^ (kOnes * ' ');
  const uint64_t space = (x - kOnes) & ~x & kHighs;  // every space (and maybe a byte after one)
  return (below | high) == 0 && (space & (space << 8)) == 0 && (space >> 63) == 0;
}

inline bool IsUnicodeSpace(int32_t cp) {
  return cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

// Builds the normalized text, tracking where lines start so that lines holding characters that
// Unicode normalization may change are normalized (lines never interact under NFC/NFKC: '\n' is a
// starter that composes with nothing).
class Normalizer {
 public:
  Normalizer(const CleanOptions& o, std::string* out, NormalizeCounters* c)
      : o_(o), ws_(o.normalize_whitespace), out_(out), c_(c) {
    norm_threshold_ = o.normalization == Normalization::kNfc    ? 0x300
                      : o.normalization == Normalization::kNfkc ? 0xA0
                                                                : 0x110000;
  }

  // Returns false when invalid UTF-8 was found (always repaired in *out).
  bool Run(std::string_view raw) {
    out_->clear();
    out_->reserve(raw.size() + 16);
    const uint8_t* p = reinterpret_cast<const uint8_t*>(raw.data());
    const uint8_t* end = p + raw.size();
    if (o_.strip_bom && raw.size() >= 3 && p[0] == 0xEF && p[1] == 0xBB && p[2] == 0xBF) {
      p += 3;
      c_->bom_stripped = 1;
    }
    bool valid = true;
    while (p < end) {
      uint8_t cls = kBytes.cls[*p];
      switch (cls) {
        case kContent: {
          // A run of ordinary ASCII, single spaces between words included (they survive
          // whitespace normalization unchanged), is copied in one go.
          const uint8_t* q = p + 1;
          while (q < end) {
            if (end - q >= 8) {
              uint64_t w;
              std::memcpy(&w, q, 8);
              if (ContentWord(w)) {
                q += 8;
                continue;
              }
            }
            if (kBytes.cls[*q] == kContent) {
              ++q;
            } else if (*q == ' ' && q + 1 < end && kBytes.cls[q[1]] == kContent) {
              q += 2;
            } else {
              break;
            }
          }
          Content(reinterpret_cast<const char*>(p), q - p);
          p = q;
          break;
        }
        case kSpace:
          Space(reinterpret_cast<const char*>(p), 1);
          ++p;
          break;
        case kNewline:
          Newline(1);
          ++p;
          break;
        case kCr:
          ++c_->crlf_unified;
          Newline(1);
          p += (p + 1 < end && p[1] == '\n') ? 2 : 1;
          break;
        case kVtFf:
          ++c_->crlf_unified;
          Newline(1);
          ++p;
          break;
        case kControl:
          if (o_.remove_control) {
            ++c_->control_chars_removed;
          } else {
            Content(reinterpret_cast<const char*>(p), 1);
          }
          ++p;
          break;
        default: {
          int32_t cp;
          size_t n = DecodeUtf8(p, end, &cp);
          if (cp < 0) {
            valid = false;
            ++c_->invalid_utf8_sequences;
            static const char kReplacement[] = "\xEF\xBF\xBD";
            line_needs_norm_ |= 0xFFFD >= norm_threshold_;
            Content(kReplacement, 3);
          } else if (cp == 0xFEFF && o_.strip_bom && out_->empty()) {
            // A byte order mark before any output (e.g. after removed control characters) is
            // stripped like one at byte 0, so normalizing twice gives what normalizing once did.
            c_->bom_stripped = 1;
          } else if (cp == 0x85 || cp == 0x2028) {
            ++c_->crlf_unified;
            Newline(1);
          } else if (cp == 0x2029) {
            ++c_->crlf_unified;
            Newline(2);
          } else if (cp < 0xA0) {  // C1 controls
            if (o_.remove_control) {
              ++c_->control_chars_removed;
            } else {
              Content(reinterpret_cast<const char*>(p), n);
            }
          } else if (ws_ && IsUnicodeSpace(cp)) {
            Space(reinterpret_cast<const char*>(p), n);
          } else {
            line_needs_norm_ |= cp >= norm_threshold_ && !(nfc_ && NfcInert(cp));
            Content(reinterpret_cast<const char*>(p), n);
          }
          p += n;
          break;
        }
      }
    }
    EndLine();
    return valid;
  }

 private:
  void Content(const char* s, size_t n) {
    if (ws_) {
      if (pending_newlines_ > 0) {
        if (!at_doc_start_) out_->append(std::min(pending_newlines_, 2), '\n');
        pending_newlines_ = 0;
        line_begin_ = out_->size();
      } else if (pending_space_ && !at_line_start_) {
        out_->push_back(' ');
      }
      pending_space_ = false;
      at_doc_start_ = false;
      at_line_start_ = false;
    }
    out_->append(s, n);
  }
  void Space(const char* s, size_t n) {
    if (ws_) {
      pending_space_ = true;
    } else {
      out_->append(s, n);
    }
  }
  void Newline(int count) {
    EndLine();
    if (ws_) {
      pending_space_ = false;
      pending_newlines_ += count;
      at_line_start_ = true;
    } else {
      out_->append(count, '\n');
      line_begin_ = out_->size();
    }
  }
  // Unicode-normalizes the current line [line_begin_, end) when it needs it.
  void EndLine() {
    if (!line_needs_norm_) return;
    line_needs_norm_ = false;
    size_t len = out_->size() - line_begin_;
    if (len == 0) return;
    int options = UTF8PROC_STABLE | UTF8PROC_COMPOSE;
    if (o_.normalization == Normalization::kNfkc) options |= UTF8PROC_COMPAT;
    utf8proc_uint8_t* dst = nullptr;
    utf8proc_ssize_t r =
        utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(out_->data() + line_begin_),
                     static_cast<utf8proc_ssize_t>(len), &dst, static_cast<utf8proc_option_t>(options));
    if (r >= 0) {
      std::string_view now(reinterpret_cast<const char*>(dst), static_cast<size_t>(r));
      if (now != std::string_view(out_->data() + line_begin_, len)) {
        ++c_->lines_normalized;
        out_->resize(line_begin_);
        out_->append(now);
      }
    }
    std::free(dst);
  }

  // Punctuation and currency blocks (dashes, curly quotes, bullets, ellipsis, per mille, euro...):
  // no canonical decomposition and no composition with a neighbour, so NFC never changes them.
  // (NFKC does: U+2026 becomes "...".)
  static bool NfcInert(int32_t cp) {
    return (cp >= 0x2010 && cp <= 0x205E) || (cp >= 0x20A0 && cp <= 0x20CF);
  }

  const CleanOptions& o_;
  bool nfc_ = o_.normalization == Normalization::kNfc;
  bool ws_;
  std::string* out_;
  NormalizeCounters* c_;
  int32_t norm_threshold_;
  size_t line_begin_ = 0;
  bool line_needs_norm_ = false;
  bool pending_space_ = false;
  int pending_newlines_ = 0;
  bool at_doc_start_ = true;
  bool at_line_start_ = true;
};

}  // namespace

bool NormalizeText(const CleanOptions& options, std::string_view raw, std::string* out,
                   NormalizeCounters* counters) {
  Normalizer n(options, out, counters);
  return n.Run(raw);
}

}  // namespace grist::clean::internal
