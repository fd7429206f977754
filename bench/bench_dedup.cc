// `grist bench dedup`: MinHash signatures and the whole dedup per core beside the tools a user would
// pick instead, in the same run on the same documents (bench/python/bench_dedup_peers.py: datasketch
// MinHash.update_batch + MinHashLSH, rensa RMinHash + RMinHashLSH, datatrove's MinHash dedup
// stages), with each one's precision and recall against the exact Jaccard of the sample's pairs;
// then signature throughput per thread (an in-project scalar loop as an extra line), the whole dedup
// of the shared corpus per stage, and peak memory beside the --memory-limit for an input, the same
// input replicated 4x, and 4 near copies of it.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/dedup_peers.h"
#include "bench/harness.h"
#include "bench/registry.h"
#include "bench/sweep.h"
#include "common/env.h"
#include "common/json_writer.h"
#include "common/progress.h"
#include "common/records.h"
#include "common/rng.h"
#include "common/status_macros.h"
#include "common/sysinfo.h"
#include "common/thread_pool.h"
#include "dedup/dedup.h"
#include "dedup/minhash.h"

namespace grist::bench {
namespace {

// The --memory-limit of the memory and merge figures, in MB.
constexpr int kMemoryBudgetMb = 64;

struct DedupBenchFlags {
  Options options;
  std::string corpus;
  std::vector<int> threads;
  int e2e_repetitions = 1;
  DedupPeerSizes peers;
};

std::string DefaultCorpus() {
  if (const char* e = std::getenv("GRIST_CORPUS_DIR"); e && *e) return e;
  for (const char* d : {"../shared/corpus", "../../shared/corpus"}) {
    if (Env::Default()->IsDirectory(d)) return d;
  }
  return "";
}

// Deterministic stand-in text when the shared corpus is absent (words with a Zipf-like spread).
std::vector<std::string> GeneratedDocs(size_t bytes) {
  Rng rng(1);
  std::vector<std::string> words;
  for (int i = 0; i < 20000; ++i) {
    std::string w;
    const int len = 2 + static_cast<int>(rng.Uniform(8));
    for (int k = 0; k < len; ++k) w.push_back(static_cast<char>('a' + rng.Uniform(26)));
    words.push_back(w);
  }
  std::vector<std::string> docs;
  size_t total = 0;
  while (total < bytes) {
    std::string d;
    const int n = 200 + static_cast<int>(rng.Uniform(2000));
    for (int i = 0; i < n; ++i) {
      const uint64_t r = rng.Uniform(20000);
      d += words[(r * r) / 20000];
      d += (i % 15 == 14) ? ". " : " ";
    }
    total += d.size();
    docs.push_back(std::move(d));
  }
  return docs;
}

absl::StatusOr<std::vector<std::string>> LoadTexts(const std::vector<std::string>& inputs) {
  Env* env = Env::Default();
  ASSIGN_OR_RETURN(auto files, ListInputs(env, inputs));
  std::vector<std::string> docs;
  for (const InputFile& f : files) {
    ASSIGN_OR_RETURN(auto r, OpenRecordReader(env, f, InputSplit{}, InputOptions{}));
    Document d;
    while (true) {
      ASSIGN_OR_RETURN(bool more, r->Next(&d));
      if (!more) break;
      if (d.error.empty() && !d.text.empty()) docs.push_back(std::move(d.text));
    }
  }
  return docs;
}

std::string SelfExe() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string("grist");
}

// The number after the first "KEY": at or after `from` in a grist JSON report; `missing` when absent.
double JsonNumberAfter(const std::string& json, const char* key, size_t from = 0, double missing = 0) {
  const std::string pat = absl::StrCat("\"", key, "\":");
  size_t p = from == std::string::npos ? std::string::npos : json.find(pat, from);
  return p == std::string::npos ? missing : std::strtod(json.c_str() + p + pat.size(), nullptr);
}

// Peak RSS and seconds of `grist dedup` run as its own process.
struct DedupRun {
  double peak_rss_bytes = 0;  // the whole process's (the report's last peak_rss_bytes)
  double seconds = 0;
  std::string report;         // its --json report
};

// Runs `grist dedup ARGS --json JSON_PATH` as its own process (so its peak RSS is its own).
absl::StatusOr<DedupRun> DedupProcess(const std::string& args, const std::string& json_path) {
  Stopwatch sw;
  auto r = RunCommand(absl::StrCat(SelfExe(), " dedup --quiet ", args, " --json ", json_path));
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) {
    return absl::InternalError(absl::StrCat("grist dedup ", args, " failed: ", r->output));
  }
  DedupRun run;
  run.seconds = sw.Seconds();
  ASSIGN_OR_RETURN(run.report, ReadFileToString(Env::Default(), json_path));
  size_t p = run.report.rfind("\"peak_rss_bytes\":");
  if (p == std::string::npos) return absl::InternalError("no peak_rss_bytes in the report");
  run.peak_rss_bytes = JsonNumberAfter(run.report, "peak_rss_bytes", p);
  return run;
}

