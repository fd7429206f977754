#include "bench/dedup_peers.h"

#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/python_peer.h"
#include "common/env.h"
#include "common/hash.h"
#include "common/progress.h"
#include "common/records.h"
#include "common/status_macros.h"
#include "common/sysinfo.h"
#include "dedup/dedup.h"
#include "dedup/minhash.h"

namespace grist::bench {
namespace {

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
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

// The run options of the per-core figures: one thread, no progress display.
RunOptions OneThread() {
  RunOptions run;
  run.threads = 1;
  run.progress = false;
  return run;
}

// grist's whole dedup of `path` (exact + near, verified, output written), one thread, in MB of
// text per CPU-second of the process; `stages` gets the last run's per-stage report.
absl::StatusOr<Stats> WholeDedupPerCore(const Options& options, const std::string& path,
                                        uint64_t bytes, const std::string& tmp,
                                        std::vector<dedup::StageTiming>* stages,
                                        dedup::DedupOptions::KeepShingles keep_shingles =
                                            dedup::DedupOptions::KeepShingles::kDecide) {
  Env* env = Env::Default();
  const RunOptions run = OneThread();
  dedup::DedupOptions o;
  o.work_dir = tmp + "/peer_work";
  o.keep_shingles = keep_shingles;
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

}  // namespace

double SignatureMBps(const std::vector<std::string>& docs, int threads, bool scalar,
                     bool shingles_only, bool per_cpu_second) {
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

absl::Status AddDedupPeerFigures(Report* report, const Options& options,
                                 const DedupPeerSizes& sizes, const std::vector<std::string>& docs,
                                 const std::string& tmp) {
  Env* env = Env::Default();
  const DedupPeerSizes used = options.quick ? DedupPeerSizes::Quick() : sizes;
  const double sample_mb = used.sample_mb;
  const double peer_mb = used.peer_mb;
  const double datatrove_mb = used.datatrove_mb;
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
  ASSIGN_OR_RETURN(Stats sig, Repeat(options, [&]() -> absl::StatusOr<double> {
    return SignatureMBps(sample, 1, false, false, true);
  }));
  std::vector<dedup::StageTiming> stages;
  ASSIGN_OR_RETURN(Stats whole, WholeDedupPerCore(options, sample_path, bytes, tmp, &stages));
  ASSIGN_OR_RETURN(Stats whole_prefix, WholeDedupPerCore(options, path, prefix_bytes, tmp, nullptr));
  // The signatures stage's shingles always kept for verification, and never (dedup.h,
  // keep_shingles: by default a trial over the first splits decides; here it keeps them).
  using Keep = dedup::DedupOptions::KeepShingles;
  ASSIGN_OR_RETURN(Stats whole_kept,
                   WholeDedupPerCore(options, sample_path, bytes, tmp, nullptr, Keep::kAlways));
  ASSIGN_OR_RETURN(Stats whole_unkept,
                   WholeDedupPerCore(options, sample_path, bytes, tmp, nullptr, Keep::kNever));
  // The same documents as `grist clean` hands them to dedup in a pipeline: a grist part (zstd
  // frames with a frame index), whose frames of kept documents the filter copies as they are.
  const std::string part_dir = tmp + "/grist_sample_part";
  RETURN_IF_ERROR(env->RemoveAll(part_dir));
  {
    ASSIGN_OR_RETURN(std::unique_ptr<RecordWriter> w, RecordWriter::Open(env, part_dir, "part"));
    for (const std::string& d : sample) {
      Document doc;
      doc.text = d;
      RETURN_IF_ERROR(w->Append(doc));
    }
    RETURN_IF_ERROR(w->Finish().status());
  }
  ASSIGN_OR_RETURN(Stats whole_part, WholeDedupPerCore(options, part_dir, bytes, tmp, nullptr));
  for (const auto& st : stages) {
    report->AddNote(absl::StrFormat("whole dedup of %s, 1 thread: stage %-10s %6.3f s (%.1f MB/s)",
                                    what, st.stage, st.seconds,
                                    st.seconds > 0 ? static_cast<double>(bytes) / st.seconds / 1e6 : 0.0));
  }
  ASSIGN_OR_RETURN(StageCpu per_stage, StagesPerCore(options, sample_path, bytes, tmp));
  for (const auto& [name, st] : per_stage.stages) {
    report->AddNote(absl::StrFormat(
        "stage %s alone (RunDedupStage, 1 thread), %s: %.1f MB/s per CPU-second [%.1f, %.1f]",
        name, what, st.median, st.min, st.max));
  }
  const int reps = std::max(1, options.repetitions);
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
  add("datasketch",
      absl::StrCat("whole dedup per core, ", what, ", read from a grist part as clean writes it"),
      whole_part, "update_batch + MinHashLSH insert/query, per core", "whole_mb_per_s",
      ">= 20 x datasketch");
  add("datasketch", absl::StrCat("whole dedup per core, the peers' ", what_prefix), whole_prefix,
      "update_batch + MinHashLSH insert/query, per core", "whole_mb_per_s", ">= 20 x datasketch");
  add("datasketch",
      absl::StrCat("whole dedup per core, ", what,
                   ", the signatures stage's shingles always kept for verification"),
      whole_kept, "update_batch + MinHashLSH insert/query, per core", "whole_mb_per_s",
      "extra: what the trial chose here");
  add("datasketch",
      absl::StrCat("whole dedup per core, ", what,
                   ", shingles never kept (candidates' splits read again)"),
      whole_unkept, "update_batch + MinHashLSH insert/query, per core", "whole_mb_per_s",
      "extra: the default before the trial");
  // The same two measured in turns (grist's whole dedup of the sample, then datasketch on its
  // prefix, each once a turn): the VM's speed moves between the peer's runs above and grist's, so
  // each turn's pair gives a ratio of its own; their median and range say how reliable the ratio
  // is. Rates only (no pairs scored).
  if (peer.ok() && stats_of("datasketch_whole_mb_per_s")) {
    std::vector<double> ours_turns, peer_turns, ratios;
    Options once = options;
    once.warmup = 0;
    once.repetitions = 1;
    for (int turn = 0; turn < std::max(3, reps); ++turn) {
      ASSIGN_OR_RETURN(Stats g, WholeDedupPerCore(once, sample_path, bytes, tmp, nullptr));
      auto p = RunPythonPeer("bench_dedup_peers.py", "datasketch",
                             {path, "--peers", "datasketch", "--no-scores", "--repetitions", "1",
                              "--warmup", "0"});
      if (!p.ok()) break;
      const std::vector<double> d = PeerJsonNumbers(p->json, "datasketch_whole_mb_per_s");
      if (d.empty() || d[0] <= 0) break;
      ours_turns.push_back(g.median);
      peer_turns.push_back(d[0]);
      ratios.push_back(g.median / d[0]);
    }
    if (!ratios.empty()) {
      Figure fig{absl::StrFormat("whole dedup per core, %s, in %zu turns with datasketch",
                                 what, ratios.size()),
                 "MB/s", Stats::Of(ours_turns),
                 absl::StrCat(label("datasketch"), " update_batch + MinHashLSH, per core, each "
                              "turn right after grist's"),
                 Stats::Of(peer_turns)};
      fig.target = ">= 20 x datasketch";
      const Stats r = Stats::Of(ratios);
      report->AddNote(absl::StrFormat(
          "ratio of each turn, whole dedup per core / datasketch: %.3gx [%.3g, %.3g] (%zu turns)",
          r.median, r.min, r.max, ratios.size()));
      report->AddFigure(std::move(fig));
    }
  }
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

}  // namespace grist::bench
