#include "ckptio/checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <set>

#include <simdjson.h>

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
  w.Field("version", kManifestVersion);
  w.Field("step", m.step);
  w.Field("world_size", m.world_size);
  w.Field("created_by", m.created_by.empty() ? std::string("grist ") + GRIST_VERSION : m.created_by);
  w.Key("metadata").BeginObject();
  for (const auto& [k, v] : m.metadata) w.Field(k, v);
  w.EndObject();
  w.Key("files").BeginArray();
  for (const ManifestFile& f : m.files) WriteFileRecord(w, f);
  w.EndArray();
  w.EndObject();
  std::string body = w.Take();
  // body ends with "\n}": the checksum member goes last, covering every byte before its key.
  while (!body.empty() && (body.back() == '}' || body.back() == '\n')) body.pop_back();
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
  if (root["version"].get_int64().get(version) || version != kManifestVersion) {
    return Bad(what, "unsupported manifest version");
  }
  Manifest m;
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
  return m;
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

absl::Status PrepareCheckpointDir(Env* env, const std::string& dir) {
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
  ASSIGN_OR_RETURN(auto all, ListCheckpoints(env, root));
  if (all.size() <= static_cast<size_t>(keep_last)) return absl::OkStatus();
  for (size_t i = 0; i + keep_last < all.size(); ++i) {
    RETURN_IF_ERROR(env->RemoveFile(JoinPath(all[i].path, kManifestName)));
    RETURN_IF_ERROR(env->SyncDir(all[i].path));
    RETURN_IF_ERROR(crash::Point(internal::kCrashRetentionAfterUnpublish));
    RETURN_IF_ERROR(env->RemoveAll(all[i].path));
  }
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
