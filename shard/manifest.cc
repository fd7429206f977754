#include "shard/manifest.h"

#include <simdjson.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/hash.h"
#include "common/json_writer.h"
#include "common/status_macros.h"

namespace grist::shard {
namespace {

void WriteFile(JsonWriter* w, const FileInfo& f) {
  w->BeginObject();
  w->Field("path", f.path).Field("bytes", f.bytes).Field("xxh3_128", f.xxh3_128.ToHex());
  w->EndObject();
}

// ---- Parsing helpers over simdjson's DOM. Every error names the manifest and the field. ----

class Parser {
 public:
  explicit Parser(const std::string& source) : source_(source) {}

  absl::Status Bad(std::string_view field, std::string_view what) const {
    return absl::DataLossError(absl::StrCat(source_, ": field '", std::string(field), "': ",
                                            std::string(what)));
  }

  absl::StatusOr<simdjson::dom::element> Field(simdjson::dom::object o, std::string_view key,
                                               std::string_view path) const {
    simdjson::dom::element e;
    if (o.at_key(key).get(e) != simdjson::SUCCESS) return Bad(path, "missing");
    return e;
  }
  absl::StatusOr<uint64_t> Uint(simdjson::dom::object o, std::string_view key,
                                std::string_view path) const {
    ASSIGN_OR_RETURN(auto e, Field(o, key, path));
    uint64_t v;
    if (e.get_uint64().get(v) != simdjson::SUCCESS) {
      return Bad(path, "expected a non-negative integer");
    }
    return v;
  }
  absl::StatusOr<int64_t> Int(simdjson::dom::object o, std::string_view key,
                              std::string_view path) const {
    ASSIGN_OR_RETURN(auto e, Field(o, key, path));
    int64_t v;
    if (e.get_int64().get(v) != simdjson::SUCCESS) return Bad(path, "expected an integer");
    return v;
  }
  absl::StatusOr<std::string> Str(simdjson::dom::object o, std::string_view key,
                                  std::string_view path) const {
    ASSIGN_OR_RETURN(auto e, Field(o, key, path));
    std::string_view v;
    if (e.get_string().get(v) != simdjson::SUCCESS) return Bad(path, "expected a string");
    return std::string(v);
  }
  absl::StatusOr<simdjson::dom::object> Obj(simdjson::dom::object o, std::string_view key,
                                            std::string_view path) const {
    ASSIGN_OR_RETURN(auto e, Field(o, key, path));
    simdjson::dom::object v;
    if (e.get_object().get(v) != simdjson::SUCCESS) return Bad(path, "expected an object");
    return v;
  }
  absl::StatusOr<simdjson::dom::array> Arr(simdjson::dom::object o, std::string_view key,
                                           std::string_view path) const {
    ASSIGN_OR_RETURN(auto e, Field(o, key, path));
    simdjson::dom::array v;
    if (e.get_array().get(v) != simdjson::SUCCESS) return Bad(path, "expected an array");
    return v;
  }
  // A path inside the release (CheckRelativePath): a path that leaves the folder is
  // InvalidArgument naming the field, a hostile manifest rather than a damaged one.
  absl::StatusOr<std::string> RelativePath(simdjson::dom::object o, std::string_view key,
                                           std::string_view path) const {
    ASSIGN_OR_RETURN(std::string v, Str(o, key, path));
    if (absl::Status s = CheckRelativePath(v); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(source_, ": field '", std::string(path),
                                                     "': ", std::string(s.message())));
    }
    return v;
  }
  absl::StatusOr<Hash128> Hash(simdjson::dom::object o, std::string_view key,
                               std::string_view path) const {
    ASSIGN_OR_RETURN(std::string hex, Str(o, key, path));
    auto h = Hash128::FromHex(hex);
    if (!h.ok()) return Bad(path, "expected 32 hex digits");
    return *h;
  }
  // A file entry looked up by key (obj["bin"]): a missing key is an error, not an exception.
  absl::StatusOr<FileInfo> File(simdjson::simdjson_result<simdjson::dom::element> r,
                                std::string_view path, bool release_file) const {
    simdjson::dom::element e;
    if (r.get(e) != simdjson::SUCCESS) return Bad(path, "missing");
    return File(e, path, release_file);
  }
  // A file entry; `release_file` applies the release path rules.
  absl::StatusOr<FileInfo> File(simdjson::dom::element e, std::string_view path,
                                bool release_file) const {
    simdjson::dom::object o;
    if (e.get_object().get(o) != simdjson::SUCCESS) return Bad(path, "expected an object");
    FileInfo f;
    const std::string path_field = absl::StrCat(std::string(path), ".path");
    if (release_file) {
      ASSIGN_OR_RETURN(f.path, RelativePath(o, "path", path_field));
    } else {
      ASSIGN_OR_RETURN(f.path, Str(o, "path", path_field));
    }
    ASSIGN_OR_RETURN(f.bytes, Uint(o, "bytes", absl::StrCat(std::string(path), ".bytes")));
    ASSIGN_OR_RETURN(f.xxh3_128, Hash(o, "xxh3_128", absl::StrCat(std::string(path), ".xxh3_128")));
    return f;
  }

