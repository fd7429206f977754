// DeferredSyncEnv (common/env.h).
#include <algorithm>
#include <atomic>
#include <set>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/env.h"
#include "common/status_macros.h"

namespace grist {

namespace {

std::string Trimmed(const std::string& p) {
  std::string s = p;
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

// Whether `path` is `root` or lies under it.
bool Within(const std::string& path, const std::string& root) {
  return path == root || (absl::StartsWith(path, root) && path.size() > root.size() &&
                          (root.back() == '/' || path[root.size()] == '/'));
}

// Moves the entries of `set` that lie within `from` to the same place within `to`; whether any.
bool MoveWithin(std::set<std::string>* set, const std::string& from, const std::string& to) {
  std::vector<std::string> moved;
  for (auto it = set->begin(); it != set->end();) {
    if (Within(*it, from)) {
      moved.push_back(to + it->substr(from.size()));
      it = set->erase(it);
    } else {
      ++it;
    }
  }
  set->insert(moved.begin(), moved.end());
  return !moved.empty();
}

void EraseWithin(std::set<std::string>* set, const std::string& root) {
  for (auto it = set->begin(); it != set->end();) {
    it = Within(*it, root) ? set->erase(it) : std::next(it);
  }
}

}  // namespace

struct DeferredSyncEnv::State {
  mutable absl::Mutex mu;
  std::set<std::string> files ABSL_GUARDED_BY(mu);  // synced by their writers, not yet durable
  std::set<std::string> dirs ABSL_GUARDED_BY(mu);   // synced, or holding a new directory

  void NoteFile(const std::string& path) {
    absl::MutexLock l(&mu);
    files.insert(Trimmed(path));
  }
  void NoteDir(const std::string& dir) {
    absl::MutexLock l(&mu);
    dirs.insert(Trimmed(dir));
  }
};

namespace {

class DeferredWritableFile : public WritableFile {
 public:
  DeferredWritableFile(std::unique_ptr<WritableFile> base,
                       std::shared_ptr<DeferredSyncEnv::State> st)
      : base_(std::move(base)), st_(std::move(st)) {}
  absl::Status Append(std::string_view data) override { return base_->Append(data); }
  absl::Status Flush() override { return base_->Flush(); }
  // The bytes reach the OS now (a write error is reported here, as Sync would); the device later.
  absl::Status Sync() override {
    RETURN_IF_ERROR(base_->Flush());
    st_->NoteFile(base_->path());
    return absl::OkStatus();
  }
  absl::Status Close() override { return base_->Close(); }
  uint64_t Size() const override { return base_->Size(); }
  const std::string& path() const override { return base_->path(); }
  void SetWritebackBytes(uint64_t bytes) override { base_->SetWritebackBytes(bytes); }

 private:
  std::unique_ptr<WritableFile> base_;
  std::shared_ptr<DeferredSyncEnv::State> st_;
};

}  // namespace

DeferredSyncEnv::DeferredSyncEnv(Env* base)
    : ForwardingEnv(base), state_(std::make_shared<State>()) {}
DeferredSyncEnv::~DeferredSyncEnv() = default;

absl::Status DeferredSyncEnv::SyncAll(int threads) {
  std::vector<std::string> files;
  std::set<std::string> dir_set;
  {
    absl::MutexLock l(&state_->mu);
    files.assign(state_->files.begin(), state_->files.end());
    dir_set = std::move(state_->dirs);
    state_->files.clear();
    state_->dirs.clear();
  }
  for (const std::string& f : files) dir_set.insert(DirName(f));
  // Files first, on several threads (a file system commits concurrent fsyncs together); then
  // each directory after the directories within it, so that a new directory's entry is synced
  // after what it holds.
  std::vector<absl::Status> errors(files.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < files.size(); i = next++) errors[i] = base()->SyncFile(files[i]);
  };
  const size_t n = std::min<size_t>(std::max(threads, 1), files.size());
  std::vector<std::thread> pool;
  for (size_t t = 1; t < n; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  std::vector<std::string> dirs(dir_set.begin(), dir_set.end());
  std::stable_sort(dirs.begin(), dirs.end(), [](const std::string& a, const std::string& b) {
    return std::count(a.begin(), a.end(), '/') > std::count(b.begin(), b.end(), '/');
  });
  for (const std::string& d : dirs) errors.push_back(base()->SyncDir(d));
  for (absl::Status& s : errors) {
    if (!s.ok()) return std::move(s);
  }
  return absl::OkStatus();
}

size_t DeferredSyncEnv::pending_files() const {
  absl::MutexLock l(&state_->mu);
  return state_->files.size();
}
size_t DeferredSyncEnv::pending_dirs() const {
  absl::MutexLock l(&state_->mu);
  return state_->dirs.size();
}

absl::StatusOr<std::unique_ptr<WritableFile>> DeferredSyncEnv::NewWritableFile(
    const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> f, base()->NewWritableFile(path));
  return std::unique_ptr<WritableFile>(new DeferredWritableFile(std::move(f), state_));
}
// A directory made here is durable once its parent is synced: the parent of each new one is noted.
absl::Status DeferredSyncEnv::CreateDirs(const std::string& path) {
  std::vector<std::string> made;
  for (std::string p = Trimmed(path); !p.empty() && !base()->IsDirectory(p); p = DirName(p)) {
    made.push_back(p);
    if (p == "." || p == "/" || DirName(p) == p) break;
  }
  RETURN_IF_ERROR(base()->CreateDirs(path));
  for (const std::string& p : made) state_->NoteDir(DirName(p));
  return absl::OkStatus();
}
absl::Status DeferredSyncEnv::RemoveFile(const std::string& path) {
  RETURN_IF_ERROR(base()->RemoveFile(path));
  absl::MutexLock l(&state_->mu);
  state_->files.erase(Trimmed(path));
  return absl::OkStatus();
}
absl::Status DeferredSyncEnv::RemoveAll(const std::string& path) {
  RETURN_IF_ERROR(base()->RemoveAll(path));
  const std::string root = Trimmed(path);
  absl::MutexLock l(&state_->mu);
  EraseWithin(&state_->files, root);
  EraseWithin(&state_->dirs, root);
  return absl::OkStatus();
}
absl::Status DeferredSyncEnv::RenameFile(const std::string& from, const std::string& to) {
  RETURN_IF_ERROR(base()->RenameFile(from, to));
  const std::string f = Trimmed(from), t = Trimmed(to);
  absl::MutexLock l(&state_->mu);
  EraseWithin(&state_->files, t);  // what `to` was is gone
  EraseWithin(&state_->dirs, t);
  const bool files_moved = MoveWithin(&state_->files, f, t);
  const bool dirs_moved = MoveWithin(&state_->dirs, f, t);
  // A directory renamed with noted entries in it: their names now hang on its new entry.
  if ((files_moved || dirs_moved) && !state_->files.contains(t)) state_->dirs.insert(DirName(t));
  return absl::OkStatus();
}
absl::Status DeferredSyncEnv::SyncDir(const std::string& dir) {
  if (!base()->IsDirectory(dir)) {
    return absl::NotFoundError(absl::StrCat("fsync directory ", dir, ": no such directory"));
  }
  state_->NoteDir(dir);
  return absl::OkStatus();
}

}  // namespace grist
