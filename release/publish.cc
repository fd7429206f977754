#include "release/internal/publish.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <thread>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "common/crash_point.h"
#include "common/hash.h"
#include "common/input_plan.h"
#include "common/json_writer.h"
#include "common/ordered.h"
#include "common/progress.h"
#include "common/status_macros.h"
#include "common/thread_pool.h"
#include "common/version.h"
#include "pack/pack.h"
#include "release/internal/stages.h"
#include "shard/indexed_dataset.h"
#include "shard/shard_format.h"
#include "shard/split_writer.h"
#include "tokenize/encode.h"
#include "tokenize/indexed_dataset.h"

namespace grist::release::internal {
namespace {

// Documents of one split back to back, in their order: document i is tokens[ends[i-1], ends[i])
// (ends[-1] = 0). The unit handed from the reading threads to the split's consumers.
struct DocBatch {
  std::vector<int32_t> tokens;
  std::vector<uint64_t> ends;
  size_t size() const { return ends.size(); }
  std::span<const int32_t> doc(size_t i) const {
    const uint64_t begin = i == 0 ? 0 : ends[i - 1];
    return {tokens.data() + begin, static_cast<size_t>(ends[i] - begin)};
  }
  void Prepare(size_t reserve_tokens) { tokens.reserve(reserve_tokens); }
  void Clear() {
    tokens.clear();
    ends.clear();
  }
};
// The documents are read in items of whole documents of about this many tokens (1 MiB of int32),
// each item's documents sorted into one batch per split.
constexpr size_t kReadTokens = size_t{1} << 18;
// Samples of one split in packing order, samples[0, size): the unit handed from the split's packer
// to its shard writer. The samples' buffers are swapped with the packer's (Packer::Sink), so a
// block's buffers go back and forth between the two and keep their pages.
struct SampleBlock {
  std::vector<pack::PackedSample> samples;
  size_t size = 0;
  void Prepare(uint32_t sample_tokens);
  void Clear() { size = 0; }
};
// A block is handed on once it holds this many samples (2 MiB of int32 at 2049 tokens a sample).
constexpr size_t kBlockSamples = 256;
// Made with room for its samples, so that the packer, which gets these buffers back for the
// samples it assembles, never grows them.
void SampleBlock::Prepare(uint32_t sample_tokens) {
  samples.resize(kBlockSamples);
  for (pack::PackedSample& p : samples) {
    p.tokens.reserve(sample_tokens);
    p.segments.reserve(16);
  }
}

// Batches and blocks are reused once every consumer has let go of theirs, so their pages are
// touched once (fresh pages are slow to fault in on some VMs). Must outlive every item it hands
// out. T has Prepare(args...) (once, when made) and Clear() (each time it is handed out again).
template <typename T, typename... PrepareArgs>
class ReusePool {
 public:
  explicit ReusePool(PrepareArgs... args) : args_(args...) {}
  ReusePool(const ReusePool&) = delete;
  ReusePool& operator=(const ReusePool&) = delete;
  std::shared_ptr<T> Get() {
    std::unique_ptr<T> b;
    {
      absl::MutexLock l(&mu_);
      if (!free_.empty()) {
        b = std::move(free_.back());
        free_.pop_back();
      }
    }
    if (!b) {
      b = std::make_unique<T>();
      std::apply([&b](auto... a) { b->Prepare(a...); }, args_);
    }
    b->Clear();
    return std::shared_ptr<T>(b.release(), [this](T* p) {
      absl::MutexLock l(&mu_);
      free_.emplace_back(p);
    });
  }

 private:
  const std::tuple<PrepareArgs...> args_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<T>> free_ ABSL_GUARDED_BY(mu_);
};

// One consumer of a split's items (DocBatch or SampleBlock) in their order: its packer, its
// Megatron document writer, or its shard writer. Threaded, it runs on its own thread behind a
// bounded queue, so the consumers (and their final fsyncs) overlap one another and the reading;
// every consumer sees the same items in the same order either way, so the release's bytes do not
// depend on it. Inline, Push consumes at once on the caller's thread (`--threads 1`).
template <typename T>
class Consumer {
 public:
  // Gets each item as shared, so that it can keep it (the packer's window keeps its batches).
  using Fn = std::function<absl::Status(const std::shared_ptr<const T>&)>;
  using FinishFn = std::function<absl::Status()>;
  // Threaded, Push blocks while `max_queued` items wait.
  Consumer(Fn fn, FinishFn finish, bool threaded, size_t max_queued = kDefaultMaxQueued)
      : fn_(std::move(fn)),
        finish_(std::move(finish)),
        max_queued_(std::max<size_t>(1, max_queued)) {
    if (threaded) thread_ = std::thread([this] { Loop(); });
  }
  ~Consumer() { (void)Close(/*finish=*/false); }
  Consumer(const Consumer&) = delete;
  Consumer& operator=(const Consumer&) = delete;