 private:
  const std::string& source_;
};

// The verbatim text of the top-level members "config" and "counts".
absl::Status RawMembers(const simdjson::padded_string& json, const std::string& source,
                        std::string* config, std::string* counts) {
  simdjson::ondemand::parser p;
  simdjson::ondemand::document doc;
  auto bad = [&](std::string_view what) {
    return absl::DataLossError(absl::StrCat(source, ": ", std::string(what)));
  };
  if (p.iterate(json).get(doc) != simdjson::SUCCESS) return bad("not valid JSON");
  simdjson::ondemand::object top;
  if (doc.get_object().get(top) != simdjson::SUCCESS) return bad("not a JSON object");
  for (auto field : top) {
    std::string_view key;
    if (field.unescaped_key().get(key) != simdjson::SUCCESS) return bad("bad key");
    if (key == "config" || key == "counts") {
      simdjson::ondemand::object o;
      std::string_view raw;
      if (field.value().get_object().get(o) != simdjson::SUCCESS ||
          o.raw_json().get(raw) != simdjson::SUCCESS) {
        return bad(absl::StrCat("field '", std::string(key), "': expected an object"));
      }
      while (!raw.empty() && (raw.back() == ' ' || raw.back() == '\n' || raw.back() == '\r' ||
                              raw.back() == '\t')) {
        raw.remove_suffix(1);
      }
      (key == "config" ? *config : *counts) = std::string(raw);
    }
  }
  return absl::OkStatus();
}

}  // namespace

const SplitInfo* Manifest::split(std::string_view name) const {
  auto it = splits.find(name);
  return it == splits.end() ? nullptr : &it->second;
}

std::string ComputeReleaseId(const Manifest& m) {
  Hasher128 h;
  h.Update(m.config_json);
  for (std::string_view split : {kTrainSplit, kValidationSplit}) {
    const SplitInfo* s = m.split(split);
    if (s == nullptr) continue;
    for (const ShardInfo& sh : s->shards) {
      for (const FileInfo* f : {&sh.bin, &sh.idx, &sh.seg}) {
        uint64_t words[2] = {f->xxh3_128.high, f->xxh3_128.low};
        h.Update(words, sizeof(words));
      }
    }
  }
  for (std::string_view split : {kTrainSplit, kValidationSplit}) {
    const SplitInfo* s = m.split(split);
    if (s == nullptr || !s->documents_file) continue;
    for (const FileInfo* f : {&s->documents_file->bin, &s->documents_file->idx}) {
      uint64_t words[2] = {f->xxh3_128.high, f->xxh3_128.low};
      h.Update(words, sizeof(words));
    }
  }
  return h.Digest().ToHex();
}

