#include "ckptio/checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <set>

#include <simdjson.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ckptio/checkpoint_format.h"
#include "ckptio/internal/crash_points.h"
#include "ckptio/reader.h"
#include "common/crash_point.h"
#include "common/json_writer.h"
#include "common/status_macros.h"
#include "common/sysinfo.h"
#include "common/version.h"

namespace grist::ckptio {
namespace {

absl::Status Bad(const std::string& what, std::string_view why) {
  return absl::DataLossError(absl::StrCat(what, ": bad manifest: ", std::string(why)));
}

bool PlainName(std::string_view n) {
  if (n.empty() || n == "." || n == "..") return false;
  for (char c : n) {
    if (c == '/' || c == '\\' || c == '\0') return false;
  }
  return true;
}

void WriteFileRecord(JsonWriter& w, const ManifestFile& f) {
  w.BeginObject();
  w.Field("rank", f.rank);
  w.Field("name", f.name);
  w.Field("size", f.size);
  w.Field("data_len", f.data_len);
  w.Field("tensors", f.tensors);
  w.Field("data_xxh3", f.data_hash.ToHex());
  w.Field("header_xxh3", Hex64(f.header_hash));
  w.EndObject();
}

absl::StatusOr<ManifestFile> FileRecordFrom(simdjson::dom::element e, const std::string& what) {
  ManifestFile f;
  int64_t rank;
  std::string_view name, dh, hh;
  if (e["rank"].get_int64().get(rank) || rank < 0 || rank > (1 << 24)) return Bad(what, "file rank");
  f.rank = static_cast<int>(rank);
  if (e["name"].get_string().get(name)) return Bad(what, "file name missing");
  if (!PlainName(name)) {
    return Bad(what, absl::StrCat("file name '", std::string(name), "' is not a plain file name"));
  }
  f.name = std::string(name);
  if (e["size"].get_uint64().get(f.size) || e["data_len"].get_uint64().get(f.data_len) ||
      e["tensors"].get_uint64().get(f.tensors) || f.data_len > f.size) {
    return Bad(what, absl::StrCat("sizes of '", f.name, "'"));
  }
  if (e["data_xxh3"].get_string().get(dh) || e["header_xxh3"].get_string().get(hh)) {
    return Bad(what, absl::StrCat("checksums of '", f.name, "' missing"));
  }
  auto h = Hash128::FromHex(dh);
  if (!h.ok()) return Bad(what, "data_xxh3 is not 32 hex digits");
  f.data_hash = *h;
  auto hh128 = Hash128::FromHex(absl::StrCat("0000000000000000", std::string(hh)));
  if (hh.size() != 16 || !hh128.ok()) return Bad(what, "header_xxh3 is not 16 hex digits");
  f.header_hash = hh128->low;
  return f;
}


absl::StatusOr<std::vector<int64_t>> IntList(simdjson::dom::element e, const std::string& what,
                                             const std::string& field) {
  simdjson::dom::array a;
  if (e.get_array().get(a)) return Bad(what, absl::StrCat(field, " is not an array"));
  std::vector<int64_t> v;
  for (auto x : a) {
    int64_t i;
    if (x.get_int64().get(i) || i < 0 || i > (int64_t{1} << 50)) {
      return Bad(what, absl::StrCat(field, " holds a value that is not an integer in [0, 2^50]"));
    }
    v.push_back(i);
    if (v.size() > 64) return Bad(what, absl::StrCat(field, " has more than 64 dimensions"));
  }
  return v;
}

// Product of `v` into `out`; false on overflow past 2^62.
bool Volume(const std::vector<int64_t>& v, uint64_t* out) {
  unsigned __int128 p = 1;
  for (int64_t x : v) {
    p *= static_cast<uint64_t>(x);
    if (p > (static_cast<unsigned __int128>(1) << 62)) return false;
  }
  *out = static_cast<uint64_t>(p);
  return true;
}

bool BoxesOverlap(const ShardEntry& a, const ShardEntry& b) {
  for (size_t d = 0; d < a.offsets.size(); ++d) {
    if (a.offsets[d] + a.lengths[d] <= b.offsets[d] || b.offsets[d] + b.lengths[d] <= a.offsets[d]) {
      return false;
    }
  }
  return true;
}

std::string BoxText(const ShardEntry& s) {
  std::string t = "[";
  for (size_t d = 0; d < s.offsets.size(); ++d) {
    absl::StrAppend(&t, d ? ", " : "", s.offsets[d], ":", s.offsets[d] + s.lengths[d]);
  }
  return t + "]";
}

absl::StatusOr<std::vector<TensorEntry>> IndexFrom(simdjson::dom::array index, const Manifest& m,
                                                   const std::string& what) {
  std::vector<TensorEntry> out;
  std::set<std::string> names;
  // Per file: every byte range any shard claims, to refuse two shards sharing bytes.
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> claimed(m.files.size());
  for (auto e : index) {
    TensorEntry t;
    std::string_view name, kind, dtype;
    if (e["name"].get_string().get(name) || name.empty()) return Bad(what, "a tensor without a name");
    t.name = std::string(name);
    const std::string tw = absl::StrCat("tensor '", t.name, "'");
    if (!names.insert(t.name).second) return Bad(what, absl::StrCat(tw, " listed twice"));
    if (!e["kind"].get_string().get(kind)) {
      if (kind != "bytes" && kind != "tensor") return Bad(what, absl::StrCat(tw, ": unknown kind"));
      t.bytes = kind == "bytes";
    }
    uint64_t volume = 0;
    size_t dsize = 1;
    if (!t.bytes) {
      if (e["dtype"].get_string().get(dtype)) return Bad(what, absl::StrCat(tw, ": no dtype"));
      auto d = DTypeFromName(dtype);
      if (!d) return Bad(what, absl::StrCat(tw, ": unknown dtype '", std::string(dtype), "'"));
      t.dtype = *d;
      dsize = DTypeSize(t.dtype);
      simdjson::dom::element shape;
      if (e["shape"].get(shape)) return Bad(what, absl::StrCat(tw, ": no shape"));
      ASSIGN_OR_RETURN(t.shape, IntList(shape, what, absl::StrCat(tw, " shape")));
      if (!Volume(t.shape, &volume)) return Bad(what, absl::StrCat(tw, ": shape overflows"));
    }
    simdjson::dom::array shards;
    if (e["shards"].get_array().get(shards)) return Bad(what, absl::StrCat(tw, ": shards is not an array"));
    uint64_t covered = 0;
    for (auto se : shards) {
      ShardEntry s;
      int64_t rank;
      if (se["rank"].get_int64().get(rank) || rank < 0 || rank >= m.world_size) {
        return Bad(what, absl::StrCat(tw, ": a shard's rank is missing or not in [0, world_size)"));
      }
      s.rank = static_cast<int>(rank);
      if (se["begin"].get_uint64().get(s.begin) || se["end"].get_uint64().get(s.end) || s.end < s.begin) {
        return Bad(what, absl::StrCat(tw, ": a shard's byte range is missing or reversed"));
      }
      uint64_t svol = s.end - s.begin;
      if (!t.bytes) {
        simdjson::dom::element offs, lens;
        if (se["offsets"].get(offs) || se["lengths"].get(lens)) {
          return Bad(what, absl::StrCat(tw, ": a shard without offsets/lengths"));
        }
        ASSIGN_OR_RETURN(s.offsets, IntList(offs, what, absl::StrCat(tw, " offsets")));
        ASSIGN_OR_RETURN(s.lengths, IntList(lens, what, absl::StrCat(tw, " lengths")));
        if (s.offsets.size() != t.shape.size() || s.lengths.size() != t.shape.size()) {
          return Bad(what, absl::StrCat(tw, ": a shard's rank (dimensions) differs from the shape's"));
        }
        for (size_t d = 0; d < t.shape.size(); ++d) {
          if (s.offsets[d] + s.lengths[d] > t.shape[d]) {
            return Bad(what, absl::StrCat(tw, ": shard ", BoxText(s), " lies outside the shape"));
          }
        }
        if (!Volume(s.lengths, &svol)) return Bad(what, absl::StrCat(tw, ": shard size overflows"));
        if (s.end - s.begin != svol * dsize) {
          return Bad(what, absl::StrCat(tw, ": shard ", BoxText(s), " has ", s.end - s.begin,
                                        " bytes, its size needs ", svol * dsize));
        }
        covered += svol;
      }
      const ManifestFile& f = m.files[static_cast<size_t>(s.rank)];
      if (s.end > f.data_len) {
        return Bad(what, absl::StrCat(tw, ": bytes [", s.begin, ", ", s.end, ") lie beyond the data of ",
                                      f.name, " (", f.data_len, " bytes)"));
      }
      if (s.end > s.begin) claimed[static_cast<size_t>(s.rank)].emplace_back(s.begin, s.end);
      t.shards.push_back(std::move(s));
    }
    if (t.bytes) {
      if (t.shards.size() != 1) return Bad(what, absl::StrCat(tw, ": a byte item needs exactly one shard"));
    } else {
      // Boxes sorted by their first offset; only those starting before one's end can overlap it.
      std::vector<const ShardEntry*> live;
      for (const ShardEntry& s : t.shards) {
        uint64_t v = 0;
        if (Volume(s.lengths, &v) && v > 0) live.push_back(&s);
      }
      if (!t.shape.empty()) {
        std::sort(live.begin(), live.end(), [](const ShardEntry* a, const ShardEntry* b) {
          return a->offsets[0] < b->offsets[0];
        });
      }
      for (size_t i = 0; i < live.size(); ++i) {
        for (size_t j = i + 1; j < live.size(); ++j) {
          if (!t.shape.empty() && live[j]->offsets[0] >= live[i]->offsets[0] + live[i]->lengths[0]) break;
          if (BoxesOverlap(*live[i], *live[j])) {
            return Bad(what, absl::StrCat(tw, ": shards ", BoxText(*live[i]), " and ", BoxText(*live[j]),
                                          " overlap"));
          }
        }
      }
      if (covered != volume) {
        return Bad(what, absl::StrCat(tw, ": shards cover ", covered, " of its ", volume,
                                      " elements (a hole)"));
      }
    }
    out.push_back(std::move(t));
  }
  for (size_t r = 0; r < claimed.size(); ++r) {
    auto& c = claimed[r];
    std::sort(c.begin(), c.end());
    for (size_t i = 1; i < c.size(); ++i) {
      if (c[i].first < c[i - 1].second) {
        return Bad(what, absl::StrCat("two shards share bytes [", c[i].first, ", ", c[i - 1].second,
                                      ") of ", m.files[r].name));
      }
    }
  }
  return out;
}

}  // namespace

std::string RankFileName(int rank) { return absl::StrFormat("rank-%05d.safetensors", rank); }

ManifestFile ToManifestFile(const FileResult& r, int rank) {
  ManifestFile f;
  f.rank = rank;
  f.name = BaseName(r.path);
  f.size = r.size;
  f.data_len = r.data_len;
  f.tensors = r.tensors;
  f.data_hash = r.data_hash;
  f.header_hash = r.header_hash;
  return f;
}

std::string ManifestJson(const Manifest& m) {
  JsonWriter w(2);
  w.BeginObject();
  w.Field("format", kManifestFormat);
  w.Field("version", m.version);
  w.Field("step", m.step);
  w.Field("world_size", m.world_size);
  w.Field("created_by", m.created_by.empty() ? std::string("grist ") + GRIST_VERSION : m.created_by);
  w.Key("metadata").BeginObject();
  for (const auto& [k, v] : m.metadata) w.Field(k, v);
  w.EndObject();
  w.Key("files").BeginArray();
  for (const ManifestFile& f : m.files) WriteFileRecord(w, f);
  w.EndArray();
  if (m.version >= 2) w.Key("tensors").Raw(TensorIndexJson(m.tensors));
  if (m.version >= 2 && !m.structure.empty()) w.Key("structure").Raw(m.structure);
  w.EndObject();
  std::string body = w.Take();
  // body ends with "\n}": the checksum member goes last, covering every byte before its key.
  // Drop exactly the object's closing brace (members may end in braces themselves).
  while (!body.empty() && body.back() == '\n') body.pop_back();
  if (!body.empty() && body.back() == '}') body.pop_back();
  while (!body.empty() && body.back() == '\n') body.pop_back();
  body += ",\n  ";
  uint64_t h = Hash64(body);
  absl::StrAppend(&body, std::string(kManifestChecksumKey), ": \"", Hex64(h), "\"\n}\n");
  return body;
}

absl::StatusOr<Manifest> ParseManifest(std::string_view text, const std::string& what) {
  size_t pos = text.rfind(kManifestChecksumKey);
  if (pos == std::string_view::npos) return Bad(what, "no manifest_xxh3 checksum");
  const uint64_t want = Hash64(text.substr(0, pos));
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (auto err = parser.parse(simdjson::padded_string(text)).get(root); err) {
    return Bad(what, absl::StrCat("JSON: ", simdjson::error_message(err)));
  }
  std::string_view sum, format, created;
  if (root["manifest_xxh3"].get_string().get(sum) || sum != Hex64(want)) {
    return Bad(what, "manifest_xxh3 checksum mismatch");
  }
  int64_t version, world;
  if (root["format"].get_string().get(format) || format != kManifestFormat) {
    return Bad(what, "not a grist checkpoint manifest");
  }
  if (root["version"].get_int64().get(version)) return Bad(what, "no version");
  if (version > kManifestVersionCurrent || version < kManifestVersionOldest) {
    return Bad(what, absl::StrCat("manifest version ", version, " is not one this grist reads (",
                                  kManifestVersionOldest, " to ", kManifestVersionCurrent,
                                  "): a newer grist wrote it; upgrade grist to read it"));
  }
  Manifest m;
  m.version = static_cast<int>(version);
  if (root["step"].get_int64().get(m.step) || m.step < 0) return Bad(what, "step");
  if (root["world_size"].get_int64().get(world) || world < 1 || world > (1 << 24)) {
    return Bad(what, "world_size");
  }
  m.world_size = static_cast<int>(world);
  if (!root["created_by"].get_string().get(created)) m.created_by = std::string(created);
  simdjson::dom::object meta;
  if (root["metadata"].get_object().get(meta)) return Bad(what, "metadata is not an object");
  for (auto kv : meta) {
    std::string_view v;
    if (kv.value.get_string().get(v)) return Bad(what, "metadata values must be strings");
    m.metadata.emplace_back(std::string(kv.key), std::string(v));
  }
  simdjson::dom::array files;
  if (root["files"].get_array().get(files)) return Bad(what, "files is not an array");
  std::set<int> ranks;
  std::set<std::string> names;
  for (auto e : files) {
    ASSIGN_OR_RETURN(ManifestFile f, FileRecordFrom(e, what));
    if (f.rank >= m.world_size || !ranks.insert(f.rank).second) {
      return Bad(what, absl::StrCat("rank ", f.rank, " out of range or listed twice"));
    }
    if (!names.insert(f.name).second || f.name == kManifestName) {
      return Bad(what, absl::StrCat("file name '", f.name, "' listed twice or reserved"));
    }
    m.files.push_back(std::move(f));
  }
  if (static_cast<int>(m.files.size()) != m.world_size) {
    return Bad(what, absl::StrCat(m.files.size(), " files for world_size ", m.world_size));
  }
  std::sort(m.files.begin(), m.files.end(),
            [](const ManifestFile& a, const ManifestFile& b) { return a.rank < b.rank; });
  if (m.version >= 2) {
    simdjson::dom::array index;
    if (root["tensors"].get_array().get(index)) return Bad(what, "tensors is not an array");
    ASSIGN_OR_RETURN(m.tensors, IndexFrom(index, m, what));
    simdjson::dom::element structure;
    if (!root["structure"].get(structure)) m.structure = simdjson::minify(structure);
  }
  return m;
}

std::string TensorIndexJson(const std::vector<TensorEntry>& tensors) {
  JsonWriter w(0);
  auto ints = [&w](const std::vector<int64_t>& v) {
    w.BeginArray();
    for (int64_t x : v) w.Int(x);
    w.EndArray();
  };
  w.BeginArray();
  for (const TensorEntry& t : tensors) {
    w.BeginObject().Field("name", t.name);
    if (t.bytes) {
      w.Field("kind", "bytes");
    } else {
      w.Field("dtype", DTypeName(t.dtype));
      w.Key("shape");
      ints(t.shape);
    }
    w.Key("shards").BeginArray();
    for (const ShardEntry& s : t.shards) {
      w.BeginObject().Field("rank", s.rank);
      if (!t.bytes) {
        w.Key("offsets");
        ints(s.offsets);
        w.Key("lengths");
        ints(s.lengths);
      }
      w.Field("begin", s.begin).Field("end", s.end).EndObject();
    }
    w.EndArray().EndObject();
  }
  w.EndArray();
  return w.Take();
}

absl::StatusOr<std::vector<TensorEntry>> ParseTensorIndex(std::string_view json, const Manifest& m,
                                                          const std::string& what) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (auto err = parser.parse(simdjson::padded_string(json)).get(root); err) {
    return Bad(what, absl::StrCat("tensors JSON: ", simdjson::error_message(err)));
  }
  simdjson::dom::array index;
  if (root.get_array().get(index)) return Bad(what, "tensors is not an array");
  return IndexFrom(index, m, what);
}

