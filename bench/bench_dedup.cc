// `grist bench dedup`: MinHash signatures and the whole dedup per core beside the tools a user would
// pick instead, in the same run on the same documents (bench/python/bench_dedup_peers.py: datasketch
// MinHash.update_batch + MinHashLSH, rensa RMinHash + RMinHashLSH, datatrove's MinHash dedup
// stages), with each one's precision and recall against the exact Jaccard of the sample's pairs;
// then signature throughput per thread (an in-project scalar loop as an extra line), the whole dedup
// of the shared corpus per stage, and peak memory beside the --memory-limit for an input, the same
// input replicated 4x, and 4 near copies of it.
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/harness.h"
#include "bench/python_peer.h"
#include "bench/registry.h"
#include "common/env.h"
#include "common/hash.h"
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

struct DedupBenchFlags {
  Options options;
  std::string corpus;
  std::vector<int> threads;
  int e2e_repetitions = 1;
  double sample_mb = 24;    // grist's sample for the peer figures (Wikinews with near copies)
  double peer_mb = 4;       // the prefix of it datasketch and rensa run on
  double datatrove_mb = 1;  // the prefix of it datatrove runs on
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

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// MB/s of shingling + signatures over `docs` on `threads` threads (documents dealt round-robin),
// by the wall clock; with `per_cpu_second`, by the CPU time the threads used (what one core does
// per second of its time, independent of other load on a shared machine).
double SignatureMBps(const std::vector<std::string>& docs, int threads, bool scalar,
                     bool shingles_only = false, bool per_cpu_second = false) {
  const dedup::MinHasher mh(112, dedup::DedupOptions{}.seed);
  const dedup::ShingleOptions so;
  uint64_t bytes = 0;
  for (const auto& d : docs) bytes += d.size();
  std::atomic<uint64_t> sink{0};
  std::atomic<int64_t> cpu_ns{0};
  Stopwatch sw;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      const double cpu0 = ThreadCpuSeconds();
      std::vector<uint64_t> sh, sig(112);
      std::string scratch;
      uint64_t acc = 0;
      for (size_t i = static_cast<size_t>(t); i < docs.size(); i += static_cast<size_t>(threads)) {
        dedup::ShingleHashesUnordered(docs[i], so, &sh, &scratch);
        if (shingles_only) {
          acc += sh.size();
          continue;
        }
        if (scalar) {
          mh.ComputeScalar(sh.data(), sh.size(), sig.data());
        } else {
          mh.Compute(sh, sig.data());
        }
        acc += sig[0];
      }
      sink += acc;
      cpu_ns += static_cast<int64_t>((ThreadCpuSeconds() - cpu0) * 1e9);
    });
  }
  for (auto& th : pool) th.join();
  const double s = per_cpu_second ? static_cast<double>(cpu_ns.load()) * 1e-9 : sw.Seconds();
  return static_cast<double>(bytes) / s / 1e6;
}

// CPU time (user + system) of this process, all threads.
double ProcessCpuSeconds() {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + ru.ru_stime.tv_sec +
         ru.ru_stime.tv_usec * 1e-6;
}

// The peers' sample: documents of `docs` up to `max_bytes`, and after every one of the first three
// of each four a near copy: one word prepended (Jaccard ~1), every 40th word replaced (~0.78, at
// the threshold) or every 20th (~0.6, below it): known pairs on both sides of 0.8 in real text.
std::vector<std::string> PeerSample(const std::vector<std::string>& docs, uint64_t max_bytes) {
  std::vector<std::string> out;
  uint64_t bytes = 0;
  for (size_t i = 0; i < docs.size() && bytes < max_bytes; ++i) {
    out.push_back(docs[i]);
    bytes += docs[i].size();
    const int kind = static_cast<int>(i % 4);
    if (kind == 3) continue;
    std::string copy;
    if (kind == 0) {
      copy = "copy " + docs[i];
    } else {
      const int every = kind == 1 ? 40 : 20;
      int word = 0;
      bool in_word = false;
      for (char c : docs[i]) {
        bool space = c == ' ' || c == '\n';
        if (!space && !in_word && ++word % every == 0) copy += "zzedit";
        in_word = !space;
        if (!space && word % every == 0) continue;
        copy.push_back(c);
      }
    }
    bytes += copy.size();
    out.push_back(std::move(copy));
  }
  return out;
}

