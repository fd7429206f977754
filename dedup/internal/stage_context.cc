// The shared context of the dedup stages: see stage_context.h.

#include "dedup/internal/stage_context.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>

#include "absl/strings/str_format.h"
#include "common/hash.h"
#include "common/task_parts.h"

namespace grist::dedup::internal {

std::unique_ptr<SplitDecoders> PassDecoders(const Ctx& c, const std::vector<size_t>& indices) {
  std::vector<InputSplit> splits;
  splits.reserve(indices.size());
  for (size_t i : indices) splits.push_back(c.splits[i]);
  // Decoded pieces (<= 1 MiB each) waiting for readers: at most an eighth of the budget, over all
  // the decoders that may hold them at once.
  const uint64_t by_budget = std::max<uint64_t>(
      2, c.opt.memory_limit / 8 / SplitDecoders::kMaxHoldingDecoders / (1ull << 20));
  const size_t chunks = static_cast<size_t>(std::min<uint64_t>(
      by_budget, SplitDecoders::DefaultChunksInFlight(c.pool->size())));
  return std::make_unique<SplitDecoders>(c.env, c.files, splits, c.opt.input, chunks);
}

uint64_t OptionsFingerprint(const DedupOptions& o) {
  std::string s = absl::StrCat(
      o.exact, "|", ExactNormalizeName(o.exact_normalize), "|", o.near, "|",
      static_cast<int>(o.shingle.kind), "|", o.shingle.n, "|", o.num_perm, "|", o.bands, "|",
      o.rows, "|", absl::StrFormat("%.17g", o.threshold), "|", o.verify, "|", o.seed, "|",
      o.line_dedup, "|", o.split_bytes, "|", o.input.text_field, "|", o.input.txt_mode, "|",
      o.input.max_record_bytes);
  return Hash64(s);
}

absl::StatusOr<Ctx> MakeCtx(Env* env, const std::vector<std::string>& inputs,
                            const std::string& output_dir, const DedupOptions& options,
                            const RunOptions& run) {
  RETURN_IF_ERROR(options.Validate());
  if (run.tasks < 1 || run.task < 0 || run.task >= run.tasks) {
    return absl::InvalidArgumentError(
        absl::StrCat("dedup: task ", run.task, " is not in [0, ", run.tasks, ")"));
  }
  Ctx c;
  c.env = env;
  c.opt = options.Resolved();
  c.run = run;
  c.output_dir = output_dir;
  c.work = options.work_dir.empty() ? JoinPath(output_dir, ".dedup-work") : options.work_dir;
  ASSIGN_OR_RETURN(c.files, ListInputs(env, inputs));
  c.pool = std::make_unique<ThreadPool>(run.threads);
  // About kSplitsPerTask splits over the whole input (split_bytes at most), so that a corpus of a
  // few part files still keeps every thread busy. Planned for one task whatever run.tasks is: the
  // stages that run as one task (merge, report) must plan the same splits as the arrays, since
  // document keys and the work files' fingerprint are made from them.
  ASSIGN_OR_RETURN(c.splits, PlanSplits(env, c.files, BalancedSplitBytes(c.files, c.opt.split_bytes, 1),
                                        c.pool.get(), c.opt.input));
  if (c.splits.size() >= (uint64_t{1} << (64 - format::kOrdinalBits))) {
    return absl::InvalidArgumentError("dedup: too many input splits");
  }
  Hasher64 h(OptionsFingerprint(c.opt));
  for (const InputFile& f : c.files) {
    h.Update(f.path);
    h.Update(&f.size, sizeof(f.size));
    h.Update("\0", 1);
  }
  for (const InputSplit& s : c.splits) {
    uint64_t v[3] = {s.file_index, s.begin, s.end};
    h.Update(v, sizeof(v));
  }
  c.fingerprint = h.Digest();
  return c;
}

namespace {

// What a byte becomes in NormalizeForExact: itself (keep) or itself lowercased (lower), and
// whether it is ASCII whitespace (space), which NormalizeForExact drops. NUL is kept, as a byte
// like any other.
struct ExactTables {
  unsigned char keep[256];
  unsigned char lower[256];
  unsigned char space[256];
  constexpr ExactTables() : keep(), lower(), space() {
    for (int c = 0; c < 256; ++c) {
      const bool ws = c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
      keep[c] = static_cast<unsigned char>(c);
      lower[c] = static_cast<unsigned char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
      space[c] = ws ? 1 : 0;
    }
  }
};
constexpr ExactTables kExact;

}  // namespace

Hash128 ExactHash(std::string_view text, ExactNormalize mode, std::string* scratch) {
  if (mode == ExactNormalize::kNone) return Hash128Of(text);
  const bool lower = mode == ExactNormalize::kLower;
  const unsigned char* table = lower ? kExact.lower : kExact.keep;
  if (scratch->size() < text.size() + 1) scratch->resize(text.size() + 1);
  char* out = scratch->data();
  const unsigned char* p = reinterpret_cast<const unsigned char*>(text.data());
  // Runs of whitespace become one space, none at either end. Every byte is stored; the position
  // advances over a pending space (whitespace seen after some output) and over non-space bytes,
  // so the output never gets ahead of the input. The loop-carried chains are one operation each
  // (o advances by one add; `any` says some byte was kept; `pending` follows from it).
  size_t o = 0, pending = 0, any = 0;
  auto scalar = [&](size_t from, size_t to) {
    for (size_t i = from; i < to; ++i) {
      const unsigned char t = table[p[i]];
      const size_t keep = kExact.space[p[i]] ^ 1u;
      const size_t space = pending & keep;
      out[o] = ' ';
      out[o + space] = static_cast<char>(t);
      o += space + keep;
      pending = (keep ^ 1) & any;  // whitespace after something kept
      any |= keep;
    }
  };
  size_t i = 0;
#if defined(__SSE2__)
  // Running text is mostly words between single spaces: a block of 16 bytes that starts with a
  // kept byte and whose only whitespace is single ' ' bytes is copied whole (lowercased for
  // kLower), after the pending space if any; a trailing ' ' becomes the pending one. Other blocks
  // go through the byte loop.
  const __m128i space_v = _mm_set1_epi8(' ');
  for (; i + 16 <= text.size(); i += 16) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
    const unsigned sp = static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(x, space_v)));
    const __m128i ctl = _mm_sub_epi8(x, _mm_set1_epi8('\t'));  // '\t' ... '\r': 0 ... 4
    const unsigned other_ws = static_cast<unsigned>(
        _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_min_epu8(ctl, _mm_set1_epi8(4)), ctl)));
    if (other_ws != 0 || (sp & 1) != 0 || (sp & (sp >> 1)) != 0) {
      scalar(i, i + 16);
      continue;
    }
    __m128i v = x;
    if (lower) {
      const __m128i d = _mm_sub_epi8(x, _mm_set1_epi8('A'));
      const __m128i upper = _mm_cmpeq_epi8(_mm_min_epu8(d, _mm_set1_epi8(25)), d);
      v = _mm_add_epi8(x, _mm_and_si128(upper, _mm_set1_epi8(32)));
    }
    out[o] = ' ';
    o += pending;
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + o), v);
    pending = sp >> 15;
    o += 16 - pending;
    any = 1;
  }
