#include "common/input_plan.h"

#include <time.h>

#include <algorithm>
#include <filesystem>
#include <iterator>
#include <memory>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "common/config.h"
#include "common/documents_format.h"
#include "common/env.h"
#include "common/internal/byte_sources.h"
#include "common/internal/line_reader.h"
#include "common/internal/python_records.h"
#include "common/status_macros.h"
#include "common/thread_pool.h"

namespace grist {

namespace {
bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
bool IsJsonName(const std::string& name) {
  return EndsWith(name, ".jsonl") || EndsWith(name, ".json") || EndsWith(name, ".ndjson");
}
}  // namespace

InputFormat FormatOf(const std::string& path) {
  if (path.rfind(kHfDatasetPrefix, 0) == 0) return InputFormat::kHfDataset;
  std::string name = BaseName(path);
  if (EndsWith(name, ".parquet")) return InputFormat::kParquet;
  if (EndsWith(name, ".gz")) {
    return IsJsonName(name.substr(0, name.size() - 3)) ? InputFormat::kJsonlGzip
                                                       : InputFormat::kTextGzip;
  }
  if (EndsWith(name, ".zst")) {
    return IsJsonName(name.substr(0, name.size() - 4)) ? InputFormat::kJsonlZstd
                                                       : InputFormat::kTextZstd;
  }
  return IsJsonName(name) ? InputFormat::kJsonl : InputFormat::kText;
}

bool IsStageReportName(std::string_view name) {
  if (name == "dedup_report.json") return true;
  return name.size() > 18 && name.rfind("clean-report-", 0) == 0 && EndsWith(name, ".json");
}

namespace {
int64_t RealtimeNs() {
  struct timespec t;
  ::clock_gettime(CLOCK_REALTIME, &t);
  return static_cast<int64_t>(t.tv_sec) * 1000000000 + static_cast<int64_t>(t.tv_nsec);
}

// `path` as listed: one stat(2) (the file's size and whether it is a folder, kept in the entry),
// or where the Env has no stat, the folder test and the size. NotFound naming it if it is gone.
absl::StatusOr<InputFile> Listed(Env* env, const std::string& path) {
  InputFile f{path, 0, FormatOf(path)};
  f.listed_ns = RealtimeNs();
  absl::StatusOr<FileStat> st = env->Stat(path);
  if (st.ok()) {
    f.size = st->size;
    f.stat = *st;
    return f;
  }
  if (!absl::IsUnimplemented(st.status())) return st.status();
  if (env->IsDirectory(path)) {
    f.stat = FileStat{.directory = true};  // no times: only the folder test
    return f;
  }
  ASSIGN_OR_RETURN(f.size, env->GetFileSize(path));
  return f;
}

bool IsFolder(const InputFile& f) { return f.stat && f.stat->directory; }

absl::Status Walk(Env* env, const std::string& dir, std::vector<InputFile>* out) {
  ASSIGN_OR_RETURN(std::vector<std::string> names, env->ListDir(dir));
  bool stage_output = false;
  for (const auto& n : names) stage_output = stage_output || IsStageReportName(n);
  if (stage_output) {
    // A grist stage's output folder: its kept document parts only, never rejects/, removed/, the
    // report or a part still being written (docs/formats/documents.md, "Stage output folders").
    for (const auto& n : names) {
      if (n.empty() || n[0] == '.' || !EndsWith(n, ".jsonl.zst")) continue;
      ASSIGN_OR_RETURN(InputFile f, Listed(env, JoinPath(dir, n)));
      if (!IsFolder(f)) out->push_back(std::move(f));
    }
    return absl::OkStatus();
  }
  for (const auto& n : names) {
    if (n.empty() || n[0] == '.') continue;
    ASSIGN_OR_RETURN(InputFile f, Listed(env, JoinPath(dir, n)));
    if (IsFolder(f)) {
      RETURN_IF_ERROR(Walk(env, f.path, out));
    } else {
      out->push_back(std::move(f));
    }
  }
  return absl::OkStatus();
}
}  // namespace

absl::StatusOr<std::vector<InputFile>> ListInputs(Env* env, const std::vector<std::string>& paths) {
  if (paths.empty()) return absl::InvalidArgumentError("no input paths given");
  std::vector<InputFile> out;
  for (const auto& p : paths) {
    if (p.rfind(kHfDatasetPrefix, 0) == 0) {
      RETURN_IF_ERROR(HfDatasetInput(p.substr(kHfDatasetPrefix.size())).status());
      out.push_back({p, 0, InputFormat::kHfDataset});
      continue;
    }
    absl::StatusOr<InputFile> f = Listed(env, p);
    if (absl::IsNotFound(f.status())) {
      return absl::NotFoundError(absl::StrCat("input ", p, ": no such file or directory"));
    }
    if (!f.ok()) return f.status();
    if (IsFolder(*f)) {
      RETURN_IF_ERROR(Walk(env, p, &out));
    } else {
      out.push_back(*std::move(f));
    }
  }
  return out;
}

namespace {
// `path` absolute, with "." and ".." and the symbolic links of its existing part resolved.
std::filesystem::path Resolved(const std::string& path) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(path, ec);
  if (ec) p = path;
  std::filesystem::path r = std::filesystem::weakly_canonical(p, ec);
  return ec ? p.lexically_normal() : r;
}
}  // namespace

