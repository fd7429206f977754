#include "release/internal/stage_record.h"

#include <simdjson.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <span>

#include "absl/strings/str_cat.h"
#include "common/json_writer.h"
#include "common/status_macros.h"
#include "common/thread_pool.h"

namespace grist::release::internal {
namespace {

void ListFilesUnder(Env* env, const std::string& base, const std::string& rel,
                    std::vector<std::string>* out) {
  const std::string path = rel.empty() ? base : JoinPath(base, rel);
  if (!env->IsDirectory(path)) {
    if (env->FileExists(path)) out->push_back(rel);
    return;
  }
  auto names = env->ListDir(path);
  if (!names.ok()) return;
  for (const std::string& n : *names) ListFilesUnder(env, base, rel.empty() ? n : JoinPath(rel, n), out);
}

// Why `now` differs from `recorded` (the first difference), empty when they are equal.
std::string OutputsDiffer(const std::vector<StageOutput>& recorded, const std::vector<StageOutput>& now) {
  std::map<std::string, const StageOutput*> have;
  for (const StageOutput& o : now) have[o.path] = &o;
  for (const StageOutput& o : recorded) {
    auto it = have.find(o.path);
    if (it == have.end()) return absl::StrCat(o.path, " is missing");
    if (it->second->bytes != o.bytes) {
      return absl::StrCat(o.path, " has ", it->second->bytes, " bytes, the record says ", o.bytes);
    }
    if (it->second->xxh3_128_pieces != o.xxh3_128_pieces) {
      return absl::StrCat(o.path, " does not match its checksum");
    }
    have.erase(it);
  }
  if (!have.empty()) return absl::StrCat(have.begin()->first, " is not in the record");
  return "";
}

// The checksum of a file from its pieces' digests (stage_record.h).
std::string PiecesChecksum(std::span<const Hash128> pieces) {
  Hasher128 h;
  for (const Hash128& d : pieces) {
    unsigned char be[16];
    for (int b = 0; b < 8; ++b) {
      be[b] = static_cast<unsigned char>(d.high >> (56 - 8 * b));
      be[8 + b] = static_cast<unsigned char>(d.low >> (56 - 8 * b));
    }
    h.Update(be, sizeof(be));
  }
  return h.Digest().ToHex();
}

}  // namespace

absl::StatusOr<std::vector<StageOutput>> StageOutputs(Env* env, const std::string& work,
                                                      const std::string& output_root, int threads,
                                                      FileSums* sums) {
  const std::string root = JoinPath(work, output_root);
  std::vector<std::string> rels;
  ListFilesUnder(env, root, "", &rels);
  std::sort(rels.begin(), rels.end());
  std::vector<StageOutput> out(rels.size());
  std::vector<std::string> paths(rels.size());
  // Every piece of every file is one item, so that one large file (a stage's single part) is read
  // and hashed by every thread, not by one.
  struct Piece {
    size_t file;
    uint64_t offset, bytes;
  };
  std::vector<Piece> pieces;
  std::vector<size_t> first_piece(rels.size() + 1);
  std::vector<FileSums::Seen> seen(rels.size());
  for (size_t i = 0; i < rels.size(); ++i) {
    const std::string& rel = rels[i];
    paths[i] = rel.empty() ? root : JoinPath(root, rel);
    out[i].path = rel.empty() ? output_root : JoinPath(output_root, rel);
    first_piece[i] = pieces.size();
    if (sums != nullptr) {
      out[i].xxh3_128_pieces = sums->Find(kChecksumKey, paths[i], &seen[i]);
      if (!out[i].xxh3_128_pieces.empty()) {  // remembered for this very stat: not read again
        out[i].bytes = seen[i].stat->size;
        continue;
      }
    }
    ASSIGN_OR_RETURN(out[i].bytes, env->GetFileSize(paths[i]));
    for (uint64_t off = 0; off < out[i].bytes; off += kChecksumPieceBytes) {
      pieces.push_back({i, off, std::min(kChecksumPieceBytes, out[i].bytes - off)});
    }
  }
  first_piece[rels.size()] = pieces.size();
  std::vector<Hash128> digests(pieces.size());
  RETURN_IF_ERROR(ParallelForThreads(threads, pieces.size(), [&](size_t k) -> absl::Status {
    const Piece& p = pieces[k];
    ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> f, env->NewRandomAccessFile(paths[p.file]));
    // One buffer per thread for the whole pass: fresh pages for every piece would cost more
    // than the hashing on some VMs.
    thread_local std::vector<char> buf;
    buf.resize(1 << 20);
    Hasher128 h;
    for (uint64_t done = 0; done < p.bytes;) {
      const size_t want = static_cast<size_t>(std::min<uint64_t>(buf.size(), p.bytes - done));
      ASSIGN_OR_RETURN(size_t n, f->ReadAt(p.offset + done, buf.data(), want));
      if (n == 0) {
        return absl::DataLossError(absl::StrCat(paths[p.file], ": ended at byte ",
                                                p.offset + done, " while hashing it (it had ",
                                                out[p.file].bytes, " bytes)"));
      }
      h.Update(buf.data(), n);
      done += n;
    }
    digests[k] = h.Digest();
    return absl::OkStatus();
  }));
  const std::span<const Hash128> all(digests);
  for (size_t i = 0; i < rels.size(); ++i) {
    if (!out[i].xxh3_128_pieces.empty()) continue;
    out[i].xxh3_128_pieces =
        PiecesChecksum(all.subspan(first_piece[i], first_piece[i + 1] - first_piece[i]));
    // Remembered only with the size it was read at: a file that grew under the hashing has
    // another stat.
    if (sums != nullptr && seen[i].stat && seen[i].stat->size == out[i].bytes) {
      sums->Remember(kChecksumKey, paths[i], seen[i], out[i].xxh3_128_pieces);
    }
  }
  return out;
}