// grist's near-duplicate pairs of `docs` as the dedup stage finds them: MinHash (num_perm, seed),
// documents sharing a band of bands x rows are candidates, kept when their exact Jaccard reaches
// the threshold.
std::vector<std::pair<uint32_t, uint32_t>> GristPairs(const std::vector<std::string>& docs,
                                                      const dedup::DedupOptions& o) {
  const dedup::MinHasher mh(o.num_perm, o.seed);
  std::vector<std::vector<uint64_t>> sets(docs.size());
  std::vector<uint64_t> sigs(docs.size() * static_cast<size_t>(o.num_perm));
  std::string scratch;
  for (size_t i = 0; i < docs.size(); ++i) {
    dedup::ShingleHashes(docs[i], o.shingle, &sets[i], &scratch);
    mh.Compute(sets[i], &sigs[i * static_cast<size_t>(o.num_perm)]);
  }
  std::vector<std::pair<uint64_t, uint32_t>> keys;
  std::vector<std::pair<uint32_t, uint32_t>> cand;
  for (int band = 0; band < o.bands; ++band) {
    keys.clear();
    for (size_t i = 0; i < docs.size(); ++i) {
      if (sets[i].empty()) continue;
      const uint64_t* row = &sigs[i * static_cast<size_t>(o.num_perm) + static_cast<size_t>(band * o.rows)];
      keys.emplace_back(Hash64(row, sizeof(uint64_t) * static_cast<size_t>(o.rows), static_cast<uint64_t>(band)),
                        static_cast<uint32_t>(i));
    }
    std::sort(keys.begin(), keys.end());
    for (size_t x = 0; x < keys.size();) {
      size_t y = x;
      while (y < keys.size() && keys[y].first == keys[x].first) ++y;
      for (size_t p = x; p < y; ++p) {
        for (size_t q = p + 1; q < y; ++q) cand.emplace_back(keys[p].second, keys[q].second);
      }
      x = y;
    }
  }
  std::sort(cand.begin(), cand.end());
  cand.erase(std::unique(cand.begin(), cand.end()), cand.end());
  std::vector<std::pair<uint32_t, uint32_t>> out;
  for (const auto& [a, b] : cand) {
    if (!o.verify || dedup::JaccardSorted(sets[a], sets[b]) >= o.threshold) out.emplace_back(a, b);
  }
  return out;
}

// The ratio of two figures with its range over the repetitions: the medians' ratio, and from the
// least to the most favourable pairing of grist's and the peer's runs.
std::string RatioWithRange(const Figure& fig) {
  if (!fig.peer || fig.peer->min <= 0 || fig.ours.min <= 0) return "";
  const Stats& o = fig.ours;
  const Stats& p = *fig.peer;
  const double lo = fig.higher_is_better ? o.min / p.max : p.min / o.max;
  const double hi = fig.higher_is_better ? o.max / p.min : p.max / o.min;
  const double median = fig.higher_is_better ? o.median / p.median : p.median / o.median;
  return absl::StrFormat("%.3gx [%.3g, %.3g] (%zu and %zu runs)", median, lo, hi,
                         o.samples.size(), p.samples.size());
}

// Adds `fig` and a note with its ratio's median and range.
void AddFigureWithRange(Report* report, Figure fig) {
  const std::string r = RatioWithRange(fig);
  if (!r.empty()) report->AddNote(absl::StrCat("ratio, ", fig.name, " / ", fig.peer_name, ": ", r));
  report->AddFigure(std::move(fig));
}

// Writes `docs` as JSONL ({"text": ...} per line) to `path`; returns their bytes of text.
absl::StatusOr<uint64_t> WriteDocs(Env* env, const std::vector<std::string>& docs,
                                   const std::string& path) {
  std::string jsonl;
  uint64_t bytes = 0;
  for (const auto& d : docs) {
    Document doc;
    doc.text = d;
    jsonl += SerializeRecord(doc) + "\n";
    bytes += d.size();
  }
  RETURN_IF_ERROR(WriteFileAtomic(env, path, jsonl));
  return bytes;
}

