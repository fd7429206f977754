// `grist bench clean`: throughput of the clean stage on real text beside the tool a user would pick
// instead, measured in the same run on the same documents: datatrove's FineWeb filter pipeline
// (bench/python/bench_clean_peer.py: GopherRepetition, GopherQuality, C4, FineWeb with grist's
// thresholds), per core, on Wikinews and on short news documents (the Wikinews articles of 1-2 KB);
// then `grist clean` end to end per core on both beside the read+decompress+parse ceiling, scaling
// with the thread count, and (an extra line) SentencePiece's spm_encode per core on the same text.
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <optional>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/corpus_sample.h"
#include "bench/python_peer.h"
#include "bench/registry.h"
#include "clean/cleaner.h"
#include "clean/run_clean.h"
#include "common/env.h"
#include "common/progress.h"
#include "common/records.h"
#include "common/stage.h"
#include "common/status_macros.h"
#include "common/sysinfo.h"
#include "common/thread_pool.h"

namespace grist::bench {
namespace {

struct CleanBenchFlags {
  Options options;
  std::vector<std::string> inputs;
  std::string spm_model;
  int max_threads = 0;
  int limit_mb = 0;
};

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// CPU time (user + system) of this process, all threads.
double ProcessCpuSeconds() {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + ru.ru_stime.tv_sec +
         ru.ru_stime.tv_usec * 1e-6;
}

// CPU time (user + system) of the waited-for child processes so far.
double ChildrenCpuSeconds() {
  rusage ru;
  getrusage(RUSAGE_CHILDREN, &ru);
  return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + ru.ru_stime.tv_sec +
         ru.ru_stime.tv_usec * 1e-6;
}

std::string FirstExisting(const std::vector<std::string>& candidates) {
  for (const auto& c : candidates) {
    if (Env::Default()->FileExists(c)) return c;
  }
  return "";
}

// Reads every document of `inputs` (all splits, one thread): the read+decompress+parse ceiling.
absl::StatusOr<std::vector<Document>> ReadAll(const std::vector<std::string>& inputs,
                                              uint64_t* record_bytes, double* seconds,
                                              bool keep, uint64_t limit_bytes) {
  Stopwatch sw;
  Env* env = Env::Default();
  ASSIGN_OR_RETURN(std::vector<InputFile> files, ListInputs(env, inputs));
  ASSIGN_OR_RETURN(std::vector<InputSplit> splits, PlanSplits(env, files, 32ull << 20));
  std::vector<Document> docs;
  *record_bytes = 0;
  InputOptions io;
  for (const auto& s : splits) {
    ASSIGN_OR_RETURN(auto reader, OpenRecordReader(env, files[s.file_index], s, io));
    Document d;
    while (true) {
      ASSIGN_OR_RETURN(bool more, reader->Next(&d));
      if (!more) break;
      *record_bytes += d.input_bytes;
      if (keep && d.error.empty() && !d.text.empty()) docs.push_back(std::move(d));
      d = Document();
      if (limit_bytes && *record_bytes >= limit_bytes) break;
    }
    if (limit_bytes && *record_bytes >= limit_bytes) break;
  }
  *seconds = sw.Seconds();
  return docs;
}

// The documents of `docs` up to `max_bytes` of text, as a JSONL file at `path`.
absl::StatusOr<uint64_t> WriteDocs(const std::vector<const Document*>& docs, uint64_t max_bytes,
                                   const std::string& path, std::vector<const Document*>* taken) {
  std::string jsonl;
  uint64_t bytes = 0;
  taken->clear();
  for (const Document* d : docs) {
    if (max_bytes && bytes >= max_bytes) break;
    Document copy;
    copy.text = d->text;
    jsonl += SerializeRecord(copy);
    jsonl += '\n';
    bytes += d->text.size();
    taken->push_back(d);
  }
  RETURN_IF_ERROR(WriteFileAtomic(Env::Default(), path, jsonl));
  return bytes;
}

// grist's Cleaner (default options) over `docs`, one thread: {MB/s, docs/s} of this thread's CPU
// time, and how many it keeps.
struct CleanerRate {
  double mb_per_s = 0, docs_per_s = 0;
  uint64_t kept = 0;
};
CleanerRate CleanerRun(const std::vector<const Document*>& docs) {
  clean::Cleaner cleaner{clean::CleanOptions()};
  clean::CleanResult r;
  uint64_t bytes = 0;
  CleanerRate rate;
  double t0 = ThreadCpuSeconds();
  for (const Document* d : docs) {
    cleaner.Clean(d->text, &r);
    bytes += d->text.size();
    rate.kept += r.keep();
  }
  double s = std::max(ThreadCpuSeconds() - t0, 1e-9);
  rate.mb_per_s = bytes / 1e6 / s;
  rate.docs_per_s = docs.size() / s;
  return rate;
}

// The datatrove peer beside grist's cleaner on the same documents (the first `sample_bytes` of
// `docs`): MB/s and docs/s per core.
absl::Status FiltersVsDatatrove(Report* report, const Options& opt, const std::string& corpus_name,
                                const std::vector<const Document*>& docs, uint64_t sample_bytes,
                                const std::string& tmp) {
  std::vector<const Document*> sample;
  const std::string path = JoinPath(tmp, "peer_sample.jsonl");
  ASSIGN_OR_RETURN(uint64_t bytes, WriteDocs(docs, sample_bytes, path, &sample));
  std::vector<double> mb, dps;
  uint64_t kept = 0;
  for (int i = 0; i < opt.warmup + std::max(1, opt.repetitions); ++i) {
    CleanerRate r = CleanerRun(sample);
    kept = r.kept;
    if (i >= opt.warmup) {
      mb.push_back(r.mb_per_s);
      dps.push_back(r.docs_per_s);
    }
  }
  std::optional<Stats> peer_mb, peer_docs;
  std::string note;
  auto run = RunPythonPeer("bench_clean_peer.py", "datatrove,spacy",
                           {path, "--repetitions", std::to_string(std::max(1, opt.repetitions)),
                            "--warmup", std::to_string(opt.warmup)});
  std::string version = "datatrove";
  if (run.ok()) {
    peer_mb = Stats::Of(PeerJsonNumbers(run->json, "mb_per_s"));
    peer_docs = Stats::Of(PeerJsonNumbers(run->json, "docs_per_s"));
    version = absl::StrCat("datatrove ", PeerJsonString(run->json, "datatrove"), " (spaCy ",
                           PeerJsonString(run->json, "spacy"), ")");
    report->AddNote(absl::StrFormat(
        "%s sample (%zu docs, %s): grist keeps %llu, %s keeps %.0f (same thresholds; "
        "bench/python/clean_agreement.py reports per-filter agreement)",
        corpus_name, sample.size(), HumanBytes(static_cast<double>(bytes)),
        static_cast<unsigned long long>(kept), version, PeerJsonNumber(run->json, "kept")));
  } else {
    note = std::string(run.status().message());
  }
  const std::string what = absl::StrFormat("%s, %zu docs of %s", corpus_name, sample.size(),
                                           HumanBytes(static_cast<double>(bytes)));
  report->AddFigure({absl::StrCat("clean filters per core (CPU time), ", what), "MB/s",
                     Stats::Of(mb),
                     absl::StrCat(version, " GopherRep+GopherQuality+C4+FineWeb, per core"),
                     peer_mb, note, true, ">= 20 x peer"});
  report->AddFigure({absl::StrCat("clean filters per core (CPU time), ", what), "docs/s",
                     Stats::Of(dps), absl::StrCat(version, " same pipeline, per core"), peer_docs,
                     note, true, ">= 20 x peer"});
  return absl::OkStatus();
}

BenchRunner Setup(CLI::App* app) {
  auto f = std::make_shared<CleanBenchFlags>();
  AddBenchFlags(app, &f->options);
  app->add_option("--input", f->inputs,
                  "Corpus to clean (default: ../shared/corpus/wikinews-en, else .demo/corpus)");
  app->add_option("--spm-model", f->spm_model,
                  "SentencePiece model for the spm_encode peer (default: the shared corpus's "
                  "unigram test model)");
  app->add_option("--max-threads", f->max_threads, "Largest thread count measured (default: CPUs)");
  return [f]() -> absl::Status {
    Options& opt = f->options;
    if (f->inputs.empty()) {
      std::string in = FirstExisting({"../shared/corpus/wikinews-en", ".demo/corpus"});
      if (in.empty()) {
        return absl::NotFoundError(
            "no corpus: pass --input, or run scripts/make_demo_corpus.sh .demo/corpus");
      }
      f->inputs.push_back(in);
    }
    if (f->spm_model.empty()) {
      f->spm_model = FirstExisting(
          {"../shared/corpus/tokenizers/sentencepiece-test-unigram-1k/test_model.model"});
    }
    std::string corpus_name = f->inputs.size() == 1 ? BaseName(f->inputs[0]) : "input";
    if (corpus_name.empty()) corpus_name = "input";
    if (opt.quick) {  // --quick (grist bench all): the first 4 MiB of text of the corpus
      ASSIGN_OR_RETURN(std::string dir, ScratchDir("", "clean"));
      ASSIGN_OR_RETURN(CorpusSample s,
                       WriteCorpusSample(f->inputs, JoinPath(dir, "quick.jsonl"), 4ull << 20));
      f->inputs = {s.path};
    }
    int max_threads = f->max_threads > 0 ? f->max_threads : NumCpus();
    Report report("clean", opt);
    report.SetParam("input", absl::StrJoin(f->inputs, " "));
    report.SetParam("filters", "default (all on: length, gopher_repetition, gopher_quality, c4, fineweb), NFC");

    // The ceiling: read + decompress + parse, one thread.
    uint64_t record_bytes = 0;
    double secs = 0;
    ASSIGN_OR_RETURN(std::vector<Document> docs, ReadAll(f->inputs, &record_bytes, &secs, true, 0));
    uint64_t text_bytes = 0;
    for (const auto& d : docs) text_bytes += d.text.size();
    report.SetParam("records", absl::StrCat(HumanBytes(static_cast<double>(record_bytes)), " of records, ",
                                            docs.size(), " non-empty documents, ",
                                            HumanBytes(static_cast<double>(text_bytes)), " of text"));
    ASSIGN_OR_RETURN(Stats read_ceiling, Repeat(opt, [&]() -> absl::StatusOr<double> {
      uint64_t rb;
      double s;
      ASSIGN_OR_RETURN(auto unused, ReadAll(f->inputs, &rb, &s, false, 0));
      (void)unused;
      return rb / 1e6 / s;
    }));

    // Short news documents: the Wikinews articles of 1-2 KB of text (real documents, not cut).
    std::vector<const Document*> all_docs, short_docs;
    for (const auto& d : docs) {
      all_docs.push_back(&d);
      if (d.text.size() >= 1000 && d.text.size() <= 2000) short_docs.push_back(&d);
    }
    ASSIGN_OR_RETURN(std::string tmp, ScratchDir("", "clean_peer"));
    const uint64_t sample_bytes = opt.quick ? (256u << 10) : (1u << 20);
    RETURN_IF_ERROR(FiltersVsDatatrove(&report, opt, corpus_name, all_docs, sample_bytes, tmp));
    if (!short_docs.empty()) {
      RETURN_IF_ERROR(FiltersVsDatatrove(&report, opt, "short news (1-2 KB docs)", short_docs,
                                         sample_bytes, tmp));
    }

    // The cleaner alone on documents in memory, one thread: MB of text per second per core.
    clean::CleanOptions options;
    // Measured in this thread's CPU time: the figure per core, robust to other load on the machine.
    ASSIGN_OR_RETURN(Stats cleaner_only, Repeat(opt, [&]() -> absl::StatusOr<double> {
      clean::Cleaner cleaner(options);
      clean::CleanResult r;
      double t0 = ThreadCpuSeconds();
      for (const auto& d : docs) cleaner.Clean(d.text, &r);
      return text_bytes / 1e6 / (ThreadCpuSeconds() - t0);
    }));

    // spm_encode on the same text, one process (it is single-threaded): MB/s per core.
    std::optional<Stats> spm;
    std::string spm_note;
    if (!HaveProgram("spm_encode")) {
      spm_note = "spm_encode not installed (apt-get install sentencepiece)";
    } else if (f->spm_model.empty()) {
      spm_note = "no SentencePiece model (pass --spm-model)";
    } else {
      std::string tmp = JoinPath(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp",
                                 absl::StrCat("grist_bench_clean_", ::getpid(), ".txt"));
      std::string lines;
      uint64_t spm_bytes = 0;
      for (const auto& d : docs) {  // one document per line, as spm_encode reads lines
        if (spm_bytes > (8u << 20)) break;
        std::string t = d.text;
        for (char& c : t) if (c == '\n') c = ' ';
        lines += t;
        lines += '\n';
        spm_bytes += t.size() + 1;
      }
      RETURN_IF_ERROR(WriteFileAtomic(Env::Default(), tmp, lines));
      std::string cmd = absl::StrCat("spm_encode --model='", f->spm_model,
                                     "' --output_format=id < '", tmp, "' > /dev/null");
      auto s = Repeat(opt, [&]() -> absl::StatusOr<double> {
        double t0 = ChildrenCpuSeconds();
        ASSIGN_OR_RETURN(CommandResult r, RunCommand(cmd));
        if (r.exit_code != 0) return absl::InternalError("spm_encode failed: " + cmd);
        return spm_bytes / 1e6 / (ChildrenCpuSeconds() - t0);
      });
      (void)Env::Default()->RemoveFile(tmp);
      if (s.ok()) spm = *s; else spm_note = std::string(s.status().message());
      report.SetParam("spm_encode", absl::StrCat(f->spm_model, " on the first ",
                                                 HumanBytes(static_cast<double>(spm_bytes)), " of text"));
    }
    report.AddFigure({absl::StrCat("cleaner alone (default filters), ", corpus_name,
                                   ", per core (CPU time)"),
                      "MB/s", cleaner_only,
                      "extra: spm_encode (Debian) per core, the next stage", spm, spm_note, true,
                      ">= 50 MB/s"});

    // grist clean end to end (read, clean, write kept + rejects). Per core: process CPU time, beside
    // the read+decompress+parse ceiling in CPU time. Scaling: wall time at 1..N threads.
    std::string out_root = JoinPath(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp",
                                    absl::StrCat("grist_bench_clean_out_", ::getpid()));
    {
      RunOptions run;
      run.threads = 1;
      run.progress = false;
      ASSIGN_OR_RETURN(Stats cpu, Repeat(opt, [&]() -> absl::StatusOr<double> {
        double t0 = ProcessCpuSeconds();
        ASSIGN_OR_RETURN(clean::CleanReport r,
                         clean::RunClean(Env::Default(), f->inputs, out_root, options, run));
        return r.record_bytes / 1e6 / (ProcessCpuSeconds() - t0);
      }));
      ASSIGN_OR_RETURN(Stats read_cpu, Repeat(opt, [&]() -> absl::StatusOr<double> {
        uint64_t rb;
        double s;
        double t0 = ProcessCpuSeconds();
        ASSIGN_OR_RETURN(auto unused, ReadAll(f->inputs, &rb, &s, false, 0));
        (void)unused;
        return rb / 1e6 / (ProcessCpuSeconds() - t0);
      }));
      report.AddFigure({absl::StrCat("grist clean end to end, ", corpus_name,
                                     ", per core (process CPU time)"),
                        "MB/s", cpu, "read+decompress+parse only, per core (CPU time)", read_cpu, "",
                        true, ">= 50 MB/s"});
      // The same on the short news documents, written as one JSONL file.
      if (!short_docs.empty()) {
        std::vector<const Document*> taken;
        const std::string short_path = JoinPath(tmp, "short_news.jsonl");
        ASSIGN_OR_RETURN(uint64_t sb, WriteDocs(short_docs, 0, short_path, &taken));
        ASSIGN_OR_RETURN(Stats scpu, Repeat(opt, [&]() -> absl::StatusOr<double> {
          double t0 = ProcessCpuSeconds();
          ASSIGN_OR_RETURN(clean::CleanReport r,
                           clean::RunClean(Env::Default(), {short_path}, out_root, options, run));
          return r.record_bytes / 1e6 / (ProcessCpuSeconds() - t0);
        }));
        ASSIGN_OR_RETURN(Stats sread, Repeat(opt, [&]() -> absl::StatusOr<double> {
          uint64_t rb;
          double s;
          double t0 = ProcessCpuSeconds();
          ASSIGN_OR_RETURN(auto unused, ReadAll({short_path}, &rb, &s, false, 0));
          (void)unused;
          return rb / 1e6 / (ProcessCpuSeconds() - t0);
        }));
        report.SetParam("short news", absl::StrFormat("%zu Wikinews articles of 1-2 KB, %s of text",
                                                      taken.size(), HumanBytes(static_cast<double>(sb))));
        report.AddFigure({"grist clean end to end, short news (1-2 KB docs), per core (process CPU time)",
                          "MB/s", scpu, "read+decompress+parse only, per core (CPU time)", sread, "",
                          true, ">= 50 MB/s"});
      }
    }
    double one_thread = 0;
    for (int t = 1; t <= max_threads; t *= 2) {
      RunOptions run;
      run.threads = t;
      run.progress = false;
      ASSIGN_OR_RETURN(Stats s, Repeat(opt, [&]() -> absl::StatusOr<double> {
        ASSIGN_OR_RETURN(clean::CleanReport r,
                         clean::RunClean(Env::Default(), f->inputs, out_root, options, run));
        return r.MbPerSecond();
      }));
      if (t == 1) {
        one_thread = s.median;
        report.AddFigure({"grist clean end to end, 1 thread (wall)", "MB/s", s,
                          "read+decompress+parse only, 1 thread (wall)", read_ceiling, "",
                          true, "informational"});
      } else {
        Stats ideal = Stats::Of({one_thread * t});
        report.AddFigure({absl::StrCat("grist clean end to end, ", t, " threads (wall)"), "MB/s", s,
                          absl::StrCat(t, " x the 1-thread figure (perfect scaling)"), ideal, "",
                          true, "ratio = parallel efficiency >= 0.8"});
      }
      if (t * 2 > max_threads && t != max_threads) t = max_threads / 2;
    }
    (void)Env::Default()->RemoveAll(out_root);
    (void)Env::Default()->RemoveAll(tmp);
    double load[3] = {0, 0, 0};
    if (getloadavg(load, 3) > 0) {
      report.AddNote(absl::StrFormat("load average at the end: %.1f (on %d CPUs); wall-clock "
                                     "figures suffer when the machine is shared, CPU-time ones much less",
                                     load[0], NumCpus()));
    }
    report.AddNote("MB are 10^6 bytes of input records (decompressed JSONL) for end-to-end figures, of "
                   "document text for the cleaner and spm_encode figures.");
    return report.Finish();
  };
}

GRIST_REGISTER_BENCH(clean, "clean",
                     "Clean stage MB/s per thread and scaling, beside the read ceiling and spm_encode",
                     Setup);

}  // namespace
}  // namespace grist::bench
