// MemEnv and FaultInjectionEnv.
#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <set>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/env.h"
#include "common/status_macros.h"

namespace grist {

namespace {
struct MemFile {
  std::string data;
  size_t synced = 0;
};

std::string Normalize(const std::string& p) {
  std::string s = p;
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}
}  // namespace

struct MemEnv::Impl {
  absl::Mutex mu;
  std::map<std::string, std::shared_ptr<MemFile>> files ABSL_GUARDED_BY(mu);
  std::set<std::string> dirs ABSL_GUARDED_BY(mu);
};

namespace {
class MemSequentialFile : public SequentialFile {
 public:
  MemSequentialFile(std::string path, std::shared_ptr<MemEnv::Impl> env,
                    std::shared_ptr<MemFile> f)
      : path_(std::move(path)), env_(std::move(env)), file_(std::move(f)) {}
  absl::StatusOr<size_t> Read(char* buf, size_t n) override {
    absl::MutexLock l(&env_->mu);
    size_t avail = file_->data.size() > pos_ ? file_->data.size() - pos_ : 0;
    size_t k = std::min(avail, n);
    std::copy_n(file_->data.data() + pos_, k, buf);
    pos_ += k;
    return k;
  }
  const std::string& path() const override { return path_; }

 private:
  std::string path_;
  std::shared_ptr<MemEnv::Impl> env_;
  std::shared_ptr<MemFile> file_;
  size_t pos_ = 0;
};

class MemRandomAccessFile : public RandomAccessFile {
 public:
  MemRandomAccessFile(std::string path, std::shared_ptr<MemEnv::Impl> env,
                      std::shared_ptr<MemFile> f)
      : path_(std::move(path)), env_(std::move(env)), file_(std::move(f)) {}
  absl::StatusOr<size_t> ReadAt(uint64_t offset, char* buf, size_t n) const override {
    absl::MutexLock l(&env_->mu);
    if (offset >= file_->data.size()) return size_t{0};
    size_t k = std::min<size_t>(n, file_->data.size() - offset);
    std::copy_n(file_->data.data() + offset, k, buf);
    return k;
  }
  uint64_t Size() const override {
    absl::MutexLock l(&env_->mu);
    return file_->data.size();
  }
  const std::string& path() const override { return path_; }

 private:
  std::string path_;
  std::shared_ptr<MemEnv::Impl> env_;
  std::shared_ptr<MemFile> file_;
};

class MemWritableFile : public WritableFile {
 public:
  MemWritableFile(std::string path, std::shared_ptr<MemEnv::Impl> env, std::shared_ptr<MemFile> f)
      : path_(std::move(path)), env_(std::move(env)), file_(std::move(f)) {}
  absl::Status Append(std::string_view data) override {
    if (closed_) return absl::FailedPreconditionError(absl::StrCat("append to closed ", path_));
    absl::MutexLock l(&env_->mu);
    file_->data.append(data);
    return absl::OkStatus();
  }
  absl::Status Flush() override { return absl::OkStatus(); }
  absl::Status Sync() override {
    absl::MutexLock l(&env_->mu);
    file_->synced = file_->data.size();
    return absl::OkStatus();
  }
  absl::Status Close() override {
    closed_ = true;
    return absl::OkStatus();
  }
  uint64_t Size() const override {
    absl::MutexLock l(&env_->mu);
    return file_->data.size();
  }
  const std::string& path() const override { return path_; }

