// A small streaming JSON writer for manifests and reports. Output is deterministic: keys appear in
// the order written, doubles use the shortest representation that round-trips (std::to_chars), and
// strings are escaped per RFC 8259 (control characters as \u00XX; invalid UTF-8 bytes as U+FFFD).
//
//   JsonWriter w(/*indent=*/2);
//   w.BeginObject(); w.Key("docs"); w.Int(3); w.EndObject();
//   std::string s = w.str();
//
// Misuse (a value without a key inside an object, unbalanced End*) is a programmer bug: CHECK.
#ifndef GRIST_COMMON_JSON_WRITER_H_
#define GRIST_COMMON_JSON_WRITER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace grist {

class JsonWriter {
 public:
  // indent 0 writes one line with no spaces; > 0 pretty-prints with that many spaces.
  explicit JsonWriter(int indent = 2) : indent_(indent) {}

  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  JsonWriter& Key(std::string_view key);
  JsonWriter& String(std::string_view s);
  JsonWriter& Int(int64_t v);
  JsonWriter& Uint(uint64_t v);
  JsonWriter& Double(double v);  // NaN/inf are written as null
  JsonWriter& Bool(bool v);
  JsonWriter& Null();
  // Inserts pre-serialized JSON as a value (the caller guarantees it is valid).
  JsonWriter& Raw(std::string_view json);

  // Convenience: Key(k) followed by the value.
  JsonWriter& Field(std::string_view k, std::string_view v) { return Key(k).String(v); }
  JsonWriter& Field(std::string_view k, const char* v) { return Key(k).String(v); }
  JsonWriter& Field(std::string_view k, const std::string& v) { return Key(k).String(v); }
  JsonWriter& Field(std::string_view k, int64_t v) { return Key(k).Int(v); }
  JsonWriter& Field(std::string_view k, int v) { return Key(k).Int(v); }
  JsonWriter& Field(std::string_view k, uint64_t v) { return Key(k).Uint(v); }
  JsonWriter& Field(std::string_view k, double v) { return Key(k).Double(v); }
  JsonWriter& Field(std::string_view k, bool v) { return Key(k).Bool(v); }

  const std::string& str() const { return out_; }
  std::string Take() { return std::move(out_); }

 private:
  void BeforeValue();
  void Newline();
  struct Level {
    bool is_object;
    bool empty = true;
    bool after_key = false;
  };
  int indent_;
  std::string out_;
  std::vector<Level> stack_;
};

// Appends `s` to `out` as a quoted, escaped JSON string.
void AppendJsonString(std::string* out, std::string_view s);
// Whether `s` starts at `pos` with a quoted JSON string exactly as AppendJsonString writes it for
// some string: only the escapes it writes (\" \\ \n \r \t \b \f, and \u00xx in lowercase
// hex for the other bytes below 0x20 and for 0x7f), no byte that it escapes left raw. The bytes of
// `s` must be valid UTF-8 (the caller checks; AppendJsonString writes no invalid UTF-8). On true,
// *end is the position after the closing quote and *decoded_bytes the string's length decoded.
bool ScanJsonStringAsWritten(std::string_view s, size_t pos, size_t* end, size_t* decoded_bytes);
// Shortest round-trip text of `v` ("null" for NaN/inf).
std::string JsonDouble(double v);

}  // namespace grist

#endif  // GRIST_COMMON_JSON_WRITER_H_