// grist's whole dedup of `path` (exact + near, verified, output written), one thread, in MB of
// text per CPU-second of the process; `stages` gets the last run's per-stage report.
// The run options of the per-core figures: one thread, no progress display.
RunOptions OneThread() {
  RunOptions run;
  run.threads = 1;
  run.progress = false;
  return run;
}

absl::StatusOr<Stats> WholeDedupPerCore(const Options& options, const std::string& path,
                                        uint64_t bytes, const std::string& tmp,
                                        std::vector<dedup::StageTiming>* stages) {
  Env* env = Env::Default();
  const RunOptions run = OneThread();
  dedup::DedupOptions o;
  o.work_dir = tmp + "/peer_work";
  return Repeat(options, [&]() -> absl::StatusOr<double> {
    RETURN_IF_ERROR(env->RemoveAll(tmp + "/peer_out"));
    const double t0 = ProcessCpuSeconds();
    ASSIGN_OR_RETURN(auto rep, dedup::RunDedup(env, {path}, tmp + "/peer_out", o, run));
    const double cpu = ProcessCpuSeconds() - t0;
    if (stages != nullptr) *stages = rep.stages;
    return static_cast<double>(bytes) / 1e6 / cpu;
  });
}

// The stages of grist's dedup of `path` run one by one (RunDedupStage, one thread), each one's CPU
// time per repetition: MB of text per CPU-second of each stage, and of the four stages before
// filter (the work datasketch's whole figure does: signatures, candidates, verification,
// clusters; filter writes the output, which datasketch does not).
struct StageCpu {
  std::vector<std::pair<std::string, Stats>> stages;
  Stats before_filter;
};
absl::StatusOr<StageCpu> StagesPerCore(const Options& options, const std::string& path,
                                       uint64_t bytes, const std::string& tmp) {
  Env* env = Env::Default();
  const RunOptions run = OneThread();
  dedup::DedupOptions o;
  o.work_dir = tmp + "/stage_work";
  const auto& order = dedup::kDedupStages;
  std::vector<std::vector<double>> rates(std::size(order));
  std::vector<double> before_filter;
  const int total = options.warmup + options.repetitions;
  for (int rep = 0; rep < total; ++rep) {
    RETURN_IF_ERROR(env->RemoveAll(o.work_dir));
    RETURN_IF_ERROR(env->RemoveAll(tmp + "/stage_out"));
    double first_four = 0;
    for (size_t k = 0; k < std::size(order); ++k) {
      const double t0 = ProcessCpuSeconds();
      RETURN_IF_ERROR(dedup::RunDedupStage(env, order[k], {path}, tmp + "/stage_out", o, run).status());
      const double cpu = std::max(ProcessCpuSeconds() - t0, 1e-6);
      if (k < 4) first_four += cpu;
      if (rep >= options.warmup) rates[k].push_back(static_cast<double>(bytes) / 1e6 / cpu);
    }
    if (rep >= options.warmup) before_filter.push_back(static_cast<double>(bytes) / 1e6 / first_four);
  }
  StageCpu out;
  for (size_t k = 0; k < std::size(order); ++k) {
    out.stages.emplace_back(dedup::DedupStageName(order[k]), Stats::Of(rates[k]));
  }
  out.before_filter = Stats::Of(before_filter);
  return out;
}