std::string ManifestToJson(const Manifest& m) {
  JsonWriter w(2);
  w.BeginObject();
  w.Field("format", kReleaseFormat);
  w.Field("format_version", m.format_version);
  w.Field("release_version", m.release_version);
  w.Field("release_id", m.release_id);
  w.Field("grist_version", m.grist_version);
  w.Key("config").Raw(m.config_json);
  w.Field("config_xxh3_128", m.config_xxh3_128.ToHex());
  w.Key("inputs").BeginArray();
  for (const FileInfo& f : m.inputs) WriteFile(&w, f);
  w.EndArray();
  w.Key("tokenizer").BeginObject();
  w.Field("path", m.tokenizer.file.path).Field("bytes", m.tokenizer.file.bytes);
  w.Field("xxh3_128", m.tokenizer.file.xxh3_128.ToHex());
  w.Field("vocab_size", m.tokenizer.vocab_size);
  w.Field("bos_id", static_cast<int64_t>(m.tokenizer.bos_id));
  w.Field("eos_id", static_cast<int64_t>(m.tokenizer.eos_id));
  w.Field("pad_id", static_cast<int64_t>(m.tokenizer.pad_id));
  w.Field("model_type", m.tokenizer.model_type);
  w.EndObject();
  w.Field("seq_len", static_cast<uint64_t>(m.seq_len));
  w.Field("sample_tokens", static_cast<uint64_t>(m.sample_tokens));
  w.Field("token_dtype", TokenDtypeName(m.token_dtype));
  w.Field("seed", m.seed);
  w.Field("packing", m.packing);
  w.Key("splits").BeginObject();
  for (const auto& [name, s] : m.splits) {
    w.Key(name).BeginObject();
    w.Field("samples", s.samples).Field("tokens", s.tokens);
    w.Field("padding_tokens", s.padding_tokens).Field("documents", s.documents);
    w.Key("shards").BeginArray();
    for (const ShardInfo& sh : s.shards) {
      w.BeginObject();
      w.Field("name", sh.name).Field("samples", sh.samples).Field("tokens", sh.tokens);
      w.Field("padding_tokens", sh.padding_tokens).Field("first_sample", sh.first_sample);
      w.Key("bin");
      WriteFile(&w, sh.bin);
      w.Key("idx");
      WriteFile(&w, sh.idx);
      w.Key("seg");
      WriteFile(&w, sh.seg);
      w.EndObject();
    }
    w.EndArray();
    if (s.documents_file) {
      const DocumentsFileInfo& d = *s.documents_file;
      w.Key("documents_file").BeginObject();
      w.Field("name", d.name).Field("sequences", d.sequences).Field("tokens", d.tokens);
      w.Field("eod_appended", d.eod_appended);
      w.Key("bin");
      WriteFile(&w, d.bin);
      w.Key("idx");
      WriteFile(&w, d.idx);
      w.EndObject();
    }
    w.EndObject();
  }
  w.EndObject();
  w.Key("counts").Raw(m.counts_json);
  w.EndObject();
  std::string out = w.Take();
  if (out.empty() || out.back() != '\n') out += '\n';
  return out;
}