absl::StatusOr<Manifest> ReadManifest(Env* env, const std::string& dir) {
  const std::string path = JoinPath(dir, kManifestName);
  if (!env->FileExists(path)) {
    return absl::NotFoundError(absl::StrCat(dir, " is not a published checkpoint (no ", std::string(kManifestName), ")"));
  }
  ASSIGN_OR_RETURN(uint64_t size, env->GetFileSize(path));
  if (size > (64ull << 20)) return Bad(path, "larger than 64 MiB");
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(env, path));
  return ParseManifest(text, path);
}

std::string FileRecordJson(const ManifestFile& f) {
  JsonWriter w(0);
  WriteFileRecord(w, f);
  return w.Take();
}

absl::StatusOr<ManifestFile> ParseFileRecord(std::string_view json) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (auto err = parser.parse(simdjson::padded_string(json)).get(root); err) {
    return absl::InvalidArgumentError(absl::StrCat("file record JSON: ", simdjson::error_message(err)));
  }
  return FileRecordFrom(root, "file record");
}

namespace {

constexpr char kDeletingPrefix[] = ".deleting.";

bool GoneOrOk(const absl::Status& s) { return s.ok() || absl::IsNotFound(s); }

// Deletes a hidden retention victim file by file (a concurrent sweep may be deleting it too, so
// what is already gone is no error).
absl::Status RemoveHidden(Env* env, const std::string& hidden, bool crash_points) {
  auto names = env->ListDir(hidden);
  if (!names.ok()) return GoneOrOk(names.status()) ? absl::OkStatus() : names.status();
  bool first = true;
  for (const std::string& n : *names) {
    const std::string path = JoinPath(hidden, n);
    absl::Status s = env->IsDirectory(path) ? env->RemoveAll(path) : env->RemoveFile(path);
    if (!GoneOrOk(s)) return s;
    if (first && crash_points) RETURN_IF_ERROR(crash::Point(internal::kCrashRetentionDuringRemove));
    first = false;
  }
  absl::Status s = env->RemoveAll(hidden);
  return GoneOrOk(s) ? absl::OkStatus() : s;
}

}  // namespace