// A peak-RSS figure (`rss_bytes`) beside the --memory-limit `budget_mb` it must stay under.
Figure PeakRssFigure(std::string name, double rss_bytes, int budget_mb, std::string target) {
  Figure fig{std::move(name), "MB", Stats::Of({rss_bytes / 1e6}),
             absl::StrFormat("the budget (--memory-limit %d)", budget_mb),
             Stats::Of({static_cast<double>(budget_mb) * (1 << 20) / 1e6})};
  fig.higher_is_better = false;
  fig.peer_is_ceiling = true;
  fig.target = std::move(target);
  return fig;
}

// Per thread count of the --sweep: signature MB/s (total) beside the scalar loop at the same
// count, and the whole dedup of the signature text beside reading it once.
absl::Status SignatureSweep(Report* report, const DedupBenchFlags& f, const Sweep& sweep,
                            const std::vector<std::string>& docs, const std::string& tmp) {
  Env* env = Env::Default();
  RETURN_IF_ERROR(env->CreateDirs(tmp + "/sweep"));
  std::string jsonl;
  for (const auto& d : docs) {
    Document doc;
    doc.text = d;
    jsonl += SerializeRecord(doc) + "\n";
  }
  const std::string input = tmp + "/sweep/input.jsonl";
  RETURN_IF_ERROR(WriteFileAtomic(env, input, jsonl));
  RETURN_IF_ERROR(RunSweep(report, sweep, [&](const std::string& v)
                                              -> absl::StatusOr<std::vector<Figure>> {
    ASSIGN_OR_RETURN(int64_t t64, SweepInt(sweep, v));
    const int t = static_cast<int>(t64);
    ASSIGN_OR_RETURN(Stats ours, Repeat(f.options, [&]() -> absl::StatusOr<double> {
      return SignatureMBps(docs, t, false);
    }));
    ASSIGN_OR_RETURN(Stats scalar, Repeat(f.options, [&]() -> absl::StatusOr<double> {
      return SignatureMBps(docs, t, true);
    }));
    Figure sig{"signatures, total", "MB/s", ours, "extra: same MinHash as a scalar loop (in-project)", scalar};
    dedup::DedupOptions o;
    o.work_dir = tmp + "/sweep/work";
    o.split_bytes = 4u << 20;  // enough splits to feed the threads
    RunOptions run;
    run.threads = t;
    run.progress = false;
    ASSIGN_OR_RETURN(Stats whole, Repeat(f.options, [&]() -> absl::StatusOr<double> {
      RETURN_IF_ERROR(env->RemoveAll(tmp + "/sweep/out"));
      Stopwatch sw;
      ASSIGN_OR_RETURN(auto rep, dedup::RunDedup(env, {input}, tmp + "/sweep/out", o, run));
      return static_cast<double>(rep.counts.bytes_in) / sw.Seconds() / 1e6;
    }));
    ASSIGN_OR_RETURN(Stats read, Repeat(f.options, [&]() -> absl::StatusOr<double> {
      Stopwatch sw;
      ASSIGN_OR_RETURN(auto texts, LoadTexts({input}));
      uint64_t b = 0;
      for (const auto& x : texts) b += x.size();
      return static_cast<double>(b) / sw.Seconds() / 1e6;
    }));
    Figure all{"whole dedup", "MB/s", whole, "reading every record once (1 thread)", read};
    all.peer_is_ceiling = true;
    return std::vector<Figure>{sig, all};
  }));
  return absl::OkStatus();
}