absl::Status CheckOutputOutsideInputs(Env* env, const std::vector<std::string>& inputs,
                                      const std::string& output, std::string_view inputs_from) {
  const std::filesystem::path out = Resolved(output);
  for (const std::string& in : inputs) {
    if (in.rfind(kHfDatasetPrefix, 0) == 0 || !env->IsDirectory(in)) continue;
    const std::filesystem::path dir = Resolved(in);
    const auto end = std::mismatch(dir.begin(), dir.end(), out.begin(), out.end()).first;
    // Inside: every component of the folder's path begins the output's (a trailing "" aside).
    if (end != dir.end() && !(std::next(end) == dir.end() && end->empty())) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        "--output ", output, " lies inside the input folder ", in, " (", std::string(inputs_from),
        "): a later run would read what this one writes as input; choose an output outside the "
        "input folders"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> HfDatasetInput(std::string_view spec) {
  if (spec.empty() || spec.front() == ':') {
    return absl::InvalidArgumentError(
        absl::StrCat("dataset \"", std::string(spec),
                     "\": give NAME or NAME:split (a Hub name or a local folder)"));
  }
  return std::string(kHfDatasetPrefix) + std::string(spec);
}

absl::StatusOr<std::vector<std::string>> ConfigInputs(const Config& c) {
  ASSIGN_OR_RETURN(std::vector<std::string> out, c.GetStringList("inputs.paths", {}));
  ASSIGN_OR_RETURN(std::vector<std::string> datasets, c.GetStringList("inputs.hf_datasets", {}));
  for (const std::string& d : datasets) {
    auto in = HfDatasetInput(d);
    if (!in.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("config ", c.source(), ": key 'inputs.hf_datasets': ", in.status().message()));
    }
    out.push_back(*std::move(in));
  }
  if (out.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config ", c.source(), ": key 'inputs.paths': must name at least one input "
        "(or name datasets in inputs.hf_datasets)"));
  }
  return out;
}

absl::StatusOr<Hash128> HashInput(Env* env, const InputFile& file) {
  if (file.format != InputFormat::kHfDataset) return HashFile128(env, file.path);
  ASSIGN_OR_RETURN(std::unique_ptr<internal::ByteSource> src, internal::OpenPythonRecords(file, ""));
  Hasher128 h;
  internal::Buffer buf(internal::kReadChunk);
  while (true) {
    ASSIGN_OR_RETURN(size_t got, src->Read(buf.data(), buf.size));
    if (got == 0) break;
    h.Update(buf.data(), got);
  }
  return h.Digest();
}

