#include "tokenize/encode.h"

#include <algorithm>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/config.h"
#include "common/env.h"
#include "common/json_writer.h"
#include "common/ordered.h"
#include "common/progress.h"
#include "common/records.h"
#include "common/shared_work.h"
#include "common/status_macros.h"
#include "common/sysinfo.h"
#include "common/task_parts.h"
#include "common/thread_pool.h"
#include "tokenize/indexed_dataset.h"

namespace grist::tokenize {
namespace {

// One document's ids as encoded by the split's thread or a helper (common/shared_work.h).
struct Encoded {
  std::vector<int> ids;
  absl::Status status;
};

struct SplitResult {
  std::vector<int> ids;          // all documents' ids, concatenated
  std::vector<uint32_t> lengths; // per kept document
  uint64_t docs = 0, malformed = 0, empty = 0, bytes = 0;
};

}  // namespace

const OptionTable<EncodeStageOptions>& EncodeStageOptions::Table() {
  static const auto* table = [] {
    auto* t = new OptionTable<EncodeStageOptions>("tokenize.");
    t->Enum("tokenize.engine", GRIST_OPTION_FIELD(encode.engine),
            "grist: grist's own BPE encoder where it is exact, else SentencePiece; sentencepiece: "
            "always the library",
            std::vector<std::pair<std::string, Engine>>{{"grist", Engine::kGrist},
                                                        {"sentencepiece", Engine::kSentencePiece}});
    t->Bool("tokenize.add_bos", GRIST_OPTION_FIELD(encode.add_bos), "Prepend BOS to every document")
        .Flags({"bos", "no-bos"});
    t->Bool("tokenize.add_eos", GRIST_OPTION_FIELD(encode.add_eos), "Append EOS to every document")
        .Flags({"eos", "no-eos"});
    t->Int("tokenize.piece_bytes", GRIST_OPTION_FIELD(encode.piece_bytes),
           "Target size of the pieces a long document is encoded in (0: never cut)", {0});
    t->Int("tokenize.split_bytes", GRIST_OPTION_FIELD(split_bytes),
           "Largest input split, the unit of parallel work (never changes the output)", {1});
    return t;
  }();
  return *table;
}

absl::StatusOr<EncodeStageOptions> EncodeStageOptions::FromConfig(const Config& config) {
  EncodeStageOptions o;
  RETURN_IF_ERROR(Table().Read(config, &o));
  return o;
}

std::string EncodeReport::ToJson(bool with_seconds) const {
  JsonWriter w(0);
  w.BeginObject();
  w.Field("docs_in", counts.docs_in).Field("docs_out", counts.docs_out);
  w.Field("docs_rejected", counts.docs_rejected).Field("docs_removed", counts.docs_removed);
  w.Field("bytes_in", counts.bytes_in).Field("tokens", tokens);
  w.Field("rejected_malformed", rejected_malformed).Field("rejected_empty", rejected_empty);
  w.Field("max_document_tokens", max_document_tokens);
  if (with_seconds) {
    w.Field("seconds", seconds).Key("phase_seconds").BeginObject();
    w.Field("start", phase_seconds.start).Field("model", phase_seconds.model);
    w.Field("plan", phase_seconds.plan).Field("encode", phase_seconds.encode);
    w.Field("finish", phase_seconds.finish);
    w.EndObject();
  }
  w.EndObject();
  return w.Take();
}

absl::StatusOr<EncodeReport> RunEncode(Env* env, const std::vector<std::string>& inputs,
                                       const std::string& output_dir,
                                       const EncodeStageOptions& options, const RunOptions& run,
                                       const Tokenizer* model) {
  Stopwatch sw;
  if (run.tasks < 1 || run.task < 0 || run.task >= run.tasks) {
    return absl::InvalidArgumentError(absl::StrCat("task ", run.task, " of ", run.tasks));
  }
  // The model loads (SentencePiece's parse, then grist's encoder's tables: tens of ms for a 32k
  // model) on its own thread while this one lists and plans the inputs; one after the other they
  // were the serial start of every encode. A model error is reported before an input error.
  EncodeReport rep;
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok_or = absl::UnknownError("model not loaded");
  std::jthread model_thread([&] {
    Stopwatch msw;
    if (model == nullptr) {
      tok_or = Tokenizer::Load(env, options.model_path,
                               /*build_native=*/options.encode.engine == Engine::kGrist);
    }
    const Tokenizer* t = model != nullptr ? model : tok_or.ok() ? tok_or->get() : nullptr;
    if (t != nullptr && options.encode.engine == Engine::kGrist) (void)t->native();
    rep.phase_seconds.model = msw.Seconds();
  });
  ThreadPool pool(run.threads);
  absl::StatusOr<std::vector<InputFile>> files_or = ListInputs(env, inputs);
  absl::StatusOr<std::vector<InputSplit>> all_or = absl::UnknownError("inputs not planned");
  if (files_or.ok()) {
    all_or = PlanSplits(env, *files_or,
                        BalancedSplitBytes(*files_or, options.split_bytes, run.tasks), &pool);
  } else {
    all_or = files_or.status();
  }
  rep.phase_seconds.plan = sw.Seconds();
  model_thread.join();
  std::unique_ptr<Tokenizer> loaded;
  if (model == nullptr) {
    ASSIGN_OR_RETURN(loaded, std::move(tok_or));
  }
  const Tokenizer* tok = model != nullptr ? model : loaded.get();
  ASSIGN_OR_RETURN(std::vector<InputFile> files, std::move(files_or));
  ASSIGN_OR_RETURN(std::vector<InputSplit> all, std::move(all_or));
  std::vector<InputSplit> splits = SelectTaskSplits(all, run.task, run.tasks);
  SplitDecoders decoders(env, files, splits, InputOptions{},
                         SplitDecoders::DefaultChunksInFlight(pool.size()));
  uint64_t total = 0;
  for (const auto& s : splits) total += s.bytes;
  RETURN_IF_ERROR(env->CreateDirs(output_dir));
  const std::string prefix = JoinPath(output_dir, TaskPartName(kTokenPartStem, run.task, run.tasks));
  const int dtype_bytes = tok->vocab_size() <= 65536 ? 2 : 4;
  ASSIGN_OR_RETURN(auto writer, IndexedDatasetWriter::Open(env, prefix, dtype_bytes));

  Progress prog("tokenize", total, Progress::Unit::kBytes, !run.progress);
  rep.output_prefix = prefix;
  if (options.encode.engine == Engine::kSentencePiece) {
    rep.engine = "sentencepiece (requested)";
  } else if (tok->native()) {
    rep.engine = tok->native_chunk_cache() ? "grist (chunk cache)" : "grist";
  } else {
    rep.engine = absl::StrCat("sentencepiece (", tok->native_why_not(), ")");
  }
  // A split's documents are read a batch at a time and encoded through `shared`: this thread from
  // the first, threads with no split left to start (the stage's last wave) from the last; their
  // ids go to `helped` by document and come after this thread's, in document order.
  SharedWork shared;
  auto process = [&](size_t i) -> absl::StatusOr<SplitResult> {
    SplitResult r;
    ASSIGN_OR_RETURN(auto reader,
                     OpenRecordReader(env, files[splits[i].file_index], splits[i], InputOptions{},
                                      &decoders));
    // Reused from split to split on this thread: no allocation per document once grown.
    thread_local std::vector<Document> docs;
    thread_local std::vector<Encoded> helped;
    Encoded own;
    bool more = true;
    uint64_t last = 0;
    // A read error ends the batch; it is returned after the documents read before it, as when the
    // documents were encoded one by one as read (an earlier document's encode error comes first).
    absl::Status read_error;
    while (more) {
      size_t n = 0;
      uint64_t batch_bytes = 0;
      while (batch_bytes < kSharedWorkBatchBytes) {
        if (docs.size() <= n) docs.emplace_back();
        Document& doc = docs[n];
        absl::StatusOr<bool> next = reader->Next(&doc);
        if (!next.ok()) {
          read_error = next.status();
          more = false;
          break;
        }
        more = *next;
        if (!more) break;
        ++r.docs;
        r.bytes += doc.input_bytes;
        if (!doc.error.empty()) {
          ++r.malformed;
          continue;
        }
        if (doc.text.empty()) {
          ++r.empty;
          continue;
        }
        batch_bytes += doc.text.size();
        ++n;
      }
      const Document* const batch = docs.data();  // this thread's, for a helper too
      RETURN_IF_ERROR(RunInOrder(
          &shared, n, &own, &helped,
          [&](size_t k, Encoded* e, bool) {
            e->status = tok->Encode(batch[k].text, options.encode, &e->ids);
            if (!e->status.ok()) e->status = Annotate(e->status, batch[k].id());
          },
          [&](size_t, const Encoded& e) -> absl::Status {
            RETURN_IF_ERROR(e.status);
            r.ids.insert(r.ids.end(), e.ids.begin(), e.ids.end());
            r.lengths.push_back(static_cast<uint32_t>(e.ids.size()));
            return absl::OkStatus();
          }));
      RETURN_IF_ERROR(read_error);
      prog.Add(reader->bytes_consumed() - last);
      last = reader->bytes_consumed();
    }
    return r;
  };
  auto emit = [&](size_t, SplitResult&& r) -> absl::Status {
    size_t off = 0;
    for (uint32_t len : r.lengths) {
      RETURN_IF_ERROR(writer->Add(std::span<const int>(r.ids.data() + off, len)));
      off += len;
      rep.max_document_tokens = std::max<uint64_t>(rep.max_document_tokens, len);
    }
    rep.counts.docs_in += r.docs;
    rep.counts.docs_out += r.lengths.size();
    rep.counts.docs_rejected += r.malformed + r.empty;
    rep.counts.bytes_in += r.bytes;
    rep.rejected_malformed += r.malformed;
    rep.rejected_empty += r.empty;
    rep.tokens += off;
    return absl::OkStatus();
  };
  const double encode_start = sw.Seconds();
  rep.phase_seconds.start = encode_start;
  RETURN_IF_ERROR(OrderedParallel<SplitResult>(&pool, splits.size(),
                                               static_cast<size_t>(pool.size()) * 2, process,
                                               emit,
                                               [&] { return shared.Help(absl::Milliseconds(1)); }));
  rep.phase_seconds.encode = sw.Seconds() - encode_start;
  ASSIGN_OR_RETURN(DatasetInfo info, writer->Finish());
  rep.counts.bytes_out = info.bin_bytes + info.idx_bytes;
  prog.Finish();
  if (!rep.counts.Balanced()) {
    return absl::InternalError("tokenize: document accounting does not balance");
  }
  rep.seconds = sw.Seconds();
  rep.phase_seconds.finish = rep.seconds - encode_start - rep.phase_seconds.encode;
  RETURN_IF_ERROR(WriteFileAtomic(env, prefix + ".json", rep.ToJson(/*with_seconds=*/true) + "\n"));
  return rep;
}

absl::StatusOr<std::vector<std::string>> ListTokenParts(Env* env, const std::string& dir) {
  ASSIGN_OR_RETURN(std::vector<std::string> names, env->ListDir(dir));
  ASSIGN_OR_RETURN(TaskParts parts, FindTaskParts(names, kTokenPartStem, ".idx", dir));
  if (parts.tasks == 0) {
    return absl::NotFoundError(absl::StrCat(dir, ": no ", kTokenPartStem, "-*.idx parts"));
  }
  std::vector<std::string> out;
  for (int t = 0; t < parts.tasks; ++t) {
    std::string want = JoinPath(dir, TaskPartName(kTokenPartStem, t, parts.tasks));
    if (!parts.names.count(t) || !env->FileExists(want + ".json")) {
      return absl::FailedPreconditionError(
          absl::StrCat(want, ": task ", t, " of ", parts.tasks, " has not finished"));
    }
    out.push_back(std::move(want));
  }
  return out;
}

}  // namespace grist::tokenize