// Signature MB/s per thread at each thread count (and the total beside one thread's), per
// CPU-second, and shingling alone, each beside the in-project scalar MinHash loop.
absl::Status SignatureFigures(Report* report, const DedupBenchFlags& f,
                              const std::vector<std::string>& docs) {
  std::vector<int> threads = f.threads;
  if (threads.empty()) {
    threads = {1};
    if (NumCpus() > 1) threads.push_back(NumCpus());
  }
  std::optional<Stats> one_thread;
  for (int t : threads) {
    ASSIGN_OR_RETURN(Stats ours, Repeat(f.options, [&]() -> absl::StatusOr<double> {
      return SignatureMBps(docs, t, false) / t;
    }));
    ASSIGN_OR_RETURN(Stats scalar, Repeat(f.options, [&]() -> absl::StatusOr<double> {
      return SignatureMBps(docs, t, true) / t;
    }));
    Figure fig{absl::StrFormat("signatures, %d thread(s), per thread", t), "MB/s", ours,
               "extra: same MinHash as a scalar loop (in-project)", scalar};
    fig.target = ">= 100 MB/s per core";
    report->AddFigure(fig);
    if (t == 1) one_thread = ours;
    if (t > 1 && one_thread) {
      Figure scale{absl::StrFormat("signatures, %d threads, total", t), "MB/s",
                   Stats::Of({ours.median * t}), "1 thread", *one_thread};
      scale.target = absl::StrFormat("~%d x with %d idle cores", t, t);
      report->AddFigure(scale);
    }
  }
  {
    ASSIGN_OR_RETURN(Stats ours, Repeat(f.options, [&]() -> absl::StatusOr<double> {
      return SignatureMBps(docs, 1, false, false, true);
    }));
    ASSIGN_OR_RETURN(Stats scalar, Repeat(f.options, [&]() -> absl::StatusOr<double> {
      return SignatureMBps(docs, 1, true, false, true);
    }));
    Figure fig{"signatures per CPU-second (thread CPU time)", "MB/s", ours,
               "extra: same MinHash as a scalar loop (in-project), per CPU-second", scalar};
    fig.target = ">= 100 MB/s per core";
    report->AddFigure(fig);
  }
  ASSIGN_OR_RETURN(Stats shingle_only, Repeat(f.options, [&]() -> absl::StatusOr<double> {
    return SignatureMBps(docs, 1, false, true, true);
  }));
  report->AddNote(absl::StrFormat(
      "shingling + hashing alone (no MinHash): %.1f MB/s per CPU-second", shingle_only.median));
  return absl::OkStatus();
}