absl::Status SweepRetentionLeftovers(Env* env, const std::string& root) {
  if (!env->IsDirectory(root)) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::vector<std::string> names, env->ListDir(root));
  bool removed = false;
  for (const std::string& n : names) {
    if (!absl::StartsWith(n, kDeletingPrefix)) continue;
    RETURN_IF_ERROR(RemoveHidden(env, JoinPath(root, n), /*crash_points=*/false));
    removed = true;
  }
  return removed ? env->SyncDir(root) : absl::OkStatus();
}

absl::Status PrepareCheckpointDir(Env* env, const std::string& dir) {
  // The writer's open: what a retention pass killed midway left beside this folder goes first.
  RETURN_IF_ERROR(SweepRetentionLeftovers(env, DirName(dir)));
  if (env->FileExists(JoinPath(dir, kManifestName))) {
    return absl::AlreadyExistsError(absl::StrCat(dir, " is already a published checkpoint"));
  }
  if (env->IsDirectory(dir)) RETURN_IF_ERROR(env->RemoveAll(dir));  // a torn save
  return env->CreateDirs(dir);
}

absl::Status PublishCheckpoint(Env* env, const std::string& dir, const Manifest& m) {
  if (static_cast<int>(m.files.size()) != m.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("publishing ", dir, ": ", m.files.size(), " files for world_size ", m.world_size));
  }
  for (const ManifestFile& f : m.files) {
    if (!PlainName(f.name)) return absl::InvalidArgumentError(absl::StrCat("bad file name '", f.name, "'"));
    ASSIGN_OR_RETURN(uint64_t size, env->GetFileSize(JoinPath(dir, f.name)));
    if (size != f.size) {
      return absl::DataLossError(absl::StrCat("publishing ", dir, ": ", f.name, " has ", size,
                                              " bytes, expected ", f.size));
    }
  }
  // As WriteFileAtomic (temporary name, fsync, rename, fsync of `dir`), with the crash points
  // between the steps (common/crash_point.h).
  const std::string path = JoinPath(dir, kManifestName);
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  absl::Status s = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> f, env->NewWritableFile(tmp));
    RETURN_IF_ERROR(f->Append(ManifestJson(m)));
    RETURN_IF_ERROR(f->Sync());
    RETURN_IF_ERROR(f->Close());
    RETURN_IF_ERROR(crash::Point(internal::kCrashBeforeManifestRename));
    return env->RenameFile(tmp, path);
  }();
  if (!s.ok()) {
    (void)env->RemoveFile(tmp);
    return s;
  }
  RETURN_IF_ERROR(crash::Point(internal::kCrashAfterManifestRename));
  RETURN_IF_ERROR(env->SyncDir(dir));
  RETURN_IF_ERROR(crash::Point(internal::kCrashBeforeParentFsync));
  return env->SyncDir(DirName(dir));
}

