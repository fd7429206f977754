#include "ckptio/safetensors.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <set>

#include <simdjson.h>

#include "absl/strings/str_cat.h"
#include "ckptio/checkpoint_format.h"
#include "common/check.h"
#include "common/json_writer.h"
#include "common/status_macros.h"

namespace grist::ckptio {
namespace {

struct DTypeRow {
  std::string_view name;
  size_t size;
};
constexpr std::array<DTypeRow, kNumDTypes> kDTypes = {{
    {"BOOL", 1}, {"U8", 1}, {"I8", 1}, {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2}, {"U16", 2},
    {"F16", 2}, {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4}, {"I64", 8}, {"U64", 8},
    {"F64", 8},
}};

uint64_t RoundUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

bool MulOverflows(uint64_t a, uint64_t b, uint64_t* out) {
  return __builtin_mul_overflow(a, b, out);
}

// The JSON header text (no padding). Hash fields are fixed-width so the length never depends on
// their values.
std::string HeaderJson(const FileLayout& layout, const std::vector<uint64_t>& block_hashes) {
  JsonWriter w(/*indent=*/0);
  w.BeginObject();
  w.Key("__metadata__").BeginObject();
  for (const auto& [k, v] : layout.user_metadata) w.Field(k, v);
  w.Field(kMetaFormatVersion, "1");
  w.Field(kMetaBlockSize, std::to_string(layout.checksum_block));
  std::string hashes;
  hashes.reserve(block_hashes.size() * 16);
  for (uint64_t h : block_hashes) hashes += Hex64(h);
  w.Field(kMetaBlockHashes, hashes);
  w.Field(kMetaDataHash, DataHashOf(block_hashes).ToHex());
  w.EndObject();
  for (const TensorInfo& t : layout.tensors) {
    w.Key(t.name).BeginObject();
    w.Field("dtype", DTypeName(t.dtype));
    w.Key("shape").BeginArray();
    for (int64_t d : t.shape) w.Int(d);
    w.EndArray();
    w.Key("data_offsets").BeginArray().Uint(t.begin).Uint(t.end).EndArray();
    w.EndObject();
  }
  w.EndObject();
  return w.Take();
}

absl::Status Bad(const std::string& what, std::string_view why) {
  return absl::DataLossError(absl::StrCat(what, ": bad safetensors header: ", std::string(why)));
}

absl::StatusOr<uint64_t> ParseDecimal(std::string_view s) {
  if (s.empty() || s.size() > 19) return absl::InvalidArgumentError("not a decimal");
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return absl::InvalidArgumentError("not a decimal");
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

bool ParseHex64(std::string_view s, uint64_t* out) {
  if (s.size() != 16) return false;
  uint64_t v = 0;
  for (char c : s) {
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else return false;
    v = (v << 4) | static_cast<uint64_t>(d);
  }
  *out = v;
  return true;
}

}  // namespace

std::string_view DTypeName(DType d) { return kDTypes[static_cast<int>(d)].name; }
size_t DTypeSize(DType d) { return kDTypes[static_cast<int>(d)].size; }
std::optional<DType> DTypeFromName(std::string_view name) {
  for (int i = 0; i < kNumDTypes; ++i) {
    if (kDTypes[i].name == name) return static_cast<DType>(i);
  }
  return std::nullopt;
}

Hash128 DataHashOf(const std::vector<uint64_t>& block_hashes) {
  std::string bytes(block_hashes.size() * 8, '\0');
  for (size_t i = 0; i < block_hashes.size(); ++i) {
    for (int b = 0; b < 8; ++b) bytes[i * 8 + b] = static_cast<char>(block_hashes[i] >> (8 * b));
  }
  return Hash128Of(bytes);
}

absl::StatusOr<FileLayout> PlanFile(const std::vector<TensorSpec>& specs, Metadata user_metadata,
                                    uint64_t checksum_block, uint64_t align) {
  if (align < 8 || (align & (align - 1)) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("alignment ", align, " is not a power of two >= 8"));
  }
  if (checksum_block == 0) return absl::InvalidArgumentError("checksum block size must be > 0");
  FileLayout layout;
  std::set<std::string_view> keys;
  for (const auto& [k, v] : user_metadata) {
    if (std::string_view(k).substr(0, kReservedPrefix.size()) == kReservedPrefix) {
      return absl::InvalidArgumentError(
          absl::StrCat("metadata key '", k, "' uses the reserved prefix 'grist.'"));
    }
    if (!keys.insert(k).second) {
      return absl::InvalidArgumentError(absl::StrCat("duplicate metadata key '", k, "'"));
    }
  }
  layout.user_metadata = std::move(user_metadata);
  std::set<std::string_view> names;
  uint64_t offset = 0;
  for (const TensorSpec& s : specs) {
    if (s.name.empty()) return absl::InvalidArgumentError("a tensor has an empty name");
    if (s.name == "__metadata__") {
      return absl::InvalidArgumentError("a tensor may not be named __metadata__");
    }
    if (!simdjson::validate_utf8(s.name.data(), s.name.size())) {
      return absl::InvalidArgumentError("a tensor name is not valid UTF-8");
    }
    if (!names.insert(s.name).second) {
      return absl::InvalidArgumentError(absl::StrCat("duplicate tensor name '", s.name, "'"));
    }
    uint64_t n = DTypeSize(s.dtype);
    for (int64_t d : s.shape) {
      if (d < 0) {
        return absl::InvalidArgumentError(absl::StrCat("tensor '", s.name, "' has a negative dimension"));
      }
      if (MulOverflows(n, static_cast<uint64_t>(d), &n)) {
        return absl::InvalidArgumentError(absl::StrCat("tensor '", s.name, "' is too large"));
      }
    }
    TensorInfo t{s.name, s.dtype, s.shape, offset, offset + n};
    if (t.end < offset) return absl::InvalidArgumentError("checkpoint too large");
    offset = t.end;
    layout.tensors.push_back(std::move(t));
  }
  layout.data_len = offset;
  layout.checksum_block = checksum_block;
  std::vector<uint64_t> zeros(layout.num_blocks(), 0);
  const uint64_t json_len = HeaderJson(layout, zeros).size();
  layout.data_start = RoundUp(8 + json_len, align);
  if (layout.data_start - 8 > kMaxHeaderBytes) {
    return absl::InvalidArgumentError("header would exceed 100 MB: too many tensors or blocks");
  }
  layout.file_size = layout.data_start + layout.data_len;
  return layout;
}

std::string RenderHeader(const FileLayout& layout, const std::vector<uint64_t>& block_hashes) {
  std::string json = HeaderJson(layout, block_hashes);
  const uint64_t n = layout.data_start - 8;
  GRIST_CHECK(json.size() <= n, "header grew after planning");
  json.resize(n, ' ');
  std::string out(8, '\0');
  for (int b = 0; b < 8; ++b) out[b] = static_cast<char>(n >> (8 * b));
  out += json;
  return out;
}

absl::StatusOr<uint64_t> HeaderBytesNeeded(std::string_view first8, uint64_t file_size,
                                           const std::string& what) {
  if (file_size < 8 || first8.size() < 8) return Bad(what, "file shorter than 8 bytes");
  uint64_t n = 0;
  for (int b = 0; b < 8; ++b) n |= static_cast<uint64_t>(static_cast<uint8_t>(first8[b])) << (8 * b);
  if (n > kMaxHeaderBytes) {
    return Bad(what, absl::StrCat("header length ", n, " exceeds the 100 MB limit"));
  }
  if (n > file_size - 8) {
    return Bad(what, absl::StrCat("header length ", n, " runs past the end of the ", file_size,
                                  "-byte file"));
  }
  if (n < 2) return Bad(what, "header length < 2");
  return 8 + n;
}

absl::StatusOr<ParsedHeader> ParseHeader(std::string_view prefix, uint64_t file_size,
                                         const std::string& what) {
  ASSIGN_OR_RETURN(uint64_t need, HeaderBytesNeeded(prefix, file_size, what));
  if (prefix.size() < need) {
    return absl::OutOfRangeError(absl::StrCat(what, ": need ", need, " header bytes"));
  }
  ParsedHeader out;
  out.data_start = need;
  simdjson::dom::parser parser;
  simdjson::padded_string json(prefix.data() + 8, need - 8);
  simdjson::dom::element root;
  if (auto err = parser.parse(json).get(root); err) {
    return Bad(what, absl::StrCat("JSON: ", simdjson::error_message(err)));
  }
  simdjson::dom::object obj;
  if (root.get_object().get(obj)) return Bad(what, "header is not a JSON object");
  std::set<std::string> seen;
  for (auto field : obj) {
    std::string key(field.key);
    if (!seen.insert(key).second) return Bad(what, absl::StrCat("duplicate key '", key, "'"));
    if (key == "__metadata__") {
      simdjson::dom::object m;
      if (field.value.get_object().get(m)) return Bad(what, "__metadata__ is not an object");
      for (auto kv : m) {
        std::string_view v;
        if (kv.value.get_string().get(v)) {
          return Bad(what, absl::StrCat("__metadata__ value of '", std::string(kv.key), "' is not a string"));
        }
        out.metadata.emplace_back(std::string(kv.key), std::string(v));
      }
      continue;
    }
    if (key.empty()) return Bad(what, "empty tensor name");
    simdjson::dom::object t;
    if (field.value.get_object().get(t)) return Bad(what, absl::StrCat("tensor '", key, "' is not an object"));
    TensorInfo info;
    info.name = key;
    std::string_view dtype;
    if (t["dtype"].get_string().get(dtype)) return Bad(what, absl::StrCat("tensor '", key, "' has no dtype"));
    auto dt = DTypeFromName(dtype);
    if (!dt) return Bad(what, absl::StrCat("tensor '", key, "' has unknown dtype '", std::string(dtype), "'"));
    info.dtype = *dt;
    simdjson::dom::array shape, offs;
    if (t["shape"].get_array().get(shape)) return Bad(what, absl::StrCat("tensor '", key, "' has no shape"));
    uint64_t n = DTypeSize(info.dtype);
    for (auto d : shape) {
      int64_t v;
      if (d.get_int64().get(v) || v < 0) {
        return Bad(what, absl::StrCat("tensor '", key, "' has a bad dimension"));
      }
      if (MulOverflows(n, static_cast<uint64_t>(v), &n)) {
        return Bad(what, absl::StrCat("tensor '", key, "' shape overflows"));
      }
      info.shape.push_back(v);
    }
    if (t["data_offsets"].get_array().get(offs) || offs.size() != 2) {
      return Bad(what, absl::StrCat("tensor '", key, "' has no data_offsets pair"));
    }
    if (offs.at(0).get_uint64().get(info.begin) || offs.at(1).get_uint64().get(info.end) ||
        info.end < info.begin) {
      return Bad(what, absl::StrCat("tensor '", key, "' has bad data_offsets"));
    }
    if (info.end - info.begin != n) {
      return Bad(what, absl::StrCat("tensor '", key, "' data_offsets span ", info.end - info.begin,
                                    " bytes but its dtype and shape need ", n));
    }
    out.tensors.push_back(std::move(info));
  }
  std::stable_sort(out.tensors.begin(), out.tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t pos = 0;
  for (const TensorInfo& t : out.tensors) {
    if (t.begin < pos) return Bad(what, absl::StrCat("tensor '", t.name, "' overlaps another"));
    if (t.begin > pos) return Bad(what, absl::StrCat("hole before tensor '", t.name, "'"));
    pos = t.end;
  }
  if (pos != file_size - out.data_start) {
    return Bad(what, absl::StrCat("tensor data ends at ", out.data_start + pos, " but the file has ",
                                  file_size, " bytes"));
  }
  // grist's checksums, when present.
  const std::string* bs = nullptr;
  const std::string* bh = nullptr;
  const std::string* dh = nullptr;
  for (const auto& [k, v] : out.metadata) {
    if (k == kMetaBlockSize) bs = &v;
    if (k == kMetaBlockHashes) bh = &v;
    if (k == kMetaDataHash) dh = &v;
  }
  if (bs || bh || dh) {
    if (!bs || !bh || !dh) return Bad(what, "incomplete grist checksum metadata");
    auto block = ParseDecimal(*bs);
    if (!block.ok() || *block == 0) return Bad(what, "bad grist.block_size");
    out.checksum_block = *block;
    const uint64_t data_len = file_size - out.data_start;
    const uint64_t blocks = (data_len + *block - 1) / *block;
    if (bh->size() != blocks * 16) {
      return Bad(what, absl::StrCat("grist.block_xxh3 holds ", bh->size() / 16, " digests for ",
                                    blocks, " blocks"));
    }
    out.block_hashes.resize(blocks);
    for (uint64_t i = 0; i < blocks; ++i) {
      if (!ParseHex64(std::string_view(*bh).substr(i * 16, 16), &out.block_hashes[i])) {
        return Bad(what, "grist.block_xxh3 is not hex");
      }
    }
    auto h = Hash128::FromHex(*dh);
    if (!h.ok()) return Bad(what, "grist.data_xxh3 is not a 128-bit hex digest");
    out.data_hash = *h;
  }
  return out;
}

}  // namespace grist::ckptio