// The whole dedup of the shared corpus (--quick: web-samples and small-text) on every core beside
// reading every record once, with each stage's rate and peak RSS.
absl::Status WholeCorpusFigures(Report* report, const DedupBenchFlags& f, const std::string& corpus,
                                const std::string& tmp) {
  Env* env = Env::Default();
  std::vector<std::string> inputs;
  std::vector<const char*> subs = {"wikinews-en", "wikipedia-en-2015", "web-samples",
                                   "small-text"};
  if (f.options.quick) subs = {"web-samples", "small-text"};
  for (const char* sub : subs) {
    if (env->IsDirectory(corpus + "/" + sub)) inputs.push_back(corpus + "/" + sub);
  }
  if (!f.options.quick && env->FileExists(corpus + "/20newsgroups.tar.zst")) {
    auto r = RunCommand(absl::StrCat("tar --zstd -xf '", corpus, "/20newsgroups.tar.zst' -C '",
                                     tmp, "'"));
    if (r.ok() && r->exit_code == 0) inputs.push_back(tmp + "/20newsgroups");
  }
  dedup::DedupOptions o;
  o.work_dir = tmp + "/work";
  RunOptions run;
  run.threads = 0;
  run.progress = !f.options.quiet;
  dedup::DedupReport last;
  Options e2e = f.options;
  e2e.warmup = 0;
  e2e.repetitions = f.e2e_repetitions;
  ASSIGN_OR_RETURN(Stats total, Repeat(e2e, [&]() -> absl::StatusOr<double> {
    RETURN_IF_ERROR(env->RemoveAll(tmp + "/out"));
    Stopwatch sw;
    ASSIGN_OR_RETURN(last, dedup::RunDedup(env, inputs, tmp + "/out", o, run));
    return sw.Seconds();
  }));
  // Peer: reading every record once (the floor any stage that reads the input pays).
  ASSIGN_OR_RETURN(Stats read_only, Repeat(e2e, [&]() -> absl::StatusOr<double> {
    Stopwatch sw;
    ASSIGN_OR_RETURN(auto texts, LoadTexts(inputs));
    return sw.Seconds();
  }));
  Figure fig{absl::StrFormat("whole dedup of the shared corpus%s (%llu docs, %s), %d threads",
                             f.options.quick ? " (--quick: web-samples, small-text)" : "",
                             (unsigned long long)last.counts.docs_in,
                             HumanBytes(static_cast<double>(last.counts.bytes_in)), NumCpus()),
             "s", total, "reading every record once (1 thread)", read_only};
  fig.higher_is_better = false;
  fig.target = f.options.quick ? "" : "< 60 s on 2 cores";
  report->AddFigure(fig);
  for (const auto& s : last.stages) {
    report->AddNote(absl::StrFormat("stage %-10s %7.2f s  %8.1f MB/s of its input  %9.0f docs/s  peak RSS %s",
                                   s.stage, s.seconds,
                                   s.seconds > 0 ? s.input_bytes / s.seconds / 1e6 : 0.0,
                                   s.seconds > 0 ? last.counts.docs_in / s.seconds : 0.0,
                                   HumanBytes(static_cast<double>(s.peak_rss_bytes))));
  }
  report->AddNote(absl::StrFormat(
      "corpus result: %llu in, %llu kept, %llu removed (exact %llu, near %llu), %llu clusters",
      (unsigned long long)last.counts.docs_in, (unsigned long long)last.counts.docs_out,
      (unsigned long long)last.counts.docs_removed, (unsigned long long)last.removed_exact,
      (unsigned long long)last.removed_near, (unsigned long long)last.clusters));
  return absl::OkStatus();
}