  // Hands `b` on; blocks while max_queued items wait. Returns the consumer's error once it has
  // one (the item is then dropped), so the producer stops early.
  absl::Status Push(std::shared_ptr<const T> b) {
    absl::MutexLock l(&mu_);
    if (!thread_.joinable()) {
      if (status_.ok()) status_ = fn_(b);
      return status_;
    }
    auto room = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !status_.ok() || queue_.size() < max_queued_;
    };
    mu_.Await(absl::Condition(&room));
    if (!status_.ok()) return status_;
    queue_.push_back(std::move(b));
    return absl::OkStatus();
  }

  // Threaded: lets the consumer's thread consume what is queued and run `finish`, without waiting
  // for it (so that several consumers finish at once); with finish = false (the producer failed)
  // drops what is queued and skips `finish`. Inline: nothing (Close does it). Close must follow.
  void RequestClose(bool finish = true) {
    if (!thread_.joinable()) return;
    absl::MutexLock l(&mu_);
    closed_ = true;
    if (!finish) {
      queue_.clear();
      if (status_.ok()) status_ = absl::CancelledError("pack: not finished");
    }
  }

  // Consumes what is queued, runs `finish` (on the consumer's thread when threaded) and returns
  // the first error. With finish = false (the producer failed) drops what is queued and skips
  // `finish`, unless an earlier RequestClose asked for it. Idempotent.
  absl::Status Close(bool finish = true) {
    if (thread_.joinable()) {
      RequestClose(finish);
      thread_.join();
      absl::MutexLock l(&mu_);
      return status_;
    }
    absl::MutexLock l(&mu_);
    if (!closed_) {
      closed_ = true;
      if (status_.ok()) status_ = finish ? finish_() : absl::CancelledError("pack: not finished");
    }
    return status_;
  }

 private:
  static constexpr size_t kDefaultMaxQueued = 4;
  void Loop() {
    while (true) {
      std::shared_ptr<const T> b;
      {
        absl::MutexLock l(&mu_);
        auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return !queue_.empty() || closed_;
        };
        mu_.Await(absl::Condition(&ready));
        if (!status_.ok()) return;  // closed without finishing
        if (queue_.empty()) break;  // closed, all consumed
        b = std::move(queue_.front());
        queue_.pop_front();
      }
      absl::Status st = fn_(b);
      if (!st.ok()) {
        absl::MutexLock l(&mu_);
        status_ = std::move(st);
        queue_.clear();
        return;
      }
    }
    absl::Status st = finish_();
    absl::MutexLock l(&mu_);
    status_ = std::move(st);
  }
  Fn fn_;
  FinishFn finish_;
  const size_t max_queued_;
  absl::Mutex mu_;
  std::deque<std::shared_ptr<const T>> queue_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

// Moves the whole release at `staging` to `output`. An earlier release at `output` stays in place
// until the new one takes its name: with Env::Default() the two are swapped atomically
// (renameat2(RENAME_EXCHANGE); a reader of `output` sees the old release or the new one, never
// neither), elsewhere (other Envs, file systems without the exchange) the old one is renamed aside
// just before (a kill between the two renames leaves no release at `output` until a rerun).
// Returns the path now holding the earlier release (to remove once the new name is durable), or "".
absl::StatusOr<std::string> Publish(Env* env, const std::string& staging, const std::string& output) {
  RETURN_IF_ERROR(env->CreateDirs(DirName(output)));
  if (!env->IsDirectory(output)) {
    RETURN_IF_ERROR(env->RemoveAll(output));
    RETURN_IF_ERROR(env->RenameFile(staging, output));
    return std::string();
  }
#if defined(SYS_renameat2) && defined(RENAME_EXCHANGE)
  if (env == Env::Default()) {
    if (::syscall(SYS_renameat2, AT_FDCWD, staging.c_str(), AT_FDCWD, output.c_str(),
                  RENAME_EXCHANGE) == 0) {
      return staging;
    }
    const int e = errno;
    if (e != EINVAL && e != ENOSYS && e != ENOTSUP) {  // else: not supported here, rename instead
      return absl::Status(absl::ErrnoToStatusCode(e),
                          absl::StrCat("renameat2(RENAME_EXCHANGE) ", staging, " <-> ", output,
                                       ": ", std::strerror(e)));
    }
  }
#endif
  const std::string previous = staging + ".previous";
  RETURN_IF_ERROR(env->RemoveAll(previous));
  RETURN_IF_ERROR(env->RenameFile(output, previous));
  RETURN_IF_ERROR(env->RenameFile(staging, output));
  return previous;
}

absl::Status CheckInputSize(Env* env, const InputFile& f) {
  if (f.format == InputFormat::kHfDataset) return absl::OkStatus();
  ASSIGN_OR_RETURN(const uint64_t now, env->GetFileSize(f.path));
  if (now == f.size) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("input ", f.path, " changed while the build read it: ", f.size,
                   " bytes when the build listed it, ", now, " now; build again once it stays"));
}

}  // namespace

