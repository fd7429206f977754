// `grist bench clean`: throughput of the clean stage on real text, per thread and scaling with the
// thread count, beside the ceilings measured in the same run: reading+decompressing+parsing the same
// files (the I/O ceiling), and SentencePiece's spm_encode per core on the same text (the next stage,
// which cleaning must never slow down).
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
    report.AddFigure({"cleaner alone (default filters), per core (CPU time)", "MB/s", cleaner_only,
                      "spm_encode per core (CPU time; the next stage)", spm, spm_note, true,
                      ">= 50 MB/s, far above peer"});

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
      report.AddFigure({"grist clean end to end, per core (process CPU time)", "MB/s", cpu,
                        "read+decompress+parse only, per core (CPU time)", read_cpu, "", true,
                        "cleaning + writing cost vs reading"});
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