absl::StatusOr<Manifest> ParseManifest(std::string_view json, const std::string& source) {
  simdjson::padded_string padded(json);
  simdjson::dom::parser dp;
  simdjson::dom::element root;
  if (auto err = dp.parse(padded).get(root); err != simdjson::SUCCESS) {
    return absl::DataLossError(
        absl::StrCat(source, ": not valid JSON (", simdjson::error_message(err), ")"));
  }
  simdjson::dom::object top;
  if (root.get_object().get(top) != simdjson::SUCCESS) {
    return absl::DataLossError(absl::StrCat(source, ": not a JSON object"));
  }
  Parser p(source);
  Manifest m;
  ASSIGN_OR_RETURN(std::string format, p.Str(top, "format", "format"));
  if (format != kReleaseFormat) return p.Bad("format", absl::StrCat("'", format, "' is not ",
                                                                   std::string(kReleaseFormat)));
  ASSIGN_OR_RETURN(int64_t fv, p.Int(top, "format_version", "format_version"));
  if (fv != kReleaseFormatVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        source, ": format_version ", fv, " is not supported (this grist reads ",
        kReleaseFormatVersion, ")"));
  }
  m.format_version = static_cast<int>(fv);
  ASSIGN_OR_RETURN(m.release_version, p.Str(top, "release_version", "release_version"));
  ASSIGN_OR_RETURN(m.release_id, p.Str(top, "release_id", "release_id"));
  ASSIGN_OR_RETURN(m.grist_version, p.Str(top, "grist_version", "grist_version"));
  RETURN_IF_ERROR(p.Obj(top, "config", "config"));
  RETURN_IF_ERROR(p.Obj(top, "counts", "counts"));
  RETURN_IF_ERROR(RawMembers(padded, source, &m.config_json, &m.counts_json));
  ASSIGN_OR_RETURN(m.config_xxh3_128, p.Hash(top, "config_xxh3_128", "config_xxh3_128"));
  if (Hash128Of(m.config_json) != m.config_xxh3_128) {
    return p.Bad("config_xxh3_128", "does not match the embedded config");
  }
  ASSIGN_OR_RETURN(auto inputs, p.Arr(top, "inputs", "inputs"));
  size_t i = 0;
  for (auto e : inputs) {
    ASSIGN_OR_RETURN(FileInfo f, p.File(e, absl::StrCat("inputs[", i++, "]"), false));
    m.inputs.push_back(std::move(f));
  }
  ASSIGN_OR_RETURN(auto tok, p.Obj(top, "tokenizer", "tokenizer"));
  ASSIGN_OR_RETURN(m.tokenizer.file, p.File(top["tokenizer"], "tokenizer", true));
  ASSIGN_OR_RETURN(m.tokenizer.vocab_size, p.Uint(tok, "vocab_size", "tokenizer.vocab_size"));
  if (m.tokenizer.vocab_size == 0 || m.tokenizer.vocab_size > INT32_MAX) {
    return p.Bad("tokenizer.vocab_size", "out of range");
  }
  for (auto [key, dst] : {std::pair{"bos_id", &m.tokenizer.bos_id},
                          std::pair{"eos_id", &m.tokenizer.eos_id},
                          std::pair{"pad_id", &m.tokenizer.pad_id}}) {
    std::string path = absl::StrCat("tokenizer.", key);
    ASSIGN_OR_RETURN(int64_t v, p.Int(tok, key, path));
    if (v < -1 || v >= static_cast<int64_t>(m.tokenizer.vocab_size)) return p.Bad(path, "out of range");
    *dst = static_cast<int32_t>(v);
  }
  ASSIGN_OR_RETURN(m.tokenizer.model_type, p.Str(tok, "model_type", "tokenizer.model_type"));
  ASSIGN_OR_RETURN(uint64_t seq_len, p.Uint(top, "seq_len", "seq_len"));
  ASSIGN_OR_RETURN(uint64_t sample_tokens, p.Uint(top, "sample_tokens", "sample_tokens"));
  if (seq_len == 0 || seq_len >= kMaxSampleTokens) return p.Bad("seq_len", "out of range");
  if (sample_tokens != seq_len + 1) return p.Bad("sample_tokens", "is not seq_len + 1");
  m.seq_len = static_cast<uint32_t>(seq_len);
  m.sample_tokens = static_cast<uint32_t>(sample_tokens);
  ASSIGN_OR_RETURN(std::string dtype, p.Str(top, "token_dtype", "token_dtype"));
  auto d = ParseTokenDtype(dtype);
  if (!d.ok()) return p.Bad("token_dtype", std::string(d.status().message()));
  m.token_dtype = *d;
  if (m.token_dtype == TokenDtype::kUint16 && m.tokenizer.vocab_size > 65536) {
    return p.Bad("token_dtype", "uint16 cannot hold the vocabulary");
  }
  ASSIGN_OR_RETURN(m.seed, p.Uint(top, "seed", "seed"));
  ASSIGN_OR_RETURN(m.packing, p.Str(top, "packing", "packing"));
  ASSIGN_OR_RETURN(auto splits, p.Obj(top, "splits", "splits"));
  for (auto [key, value] : splits) {
    std::string name(key);
    if (name != kTrainSplit && name != kValidationSplit) {
      return p.Bad(absl::StrCat("splits.", name), "unknown split");
    }
    simdjson::dom::object so;
    if (value.get_object().get(so) != simdjson::SUCCESS) {
      return p.Bad(absl::StrCat("splits.", name), "expected an object");
    }
    SplitInfo s;
    std::string base = absl::StrCat("splits.", name);
    ASSIGN_OR_RETURN(s.samples, p.Uint(so, "samples", base + ".samples"));
    ASSIGN_OR_RETURN(s.tokens, p.Uint(so, "tokens", base + ".tokens"));
    ASSIGN_OR_RETURN(s.padding_tokens, p.Uint(so, "padding_tokens", base + ".padding_tokens"));
    ASSIGN_OR_RETURN(s.documents, p.Uint(so, "documents", base + ".documents"));
    ASSIGN_OR_RETURN(auto shards, p.Arr(so, "shards", base + ".shards"));
    uint64_t next_first = 0, tokens = 0, padding = 0;
    size_t j = 0;
    for (auto e : shards) {
      std::string sb = absl::StrCat(base, ".shards[", j++, "]");
      simdjson::dom::object sho;
      if (e.get_object().get(sho) != simdjson::SUCCESS) return p.Bad(sb, "expected an object");
      ShardInfo sh;
      ASSIGN_OR_RETURN(sh.name, p.RelativePath(sho, "name", sb + ".name"));
      ASSIGN_OR_RETURN(sh.samples, p.Uint(sho, "samples", sb + ".samples"));
      ASSIGN_OR_RETURN(sh.tokens, p.Uint(sho, "tokens", sb + ".tokens"));
      ASSIGN_OR_RETURN(sh.padding_tokens, p.Uint(sho, "padding_tokens", sb + ".padding_tokens"));
      ASSIGN_OR_RETURN(sh.first_sample, p.Uint(sho, "first_sample", sb + ".first_sample"));
      ASSIGN_OR_RETURN(sh.bin, p.File(sho["bin"], sb + ".bin", true));
      ASSIGN_OR_RETURN(sh.idx, p.File(sho["idx"], sb + ".idx", true));
      ASSIGN_OR_RETURN(sh.seg, p.File(sho["seg"], sb + ".seg", true));
      if (sh.bin.path != sh.name + ".bin" || sh.idx.path != sh.name + ".idx" ||
          sh.seg.path != sh.name + ".seg") {
        return p.Bad(sb, "file paths do not match the shard name");
      }
      if (sh.samples > UINT64_MAX / m.sample_tokens ||
          sh.tokens != sh.samples * m.sample_tokens) {
        return p.Bad(sb + ".tokens", "is not samples * sample_tokens");
      }
      if (sh.padding_tokens > sh.tokens) return p.Bad(sb + ".padding_tokens", "exceeds tokens");
      if (sh.first_sample != next_first) {
        return p.Bad(sb + ".first_sample", absl::StrCat("expected ", next_first));
      }
      next_first += sh.samples;
      tokens += sh.tokens;
      padding += sh.padding_tokens;
      s.shards.push_back(std::move(sh));
    }
    if (next_first != s.samples) return p.Bad(base + ".samples", "is not the sum of its shards");
    if (tokens != s.tokens) return p.Bad(base + ".tokens", "is not the sum of its shards");
    if (padding != s.padding_tokens) {
      return p.Bad(base + ".padding_tokens", "is not the sum of its shards");
    }
    simdjson::dom::element de;
    if (so.at_key("documents_file").get(de) == simdjson::SUCCESS) {
      const std::string db = base + ".documents_file";
      simdjson::dom::object dob;
      if (de.get_object().get(dob) != simdjson::SUCCESS) return p.Bad(db, "expected an object");
      DocumentsFileInfo d;
      ASSIGN_OR_RETURN(d.name, p.RelativePath(dob, "name", db + ".name"));
      ASSIGN_OR_RETURN(d.sequences, p.Uint(dob, "sequences", db + ".sequences"));
      ASSIGN_OR_RETURN(d.tokens, p.Uint(dob, "tokens", db + ".tokens"));
      ASSIGN_OR_RETURN(d.eod_appended, p.Uint(dob, "eod_appended", db + ".eod_appended"));
      ASSIGN_OR_RETURN(d.bin, p.File(dob["bin"], db + ".bin", true));
      ASSIGN_OR_RETURN(d.idx, p.File(dob["idx"], db + ".idx", true));
      if (d.bin.path != d.name + ".bin" || d.idx.path != d.name + ".idx") {
        return p.Bad(db, "file paths do not match the name");
      }
      if (d.sequences > s.documents) return p.Bad(db + ".sequences", "exceeds the split's documents");
      if (d.eod_appended > d.sequences) return p.Bad(db + ".eod_appended", "exceeds sequences");
      // The same document tokens as the shards hold (their non-padding positions), plus the EODs.
      if (d.tokens != s.tokens - s.padding_tokens + d.eod_appended) {
        return p.Bad(db + ".tokens", "is not the split's document tokens plus eod_appended");
      }
      if (d.bin.bytes != d.tokens * TokenDtypeSize(m.token_dtype)) {
        return p.Bad(db + ".bin.bytes", "is not tokens * the token dtype's size");
      }
      if (d.idx.bytes != IdxSize(d.sequences, d.sequences + 1)) {
        return p.Bad(db + ".idx.bytes", "is not the MMIDIDX size of its sequences");
      }
      s.documents_file = std::move(d);
    }
    m.splits.emplace(name, std::move(s));
  }
  if (ComputeReleaseId(m) != m.release_id) {
    return p.Bad("release_id", "does not match the config and shard checksums");
  }
  return m;
}