absl::Status CheckInputSizes(Env* env, const std::vector<InputFile>& files,
                             const std::vector<std::optional<FileStat>>* listed) {
  for (size_t i = 0; i < files.size(); ++i) {
    const InputFile& f = files[i];
    if (listed == nullptr || i >= listed->size() || !(*listed)[i]) {
      RETURN_IF_ERROR(CheckInputSize(env, f));
      continue;
    }
    // One stat: its size first (the message that names both sizes), then the rest of it.
    absl::StatusOr<FileStat> now = env->Stat(f.path);
    if (!now.ok() || now->size != f.size) {
      RETURN_IF_ERROR(CheckInputSize(env, f));
      if (!now.ok()) continue;
    }
    if (*now == *(*listed)[i]) continue;
    return absl::FailedPreconditionError(absl::StrCat(
        "input ", f.path, " changed while the build read it: the same size (", f.size,
        " bytes), but written or replaced since the build listed it (its modification or change "
        "time, or its inode, is another); build again once it stays"));
  }
  return absl::OkStatus();
}

std::vector<std::optional<FileStat>> StatInputs(Env* env, const std::vector<InputFile>& files) {
  std::vector<std::optional<FileStat>> out(files.size());
  for (size_t i = 0; i < files.size(); ++i) {
    if (files[i].format == InputFormat::kHfDataset) continue;
    if (files[i].stat) {
      out[i] = files[i].stat;
    } else if (absl::StatusOr<FileStat> st = env->Stat(files[i].path); st.ok()) {
      out[i] = *st;
    }
  }
  return out;
}

absl::StatusOr<std::vector<shard::FileInfo>> HashInputs(Env* env,
                                                        const std::vector<InputFile>& files,
                                                        int threads, FileSums* sums) {
  constexpr std::string_view kKind = "xxh3_128";
  std::vector<shard::FileInfo> inputs(files.size());
  RETURN_IF_ERROR(ParallelForThreads(threads, files.size(), [&](size_t i) -> absl::Status {
    const InputFile& f = files[i];
    const bool cached = sums != nullptr && f.format != InputFormat::kHfDataset;
    FileSums::Seen seen;
    if (cached) {
      const std::string hex = sums->Find(kKind, f.path, &seen, f.stat, f.listed_ns);
      if (!hex.empty() && seen.stat->size == f.size) {
        if (absl::StatusOr<Hash128> h = Hash128::FromHex(hex); h.ok()) {
          inputs[i] = {f.path, f.size, *h};
          return absl::OkStatus();
        }
      }
    }
    ASSIGN_OR_RETURN(Hash128 h, HashInput(env, f));
    RETURN_IF_ERROR(CheckInputSize(env, f));
    if (cached && seen.stat && seen.stat->size == f.size) {
      sums->Remember(kKind, f.path, seen, h.ToHex());
    }
    inputs[i] = {f.path, f.size, h};
    return absl::OkStatus();
  }));
  return inputs;
}