// Peak memory: an input, the same input 4x (exact copies), and 4 near copies (one word changed per
// copy, so every document is a verified near duplicate), each as its own process under a budget
// small enough to bind: the bucket sort spills at x4, and the near copies' candidate sets are many
// times the verification cache (the RSS includes ~11 MB of process baseline that no budget
// covers). Leaves the exact copies in tmp/x4 for MergeFigures.
absl::Status MemoryFigures(Report* report, const std::string& corpus, const std::string& tmp) {
  Env* env = Env::Default();
  constexpr int kBudgetMb = kMemoryBudgetMb;
  RETURN_IF_ERROR(env->CreateDirs(tmp + "/x4"));
  RETURN_IF_ERROR(env->CreateDirs(tmp + "/near4"));
  ASSIGN_OR_RETURN(auto names, env->ListDir(corpus + "/wikinews-en"));
  for (int copy = 0; copy < 4; ++copy) {
    for (const auto& n : names) {
      ASSIGN_OR_RETURN(std::string data, ReadFileToString(env, corpus + "/wikinews-en/" + n));
      RETURN_IF_ERROR(WriteFileAtomic(env, absl::StrCat(tmp, "/x4/c", copy, "_", n), data));
    }
  }
  {
    ASSIGN_OR_RETURN(auto texts, LoadTexts({corpus + "/wikinews-en"}));
    for (int copy = 0; copy < 4; ++copy) {
      std::string jsonl;
      for (const std::string& t : texts) {
        jsonl += "{\"text\":";
        AppendJsonString(&jsonl, copy == 0 ? t : absl::StrCat("copy", copy, " ", t));
        jsonl += "}\n";
      }
      RETURN_IF_ERROR(WriteFileAtomic(env, absl::StrCat(tmp, "/near4/c", copy, ".jsonl"), jsonl));
    }
  }
  const std::string common = absl::StrCat("--memory-limit ", kBudgetMb, " --threads 2");
  struct MemRun {
    const char* name;
    std::string input;
  };
  std::vector<double> rss;  // peak RSS bytes per input
  for (const MemRun& m : {MemRun{"wikinews-en x1", corpus + "/wikinews-en"},
                          MemRun{"wikinews-en x4 (exact copies)", tmp + "/x4"},
                          MemRun{"wikinews-en x4 (near copies)", tmp + "/near4"}}) {
    const std::string out = absl::StrCat(tmp, "/m", rss.size());
    ASSIGN_OR_RETURN(auto run, DedupProcess(absl::StrCat("-i ", m.input, " -o ", out, " ",
                                                         common),
                                            out + ".json"));
    auto field = [&](const char* key) { return JsonNumberAfter(run.report, key); };
    report->AddFigure(PeakRssFigure(absl::StrCat("peak RSS, ", m.name, ", whole dedup, 2 threads"),
                                    run.peak_rss_bytes, kBudgetMb,
                                    "<= 1 x budget, whatever the duplicates"));
    report->AddNote(absl::StrFormat(
        "%s: %.0f docs in, %.0f removed (exact %.0f, near %.0f); %.0f candidate pairs; "
        "verification spilled %s of candidate sets, %.0f pass(es); %.1f s",
        m.name, field("docs_in"), field("docs_removed"), field("removed_exact"),
        field("removed_near"), field("candidate_pairs"),
        HumanBytes(field("spilled_set_bytes")), field("verify_passes"), run.seconds));
    rss.push_back(run.peak_rss_bytes);
  }
  report->AddNote(absl::StrFormat(
      "peak RSS x4 exact / x1 = %.2f, x4 near / x1 = %.2f (memory independent of the "
      "duplicates: ~1)",
      rss[1] / rss[0], rss[2] / rss[0]));
  return absl::OkStatus();
}