namespace {

// The record's "outputs" array (docs/formats/build.md).
std::string StageOutputsJson(const std::vector<StageOutput>& outputs) {
  JsonWriter w(0);
  w.BeginArray();
  for (const StageOutput& o : outputs) {
    w.BeginObject().Field("path", o.path).Field("bytes", o.bytes);
    w.Field(kChecksumKey, o.xxh3_128_pieces);
    w.EndObject();
  }
  w.EndArray();
  return w.Take();
}

}  // namespace

std::string RecordJson(const Hash128& config_hash, const StageRecord& r) {
  JsonWriter w(2);
  const StageSummary& s = r.summary;
  w.BeginObject();
  w.Field("config_xxh3_128", config_hash.ToHex()).Field("stage", s.name);
  w.Field("upstream_xxh3_128", r.upstream);
  w.Field("docs_in", s.docs_in).Field("docs_out", s.docs_out);
  w.Field("docs_rejected", s.docs_rejected).Field("docs_removed", s.docs_removed);
  w.Field("bytes_in", s.bytes_in).Field("tokens", s.tokens).Field("samples", s.samples);
  w.Field("seconds", s.seconds).Field("note", s.note).Field("report", r.report_json);
  w.Key("outputs").Raw(StageOutputsJson(r.outputs));
  w.EndObject();
  return w.Take();
}

std::optional<std::string> RecordConfig(Env* env, const std::string& path) {
  auto text = ReadFileToString(env, path);
  if (!text.ok()) return std::nullopt;
  simdjson::dom::parser p;
  simdjson::dom::element e;
  simdjson::padded_string ps(*text);
  std::string_view h;
  if (p.parse(ps).get(e) != simdjson::SUCCESS || e["config_xxh3_128"].get(h) != simdjson::SUCCESS) {
    return std::nullopt;
  }
  return std::string(h);
}

std::string PackRecordJson(const Hash128& config_hash, const std::string& upstream,
                           const std::string& release_id) {
  JsonWriter w(2);
  w.BeginObject().Field("config_xxh3_128", config_hash.ToHex()).Field("stage", "pack");
  w.Field("upstream_xxh3_128", upstream).Field("release_id", release_id).EndObject();
  return w.Take() + "\n";
}

std::optional<std::string> PackRecordRelease(Env* env, const std::string& path,
                                             const Hash128& config_hash,
                                             const std::string& upstream) {
  auto text = ReadFileToString(env, path);
  if (!text.ok()) return std::nullopt;
  simdjson::dom::parser p;
  simdjson::dom::element e;
  simdjson::padded_string ps(*text);
  std::string_view config, stage, up, id;
  if (p.parse(ps).get(e) != simdjson::SUCCESS ||
      e["config_xxh3_128"].get(config) != simdjson::SUCCESS || config != config_hash.ToHex() ||
      e["stage"].get(stage) != simdjson::SUCCESS || stage != "pack" ||
      e["upstream_xxh3_128"].get(up) != simdjson::SUCCESS || up != upstream ||
      e["release_id"].get(id) != simdjson::SUCCESS || id.empty()) {
    return std::nullopt;
  }
  return std::string(id);
}