absl::Status WriteManifest(Env* env, const std::string& dir, const Manifest& m) {
  return WriteFileAtomic(env, JoinPath(dir, std::string(kManifestName)), ManifestToJson(m));
}

// ---------------------------------------------------------------------------------------------
// Release

absl::StatusOr<std::unique_ptr<Release>> Release::Open(Env* env, std::string dir,
                                                       ReleaseOpenOptions options) {
  const std::string path = JoinPath(dir, std::string(kManifestName));
  if (!env->FileExists(path)) {
    return absl::NotFoundError(
        absl::StrCat(dir, ": not a release (no ", std::string(kManifestName),
                     "; an unfinished build is never published)"));
  }
  ASSIGN_OR_RETURN(std::string json, ReadFileToString(env, path));
  auto r = std::unique_ptr<Release>(new Release());
  ASSIGN_OR_RETURN(r->manifest_, ParseManifest(json, path));
  r->env_ = env;
  r->dir_ = std::move(dir);
  r->options_ = options;
  return r;
}

Release::~Release() = default;

const std::vector<ShardInfo>& Release::shards(std::string_view split) const {
  static const std::vector<ShardInfo>* const kEmpty = new std::vector<ShardInfo>();
  const SplitInfo* s = manifest_.split(split);
  return s == nullptr ? *kEmpty : s->shards;
}

absl::StatusOr<const ShardReader*> Release::OpenShard(std::string_view split, size_t i) {
  const auto& list = shards(split);
  if (i >= list.size()) {
    return absl::OutOfRangeError(absl::StrCat(dir_, ": split '", std::string(split), "' has ",
                                              list.size(), " shards, no shard ", i));
  }
  std::lock_guard<std::mutex> l(mu_);
  auto key = std::make_pair(std::string(split), i);
  auto it = open_.find(key);
  if (it != open_.end()) return it->second.get();
  ShardReadOptions ro;
  ro.verify_checksums = options_.verify_checksums;
  ASSIGN_OR_RETURN(auto reader, ShardReader::Open(env_, dir_, list[i], manifest_.sample_tokens,
                                                  manifest_.token_dtype, ro));
  const ShardReader* ptr = reader.get();
  open_.emplace(std::move(key), std::move(reader));
  return ptr;
}

std::string Release::TokenizerPath() const { return JoinPath(dir_, manifest_.tokenizer.file.path); }

}  // namespace grist::shard