// datasketch, rensa and datatrove beside grist (see the file comment). grist runs on the whole
// sample (`--sample-mb` of Wikinews with near copies), and again on the prefix the peers run on
// (`--peer-mb`; datatrove, the slowest, on `--datatrove-mb` of it): per-core rates of different
// sizes are comparable, and the same input is there too. Precision and recall are scored on the
// documents each peer saw, grist's on the same documents.
absl::Status PeerFigures(Report* report, const DedupBenchFlags& f, const std::vector<std::string>& docs,
                         const std::string& tmp) {
  Env* env = Env::Default();
  const double sample_mb = f.options.quick ? 4 : f.sample_mb;
  const double peer_mb = f.options.quick ? 1 : f.peer_mb;
  const double datatrove_mb = f.options.quick ? 0.25 : f.datatrove_mb;
  std::vector<std::string> sample = PeerSample(docs, static_cast<uint64_t>(sample_mb * 1e6));
  std::vector<std::string> prefix;
  uint64_t prefix_bytes = 0;
  for (size_t i = 0; i < sample.size() && prefix_bytes < peer_mb * 1e6; ++i) {
    prefix.push_back(sample[i]);
    prefix_bytes += sample[i].size();
  }
  const std::string sample_path = tmp + "/grist_sample.jsonl";
  const std::string path = tmp + "/peer_sample.jsonl";
  ASSIGN_OR_RETURN(const uint64_t bytes, WriteDocs(env, sample, sample_path));
  RETURN_IF_ERROR(WriteDocs(env, prefix, path).status());
  dedup::DedupOptions o;
  std::string pairs_text;
  for (const auto& [a, b] : GristPairs(prefix, o)) absl::StrAppend(&pairs_text, a, " ", b, "\n");
  RETURN_IF_ERROR(WriteFileAtomic(env, tmp + "/grist_pairs.txt", pairs_text));
  const std::string what = absl::StrFormat("%zu docs, %s", sample.size(),
                                           HumanBytes(static_cast<double>(bytes)));
  const std::string what_prefix = absl::StrFormat("%zu docs, %s", prefix.size(),
                                                  HumanBytes(static_cast<double>(prefix_bytes)));
  report->SetParam("peer sample",
                   absl::StrCat("Wikinews with near copies: grist on ", what, ", datasketch and "
                                "rensa on its first ", what_prefix, ", datatrove on its first ",
                                absl::StrFormat("%.2g", datatrove_mb), " MB; threshold 0.8, 14 "
                                "bands x 8 rows, 112 permutations, word 5-grams, one thread, for "
                                "every tool"));
  ASSIGN_OR_RETURN(Stats sig, Repeat(f.options, [&]() -> absl::StatusOr<double> {
    return SignatureMBps(sample, 1, false, false, true);
  }));
  std::vector<dedup::StageTiming> stages;
  ASSIGN_OR_RETURN(Stats whole, WholeDedupPerCore(f.options, sample_path, bytes, tmp, &stages));
  ASSIGN_OR_RETURN(Stats whole_prefix, WholeDedupPerCore(f.options, path, prefix_bytes, tmp, nullptr));
  for (const auto& st : stages) {
    report->AddNote(absl::StrFormat("whole dedup of %s, 1 thread: stage %-10s %6.3f s (%.1f MB/s)",
                                    what, st.stage, st.seconds,
                                    st.seconds > 0 ? static_cast<double>(bytes) / st.seconds / 1e6 : 0.0));
  }
  ASSIGN_OR_RETURN(StageCpu per_stage, StagesPerCore(f.options, sample_path, bytes, tmp));
  for (const auto& [name, st] : per_stage.stages) {
    report->AddNote(absl::StrFormat(
        "stage %s alone (RunDedupStage, 1 thread), %s: %.1f MB/s per CPU-second [%.1f, %.1f]",
        name, what, st.median, st.min, st.max));
  }
  const int reps = std::max(1, f.options.repetitions);
  auto peer = RunPythonPeer("bench_dedup_peers.py", "datasketch,rensa,datatrove,orjson",
                            {path, "--grist-pairs", tmp + "/grist_pairs.txt", "--repetitions",
                             std::to_string(reps), "--warmup", "0", "--max-mb-datatrove",
                             absl::StrFormat("%.6g", datatrove_mb)});
  std::string note = peer.ok() ? "" : std::string(peer.status().message());
  const std::string json = peer.ok() ? peer->json : "";
  auto stats_of = [&](const std::string& key) -> std::optional<Stats> {
    std::vector<double> v = PeerJsonNumbers(json, key);
    if (v.empty()) return std::nullopt;
    return Stats::Of(v);
  };
  auto why = [&](const std::string& name) {
    if (!note.empty()) return note;
    std::string e = PeerJsonString(json, name + "_error");
    return e.empty() ? std::string("peer gave no figure") : e;
  };
  auto label = [&](const std::string& name) {
    std::string v = PeerJsonString(json, name + "_version");
    std::string l = v.empty() ? name : absl::StrCat(name, " ", v);
    const double docs_n = PeerJsonNumber(json, name + "_docs", -1);
    if (docs_n >= 0) {
      absl::StrAppend(&l, absl::StrFormat(" (on %.0f docs, %s)", docs_n,
                                          HumanBytes(PeerJsonNumber(json, name + "_bytes"))));
    }
    return l;
  };
  auto add = [&](const std::string& name, const std::string& figure, const Stats& ours,
                 const std::string& peer_what, const std::string& key, const std::string& target) {
    Figure fig{figure, "MB/s", ours, absl::StrCat(label(name), " ", peer_what),
               stats_of(absl::StrCat(name, "_", key))};
    fig.target = target;
    if (!fig.peer) fig.peer_note = why(name);
    AddFigureWithRange(report, std::move(fig));
  };
  const std::string sig_name = absl::StrCat("MinHash signatures per core (text to signature), ", what);
  add("rensa", sig_name, sig, "RMinHash.update, per core", "sig_mb_per_s", ">= 5 x rensa");
  add("datasketch", sig_name, sig, "MinHash.update_batch, per core", "sig_mb_per_s", "");
  const std::string whole_name = absl::StrCat("whole dedup per core, ", what);
  add("datasketch", whole_name, whole, "update_batch + MinHashLSH insert/query, per core",
      "whole_mb_per_s", ">= 20 x datasketch");
  add("rensa", whole_name, whole, "RMinHash + RMinHashLSH insert/query, per core",
      "whole_mb_per_s", "");
  add("datatrove", whole_name, whole, "MinHash stages 1-4 (LocalPipelineExecutor, 1 worker), per core",
      "whole_mb_per_s", "");
  add("datasketch",
      absl::StrCat("dedup before the output per core (signatures, buckets, clusters, merge), ", what),
      per_stage.before_filter,
      "update_batch + MinHashLSH insert/query (writes no output), per core", "whole_mb_per_s",
      "extra: the work datasketch's figure covers");
  add("datasketch", absl::StrCat("whole dedup per core, the peers' ", what_prefix), whole_prefix,
      "update_batch + MinHashLSH insert/query, per core", "whole_mb_per_s", ">= 20 x datasketch");
  if (peer.ok()) {
    for (const char* name : {"datasketch", "rensa", "datatrove"}) {
      const double truth = PeerJsonNumber(json, absl::StrCat(name, "_truth_pairs"), -1);
      if (truth < 0) continue;
      for (const char* metric : {"precision", "recall"}) {
        const double ours = PeerJsonNumber(json, absl::StrCat(name, "_grist_", metric), -1);
        const double theirs = PeerJsonNumber(json, absl::StrCat(name, "_", metric), -1);
        Figure fig{absl::StrFormat("%s vs exact Jaccard >= 0.8, on %s's documents (%.0f true pairs)",
                                   metric, name, truth),
                   "", Stats::Of({ours}), label(name),
                   theirs < 0 ? std::nullopt : std::optional<Stats>(Stats::Of({theirs}))};
        if (theirs < 0) fig.peer_note = why(name);
        fig.target = "at least the peer's";
        report->AddFigure(fig);
      }
      report->AddNote(absl::StrFormat(
          "pairs reported on %s's documents: grist %.0f (verified), %s %.0f%s; true pairs %.0f",
          name, PeerJsonNumber(json, absl::StrCat(name, "_grist_reported")), name,
          PeerJsonNumber(json, absl::StrCat(name, "_reported")),
          std::string(name) == "datatrove" ? " (every pair inside its clusters; its own spaCy "
                                             "word shingles)" : " (LSH candidates)",
          truth));
    }
  }
  return absl::OkStatus();
}