int64_t StepFromName(const std::string& dir) {
  std::string base = BaseName(dir);
  size_t i = base.size();
  while (i > 0 && base[i - 1] >= '0' && base[i - 1] <= '9') --i;
  if (i == base.size() || base.size() - i > 18) return -1;
  return std::stoll(base.substr(i));
}

absl::StatusOr<std::vector<PublishedCheckpoint>> ListCheckpoints(Env* env, const std::string& root) {
  std::vector<PublishedCheckpoint> out;
  if (!env->IsDirectory(root)) return out;
  ASSIGN_OR_RETURN(std::vector<std::string> names, env->ListDir(root));
  for (const std::string& n : names) {
    if (n.empty() || n[0] == '.') continue;  // hidden: a retention victim being deleted
    std::string dir = JoinPath(root, n);
    if (!env->FileExists(JoinPath(dir, kManifestName))) continue;
    auto m = ReadManifest(env, dir);
    if (!m.ok()) continue;  // a damaged manifest is not a published checkpoint
    out.push_back({dir, m->step});
  }
  std::sort(out.begin(), out.end(), [](const PublishedCheckpoint& a, const PublishedCheckpoint& b) {
    return a.step != b.step ? a.step < b.step : a.path < b.path;
  });
  return out;
}

absl::StatusOr<std::string> LatestCheckpoint(Env* env, const std::string& root, bool verify) {
  // Best effort: a read-only root, or a writer sweeping at the same time, is no reason to fail.
  (void)SweepRetentionLeftovers(env, root);
  ASSIGN_OR_RETURN(auto all, ListCheckpoints(env, root));
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    if (!verify) return it->path;
    ReadOptions ro;
    ro.env = env;
    ro.pin_for_cuda = false;
    if (VerifyCheckpoint(it->path, ro).ok()) return it->path;
  }
  return absl::NotFoundError(absl::StrCat("no published checkpoint under ", root));
}

