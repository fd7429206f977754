#include "common/json_writer.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "common/check.h"

namespace grist {

void AppendJsonString(std::string* out, std::string_view s) {
  out->push_back('"');
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size();
  for (size_t i = 0; i < n;) {
    unsigned char c = p[i];
    if (c < 0x80) {
      switch (c) {
        case '"': out->append("\\\""); break;
        case '\\': out->append("\\\\"); break;
        case '\n': out->append("\\n"); break;
        case '\r': out->append("\\r"); break;
        case '\t': out->append("\\t"); break;
        case '\b': out->append("\\b"); break;
        case '\f': out->append("\\f"); break;
        default:
          if (c < 0x20 || c == 0x7f) {
            char buf[8];
            std::snprintf(buf, sizeof(buf), "\\u%04x", c);
            out->append(buf);
          } else {
            out->push_back(static_cast<char>(c));
          }
      }
      ++i;
      continue;
    }
    // Validate one UTF-8 sequence; copy it, or write U+FFFD for an invalid byte.
    int len = 0;
    uint32_t cp = 0;
    if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; }
    else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; }
    else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; }
    bool ok = len > 0 && i + len <= n;
    for (int k = 1; ok && k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) ok = false;
      else cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if (ok) {
      if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
          cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
        ok = false;
      }
    }
    if (ok) {
      out->append(reinterpret_cast<const char*>(p + i), len);
      i += len;
    } else {
      out->append("\xEF\xBF\xBD");
      ++i;
    }
  }
  out->push_back('"');
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