std::string SelfExe() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string("grist");
}

// Peak RSS and seconds of `grist dedup` run as its own process.
// The number after the first "KEY": at or after `from` in a grist JSON report; `missing` when absent.
double JsonNumberAfter(const std::string& json, const char* key, size_t from = 0, double missing = 0) {
  const std::string pat = absl::StrCat("\"", key, "\":");
  size_t p = from == std::string::npos ? std::string::npos : json.find(pat, from);
  return p == std::string::npos ? missing : std::strtod(json.c_str() + p + pat.size(), nullptr);
}

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
    // Per thread count: signature MB/s (total) beside the scalar loop at the same count, and the
    // whole dedup of the signature text beside reading it once.
    RETURN_IF_ERROR(env->CreateDirs(tmp + "/sweep"));
    std::string jsonl;
    for (const auto& d : docs) {
      Document doc;
      doc.text = d;
      jsonl += SerializeRecord(doc) + "\n";
    }
    const std::string input = tmp + "/sweep/input.jsonl";
    RETURN_IF_ERROR(WriteFileAtomic(env, input, jsonl));
    RETURN_IF_ERROR(RunSweep(&report, *sweep, [&](const std::string& v)
                                                  -> absl::StatusOr<std::vector<Figure>> {
      ASSIGN_OR_RETURN(int64_t t64, SweepInt(*sweep, v));
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
    return report.Finish();
  }
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
    report.AddFigure(fig);
    if (t == 1) one_thread = ours;
    if (t > 1 && one_thread) {
      Figure scale{absl::StrFormat("signatures, %d threads, total", t), "MB/s",
                   Stats::Of({ours.median * t}), "1 thread", *one_thread};
      scale.target = absl::StrFormat("~%d x with %d idle cores", t, t);
      report.AddFigure(scale);
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
    report.AddFigure(fig);
  }
  ASSIGN_OR_RETURN(Stats shingle_only, Repeat(f.options, [&]() -> absl::StatusOr<double> {
    return SignatureMBps(docs, 1, false, true, true);
  }));
  report.AddNote(absl::StrFormat(
      "shingling + hashing alone (no MinHash): %.1f MB/s per CPU-second", shingle_only.median));

  // The real peers on a sample of Wikinews with near copies: datasketch, rensa, datatrove.
  std::vector<std::string> news;
  if (!corpus.empty() && env->IsDirectory(corpus + "/wikinews-en")) {
    ASSIGN_OR_RETURN(news, LoadTexts({corpus + "/wikinews-en"}));
  }
  RETURN_IF_ERROR(PeerFigures(&report, f, news.empty() ? docs : news, tmp));

  // ---- 2. the whole dedup of the shared corpus
  if (!corpus.empty()) {
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
    report.AddFigure(fig);
    for (const auto& s : last.stages) {
      report.AddNote(absl::StrFormat("stage %-10s %7.2f s  %8.1f MB/s of its input  %9.0f docs/s  peak RSS %s",
                                     s.stage, s.seconds,
                                     s.seconds > 0 ? s.input_bytes / s.seconds / 1e6 : 0.0,
                                     s.seconds > 0 ? last.counts.docs_in / s.seconds : 0.0,
                                     HumanBytes(static_cast<double>(s.peak_rss_bytes))));
    }
    report.AddNote(absl::StrFormat(
        "corpus result: %llu in, %llu kept, %llu removed (exact %llu, near %llu), %llu clusters",
        (unsigned long long)last.counts.docs_in, (unsigned long long)last.counts.docs_out,
        (unsigned long long)last.counts.docs_removed, (unsigned long long)last.removed_exact,
        (unsigned long long)last.removed_near, (unsigned long long)last.clusters));

    // ---- 3. peak memory: an input, the same input 4x (exact copies), and 4 near copies (one
    //         word changed per copy, so every document is a verified near duplicate), each as its
    //         own process under a budget small enough to bind: the bucket sort spills at x4, and
    //         the near copies' candidate sets are many times the verification cache (the RSS
    //         includes ~11 MB of process baseline that no budget covers).
    if (!f.options.quick && env->IsDirectory(corpus + "/wikinews-en")) {
      constexpr int kBudgetMb = 64;
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
      const std::string budget_name = absl::StrFormat("the budget (--memory-limit %d)", kBudgetMb);
      std::vector<double> rss;  // peak RSS bytes per input
      for (const MemRun& m : {MemRun{"wikinews-en x1", corpus + "/wikinews-en"},
                              MemRun{"wikinews-en x4 (exact copies)", tmp + "/x4"},
                              MemRun{"wikinews-en x4 (near copies)", tmp + "/near4"}}) {
        const std::string out = absl::StrCat(tmp, "/m", rss.size());
        ASSIGN_OR_RETURN(auto run, DedupProcess(absl::StrCat("-i ", m.input, " -o ", out, " ",
                                                             common),
                                                out + ".json"));
        auto field = [&](const char* key) { return JsonNumberAfter(run.report, key); };
        Figure mem{absl::StrCat("peak RSS, ", m.name, ", whole dedup, 2 threads"), "MB",
                   Stats::Of({run.peak_rss_bytes / 1e6}), budget_name,
                   Stats::Of({static_cast<double>(kBudgetMb) * (1 << 20) / 1e6})};
        mem.higher_is_better = false;
        mem.peer_is_ceiling = true;
        mem.target = "<= 1 x budget, whatever the duplicates";
        report.AddFigure(mem);
        report.AddNote(absl::StrFormat(
            "%s: %.0f docs in, %.0f removed (exact %.0f, near %.0f); %.0f candidate pairs; "
            "verification spilled %s of candidate sets, %.0f pass(es); %.1f s",
            m.name, field("docs_in"), field("docs_removed"), field("removed_exact"),
            field("removed_near"), field("candidate_pairs"),
            HumanBytes(field("spilled_set_bytes")), field("verify_passes"), run.seconds));
        rss.push_back(run.peak_rss_bytes);
      }
      report.AddNote(absl::StrFormat(
          "peak RSS x4 exact / x1 = %.2f, x4 near / x1 = %.2f (memory independent of the "
          "duplicates: ~1)",
          rss[1] / rss[0], rss[2] / rss[0]));

      // ---- 4. the merge stage's external path (the edges beyond half the budget) against the
      //         in-memory union-find on the same edges: x4 exact copies, stages before merge run
      //         once, then merge alternately one way and the other; and the whole dedup as its own
      //         process under a budget that sends merge the external way.
      {
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
        report.AddFigure(merge);
        report.AddNote(absl::StrFormat(
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
        Figure small{"peak RSS, merge stage alone (own process), wikinews-en x4 exact copies, external",
                     "MB", Stats::Of({after(merge_at, "peak_rss_bytes") / 1e6}),
                     absl::StrFormat("the budget (--memory-limit %d)", kSmallMb),
                     Stats::Of({static_cast<double>(kSmallMb) * (1 << 20) / 1e6})};
        small.higher_is_better = false;
        small.peer_is_ceiling = true;
        small.target = "<= 1 x budget + the ~11 MB process baseline, whatever the duplicates";
        report.AddFigure(small);
        report.AddNote(absl::StrFormat(
            "stage by stage at %d MB: merge_rounds %.0f, merge %.2f s; the clusters stage's process "
            "peaked at %.1f MB, filter's at %.1f MB; %.1f s in all",
            kSmallMb, after(0, "merge_rounds"), after(merge_at, "seconds"),
            after(clusters_at, "peak_rss_bytes") / 1e6,
            after(json.find("\"stage\": \"filter\""), "peak_rss_bytes") / 1e6, sw2.Seconds()));
      }
    }
  } else {
    report.AddNote("shared corpus absent: whole-corpus and memory figures skipped");
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
  app->add_option("--sample-mb", f->sample_mb,
                  "Text of the peer figures' sample for grist in MB, near copies included "
                  "(default 24; --quick 4)");
  app->add_option("--peer-mb", f->peer_mb,
                  "The prefix of that sample datasketch and rensa run on, in MB (default 4; "
                  "--quick 1)");
  app->add_option("--datatrove-mb", f->datatrove_mb,
                  "The prefix of that sample datatrove runs on, in MB (default 1; --quick 0.25)");
  return [f]() { return Run(*f); };
}

GRIST_REGISTER_BENCH(dedup, "dedup", "MinHash signatures per thread, whole-corpus dedup, memory",
                     Setup);

}  // namespace
}  // namespace grist::bench