// The merge stage's external path (the edges beyond half the budget) against the in-memory
// union-find on the same edges: tmp/x4 (MemoryFigures' exact copies), the stages before merge run
// once, then merge alternately one way and the other; and the stages as their own processes under
// a budget that sends merge the external way.
absl::Status MergeFigures(Report* report, const DedupBenchFlags& f, const std::string& tmp) {
  Env* env = Env::Default();
  constexpr int kBudgetMb = kMemoryBudgetMb;
  dedup::DedupOptions o;
  o.memory_limit = uint64_t{kBudgetMb} << 20;
  RunOptions run;
  run.threads = 2;
  run.progress = false;
  const std::string out = tmp + "/merge4";
  for (dedup::DedupStage st : {dedup::DedupStage::kSignatures, dedup::DedupStage::kBuckets, dedup::DedupStage::kClusters}) {
    RETURN_IF_ERROR(dedup::RunDedupStage(env, st, {tmp + "/x4"}, out, o, run).status());
  }
  std::vector<double> ext, mem;
  uint64_t rounds = 0;
  const int reps = std::max(3, f.options.repetitions);
  for (int i = 0; i < reps; ++i) {
    for (bool external : {false, true}) {
      o.force_external_merge = external;
      Stopwatch sw;
      RETURN_IF_ERROR(dedup::RunDedupStage(env, dedup::DedupStage::kMerge, {tmp + "/x4"}, out, o, run).status());
      (external ? ext : mem).push_back(sw.Seconds());
    }
  }
  o.force_external_merge = true;
  RETURN_IF_ERROR(dedup::RunDedupStage(env, dedup::DedupStage::kMerge, {tmp + "/x4"}, out, o, run).status());
  RETURN_IF_ERROR(dedup::RunDedupStage(env, dedup::DedupStage::kFilter, {tmp + "/x4"}, out, o, run).status());
  ASSIGN_OR_RETURN(dedup::DedupReport rep,
                   dedup::RunDedupStage(env, dedup::DedupStage::kReport, {tmp + "/x4"}, out, o, run));
  o.force_external_merge = false;
  rounds = rep.merge_rounds;
  Figure merge{absl::StrFormat("merge stage, external, wikinews-en x4 exact copies (%llu pairs)",
                               (unsigned long long)rep.exact_pairs),
               "s", Stats::Of(ext), "the in-memory union-find on the same edges",
               Stats::Of(mem)};
  merge.higher_is_better = false;
  merge.target = "bounded memory; the in-memory path stays the default when it fits";
  report->AddFigure(merge);
  report->AddNote(absl::StrFormat(
      "external merge: %llu round(s) of hooking + pointer jumping; %llu removed documents",
      (unsigned long long)rounds, (unsigned long long)rep.counts.docs_removed));
  // The stages as their own processes (a job array of one task each) under a 16 MB budget:
  // 52,428 edges in memory at most, so merge goes external; its process's peak RSS.
  constexpr int kSmallMb = 16;
  const std::string out2 = tmp + "/merge4p";
  Stopwatch sw2;
  for (const std::string& st : dedup::DedupStageNames()) {
    ASSIGN_OR_RETURN(auto r, RunCommand(absl::StrCat(SelfExe(), " dedup --quiet -i ", tmp,
                                                     "/x4 -o ", out2, " --memory-limit ",
                                                     kSmallMb, " --threads 2 --stage ", st)));
    if (r.exit_code != 0) {
      return absl::InternalError(absl::StrCat("grist dedup --stage ", st, ": ", r.output));
    }
  }
  ASSIGN_OR_RETURN(std::string json, ReadFileToString(env, out2 + "/dedup_report.json"));
  auto after = [&](size_t from, const char* key) { return JsonNumberAfter(json, key, from, -1); };
  const size_t merge_at = json.find("\"stage\": \"merge\"");
  const size_t clusters_at = json.find("\"stage\": \"clusters\"");
  if (merge_at == std::string::npos || clusters_at == std::string::npos) {
    return absl::InternalError("no merge or clusters stage in the report");
  }
  report->AddFigure(PeakRssFigure(
      "peak RSS, merge stage alone (own process), wikinews-en x4 exact copies, external",
      after(merge_at, "peak_rss_bytes"), kSmallMb,
      "<= 1 x budget + the ~11 MB process baseline, whatever the duplicates"));
  report->AddNote(absl::StrFormat(
      "stage by stage at %d MB: merge_rounds %.0f, merge %.2f s; the clusters stage's process "
      "peaked at %.1f MB, filter's at %.1f MB; %.1f s in all",
      kSmallMb, after(0, "merge_rounds"), after(merge_at, "seconds"),
      after(clusters_at, "peak_rss_bytes") / 1e6,
      after(json.find("\"stage\": \"filter\""), "peak_rss_bytes") / 1e6, sw2.Seconds()));
  return absl::OkStatus();
}