std::optional<StageRecord> LoadRecord(Env* env, const std::string& path, const Hash128& hash,
                                      const std::string& upstream, const std::string& output_root,
                                      int threads, std::string* stale, FileSums* sums) {
  auto text = ReadFileToString(env, path);
  if (!text.ok()) return std::nullopt;
  const std::string work = DirName(DirName(path));
  auto damaged = [&](const std::string& why) -> std::optional<StageRecord> {
    if (stale != nullptr) {
      *stale = why;
    } else {
      std::fprintf(stderr, "build: %s: %s; the stage runs again\n", path.c_str(), why.c_str());
    }
    return std::nullopt;
  };
  simdjson::dom::parser p;
  simdjson::dom::element e;
  simdjson::padded_string ps(*text);
  if (p.parse(ps).get(e) != simdjson::SUCCESS) return damaged("not a valid stage record");
  std::string_view h;
  if (e["config_xxh3_128"].get(h) != simdjson::SUCCESS) return damaged("no config hash");
  if (h != hash.ToHex()) return std::nullopt;
  std::string_view up;
  if (e["upstream_xxh3_128"].get(up) != simdjson::SUCCESS) {
    return damaged("an earlier grist's record, without a checksum of what the stage read");
  }
  if (up != upstream) {
    return damaged("what the stage read has changed since it ran (the config's inputs, its "
                   "tokenizer model, or the outputs of a stage before it)");
  }
  StageRecord r;
  r.upstream = std::string(up);
  StageSummary& s = r.summary;
  std::string_view sv;
  if (e["stage"].get(sv) != simdjson::SUCCESS) return std::nullopt;
  s.name = std::string(sv);
  for (auto [k, dst] : {std::pair{"docs_in", &s.docs_in}, std::pair{"docs_out", &s.docs_out},
                        std::pair{"docs_rejected", &s.docs_rejected},
                        std::pair{"docs_removed", &s.docs_removed},
                        std::pair{"bytes_in", &s.bytes_in}, std::pair{"tokens", &s.tokens},
                        std::pair{"samples", &s.samples}}) {
    if (e[k].get(*dst) != simdjson::SUCCESS) return std::nullopt;
  }
  if (e["seconds"].get(s.seconds) != simdjson::SUCCESS) return std::nullopt;
  if (e["note"].get(sv) != simdjson::SUCCESS) return std::nullopt;
  s.note = std::string(sv);
  if (e["report"].get(sv) != simdjson::SUCCESS) return std::nullopt;
  r.report_json = std::string(sv);
  simdjson::dom::array outputs;
  if (e["outputs"].get(outputs) != simdjson::SUCCESS) return damaged("no output checksums");
  std::vector<StageOutput> recorded;
  for (simdjson::dom::element o : outputs) {
    StageOutput x;
    std::string_view pth, hx;
    if (o[kChecksumKey].error() == simdjson::NO_SUCH_FIELD &&
        o["xxh3_128"].error() == simdjson::SUCCESS) {
      return damaged("its outputs' checksums are an earlier grist's (whole-file xxh3_128)");
    }
    if (o["path"].get(pth) != simdjson::SUCCESS || o["bytes"].get(x.bytes) != simdjson::SUCCESS ||
        o[kChecksumKey].get(hx) != simdjson::SUCCESS) {
      return damaged("a bad entry in 'outputs'");
    }
    x.path = std::string(pth);
    x.xxh3_128_pieces = std::string(hx);
    recorded.push_back(std::move(x));
  }
  auto now = StageOutputs(env, work, output_root, threads, sums);
  if (!now.ok()) return damaged(std::string(now.status().message()));
  if (std::string why = OutputsDiffer(recorded, *now); !why.empty()) return damaged(why);
  r.outputs = std::move(*now);
  s.resumed = true;
  return r;
}

}  // namespace grist::release::internal
