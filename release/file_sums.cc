#include "release/internal/file_sums.h"

#include <simdjson.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "common/json_writer.h"
#include "common/status_macros.h"

namespace grist::release::internal {
namespace {

constexpr std::string_view kFormat = "grist-file-sums";
constexpr int64_t kVersion = 1;

int64_t NowNs() {
  struct timespec t;
  ::clock_gettime(CLOCK_REALTIME, &t);
  return static_cast<int64_t>(t.tv_sec) * 1000000000 + static_cast<int64_t>(t.tv_nsec);
}

}  // namespace

bool SettledBefore(const FileStat& st, int64_t started_ns) {
  const bool coarse = st.mtime_ns % 1000000000 == 0 && st.ctime_ns % 1000000000 == 0;
  const int64_t newest = std::max(st.mtime_ns, st.ctime_ns);
  return newest < started_ns - (coarse ? kSettledCoarseNs : kSettledNs);
}

void AppendFileStatFields(JsonWriter* w, const FileStat& st) {
  w->Field("bytes", st.size).Field("mtime_ns", st.mtime_ns).Field("ctime_ns", st.ctime_ns);
  w->Field("inode", st.inode);
}

bool ReadFileStatFields(const simdjson::dom::element& object, FileStat* st) {
  return object["bytes"].get(st->size) == simdjson::SUCCESS &&
         object["mtime_ns"].get(st->mtime_ns) == simdjson::SUCCESS &&
         object["ctime_ns"].get(st->ctime_ns) == simdjson::SUCCESS &&
         object["inode"].get(st->inode) == simdjson::SUCCESS;
}

std::unique_ptr<FileSums> FileSums::Load(Env* env, std::string path) {
  std::unique_ptr<FileSums> s(new FileSums(env, std::move(path)));
  absl::StatusOr<std::string> text = ReadFileToString(env, s->path_);
  if (!text.ok()) return s;
  simdjson::dom::parser p;
  simdjson::dom::element e;
  simdjson::padded_string ps(*text);
  std::string_view format;
  int64_t version = 0;
  simdjson::dom::array files;
  if (p.parse(ps).get(e) != simdjson::SUCCESS || e["format"].get(format) != simdjson::SUCCESS ||
      format != kFormat || e["version"].get(version) != simdjson::SUCCESS ||
      version != kVersion || e["files"].get(files) != simdjson::SUCCESS) {
    absl::MutexLock l(&s->mu_);
    s->changed_ = true;  // rewritten by Save
    return s;
  }
  absl::MutexLock l(&s->mu_);
  for (simdjson::dom::element f : files) {
    std::string_view kind, file, sum;
    Entry en;
    if (f["kind"].get(kind) != simdjson::SUCCESS || f["path"].get(file) != simdjson::SUCCESS ||
        f["sum"].get(sum) != simdjson::SUCCESS || !ReadFileStatFields(f, &en.stat) ||
        sum.empty()) {
      s->changed_ = true;  // a bad entry is dropped
      continue;
    }
    en.sum = std::string(sum);
    s->entries_[{std::string(kind), std::string(file)}] = std::move(en);
  }
  return s;
}

std::string FileSums::Find(std::string_view kind, const std::string& file, Seen* seen,
                           const std::optional<FileStat>& known, int64_t known_ns) {
  seen->started_ns = known ? known_ns : NowNs();
  seen->stat.reset();
  absl::StatusOr<FileStat> st = known ? absl::StatusOr<FileStat>(*known) : env_->Stat(file);
  if (!st.ok()) return "";
  seen->stat = *st;
  absl::MutexLock l(&mu_);
  auto it = entries_.find({std::string(kind), file});
  if (it == entries_.end()) return "";
  if (it->second.stat != *st) {
    entries_.erase(it);
    changed_ = true;
    return "";
  }
  ++served_;
  return it->second.sum;
}

void FileSums::Remember(std::string_view kind, const std::string& file, const Seen& seen,
                        std::string sum) {
  if (!seen.stat || sum.empty() || !SettledBefore(*seen.stat, seen.started_ns)) return;
  absl::StatusOr<FileStat> after = env_->Stat(file);
  if (!after.ok() || *after != *seen.stat) return;
  absl::MutexLock l(&mu_);
  entries_[{std::string(kind), file}] = Entry{*seen.stat, std::move(sum)};
  changed_ = true;
  ++remembered_;
}

absl::Status FileSums::Save() {
  absl::MutexLock l(&mu_);
  if (!changed_) return absl::OkStatus();
  JsonWriter w(0);
  w.BeginObject().Field("format", kFormat).Field("version", kVersion).Key("files").BeginArray();
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (!env_->FileExists(it->first.second)) {
      it = entries_.erase(it);
      continue;
    }
    const Entry& en = it->second;
    w.BeginObject().Field("kind", it->first.first).Field("path", it->first.second);
    AppendFileStatFields(&w, en.stat);
    w.Field("sum", en.sum).EndObject();
    ++it;
  }
  w.EndArray().EndObject();
  std::string text = w.Take();
  text.push_back('\n');
  // WriteFileAtomic's way, under a name of this host and process: the tasks of a staged step,
  // on several nodes of a cluster, may save at once into one shared work folder.
  char host[256] = {};
  (void)::gethostname(host, sizeof(host) - 1);
  const std::string tmp = absl::StrCat(path_, ".tmp.", host, ".", ::getpid());
  {
    ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> f, env_->NewWritableFile(tmp));
    absl::Status st = f->Append(text);
    if (st.ok()) st = f->Sync();
    if (st.ok()) st = f->Close();
    if (st.ok()) st = env_->RenameFile(tmp, path_);
    if (!st.ok()) {
      (void)env_->RemoveFile(tmp);
      return st;
    }
  }
  RETURN_IF_ERROR(env_->SyncDir(DirName(path_)));
  changed_ = false;
  return absl::OkStatus();
}

uint64_t FileSums::served() const {
  absl::MutexLock l(&mu_);
  return served_;
}

uint64_t FileSums::remembered() const {
  absl::MutexLock l(&mu_);
  return remembered_;
}

}  // namespace grist::release::internal