#endif
  scalar(i, text.size());
  return Hash128Of(std::string_view(out, o));
}

// How many input splits the stages that read documents (signatures, the verification spill,
// filter) keep in flight: two per thread, but at most a quarter of the budget's worth of input
// (counted as the largest planned split each, not the split_bytes cap: the splits are planned
// finer, and a window of the cap's count held 16 threads to one split each, every thread that
// finished waiting for the oldest split to be written), and at least one.
size_t SplitWindow(const Ctx& c, int per_thread) {
  uint64_t largest = 1;
  for (const InputSplit& s : c.splits) largest = std::max(largest, s.bytes);
  const uint64_t by_budget = c.opt.memory_limit / 4 / std::min(largest, c.opt.split_bytes);
  const uint64_t by_threads = static_cast<uint64_t>(per_thread) * std::max(1, c.pool->size());
  return static_cast<size_t>(std::max<uint64_t>(1, std::min(by_budget, by_threads)));
}

// Global indices of the splits task `task` of `tasks` processes.
std::vector<size_t> TaskSplitIndices(const Ctx& c, int task, int tasks) {
  std::vector<InputSplit> mine = SelectTaskSplits(c.splits, task, tasks);
  std::vector<size_t> out;
  size_t j = 0;
  for (size_t i = 0; i < c.splits.size() && j < mine.size(); ++i) {
    const InputSplit& s = c.splits[i];
    if (s.file_index == mine[j].file_index && s.begin == mine[j].begin && s.end == mine[j].end) {
      out.push_back(i);
      ++j;
    }
  }
  return out;
}