absl::Status ApplyRetention(Env* env, const std::string& root, int keep_last) {
  if (keep_last <= 0) return absl::OkStatus();
  RETURN_IF_ERROR(SweepRetentionLeftovers(env, root));
  ASSIGN_OR_RETURN(auto all, ListCheckpoints(env, root));
  if (all.size() <= static_cast<size_t>(keep_last)) return absl::OkStatus();
  // Unpublish every victim at once, atomically each: renamed to a hidden name (which no reader
  // lists), then one fsync of the parent makes the renames durable. Only then are the files
  // deleted; a kill anywhere after leaves hidden folders that the next writer open, retention
  // pass or latest() sweeps away.
  std::vector<std::string> hidden;
  for (size_t i = 0; i + keep_last < all.size(); ++i) {
    hidden.push_back(JoinPath(root, absl::StrCat(kDeletingPrefix, BaseName(all[i].path))));
    RETURN_IF_ERROR(env->RenameFile(all[i].path, hidden.back()));
  }
  RETURN_IF_ERROR(env->SyncDir(root));
  RETURN_IF_ERROR(crash::Point(internal::kCrashRetentionAfterHide));
  for (size_t i = 0; i < hidden.size(); ++i) {
    RETURN_IF_ERROR(RemoveHidden(env, hidden[i], /*crash_points=*/i == 0));
  }
  RETURN_IF_ERROR(crash::Point(internal::kCrashRetentionBeforeFsync));
  return env->SyncDir(root);
}