absl::StatusOr<BuildReport> PackAndPublish(Env* env, const PublishOptions& o) {
  const BuildConfig& bc = *o.config;
  tokenize::Tokenizer* tok = o.tokenizer;
  auto record = [&](const std::string& name) -> const StageRecord* {
    auto it = o.records.find(name);
    return it == o.records.end() ? nullptr : &it->second;
  };
  const StageRecord* enc_rec = record("tokenize");
  const StageRecord* tok_rec = record("tokenizer");
  if (!enc_rec || !tok_rec) return absl::InternalError("build: pack before tokenize");
  BuildReport report;
  report.output_dir = o.output_dir;
  // ---- pack + shard (one stage: its output is the release itself) ----
  Stopwatch pack_sw;
  if (env->IsDirectory(o.output_dir)) {
    ASSIGN_OR_RETURN(auto names, env->ListDir(o.output_dir));
    bool ours = names.empty() || env->FileExists(JoinPath(o.output_dir, "shards")) ||
                env->FileExists(JoinPath(o.output_dir, std::string(shard::kManifestName)));
    if (!ours) {
      return absl::FailedPreconditionError(absl::StrCat(
          o.output_dir, ": exists and is not a release; refusing to overwrite it"));
    }
  }
  // The new release is written into the staging folder and moved to --output only when whole, so
  // an earlier release there stays published (and valid) until the new one replaces it at once.
  const std::string& dir = o.staging_dir;
  RETURN_IF_ERROR(env->RemoveAll(dir));
  RETURN_IF_ERROR(env->CreateDirs(JoinPath(dir, std::string(shard::kShardsDir))));
  pack::PackOptions po = bc.pack;
  po.pad_id = tok->pad_id() >= 0 ? tok->pad_id() : (tok->eos_id() >= 0 ? tok->eos_id() : 0);
  const shard::TokenDtype dtype = shard::DtypeForVocab(static_cast<uint64_t>(tok->vocab_size()));
  const uint32_t st = po.sample_tokens();
  // Per split: its packer, handing blocks of samples to its shard writer, and its Megatron
  // document file (documents/<split>, docs/formats/release.md: each document's tokens as packed,
  // then EOS as Megatron's EOD unless it already ends with it; documents without tokens are not
  // written; the file is opened at the first document). The packer, the shard writer and the
  // document file are each a Consumer: with more than one thread the six run at once.
  struct SplitState {
    std::string name;
    std::unique_ptr<shard::SplitWriter> writer;
    std::unique_ptr<pack::Packer> packer;
    uint64_t documents = 0;
    std::unique_ptr<shard::IndexedDatasetWriter> docs;
    shard::DatasetInfo docs_info;
    uint64_t eod_appended = 0;
    shard::SplitInfo info;
    std::vector<int32_t> scratch;  // a document with its EOD, for the document file
    std::shared_ptr<SampleBlock> block;  // the packer's samples not yet handed on
    // Declared before pack_consumer, whose thread pushes to it: destroyed (joined) after it.
    std::unique_ptr<Consumer<SampleBlock>> shard_consumer;
    std::unique_ptr<Consumer<DocBatch>> pack_consumer, docs_consumer;
  };
  const int threads = o.run.threads <= 0 ? NumCpus() : o.run.threads;  // 0: every CPU
  const bool threaded = threads > 1;
  // The inputs' checksums for the manifest are read while the tokens are packed, which keeps two
  // or three threads busy whatever the count: read first, on their own, they were a pass in which
  // the two largest inputs kept two threads busy and the others waited.
  absl::StatusOr<std::vector<shard::FileInfo>> inputs = absl::UnknownError("inputs not hashed");
  std::jthread input_hasher;
  if (o.hashed_inputs) {
    inputs = *o.hashed_inputs;
  } else if (threaded) {
    input_hasher = std::jthread([&] { inputs = HashInputs(env, o.inputs, threads); });
  } else {
    inputs = HashInputs(env, o.inputs, 1);
  }
  const int32_t eos_id = tok->eos_id();
  // The document file's consumer may fall behind the reading by up to a packing window of
  // batches (64 at the default bestfit_window_tokens), which bestfit holds anyway. With 4 like the
  // others, the document file's writer, the slowest of the consumers, held the reading back, and
  // with it the packer and the shard writer behind it (16 threads, H100 host: the reading ended
  // 15 ms later than with 64; docs/results/2026-12-06-gpu/).
  const size_t docs_queued = static_cast<size_t>(po.bestfit_window_tokens / kReadTokens);
  // Before splits: they outlive their consumers and the items they hold.
  // One pool of batches per split: the validation packer's window keeps its batches for long,
  // which should be neither batches whose pages a train split touched nor each an item's room
  // (a validation batch holds the few documents of an item that go there).
  using BatchPool = ReusePool<DocBatch, size_t>;
  BatchPool batches[2] = {BatchPool(kReadTokens + kReadTokens / 4), BatchPool(0)};
  ReusePool<SampleBlock, uint32_t> blocks(st);
  SplitState splits[2];
  for (int i = 0; i < 2; ++i) {
    SplitState& s = splits[i];
    s.name = std::string(i == 0 ? shard::kTrainSplit : shard::kValidationSplit);
    s.writer = std::make_unique<shard::SplitWriter>(env, dir, s.name, st, dtype,
                                                    bc.shard_max_bytes);
    s.packer = std::make_unique<pack::Packer>(
        po, [&s, &blocks](pack::PackedSample& p) -> absl::Status {
          if (!s.block) s.block = blocks.Get();
          SampleBlock& b = *s.block;
          std::swap(b.samples[b.size++], p);  // the packer resets what it gets back
          if (b.size < kBlockSamples) return absl::OkStatus();
          return s.shard_consumer->Push(std::move(s.block));
        });
    s.shard_consumer = std::make_unique<Consumer<SampleBlock>>(
        [&s](const std::shared_ptr<const SampleBlock>& b) -> absl::Status {
          for (size_t j = 0; j < b->size; ++j) {
            RETURN_IF_ERROR(s.writer->Append(b->samples[j].tokens, b->samples[j].segments));
          }
          return absl::OkStatus();
        },
        [&s]() -> absl::Status {
          ASSIGN_OR_RETURN(s.info, s.writer->Finish());
          return absl::OkStatus();
        },
        threaded);
    s.pack_consumer = std::make_unique<Consumer<DocBatch>>(
        [&s](const std::shared_ptr<const DocBatch>& b) -> absl::Status {
          // bestfit keeps the batch, not a copy, for the documents in its window.
          for (size_t d = 0; d < b->size(); ++d) {
            RETURN_IF_ERROR(s.packer->Add(b->doc(d), b, b->tokens.size()));
          }
          return absl::OkStatus();
        },
        [&s]() -> absl::Status {
          RETURN_IF_ERROR(s.packer->Finish());
          if (s.block && s.block->size > 0) {
            RETURN_IF_ERROR(s.shard_consumer->Push(std::move(s.block)));
          }
          s.block.reset();
          return s.shard_consumer->Close();
        },
        threaded);
    s.docs_consumer = std::make_unique<Consumer<DocBatch>>(
        [&s, env, &dir, dtype, eos_id](const std::shared_ptr<const DocBatch>& b) -> absl::Status {
          for (size_t d = 0; d < b->size(); ++d) {
            std::span<const int32_t> doc = b->doc(d);
            if (doc.empty()) continue;
            if (!s.docs) {
              const std::string docs_dir = JoinPath(dir, std::string(shard::kDocumentsDir));
              RETURN_IF_ERROR(env->CreateDirs(docs_dir));
              ASSIGN_OR_RETURN(s.docs, shard::IndexedDatasetWriter::Open(
                                           env, JoinPath(docs_dir, s.name), dtype));
            }
            if (eos_id >= 0 && doc.back() != eos_id) {
              s.scratch.assign(doc.begin(), doc.end());
              s.scratch.push_back(eos_id);
              ++s.eod_appended;
              RETURN_IF_ERROR(s.docs->Add(s.scratch));
            } else {
              RETURN_IF_ERROR(s.docs->Add(doc));
            }
          }
          return absl::OkStatus();
        },
        [&s]() -> absl::Status {
          if (!s.docs) return absl::OkStatus();
          ASSIGN_OR_RETURN(s.docs_info, s.docs->Finish());
          return absl::OkStatus();
        },
        threaded, docs_queued);
  }
  ASSIGN_OR_RETURN(std::vector<std::string> parts, tokenize::ListTokenParts(env, o.tokens_dir));
  {
    Progress prog("pack", enc_rec->summary.tokens, Progress::Unit::kCount, !o.run.progress);
    // The tokenized documents in their order, part by part, each part read in items of whole
    // documents of about kReadTokens tokens: a worker reads an item's documents (widened to int32)
    // and sorts them into a train and a validation batch; the items' batches are handed on in
    // item order (OrderedParallel), so every consumer sees the documents in the same order for any
    // thread count. A consumer's error stops the reading.
    struct ReadItem {
      uint64_t begin, end;  // its documents
      uint64_t tokens;
    };
    std::optional<ThreadPool> pool;
    if (threaded) pool.emplace(threads);
    absl::Status read_status = [&]() -> absl::Status {
      for (const std::string& part : parts) {
        ASSIGN_OR_RETURN(const std::unique_ptr<tokenize::IndexedDatasetReader> reader,
                         tokenize::IndexedDatasetReader::Open(env, part));
        std::vector<ReadItem> items;
        for (uint64_t i = 0; i < reader->sequences(); ++i) {
          if (items.empty() || items.back().tokens >= kReadTokens) items.push_back({i, i, 0});
          items.back().end = i + 1;
          items.back().tokens += reader->length(i);
        }
        using Read = std::array<std::shared_ptr<DocBatch>, 2>;  // train, validation
        RETURN_IF_ERROR(OrderedParallel<Read>(
            pool ? &*pool : nullptr, items.size(), static_cast<size_t>(threads) + 2,
            [&](size_t k) -> absl::StatusOr<Read> {
              const ReadItem& it = items[k];
              Read out = {batches[0].Get(), batches[1].Get()};
              // Into the train batch, then moved to the validation batch if it belongs there.
              std::vector<int32_t>& t = out[0]->tokens;
              for (uint64_t i = it.begin; i < it.end; ++i) {
                const size_t begin = t.size();
                reader->Read(i, &t);
                const std::span<const int32_t> doc(t.data() + begin, t.size() - begin);
                DocBatch& b = *out[bc.split.SplitOf(doc)];
                if (&b != out[0].get()) {
                  b.tokens.insert(b.tokens.end(), doc.begin(), doc.end());
                  t.resize(begin);
                }
                b.ends.push_back(b.tokens.size());
              }
              return out;
            },
            [&](size_t k, Read&& read) -> absl::Status {
              for (int i = 0; i < 2; ++i) {
                SplitState& s = splits[i];
                if (read[i]->size() == 0) continue;
                s.documents += read[i]->size();
                std::shared_ptr<const DocBatch> b = std::move(read[i]);
                RETURN_IF_ERROR(s.pack_consumer->Push(b));
                RETURN_IF_ERROR(s.docs_consumer->Push(std::move(b)));
              }
              prog.Add(items[k].tokens);
              return absl::OkStatus();
            }));
      }
      return absl::OkStatus();
    }();
    pool.reset();
    // Every consumer is closed (joined) whatever happened, finishing its files only if the
    // reading succeeded; the first error by a fixed order wins.
    absl::Status first = read_status;
    for (SplitState& s : splits) {  // every consumer finishes at once, then each is joined
      s.pack_consumer->RequestClose(read_status.ok());
      s.docs_consumer->RequestClose(read_status.ok());
    }
    for (SplitState& s : splits) {
      absl::Status a = s.pack_consumer->Close(read_status.ok());
      // Closed by the packer's finish when that ran; else (an error before) not finished.
      absl::Status c = s.shard_consumer->Close(/*finish=*/false);
      absl::Status b = s.docs_consumer->Close(read_status.ok());
      if (first.ok()) first = !a.ok() ? a : (!c.ok() ? c : b);
    }
    RETURN_IF_ERROR(first);
    prog.Finish();
  }
  shard::Manifest m;
  m.release_version = bc.release_version;
  m.grist_version = GRIST_VERSION;
  m.config_json = bc.canonical_json;
  m.config_xxh3_128 = bc.hash;
  if (input_hasher.joinable()) input_hasher.join();
  ASSIGN_OR_RETURN(m.inputs, std::move(inputs));
  m.seq_len = static_cast<uint32_t>(po.seq_len);
  m.sample_tokens = st;
  m.token_dtype = dtype;
  m.seed = bc.seed;
  m.packing = po.strategy;
  pack::PackStats all;
  JsonWriter pj(0);
  pj.BeginObject();
  for (SplitState& s : splits) {
    shard::SplitInfo info = std::move(s.info);
    info.documents = s.documents;
    if (s.docs) {
      const shard::DatasetInfo& d = s.docs_info;
      const std::string name = absl::StrCat(std::string(shard::kDocumentsDir), "/", s.name);
      info.documents_file = shard::DocumentsFileInfo{
          name, d.sequences, d.tokens, s.eod_appended, {name + ".bin", d.bin_bytes, d.bin_xxh3_128},
          {name + ".idx", d.idx_bytes, d.idx_xxh3_128}};
    }
    m.splits[s.name] = std::move(info);
    all.Merge(s.packer->stats());
    pj.Key(s.name).Raw(s.packer->stats().ToJson());
  }
  pj.EndObject();
  RETURN_IF_ERROR(crash::Point("build.pack.after_shards"));
  // Tokenizer into the release.
  RETURN_IF_ERROR(WriteFileAtomic(env, JoinPath(dir, std::string(shard::kTokenizerName)),
                                  tok->model_bytes()));
  m.tokenizer.file = {std::string(shard::kTokenizerName), tok->model_bytes().size(),
                      Hash128Of(tok->model_bytes())};
  m.tokenizer.vocab_size = static_cast<uint64_t>(tok->vocab_size());
  m.tokenizer.bos_id = tok->bos_id();
  m.tokenizer.eos_id = tok->eos_id();
  m.tokenizer.pad_id = po.pad_id;
  m.tokenizer.model_type = tok->model_type();
  // Counts: documents in = in shards + rejected + removed, per stage.
  const StageSummary& es = enc_rec->summary;
  if (all.documents != es.docs_out ||
      m.splits["train"].documents + m.splits["validation"].documents != es.docs_out) {
    return absl::InternalError("build: pack did not receive every tokenized document");
  }
  // Nothing lost: documents in = in shards + rejected + removed, summed over the counted stages
  // (clean, dedup, tokenize); documents in are those of the first counted stage that ran.
  JsonWriter cj(0);
  cj.BeginObject();
  uint64_t rejected = 0, removed = 0;
  std::optional<uint64_t> docs_in;
  for (const StageDef& s : Stages()) {
    if (!s.counted) continue;
    const StageRecord* r = record(s.name);
    if (!r) {
      cj.Key(s.name).BeginObject().Field("enabled", false).EndObject();
      continue;
    }
    cj.Key(s.name).Raw(r->report_json);
    if (!docs_in) docs_in = r->summary.docs_in;
    rejected += r->summary.docs_rejected;
    removed += r->summary.docs_removed;
  }
  cj.Key("pack").Raw(pj.str());
  cj.Key("shard").BeginObject();
  cj.Field("documents_in", es.docs_out);
  cj.Field("documents_train", m.splits["train"].documents);
  cj.Field("documents_validation", m.splits["validation"].documents);
  cj.Field("samples_train", m.splits["train"].samples);
  cj.Field("samples_validation", m.splits["validation"].samples);
  cj.Field("shards_train", static_cast<uint64_t>(m.splits["train"].shards.size()));
  cj.Field("shards_validation", static_cast<uint64_t>(m.splits["validation"].shards.size()));
  cj.EndObject();
  if (*docs_in != es.docs_out + rejected + removed) {
    return absl::InternalError(absl::StrCat("build: documents in (", *docs_in,
                                            ") != in shards + rejected + removed (", es.docs_out,
                                            " + ", rejected, " + ", removed, ")"));
  }
  cj.Key("total").BeginObject();
  cj.Field("documents_in", *docs_in).Field("documents_in_shards", es.docs_out);
  cj.Field("documents_rejected", rejected).Field("documents_removed", removed);
  cj.EndObject();
  cj.EndObject();
  m.counts_json = cj.Take();
  m.release_id = shard::ComputeReleaseId(m);

  StageSummary ps{.name = "pack+shard"};
  ps.docs_in = all.documents;
  ps.docs_out = all.documents - all.empty_documents;
  ps.tokens = all.tokens_out;
  ps.samples = all.samples;
  ps.bytes_in = es.tokens * shard::TokenDtypeSize(dtype);
  ps.note = absl::StrFormat("%s, %.1f%% padding", po.strategy, 100 * all.padding_fraction());
  ps.seconds = pack_sw.Seconds();

  for (const StageDef& s : Stages()) {
    const StageRecord* r = record(s.name);
    report.stages.push_back(r ? r->summary : StageSummary{.name = s.name, .note = "disabled"});
  }
  report.stages.push_back(ps);
  report.release_id = m.release_id;
  report.seconds = o.total->Seconds();
  report.peak_rss_bytes = PeakRssBytes();
  // reports/ (not reproducible, not in the manifest), then the manifest last.
  const std::string reports = JoinPath(dir, std::string(shard::kReportsDir));
  RETURN_IF_ERROR(env->CreateDirs(reports));
  JsonWriter bj(2);
  bj.BeginObject().Key("build").Raw(report.ToJson());
  bj.Field("threads", static_cast<int64_t>(o.run.threads)).Field("config", o.config_path);
  bj.EndObject();
  RETURN_IF_ERROR(WriteFileAtomic(env, JoinPath(reports, "build.json"), bj.str() + "\n"));
  RETURN_IF_ERROR(WriteFileAtomic(env, JoinPath(reports, "summary.md"), report.Table()));
  RETURN_IF_ERROR(crash::Point("build.pack.before_manifest"));
  RETURN_IF_ERROR(shard::WriteManifest(env, dir, m));
  ASSIGN_OR_RETURN(std::string previous, Publish(env, dir, o.output_dir));
  RETURN_IF_ERROR(crash::Point("build.pack.after_manifest"));
  RETURN_IF_ERROR(env->SyncDir(DirName(o.output_dir)));
  if (!previous.empty()) RETURN_IF_ERROR(env->RemoveAll(previous));
  return report;
}

}  // namespace grist::release::internal