// Removes outputs "<stem>-IIIII-of-MMMMM.bin" of an earlier run of this stage with another task
// count M != tasks (they would make the next stage's task set ambiguous).
absl::Status RemoveStaleTaskFiles(Env* env, const std::string& dir, const std::string& stem,
                                  int tasks) {
  if (!env->IsDirectory(dir)) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::vector<std::string> names, env->ListDir(dir));
  for (const std::string& n : names) {
    const std::optional<TaskPart> p = ParseTaskPart(n, stem);
    if (!p || p->rest != kTaskFileSuffix || p->tasks == tasks) continue;
    RETURN_IF_ERROR(env->RemoveFile(JoinPath(dir, n)));
  }
  return absl::OkStatus();
}


absl::Status WriteStats(const Ctx& c, DedupStage stage, std::vector<uint64_t> stats,
                        const Stopwatch& sw) {
  stats[kWallUs] = static_cast<uint64_t>(sw.Seconds() * 1e6);
  stats[kPeakRss] = PeakRssBytes();
  std::string dir = c.Dir("stats");
  RETURN_IF_ERROR(c.env->CreateDirs(dir));
  RETURN_IF_ERROR(RemoveStaleTaskFiles(c.env, dir, DedupStageName(stage), c.run.tasks));
  ASSIGN_OR_RETURN(auto w, c.OpenWork(JoinPath(dir, TaskFileName(DedupStageName(stage),
                                                                 c.run.task, c.run.tasks)),
                                      Kind::kStats, 8));
  for (uint64_t v : stats) RETURN_IF_ERROR(w->Add(v));
  return w->Finish();
}

absl::StatusOr<std::vector<std::vector<uint64_t>>> ReadStats(const Ctx& c, DedupStage stage) {
  ASSIGN_OR_RETURN(std::vector<std::string> paths,
                   FindTaskFiles(c.env, c.Dir("stats"), DedupStageName(stage), DedupStageName(stage)));
  std::vector<std::vector<uint64_t>> out;
  for (const std::string& p : paths) {
    ASSIGN_OR_RETURN(auto r, FileReader::Open(c.env, p, Kind::kStats, 8));
    RETURN_IF_ERROR(c.CheckFingerprint(*r, p));
    ASSIGN_OR_RETURN(auto v, FileReader::ReadAll<uint64_t>(c.env, p, Kind::kStats));
    if (v.size() < kNumSlots) return absl::DataLossError(absl::StrCat(p, ": too few counters"));
    out.push_back(std::move(v));
  }
  return out;
}

// Opens every task output `stem` of the producing stage in `dir`, checking the fingerprint.
absl::StatusOr<std::vector<std::unique_ptr<FileReader>>> OpenAll(const Ctx& c, const char* sub,
                                                                const std::string& stem,
                                                                DedupStage producer, Kind kind,
                                                                uint32_t record_size) {
  ASSIGN_OR_RETURN(std::vector<std::string> paths,
                   FindTaskFiles(c.env, c.Dir(sub), stem, DedupStageName(producer)));
  std::vector<std::unique_ptr<FileReader>> out;
  for (const std::string& p : paths) {
    // The fingerprint first: files of a run with other options differ in record size too.
    ASSIGN_OR_RETURN(auto r, FileReader::Open(c.env, p, kind, 0));
    RETURN_IF_ERROR(c.CheckFingerprint(*r, p));
    if (record_size != 0 && r->header().record_size != record_size) {
      return absl::DataLossError(absl::StrCat(p, ": corrupt dedup intermediate file: record size ",
                                              r->header().record_size, ", expected ", record_size));
    }
    out.push_back(std::move(r));
  }
  return out;
}

int SigBands(const Ctx& c) { return c.opt.near ? c.opt.bands : 0; }

uint32_t SigRecordSize(const Ctx& c) {
  return static_cast<uint32_t>(sizeof(SigRecord) + 8 * static_cast<size_t>(SigBands(c)));
}

uint64_t BandHash(const uint64_t* signature, int band, int rows) {
  return Hash64(reinterpret_cast<const char*>(signature + static_cast<size_t>(band) * rows),
                8 * static_cast<size_t>(rows), static_cast<uint64_t>(band));
}


}  // namespace grist::dedup::internal
