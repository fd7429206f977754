#include "tokenize/internal/model_proto.h"

#include <cstring>

namespace grist::tokenize::internal {
namespace {

bool ReadVarint(std::string_view* s, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64 && !s->empty(); shift += 7) {
    uint8_t b = static_cast<uint8_t>(s->front());
    s->remove_prefix(1);
    *v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

struct Field {
  uint64_t number = 0;
  int wire = 0;
  uint64_t varint = 0;     // wire 0
  uint32_t fixed32 = 0;    // wire 5
  std::string_view bytes;  // wire 2
};

// Calls fn(field) for each field of the message `s`; false on malformed wire data.
template <typename Fn>
bool ForEachField(std::string_view s, Fn fn) {
  while (!s.empty()) {
    uint64_t tag;
    if (!ReadVarint(&s, &tag)) return false;
    Field f;
    f.wire = static_cast<int>(tag & 7);
    f.number = tag >> 3;
    if (f.number == 0) return false;
    switch (f.wire) {
      case 0:
        if (!ReadVarint(&s, &f.varint)) return false;
        break;
      case 1:
        if (s.size() < 8) return false;
        s.remove_prefix(8);
        break;
      case 5:
        if (s.size() < 4) return false;
        std::memcpy(&f.fixed32, s.data(), 4);
        s.remove_prefix(4);
        break;
      case 2: {
        uint64_t n;
        if (!ReadVarint(&s, &n) || n > s.size()) return false;
        f.bytes = s.substr(0, n);
        s.remove_prefix(n);
        break;
      }
      default:
        return false;  // groups (3, 4) never occur in ModelProto
    }
    if (!fn(f)) return false;
  }
  return true;
}

}  // namespace

bool ParseModelFacts(std::string_view serialized, ModelFacts* facts) {
  *facts = ModelFacts();
  ModelFacts& m = *facts;
  return ForEachField(serialized, [&](const Field& f) {
    if (f.number == 1 && f.wire == 2) {
      ModelPiece p;
      bool ok = ForEachField(f.bytes, [&](const Field& g) {
        if (g.number == 1 && g.wire == 2) p.piece.assign(g.bytes);
        if (g.number == 2 && g.wire == 5) std::memcpy(&p.score, &g.fixed32, 4);
        if (g.number == 3 && g.wire == 0) {
          if (g.varint >= 1 && g.varint <= 6) {
            p.type = static_cast<PieceType>(g.varint);
          } else {
            m.odd_enum = true;
          }
        }
        return true;
      });
      if (!ok) return false;
      m.pieces.push_back(std::move(p));
    } else if (f.number == 2 && f.wire == 2) {
      return ForEachField(f.bytes, [&](const Field& g) {
        if (g.wire != 0) return true;
        if (g.number == 3) {
          if (g.varint >= 1 && g.varint <= 4) {
            m.model_type = static_cast<int>(g.varint);
          } else {
            m.odd_enum = true;
          }
        }
        if (g.number == 24) m.treat_whitespace_as_suffix = g.varint != 0;
        if (g.number == 35) m.byte_fallback = g.varint != 0;
        return true;
      });
    } else if (f.number == 3 && f.wire == 2) {
      return ForEachField(f.bytes, [&](const Field& g) {
        if (g.number == 1 && g.wire == 2) m.normalizer_name.assign(g.bytes);
        if (g.number == 2 && g.wire == 2) m.precompiled_charsmap.assign(g.bytes);
        if (g.wire == 0) {
          if (g.number == 3) m.add_dummy_prefix = g.varint != 0;
          if (g.number == 4) m.remove_extra_whitespaces = g.varint != 0;
          if (g.number == 5) m.escape_whitespaces = g.varint != 0;
        }
        return true;
      });
    }
    return true;
  });
}

}  // namespace grist::tokenize::internal