 private:
  std::string path_;
  std::shared_ptr<MemEnv::Impl> env_;
  std::shared_ptr<MemFile> file_;
  bool closed_ = false;
};
}  // namespace

MemEnv::MemEnv() : impl_(std::make_shared<Impl>()) {
  absl::MutexLock l(&impl_->mu);
  impl_->dirs.insert("/");
  impl_->dirs.insert(".");
}
MemEnv::~MemEnv() = default;

absl::StatusOr<std::unique_ptr<SequentialFile>> MemEnv::NewSequentialFile(
    const std::string& path) {
  absl::MutexLock l(&impl_->mu);
  auto it = impl_->files.find(Normalize(path));
  if (it == impl_->files.end()) return absl::NotFoundError(absl::StrCat("open ", path, ": no such file"));
  return std::unique_ptr<SequentialFile>(new MemSequentialFile(path, impl_, it->second));
}

absl::StatusOr<std::unique_ptr<RandomAccessFile>> MemEnv::NewRandomAccessFile(
    const std::string& path) {
  absl::MutexLock l(&impl_->mu);
  auto it = impl_->files.find(Normalize(path));
  if (it == impl_->files.end()) return absl::NotFoundError(absl::StrCat("open ", path, ": no such file"));
  return std::unique_ptr<RandomAccessFile>(new MemRandomAccessFile(path, impl_, it->second));
}

absl::StatusOr<std::unique_ptr<WritableFile>> MemEnv::NewWritableFile(const std::string& path) {
  absl::MutexLock l(&impl_->mu);
  std::string p = Normalize(path);
  if (impl_->dirs.count(p)) return absl::FailedPreconditionError(absl::StrCat("create ", path, ": is a directory"));
  auto f = std::make_shared<MemFile>();
  impl_->files[p] = f;
  return std::unique_ptr<WritableFile>(new MemWritableFile(path, impl_, f));
}

bool MemEnv::FileExists(const std::string& path) {
  absl::MutexLock l(&impl_->mu);
  std::string p = Normalize(path);
  return impl_->files.count(p) > 0 || impl_->dirs.count(p) > 0;
}

bool MemEnv::IsDirectory(const std::string& path) {
  absl::MutexLock l(&impl_->mu);
  return impl_->dirs.count(Normalize(path)) > 0;
}

absl::StatusOr<uint64_t> MemEnv::GetFileSize(const std::string& path) {
  absl::MutexLock l(&impl_->mu);
  auto it = impl_->files.find(Normalize(path));
  if (it == impl_->files.end()) return absl::NotFoundError(absl::StrCat("stat ", path, ": no such file"));
  return it->second->data.size();
}

absl::StatusOr<std::vector<std::string>> MemEnv::ListDir(const std::string& dir) {
  absl::MutexLock l(&impl_->mu);
  std::string d = Normalize(dir);
  if (!impl_->dirs.count(d)) return absl::NotFoundError(absl::StrCat("opendir ", dir, ": no such directory"));
  std::string prefix = d == "/" ? "/" : d + "/";
  std::set<std::string> names;
  auto collect = [&](const std::string& p) {
    if (p.size() > prefix.size() && absl::StartsWith(p, prefix)) {
      std::string rest = p.substr(prefix.size());
      names.insert(rest.substr(0, rest.find('/')));
    }
  };
  for (const auto& [p, f] : impl_->files) collect(p);
  for (const auto& p : impl_->dirs) collect(p);
  return std::vector<std::string>(names.begin(), names.end());
}

absl::Status MemEnv::CreateDirs(const std::string& path) {
  absl::MutexLock l(&impl_->mu);
  std::string p = Normalize(path);
  size_t pos = 0;
  while (true) {
    pos = p.find('/', pos + 1);
    std::string cur = p.substr(0, pos);
    if (!cur.empty()) {
      if (impl_->files.count(cur)) return absl::FailedPreconditionError(absl::StrCat("mkdir ", cur, ": is a file"));
      impl_->dirs.insert(cur);
    }
    if (pos == std::string::npos) break;
  }
  return absl::OkStatus();
}

absl::Status MemEnv::RemoveFile(const std::string& path) {
  absl::MutexLock l(&impl_->mu);
  if (impl_->files.erase(Normalize(path)) == 0) return absl::NotFoundError(absl::StrCat("unlink ", path, ": no such file"));
  return absl::OkStatus();
}

absl::Status MemEnv::RemoveAll(const std::string& path) {
  absl::MutexLock l(&impl_->mu);
  std::string p = Normalize(path);
  std::string prefix = p + "/";
  for (auto it = impl_->files.begin(); it != impl_->files.end();) {
    if (it->first == p || absl::StartsWith(it->first, prefix)) it = impl_->files.erase(it);
    else ++it;
  }
  for (auto it = impl_->dirs.begin(); it != impl_->dirs.end();) {
    if (*it == p || absl::StartsWith(*it, prefix)) it = impl_->dirs.erase(it);
    else ++it;
  }
  return absl::OkStatus();
}

absl::Status MemEnv::RenameFile(const std::string& from, const std::string& to) {
  absl::MutexLock l(&impl_->mu);
  std::string f = Normalize(from), t = Normalize(to);
  auto it = impl_->files.find(f);
  if (it != impl_->files.end()) {
    impl_->files[t] = it->second;
    if (f != t) impl_->files.erase(f);
    return absl::OkStatus();
  }
  if (impl_->dirs.count(f)) {
    std::map<std::string, std::shared_ptr<MemFile>> moved;
    std::string prefix = f + "/";
    for (auto i = impl_->files.begin(); i != impl_->files.end();) {
      if (absl::StartsWith(i->first, prefix)) {
        moved[t + i->first.substr(f.size())] = i->second;
        i = impl_->files.erase(i);
      } else {
        ++i;
      }
    }
    std::set<std::string> mdirs;
    for (auto i = impl_->dirs.begin(); i != impl_->dirs.end();) {
      if (*i == f || absl::StartsWith(*i, prefix)) {
        mdirs.insert(t + i->substr(f.size()));
        i = impl_->dirs.erase(i);
      } else {
        ++i;
      }
    }
    impl_->files.insert(moved.begin(), moved.end());
    impl_->dirs.insert(mdirs.begin(), mdirs.end());
    return absl::OkStatus();
  }
  return absl::NotFoundError(absl::StrCat("rename ", from, ": no such file"));
}

absl::Status MemEnv::SyncDir(const std::string& dir) {
  if (!IsDirectory(dir)) return absl::NotFoundError(absl::StrCat("fsync directory ", dir, ": no such directory"));
  return absl::OkStatus();
}

absl::Status MemEnv::SyncFile(const std::string& path) {
  absl::MutexLock l(&impl_->mu);
  auto it = impl_->files.find(Normalize(path));
  if (it == impl_->files.end()) {
    return absl::NotFoundError(absl::StrCat("open ", path, ": no such file"));
  }
  it->second->synced = it->second->data.size();
  return absl::OkStatus();
}

void MemEnv::DropUnsyncedData() {
  absl::MutexLock l(&impl_->mu);
  for (auto& [p, f] : impl_->files) f->data.resize(f->synced);
}

// ---------------------------------------------------------------------------------------------

struct FaultInjectionEnv::State {
  std::atomic<int> fail_nth_append{0};
  std::atomic<int> appends_seen{0};
  std::atomic<bool> fail_sync{false};
  std::atomic<bool> fail_rename{false};
  std::atomic<int64_t> disk_space{-1};
  std::atomic<int64_t> appended{0};
  std::atomic<int64_t> read{0};
  // FailReadAt's rule.
  mutable absl::Mutex read_fault_mu;
  std::string read_fault_path;
  uint64_t read_fault_offset = 0;
  size_t read_fault_n = 0;
  bool read_fault_short = false;