namespace grist::release::internal {

absl::StatusOr<std::optional<BuildReport>> ReleaseUpToDate(Env* env, const PublishOptions& o,
                                                           const std::string& release_id,
                                                           FileSums* sums) {
  const std::string manifest_path = JoinPath(o.output_dir, std::string(shard::kManifestName));
  absl::StatusOr<std::string> text = ReadFileToString(env, manifest_path);
  if (!text.ok()) return std::nullopt;  // no release there (yet): pack
  auto not_current = [&](const std::string& why) -> std::optional<BuildReport> {
    if (o.run.progress) {
      std::fprintf(stderr, "build: %s: %s; packing again\n", o.output_dir.c_str(), why.c_str());
    }
    return std::nullopt;
  };
  absl::StatusOr<shard::Manifest> m = shard::ParseManifest(*text, manifest_path);
  if (!m.ok()) return not_current(std::string(m.status().message()));
  if (m->release_id != release_id) return std::nullopt;  // another release: pack
  // Every file the manifest lists, as it lists it.
  std::vector<const shard::FileInfo*> files = {&m->tokenizer.file};
  for (const auto& [name, split] : m->splits) {
    for (const shard::ShardInfo& s : split.shards) {
      for (const shard::FileInfo* f : {&s.bin, &s.idx, &s.seg}) files.push_back(f);
    }
    if (split.documents_file) {
      files.push_back(&split.documents_file->bin);
      files.push_back(&split.documents_file->idx);
    }
  }
  constexpr std::string_view kKind = "xxh3_128";
  std::vector<std::string> differ(files.size());
  RETURN_IF_ERROR(ParallelForThreads(o.run.threads, files.size(), [&](size_t i) -> absl::Status {
    const shard::FileInfo& f = *files[i];
    const std::string path = JoinPath(o.output_dir, f.path);
    const std::string want = f.xxh3_128.ToHex();
    FileSums::Seen seen;
    std::string hex = sums != nullptr ? sums->Find(kKind, path, &seen) : "";
    if (hex.empty()) {
      absl::StatusOr<Hash128> h = HashFile128(env, path);
      if (!h.ok()) {
        differ[i] = std::string(h.status().message());
        return absl::OkStatus();
      }
      hex = h->ToHex();
      if (sums != nullptr && seen.stat && seen.stat->size == f.bytes && hex == want) {
        sums->Remember(kKind, path, seen, hex);
      }
    }
    if (seen.stat && seen.stat->size != f.bytes) {
      differ[i] = absl::StrCat(f.path, " has ", seen.stat->size, " bytes, the manifest says ",
                               f.bytes);
    } else if (hex != want) {
      differ[i] = absl::StrCat(f.path, " does not match its checksum in the manifest");
    }
    return absl::OkStatus();
  }));
  for (const std::string& why : differ) {
    if (!why.empty()) return not_current(why);
  }
  // Up to date. What an interrupted publish may have left beside it goes (as Publish's caller
  // removes it after a move).
  RETURN_IF_ERROR(env->RemoveAll(o.staging_dir));
  RETURN_IF_ERROR(env->RemoveAll(o.staging_dir + ".previous"));
  BuildReport report;
  report.output_dir = o.output_dir;
  report.release_id = m->release_id;
  for (const StageDef& s : Stages()) {
    auto it = o.records.find(s.name);
    report.stages.push_back(it != o.records.end()
                                ? it->second.summary
                                : StageSummary{.name = s.name, .note = "disabled"});
  }
  StageSummary ps{.name = "pack+shard"};
  for (const auto& [name, split] : m->splits) {
    ps.docs_in += split.documents;
    ps.tokens += split.tokens - split.padding_tokens;
    ps.samples += split.samples;
  }
  ps.docs_out = ps.docs_in;
  ps.resumed = true;
  ps.note = "release up to date";
  report.stages.push_back(ps);
  report.seconds = o.total->Seconds();
  report.peak_rss_bytes = PeakRssBytes();
  return report;
}

}  // namespace grist::release::internal