absl::StatusOr<std::vector<InputSplit>> PlanSplits(Env* env, const std::vector<InputFile>& files,
                                                   uint64_t target_bytes, ThreadPool* pool,
                                                   const InputOptions& input) {
  if (target_bytes == 0) target_bytes = 64ull << 20;
  std::vector<InputSplit> splits;
  for (size_t i = 0; i < files.size(); ++i) {
    const InputFile& f = files[i];
    const bool streamable = f.format == InputFormat::kJsonlGzip || f.format == InputFormat::kJsonlZstd ||
                            ((f.format == InputFormat::kTextGzip || f.format == InputFormat::kTextZstd) &&
                             input.txt_mode == "blocks");
    if (f.size <= target_bytes || (f.format != InputFormat::kJsonl && !streamable)) {
      splits.push_back({i, 0, UINT64_MAX, f.size, 0});
      continue;
    }
    auto stream_splits = [&] {
      const uint64_t stride = std::min(target_bytes, kMaxStreamSplitBytes);
      for (uint64_t b = 0; b < f.size; b += stride) {
        const uint64_t e = std::min(f.size, b + stride);
        splits.push_back({i, b, e == f.size ? UINT64_MAX : e, e - b, 0, stride});
      }
    };
    if (f.format != InputFormat::kJsonl && f.format != InputFormat::kJsonlZstd) {
      stream_splits();
      continue;
    }
    if (f.format == InputFormat::kJsonlZstd) {
      // A part with a frame index splits at frame boundaries; records never cross frames, and the
      // index's record counts give each split its absolute line numbers.
      ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> rf, env->NewRandomAccessFile(f.path));
      ASSIGN_OR_RETURN(auto frames, ReadZstdFrameIndex(*rf));
      if (!frames) {
        stream_splits();
        continue;
      }
      uint64_t begin = 0, bytes = 0, lines = 0, lines_before = 0;
      for (size_t k = 0; k < frames->size(); ++k) {
        const ZstdFrame& fr = (*frames)[k];
        bytes += fr.bytes;
        lines += fr.records;
        if (bytes >= target_bytes || k + 1 == frames->size()) {
          const bool last = k + 1 == frames->size();
          // The last split counts the file to its end, index frame included: split bytes add up
          // to the file's size, which is what a progress total of file sizes counts.
          if (last) bytes = f.size - begin;
          splits.push_back({i, begin, last ? UINT64_MAX : fr.offset + fr.bytes, bytes, lines_before});
          begin = fr.offset + fr.bytes;
          lines_before += lines;
          bytes = lines = 0;
        }
      }
      continue;
    }
    for (uint64_t b = 0; b < f.size; b += target_bytes) {
      uint64_t e = std::min(f.size, b + target_bytes);
      splits.push_back({i, b, e == f.size ? UINT64_MAX : e, e - b, 0});
    }
  }
  // Count newlines inside each byte-range split of plain JSONL so each reader knows its absolute
  // line numbers.
  auto counted = [&](const InputSplit& s) {
    return files[s.file_index].format == InputFormat::kJsonl && (s.begin > 0 || s.end != UINT64_MAX);
  };
  std::vector<uint64_t> counts(splits.size(), 0);
  RETURN_IF_ERROR(ParallelFor(pool, splits.size(), [&](size_t k) -> absl::Status {
    const InputSplit& s = splits[k];
    if (!counted(s)) return absl::OkStatus();
    ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> f,
                     env->NewRandomAccessFile(files[s.file_index].path));
    internal::Buffer buf(internal::kReadChunk);
    uint64_t pos = s.begin, end = std::min<uint64_t>(s.end, f->Size());
    uint64_t n = 0;
    while (pos < end) {
      ASSIGN_OR_RETURN(size_t got, f->ReadAt(pos, buf.data(), std::min<uint64_t>(buf.size, end - pos)));
      if (got == 0) break;
      n += internal::CountNewlines(buf.data(), got);
      pos += got;
    }
    counts[k] = n;
    return absl::OkStatus();
  }));
  for (size_t k = 1; k < splits.size(); ++k) {
    if (counted(splits[k]) && splits[k].file_index == splits[k - 1].file_index && splits[k].begin > 0) {
      splits[k].newlines_before = splits[k - 1].newlines_before + counts[k - 1];
    }
  }
  return splits;
}

uint64_t BalancedSplitBytes(const std::vector<InputFile>& files, uint64_t max_split_bytes, int tasks) {
  uint64_t total = 0;
  for (const InputFile& f : files) total += f.size;
  const uint64_t balanced = total / (static_cast<uint64_t>(std::max(1, tasks)) * kSplitsPerTask);
  return std::min(max_split_bytes, std::max(kMinBalancedSplitBytes, balanced));
}

std::vector<InputSplit> SelectTaskSplits(const std::vector<InputSplit>& splits, int task, int tasks) {
  if (tasks <= 1) return splits;
  unsigned __int128 total = 0;
  for (const auto& s : splits) total += s.bytes + 1;  // +1: empty files still count
  std::vector<InputSplit> out;
  unsigned __int128 cum = 0;
  for (const auto& s : splits) {
    // A split belongs to the task whose byte range holds its midpoint.
    unsigned __int128 mid = cum + (s.bytes + 1) / 2;
    int owner = static_cast<int>(mid * tasks / (total == 0 ? 1 : total));
    if (owner >= tasks) owner = tasks - 1;
    if (owner == task) out.push_back(s);
    cum += s.bytes + 1;
  }
  return out;
}

}  // namespace grist