  absl::Status OnAppend(const std::string& path, size_t n) {
    int k = ++appends_seen;
    int nth = fail_nth_append.load();
    if (nth > 0 && k == nth) {
      return absl::DataLossError(absl::StrCat("write ", path, ": Input/output error (injected)"));
    }
    int64_t space = disk_space.load();
    if (space >= 0 && appended.load() + static_cast<int64_t>(n) > space) {
      return absl::ResourceExhaustedError(
          absl::StrCat("write ", path, ": No space left on device (injected)"));
    }
    appended += static_cast<int64_t>(n);
    return absl::OkStatus();
  }
};

namespace {
class FaultSequentialFile : public SequentialFile {
 public:
  FaultSequentialFile(std::unique_ptr<SequentialFile> base,
                         std::shared_ptr<FaultInjectionEnv::State> st)
      : base_(std::move(base)), st_(std::move(st)) {}
  absl::StatusOr<size_t> Read(char* buf, size_t n) override {
    ASSIGN_OR_RETURN(size_t got, base_->Read(buf, n));
    st_->read += static_cast<int64_t>(got);
    return got;
  }
  const std::string& path() const override { return base_->path(); }

 private:
  std::unique_ptr<SequentialFile> base_;
  std::shared_ptr<FaultInjectionEnv::State> st_;
};

class FaultRandomAccessFile : public RandomAccessFile {
 public:
  FaultRandomAccessFile(std::unique_ptr<RandomAccessFile> base,
                           std::shared_ptr<FaultInjectionEnv::State> st)
      : base_(std::move(base)), st_(std::move(st)) {}
  absl::StatusOr<size_t> ReadAt(uint64_t offset, char* buf, size_t n) const override {
    bool fail = false, short_read = false;
    {
      absl::MutexLock lock(&st_->read_fault_mu);
      fail = st_->read_fault_n != 0 && n == st_->read_fault_n &&
             offset == st_->read_fault_offset && base_->path() == st_->read_fault_path;
      short_read = st_->read_fault_short;
    }
    if (fail && !short_read) {
      return absl::DataLossError(absl::StrCat("read ", base_->path(), " at offset ", offset,
                                              ": Input/output error (injected)"));
    }
    ASSIGN_OR_RETURN(size_t got, base_->ReadAt(offset, buf, fail ? n - 1 : n));
    st_->read += static_cast<int64_t>(got);
    return got;
  }
  uint64_t Size() const override { return base_->Size(); }
  const std::string& path() const override { return base_->path(); }