struct SaveShared {
  std::atomic<bool> done{false};
  absl::Status status;
  FileResult file;
};

SaveHandle::~SaveHandle() {
  if (thread_.joinable()) thread_.join();
}

absl::Status SaveHandle::Wait() {
  if (!joined_) {
    thread_.join();
    joined_ = true;
    file_ = shared_->file;
  }
  return shared_->status;
}

bool SaveHandle::Done() const { return shared_->done.load(); }

absl::StatusOr<std::unique_ptr<SaveHandle>> SaveCheckpoint(FileWriter* writer, const std::string& dir,
                                                           const std::vector<HostTensor>& tensors,
                                                           Metadata file_metadata,
                                                           const SaveOptions& options) {
  Stopwatch blocked;
  Env* env = writer->options().env ? writer->options().env : Env::Default();
  RETURN_IF_ERROR(PrepareCheckpointDir(env, dir));
  ASSIGN_OR_RETURN(std::shared_ptr<PendingFile> pending,
                   options.snapshot
                       ? writer->Save(JoinPath(dir, RankFileName(0)), tensors, std::move(file_metadata))
                       : writer->SaveInPlace(JoinPath(dir, RankFileName(0)), tensors,
                                             std::move(file_metadata)));
  std::unique_ptr<SaveHandle> h(new SaveHandle());
  h->shared_ = std::make_shared<SaveShared>();
  Manifest m;
  m.step = options.step >= 0 ? options.step : std::max<int64_t>(0, StepFromName(dir));
  m.world_size = 1;
  m.metadata = options.metadata;
  m.version = kManifestVersionCurrent;
  uint64_t at = 0;  // PlanFile lays tensors out contiguously, in order
  for (const HostTensor& t : tensors) {
    TensorEntry e;
    e.name = t.spec.name;
    e.dtype = t.spec.dtype;
    e.shape = t.spec.shape;
    uint64_t n = DTypeSize(t.spec.dtype);
    for (int64_t d : t.spec.shape) n *= static_cast<uint64_t>(d);
    e.shards.push_back({0, std::vector<int64_t>(e.shape.size(), 0), e.shape, at, at + n});
    at += n;
    m.tensors.push_back(std::move(e));
  }
  const int keep_last = options.keep_last;
  h->thread_ = std::thread([shared = h->shared_, pending, env, dir, m, keep_last]() mutable {
    auto r = pending->Wait();
    absl::Status s = r.status();
    if (s.ok()) {
      shared->file = *r;
      m.files.push_back(ToManifestFile(*r, 0));
      s = PublishCheckpoint(env, dir, m);
    }
    if (s.ok()) s = ApplyRetention(env, DirName(dir), keep_last);
    shared->status = s;
    shared->done.store(true);
  });
  h->blocked_seconds_ = blocked.Seconds();
  return h;
}

}  // namespace grist::ckptio