absl::Status Run(const DedupBenchFlags& f) {
  Report report("dedup", f.options);
  Env* env = Env::Default();
  std::string corpus = f.corpus.empty() ? DefaultCorpus() : f.corpus;
  if (!corpus.empty() && !env->IsDirectory(corpus)) corpus.clear();
  char tmpl[] = "/tmp/grist_bench_dedup_XXXXXX";
  const char* tmpdir = ::mkdtemp(tmpl);
  if (tmpdir == nullptr) return absl::InternalError("mkdtemp failed");
  const std::string tmp = tmpdir;
  struct Cleanup {
    std::string dir;
    ~Cleanup() { (void)Env::Default()->RemoveAll(dir); }
  } cleanup{tmp};

  // ---- 1. signature throughput on real text
  std::vector<std::string> docs;
  std::string text_name;
  if (!corpus.empty() && env->IsDirectory(corpus + "/wikipedia-en-2015")) {
    ASSIGN_OR_RETURN(docs, LoadTexts({corpus + "/wikipedia-en-2015"}));
    text_name = "wikipedia-en-2015";
  } else {
    docs = GeneratedDocs(32u << 20);
    text_name = "generated text (shared corpus absent)";
  }
  if (f.options.quick) {  // about 8 MB of the text
    uint64_t keep = 0;
    size_t n = 0;
    while (n < docs.size() && keep < (8u << 20)) keep += docs[n++].size();
    docs.resize(n);
  }
  uint64_t bytes = 0;
  for (const auto& d : docs) bytes += d.size();
  report.SetParam("signature text", absl::StrFormat("%s, %zu docs, %s", text_name, docs.size(),
                                                    HumanBytes(static_cast<double>(bytes))));
  report.SetParam("minhash", "112 permutations, word 5-grams, XXH3-64 per shingle");
  report.SetParam("simd target", dedup::MinHasher::SimdTarget());
  report.SetParam("cpus", std::to_string(NumCpus()));
  ASSIGN_OR_RETURN(std::optional<Sweep> sweep, SweepFromOptions(f.options, {"threads"}));
  if (sweep) {
    RETURN_IF_ERROR(SignatureSweep(&report, f, *sweep, docs, tmp));
    return report.Finish();
  }
  RETURN_IF_ERROR(SignatureFigures(&report, f, docs));

  // The real peers on a sample of Wikinews with near copies: datasketch, rensa, datatrove.
  std::vector<std::string> news;
  if (!corpus.empty() && env->IsDirectory(corpus + "/wikinews-en")) {
    ASSIGN_OR_RETURN(news, LoadTexts({corpus + "/wikinews-en"}));
  }
  RETURN_IF_ERROR(AddDedupPeerFigures(&report, f.options, f.peers, news.empty() ? docs : news, tmp));

  if (corpus.empty()) {
    report.AddNote("shared corpus absent: whole-corpus and memory figures skipped");
    return report.Finish();
  }
  // ---- 2. the whole dedup of the shared corpus
  RETURN_IF_ERROR(WholeCorpusFigures(&report, f, corpus, tmp));
  // ---- 3. peak memory, and 4. the merge stage's external path
  if (!f.options.quick && env->IsDirectory(corpus + "/wikinews-en")) {
    RETURN_IF_ERROR(MemoryFigures(&report, corpus, tmp));
    RETURN_IF_ERROR(MergeFigures(&report, f, tmp));
  }
  return report.Finish();
}

BenchRunner Setup(CLI::App* app) {
  auto f = std::make_shared<DedupBenchFlags>();
  AddBenchFlags(app, &f->options);
  app->add_option("--corpus", f->corpus, "Shared corpus folder (default ../shared/corpus)");
  app->add_option("--threads", f->threads, "Thread counts for the signature figures");
  app->add_option("--e2e-repetitions", f->e2e_repetitions,
                  "Measured runs of the whole-corpus dedup (default 1)");
  const DedupPeerSizes d, q = DedupPeerSizes::Quick();
  app->add_option("--sample-mb", f->peers.sample_mb,
                  absl::StrFormat("Text of the peer figures' sample for grist in MB, near copies "
                                  "included (default %g; --quick %g)", d.sample_mb, q.sample_mb));
  app->add_option("--peer-mb", f->peers.peer_mb,
                  absl::StrFormat("The prefix of that sample datasketch and rensa run on, in MB "
                                  "(default %g; --quick %g)", d.peer_mb, q.peer_mb));
  app->add_option("--datatrove-mb", f->peers.datatrove_mb,
                  absl::StrFormat("The prefix of that sample datatrove runs on, in MB (default %g; "
                                  "--quick %g)", d.datatrove_mb, q.datatrove_mb));
  return [f]() { return Run(*f); };
}

GRIST_REGISTER_BENCH(dedup, "dedup", "MinHash signatures per thread, whole-corpus dedup, memory",
                     Setup);

}  // namespace
}  // namespace grist::bench