 private:
  std::unique_ptr<RandomAccessFile> base_;
  std::shared_ptr<FaultInjectionEnv::State> st_;
};

class FaultWritableFile : public WritableFile {
 public:
  FaultWritableFile(std::unique_ptr<WritableFile> base, std::shared_ptr<FaultInjectionEnv::State> st)
      : base_(std::move(base)), st_(std::move(st)) {}
  absl::Status Append(std::string_view data) override {
    RETURN_IF_ERROR(st_->OnAppend(base_->path(), data.size()));
    return base_->Append(data);
  }
  absl::Status Flush() override { return base_->Flush(); }
  absl::Status Sync() override {
    if (st_->fail_sync) return absl::DataLossError(absl::StrCat("fsync ", base_->path(), ": Input/output error (injected)"));
    return base_->Sync();
  }
  absl::Status Close() override { return base_->Close(); }
  uint64_t Size() const override { return base_->Size(); }
  const std::string& path() const override { return base_->path(); }
  void SetWritebackBytes(uint64_t bytes) override { base_->SetWritebackBytes(bytes); }

 private:
  std::unique_ptr<WritableFile> base_;
  std::shared_ptr<FaultInjectionEnv::State> st_;
};
}  // namespace

FaultInjectionEnv::FaultInjectionEnv(Env* base)
    : ForwardingEnv(base), state_(std::make_shared<State>()) {}
FaultInjectionEnv::~FaultInjectionEnv() = default;
void FaultInjectionEnv::FailNthAppend(int n) {
  state_->appends_seen = 0;
  state_->fail_nth_append = n;
}
void FaultInjectionEnv::SetFailSync(bool fail) { state_->fail_sync = fail; }
void FaultInjectionEnv::SetFailRename(bool fail) { state_->fail_rename = fail; }
void FaultInjectionEnv::SetDiskSpace(int64_t bytes) {
  state_->appended = 0;
  state_->disk_space = bytes;
}
int64_t FaultInjectionEnv::appended_bytes() const { return state_->appended; }
int64_t FaultInjectionEnv::read_bytes() const { return state_->read; }
void FaultInjectionEnv::FailReadAt(const std::string& path, uint64_t offset, size_t n,
                                   bool short_read) {
  absl::MutexLock lock(&state_->read_fault_mu);
  state_->read_fault_path = path;
  state_->read_fault_offset = offset;
  state_->read_fault_n = n;
  state_->read_fault_short = short_read;
}

absl::StatusOr<std::unique_ptr<SequentialFile>> FaultInjectionEnv::NewSequentialFile(
    const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<SequentialFile> f, base()->NewSequentialFile(path));
  return std::unique_ptr<SequentialFile>(new FaultSequentialFile(std::move(f), state_));
}
absl::StatusOr<std::unique_ptr<RandomAccessFile>> FaultInjectionEnv::NewRandomAccessFile(
    const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> f, base()->NewRandomAccessFile(path));
  return std::unique_ptr<RandomAccessFile>(new FaultRandomAccessFile(std::move(f), state_));
}
absl::StatusOr<std::unique_ptr<WritableFile>> FaultInjectionEnv::NewWritableFile(
    const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> f, base()->NewWritableFile(path));
  return std::unique_ptr<WritableFile>(new FaultWritableFile(std::move(f), state_));
}

absl::Status FaultInjectionEnv::RenameFile(const std::string& from, const std::string& to) {
  if (state_->fail_rename) return absl::DataLossError(absl::StrCat("rename ", from, ": Input/output error (injected)"));
  return base()->RenameFile(from, to);
}
absl::Status FaultInjectionEnv::SyncDir(const std::string& dir) {
  if (state_->fail_sync) return absl::DataLossError(absl::StrCat("fsync directory ", dir, ": Input/output error (injected)"));
  return base()->SyncDir(dir);
}
absl::Status FaultInjectionEnv::SyncFile(const std::string& path) {
  if (state_->fail_sync) {
    return absl::DataLossError(absl::StrCat("fsync ", path, ": Input/output error (injected)"));
  }
  return base()->SyncFile(path);
}

}  // namespace grist
