// `grist bench build`: the whole pipeline, `grist build` of a config end to end (clean, dedup,
// tokenizer training, tokenize, pack+shard, manifest), every repetition from scratch (--restart),
// in input MB per second, with each stage's time and throughput from the build report.
//
// Peers, measured in the same run on the same inputs:
//   - the clean stage alone (clean::RunClean with the config's [clean] options) (a ceiling: clean
//     is the build's first stage and reads every input byte, so the build cannot be faster than
//     it);
//   - the sum of the stage times the build itself reports (the build's wall time minus this is
//     what is outside the stages: input hashing, the work folder, the manifest).
//
// Config: --config (e.g. configs/v1.0.toml with the demo corpus), else one written here over a
// sample of the default corpus (../shared/corpus/wikinews-en, else .demo/corpus) with clean and
// dedup on, as v1.0 but a smaller vocabulary.
//
// `--sweep threads=1,2,4,8,16` (this bench's own sweep, not the harness's one process per value):
// the same config built at each thread count, each stage's time taken from the build report (clean,
// dedup and each of dedup's stages from its dedup_report.json, tokenizer training, tokenize,
// pack+shard), Amdahl's law fitted per stage (bench/scaling.h), a table of serial fraction,
// predicted speedup and efficiency at the largest count with the stages below 0.8x linear flagged,
// and a check that the release's bytes (every file but reports/) are identical at every count: a
// difference fails the bench. pack+shard's figure has a ceiling beside it, measured after each
// build: writing and syncing as many bytes, in files of the release's sizes, on the same disk;
// and dedup's filter one: writing and syncing dedup's output (kept and removed parts) likewise.
// Then the host's own ceiling at the largest count N: N one-thread builds of the config as
// separate processes at once (ConcurrentOneThreadBuilds); every stage's speed-up at N threads
// beside N x its one-thread time over its time in those processes, the speed-up N busy cores give
// that stage on this host (a lower clock, shared caches and memory bandwidth: less than N). And the
// largest serial decode among the inputs (LargestSerialDecode), a floor under clean: clean bound by
// it (within 1.25x) is not judged by the ceiling.
#include <fcntl.h>
#include <simdjson.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/corpus_sample.h"
#include "bench/harness.h"
#include "bench/registry.h"
#include "bench/scaling.h"
#include "clean/run_clean.h"
#include "common/config.h"
#include "common/env.h"
#include "common/documents_format.h"
#include "common/hash.h"
#include "common/records.h"
#include "common/status_macros.h"
#include "common/sysinfo.h"
#include "common/thread_pool.h"
#include "release/release.h"
#include "shard/shard_format.h"

namespace grist::bench {
namespace {

struct BuildBenchFlags {
  Options options;
  std::string config;
  std::vector<std::string> inputs;
  uint64_t max_bytes = 32ull << 20;
  int threads = 0;
  std::string work;
};

// A release config over `input` like configs/v1.0.toml (clean and dedup on, bestfit 2048).
std::string BenchConfig(const std::string& input, int vocab) {
  return absl::StrCat(
      "seed = 1234\n[release]\nversion = \"bench\"\n[inputs]\npaths = [\"", input, "\"]\n",
      "[clean]\nenabled = true\n[dedup]\nenabled = true\nexact = true\nnear = true\n"
      "threshold = 0.8\n[tokenizer]\nmodel_type = \"bpe\"\nvocab_size = ",
      vocab,
      "\ncharacter_coverage = 0.9995\nbyte_fallback = true\nnormalization = \"identity\"\n"
      "add_dummy_prefix = true\nsplit_digits = true\nuser_defined_symbols = []\n"
      "control_symbols = []\ninput_sentence_size = 200000\nmax_sentence_length = 16384\n"
      "unk_id = 0\nbos_id = 1\neos_id = 2\npad_id = 3\n[tokenize]\nadd_bos = false\n"
      "add_eos = true\npiece_bytes = 1048576\n[pack]\nseq_len = 2048\nstrategy = \"bestfit\"\n"
      "bestfit_window_tokens = 16777216\n[split]\nvalidation_fraction = 0.01\n[shard]\n"
      "max_bytes = 268435456\n");
}

// The efficiency at the largest thread count below which the sweep flags a stage (issue 14: no
// stage below 0.8x linear scaling).
constexpr double kTargetEfficiency = 0.8;
// A stage below this share of the build's time at the smallest thread count is not judged.
constexpr double kNegligibleShare = 0.02;

// Seconds of each of dedup's stages in `dedup_dir`/dedup_report.json, in its order; empty when
// the file is absent (dedup off) or unreadable.
std::vector<std::pair<std::string, double>> DedupStageSeconds(Env* env, const std::string& dedup_dir) {
  std::vector<std::pair<std::string, double>> out;
  auto json = ReadFileToString(env, JoinPath(dedup_dir, "dedup_report.json"));
  if (!json.ok()) return out;
  simdjson::dom::parser parser;
  simdjson::padded_string ps(*json);
  simdjson::dom::array stages;
  if (parser.parse(ps)["stages"].get(stages) != simdjson::SUCCESS) return out;
  for (simdjson::dom::element st : stages) {
    std::string_view name;
    double secs;
    if (st["stage"].get(name) == simdjson::SUCCESS && st["seconds"].get(secs) == simdjson::SUCCESS) {
      out.emplace_back(absl::StrCat("dedup: ", std::string(name)), secs);
    }
  }
  return out;
}

// The release's files but reports/, by path relative to `dir`.
absl::StatusOr<std::vector<std::string>> ReleaseFiles(Env* env, const std::string& dir) {
  std::vector<std::string> files;
  std::vector<std::string> todo = {""};
  while (!todo.empty()) {
    const std::string rel = todo.back();
    todo.pop_back();
    ASSIGN_OR_RETURN(std::vector<std::string> names, env->ListDir(JoinPath(dir, rel)));
    for (const std::string& n : names) {
      const std::string r = rel.empty() ? n : JoinPath(rel, n);
      if (rel.empty() && n == shard::kReportsDir) continue;
      if (env->IsDirectory(JoinPath(dir, r))) {
        todo.push_back(r);
      } else {
        files.push_back(r);
      }
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

// A digest of the release in `dir`: every file but reports/ (which holds times and the host), by
// relative path and XXH3-128 of its bytes, in sorted order.
absl::StatusOr<std::string> ReleaseDigest(Env* env, const std::string& dir) {
  ASSIGN_OR_RETURN(std::vector<std::string> files, ReleaseFiles(env, dir));
  Hasher128 h;
  for (const std::string& f : files) {
    ASSIGN_OR_RETURN(Hash128 fh, HashFile128(env, JoinPath(dir, f)));
    h.Update(f);
    h.Update(std::string_view("\0", 1));
    h.Update(fh.ToHex());
  }
  return absl::StrCat(files.size(), " files, ", h.Digest().ToHex());
}

// The floor of pack+shard on this disk: writing as many files of the same sizes as the release
// in `dir` holds (reports/ aside) into a scratch folder beside it, 4 MiB per write with write-back
// started every kWritebackBytes (as grist's writers do), each file fsynced, then the folder;
// seconds. *bytes: their total.
absl::StatusOr<double> WriteSyncSeconds(Env* env, const std::string& dir, uint64_t* bytes) {
  ASSIGN_OR_RETURN(std::vector<std::string> files, ReleaseFiles(env, dir));
  std::vector<uint64_t> sizes;
  *bytes = 0;
  for (const std::string& f : files) {
    ASSIGN_OR_RETURN(uint64_t n, env->GetFileSize(JoinPath(dir, f)));
    sizes.push_back(n);
    *bytes += n;
  }
  const std::string scratch = dir + ".ceiling";
  RETURN_IF_ERROR(env->RemoveAll(scratch));
  RETURN_IF_ERROR(env->CreateDirs(scratch));
  static const std::string* block = new std::string(4 << 20, 'g');  // touched once per process
  Stopwatch sw;
  for (size_t i = 0; i < sizes.size(); ++i) {
    ASSIGN_OR_RETURN(auto w, env->NewWritableFile(JoinPath(scratch, absl::StrCat("f", i))));
    w->SetWritebackBytes(kWritebackBytes);  // as grist's writers: write-back starts as they grow
    for (uint64_t left = sizes[i]; left > 0;) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(left, block->size()));
      RETURN_IF_ERROR(w->Append(std::string_view(*block).substr(0, n)));
      left -= n;
    }
    RETURN_IF_ERROR(w->Sync());
    RETURN_IF_ERROR(w->Close());
  }
  RETURN_IF_ERROR(env->SyncDir(scratch));
  const double s = sw.Seconds();
  RETURN_IF_ERROR(env->RemoveAll(scratch));
  return s;
}

// This host's ceiling for the build at `n` threads: n one-thread builds of `config` as separate
// processes at once (n busy cores sharing nothing, under the clock, memory bandwidth and caches
// n threads also get), each into its own folder under `work`. Returns every stage's seconds
// (dedup's stages too, and "build" for the whole) as the median over the processes.
absl::StatusOr<std::map<std::string, double>> ConcurrentOneThreadBuilds(Env* env,
                                                                       const std::string& config,
                                                                       const std::string& work,
                                                                       int n) {
  char exe[4096];
  const ssize_t len = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (len <= 0) return absl::InternalError("cannot read /proc/self/exe");
  const std::string self(exe, static_cast<size_t>(len));
  RETURN_IF_ERROR(env->RemoveAll(work));
  RETURN_IF_ERROR(env->CreateDirs(work));
  std::vector<pid_t> pids;
  for (int i = 0; i < n; ++i) {
    const std::string out = JoinPath(work, absl::StrCat("r", i));
    std::vector<std::string> args = {self,       "build", "--config",  config,
                                     "--output", out,     "--restart", "--threads",
                                     "1",        "--quiet", "--json",  out + ".json"};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) {
      for (pid_t started : pids) ::waitpid(started, nullptr, 0);  // no child left unwaited
      return absl::InternalError("fork failed");
    }
    if (pid == 0) {
      const int null = ::open("/dev/null", O_WRONLY);
      if (null >= 0) ::dup2(null, 1);
      ::execv(self.c_str(), argv.data());
      ::_exit(127);
    }
    pids.push_back(pid);
  }
  absl::Status failed;
  for (size_t i = 0; i < pids.size(); ++i) {
    int status = 0;
    ::waitpid(pids[i], &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      failed = absl::InternalError(absl::StrCat("one-thread build ", i, " of ", n, " failed"));
    }
  }
  RETURN_IF_ERROR(failed);
  std::map<std::string, std::vector<double>> times;
  for (int i = 0; i < n; ++i) {
    const std::string out = JoinPath(work, absl::StrCat("r", i));
    ASSIGN_OR_RETURN(std::string json, ReadFileToString(env, out + ".json"));
    simdjson::dom::parser parser;
    simdjson::padded_string ps(json);
    simdjson::dom::element doc;
    double total = 0;
    simdjson::dom::array stages;
    if (parser.parse(ps).get(doc) != simdjson::SUCCESS || doc["seconds"].get(total) ||
        doc["stages"].get(stages)) {
      return absl::InternalError(absl::StrCat(out, ".json: not a build report"));
    }
    times["build"].push_back(total);
    for (simdjson::dom::element st : stages) {
      std::string_view name, note;
      double secs = 0;
      if (st["name"].get(name) || st["seconds"].get(secs)) continue;
      if (st["note"].get(note) == simdjson::SUCCESS && note == "disabled") continue;
      times[std::string(name)].push_back(secs);
      if (name == "dedup") {
        for (auto& [part, t] : DedupStageSeconds(env, JoinPath(out + ".work", "dedup"))) {
          times[part].push_back(t);
        }
      }
    }
  }
  (void)env->RemoveAll(work);
  std::map<std::string, double> medians;
  for (const auto& [name, t] : times) medians[name] = Stats::Of(t).median;
  return medians;
}

// The longest decode the inputs of `config` force onto one thread: each compressed input without a
// frame index is decoded by one decoder however many threads read its records (grist parts with an
// index decode frame by frame, in parallel). Median of `repetitions` decodes of each such file;
// returns the largest with its file name, or 0 s when there is none.
absl::StatusOr<std::pair<std::string, double>> LargestSerialDecode(Env* env,
                                                                  const std::string& config_path,
                                                                  int repetitions) {
  ASSIGN_OR_RETURN(Config config, Config::FromFile(env, config_path));
  ASSIGN_OR_RETURN(std::vector<std::string> inputs, ConfigInputs(config));
  ASSIGN_OR_RETURN(std::vector<InputFile> files, ListInputs(env, inputs));
  std::pair<std::string, double> largest{"", 0.0};
  for (const InputFile& f : files) {
    if (!IsCompressedFormat(f.format)) continue;
    if (f.format == InputFormat::kJsonlZstd) {
      ASSIGN_OR_RETURN(auto raw, env->NewRandomAccessFile(f.path));
      ASSIGN_OR_RETURN(auto index, ReadZstdFrameIndex(*raw));
      if (index.has_value()) continue;
    }
    std::vector<double> s;
    for (int i = 0; i < std::max(1, repetitions); ++i) {
      Stopwatch sw;
      RETURN_IF_ERROR(DecodeWholeFile(env, f).status());
      s.push_back(sw.Seconds());
    }
    const double median = Stats::Of(s).median;
    if (median > largest.second) largest = {f.path, median};
  }
  return largest;
}

// `grist bench build --sweep threads=...`: see the top of this file.
absl::Status RunThreadSweep(const BuildBenchFlags& f, const Sweep& sweep, const std::string& what) {
  const Options& o = f.options;
  Env* env = Env::Default();
  Report report("build", o);
  report.SetParam("config", what);
  const std::string out = JoinPath(f.work, "release");
  std::vector<std::string> stage_order;
  std::map<std::string, std::vector<double>> stage_median;  // per stage, one median per count
  std::vector<double> build_median;                          // the build's seconds, per count
  std::vector<std::pair<int64_t, std::string>> digests;
  uint64_t bytes_in = 0;
  std::string release_id;
  // The stages whose floor is the disk: pack+shard writes and syncs the release, dedup's filter
  // dedup's output (kept and removed parts). Per stage, writing and syncing as many bytes in files
  // of the same sizes, measured after each build, and the stage's speed over it at the last count.
  struct DiskCeiling {
    std::string what;           // the bytes written, as the figure names them
    std::vector<double> rate;   // input MB/s of the write, one per build at this count
    uint64_t bytes = 0;
    double vs = 0, mb = 0;      // at the last count measured
  };
  std::map<std::string, DiskCeiling> disk = {{"pack+shard", {"the release's"}},
                                             {"dedup: filter", {"dedup's output,"}}};
  absl::Status swept = RunSweep(&report, sweep, [&](const std::string& v)
                                                    -> absl::StatusOr<std::vector<Figure>> {
    ASSIGN_OR_RETURN(int64_t threads, SweepInt(sweep, v));
    std::vector<double> mbs, build_s;
    for (auto& [name, d] : disk) d.rate.clear();
    std::map<std::string, std::vector<double>> secs;
    std::string digest;
    for (int i = 0; i < o.warmup + o.repetitions; ++i) {
      RETURN_IF_ERROR(env->RemoveAll(out));
      release::BuildOptions bo;
      bo.config_path = f.config;
      bo.output_dir = out;
      bo.restart = true;
      bo.run.threads = static_cast<int>(threads);
      bo.run.progress = false;
      ASSIGN_OR_RETURN(release::BuildReport r, release::BuildRelease(env, bo));
      release_id = r.release_id;
      bytes_in = r.stages.empty() ? 0 : r.stages.front().bytes_in;
      if (i < o.warmup) continue;
      for (const auto& [name, dir] : {std::pair<std::string, std::string>{"pack+shard", out},
                                      {"dedup: filter", JoinPath(out + ".work", "dedup")}}) {
        if (!env->IsDirectory(dir)) continue;  // dedup disabled in the config
        DiskCeiling& d = disk[name];
        ASSIGN_OR_RETURN(double write_s, WriteSyncSeconds(env, dir, &d.bytes));
        d.rate.push_back(write_s > 0 ? bytes_in / 1e6 / write_s : 0);
      }
      mbs.push_back(bytes_in / 1e6 / r.seconds);
      build_s.push_back(r.seconds);
      std::vector<std::pair<std::string, double>> times;
      for (const release::StageSummary& st : r.stages) {
        if (st.note == "disabled") continue;
        times.emplace_back(st.name, st.seconds);
        if (st.name == "dedup") {
          for (auto& part : DedupStageSeconds(env, JoinPath(out + ".work", "dedup"))) {
            times.push_back(std::move(part));
          }
        }
      }
      for (const auto& [name, t] : times) {
        if (std::find(stage_order.begin(), stage_order.end(), name) == stage_order.end()) {
          stage_order.push_back(name);
        }
        secs[name].push_back(t);
      }
    }
    ASSIGN_OR_RETURN(digest, ReleaseDigest(env, out));
    digests.emplace_back(threads, digest);
    build_median.push_back(Stats::Of(build_s).median);
    std::vector<Figure> figs;
    Figure e2e{"build end to end", "MB/s", Stats::Of(mbs)};
    e2e.target = ">= 0.8 x linear";
    figs.push_back(e2e);
    for (const std::string& name : stage_order) {
      if (!secs.count(name)) continue;
      const std::vector<double>& t = secs[name];
      Stats st = Stats::Of(t);
      stage_median[name].push_back(st.median);
      // Throughput of the stage in the build's input MB per second of the stage: a stage that
      // scales linearly doubles it with twice the threads (plots draw linear and the Amdahl fit).
      std::vector<double> rate;
      for (double x : t) rate.push_back(x > 0 ? bytes_in / 1e6 / x : 0);
      Figure fig{absl::StrCat("stage ", name), "input MB/s", Stats::Of(rate)};
      fig.target = ">= 0.8 x linear";
      if (auto it = disk.find(name); it != disk.end() && !it->second.rate.empty()) {
        DiskCeiling& d = it->second;
        d.vs = Stats::Of(rate).median / std::max(1e-9, Stats::Of(d.rate).median);
        d.mb = d.bytes / 1e6;
        fig.peer_name = absl::StrFormat(
            "writing and syncing %s %.1f MB (its file sizes, 4 MiB writes, fsync each)", d.what,
            d.mb);
        fig.peer = Stats::Of(d.rate);
        fig.peer_is_ceiling = true;
      }
      figs.push_back(fig);
    }
    return figs;
  });
  (void)env->RemoveAll(out);
  (void)env->RemoveAll(out + ".work");
  RETURN_IF_ERROR(swept);

  // Every stage measured at every count: fit each (a count whose build failed has no times).
  std::vector<double> ns;
  for (const auto& [n, d] : digests) ns.push_back(n);
  std::vector<StageScaling> scaling;
  const size_t smallest = std::min_element(ns.begin(), ns.end()) - ns.begin();
  for (const std::string& name : stage_order) {
    const std::vector<double>& t = stage_median[name];
    if (t.size() != ns.size()) continue;
    StageScaling s = FitStageScaling(name, ns, t, kTargetEfficiency);
    // A stage that is a sliver of the build (copying a given tokenizer, a tiny pack) is timer noise
    // at every count: shown, not judged.
    const double share = build_median.size() == ns.size() && build_median[smallest] > 0
                             ? t[smallest] / build_median[smallest]
                             : 1.0;
    if (share < kNegligibleShare) {
      s.not_judged = absl::StrFormat("%.1f%% of the build", 100 * share);
    } else if (auto it = disk.find(name); it != disk.end() && it->second.vs >= kTargetEfficiency) {
      // Threads cannot make the disk faster: a stage already at the speed of writing its bytes
      // is judged by that ceiling (its figure above), not by linear scaling.
      s.not_judged = absl::StrFormat("bound by the disk: %.2fx writing and syncing its %.1f MB",
                                     it->second.vs, it->second.mb);
    }
    scaling.push_back(std::move(s));
  }
  report.AddNote(ScalingTable(scaling, kTargetEfficiency));

  // Linear is more than a host gives when all its cores are busy (a lower clock, shared memory
  // bandwidth and caches): each stage beside the same work on as many one-thread processes.
  const double max_n = ns.empty() ? 1 : *std::max_element(ns.begin(), ns.end());
  const size_t largest = std::max_element(ns.begin(), ns.end()) - ns.begin();
  if (max_n > 1 && ns.size() >= 2) {
    ASSIGN_OR_RETURN(auto procs,
                     ConcurrentOneThreadBuilds(env, f.config, JoinPath(f.work, "ceiling"),
                                               static_cast<int>(max_n)));
    const std::string hi = absl::StrCat(max_n);
    std::string t = absl::StrCat(
        "Against this host's ceiling at ", hi, " threads: ", hi, " one-thread builds of the same "
        "config as separate processes at once (", hi, " busy cores sharing nothing). A stage's "
        "ceiling speed-up is ", hi, " x its one-thread time alone / its median time in those "
        "processes; its speed-up at ", hi, " threads over that is the fraction of the ceiling.\n\n"
        "| stage | s at 1 | s at ", hi, " | speed-up | s in ", hi,
        " one-thread processes | ceiling speed-up | of the ceiling | target |\n"
        "|---|---:|---:|---:|---:|---:|---:|---|\n");
    // clean reads every input: it cannot end before the largest serial decode does.
    ASSIGN_OR_RETURN(const auto decode, LargestSerialDecode(env, f.config, 3));
    std::vector<std::string> below;
    auto row = [&](const std::string& name, double t1, double tn, const std::string& not_judged) {
      auto it = procs.find(name);
      if (it == procs.end() || t1 <= 0 || tn <= 0 || it->second <= 0) return;
      const double speedup = t1 / tn, ceiling = max_n * t1 / it->second;
      const double frac = speedup / ceiling;
      std::string verdict = frac >= kTargetEfficiency ? "ok" : "**below**";
      // The floor binds when the decode takes longer than the ceiling's time (t1 / ceiling); the
      // stage is then judged by its time over that decode's.
      const std::string reason =
          name == "clean" && frac < kTargetEfficiency && decode.second > t1 / ceiling &&
                  decode.second / tn >= kTargetEfficiency
              ? absl::StrFormat("bound by the serial decode of %s: %.3f s, %.2fx of it",
                                BaseName(decode.first), decode.second, decode.second / tn)
              : not_judged;
      if (!reason.empty()) verdict = absl::StrCat("not judged (", reason, ")");
      if (reason.empty() && frac < kTargetEfficiency) below.push_back(name);
      absl::StrAppend(&t, absl::StrFormat("| %s | %.3f | %.3f | %.2fx | %.3f | %.2fx | %.2f | ",
                                          name, t1, tn, speedup, it->second, ceiling, frac),
                      absl::StrFormat(">= %.1f: ", kTargetEfficiency), verdict, " |\n");
    };
    if (smallest < build_median.size() && largest < build_median.size() && ns[smallest] == 1) {
      row("build", build_median[smallest], build_median[largest], "");
    }
    for (const StageScaling& sc : scaling) {  // threads ascending, seconds in their order
      if (sc.seconds.empty() || sc.threads.front() != 1) continue;
      row(sc.stage, sc.seconds.front(), sc.seconds.back(), sc.not_judged);
    }
    absl::StrAppend(&t, "\n",
                    below.empty()
                        ? absl::StrFormat("No stage below %.1f of this host's ceiling at %s "
                                          "threads.",
                                          kTargetEfficiency, hi)
                        : absl::StrFormat("Below %.1f of this host's ceiling at %s threads: %s.",
                                          kTargetEfficiency, hi, absl::StrJoin(below, ", ")),
                    "\n");
    absl::StrAppend(
        &t, "\n",
        decode.first.empty()
            ? std::string("No input is decoded serially (no compressed file without a frame "
                          "index).")
            : absl::StrFormat("The largest serial decode among the inputs (a compressed file "
                              "without a frame index, decoded by one thread whatever the count; "
                              "median of 3, same run): %s, %.3f s: a floor under clean at any "
                              "thread count.",
                              decode.first, decode.second),
        "\n");
    report.AddNote(t);
  }
  bool identical = true;
  for (const auto& [n, d] : digests) identical = identical && d == digests.front().second;
  std::string counts_text;
  for (const auto& [n, d] : digests) absl::StrAppend(&counts_text, counts_text.empty() ? "" : ", ", n);
  if (identical) {
    report.AddNote(absl::StrCat("Release bytes identical at threads ", counts_text, " (",
                                digests.empty() ? "-" : digests.front().second, "); release ",
                                release_id, absl::StrFormat("; input %.1f MB.", bytes_in / 1e6)));
  } else {
    std::string which;
    for (const auto& [n, d] : digests) absl::StrAppend(&which, "\n- threads ", n, ": ", d);
    report.AddNote(absl::StrCat("**Release bytes differ between thread counts:**", which));
  }
  RETURN_IF_ERROR(report.Finish());
  if (!identical) {
    return absl::InternalError(absl::StrCat("the release differs between threads ", counts_text,
                                            " (see the report)"));
  }
  return absl::OkStatus();
}

BenchRunner Setup(CLI::App* app) {
  auto f = std::make_shared<BuildBenchFlags>();
  AddBenchFlags(app, &f->options);
  SweepsItself(app, {"threads"});
  app->add_option("--config", f->config,
                  "Release config to build (default: one like v1.0 over a sample of --input)");
  app->add_option("--input", f->inputs,
                  "Corpus for the default config (default ../shared/corpus/wikinews-en, else "
                  ".demo/corpus)");
  app->add_option("--max-bytes", f->max_bytes,
                  "Text bytes of --input in the default config (default 32 MiB; --quick: 2 MiB)");
  app->add_option("--threads", f->threads,
                  "Threads (0 = all CPUs); --sweep threads=1,2,4,8,16 builds at each count and fits "
                  "each stage's scaling")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--work", f->work, "Scratch folder (default $TMPDIR/grist-bench-build)");
  return [f]() -> absl::Status {
    const Options& o = f->options;
    Env* env = Env::Default();
    ASSIGN_OR_RETURN(std::optional<Sweep> sweep, SweepFromOptions(o, {"threads"}));
    if (sweep) {
      for (const std::string& v : sweep->values) {
        ASSIGN_OR_RETURN(int64_t n, SweepInt(*sweep, v));
        if (n > 4096) return FlagError(absl::StrCat("--sweep threads: ", v, " threads is too many"));
      }
    }
    ASSIGN_OR_RETURN(f->work, ScratchDir(f->work, "build"));
    if (o.quick && f->max_bytes == (32ull << 20)) f->max_bytes = 2ull << 20;
    std::string what;
    if (f->config.empty()) {
      if (f->inputs.empty()) {
        ASSIGN_OR_RETURN(std::string in, DefaultCorpus());
        f->inputs = {in};
      }
      ASSIGN_OR_RETURN(CorpusSample s,
                       WriteCorpusSample(f->inputs, JoinPath(f->work, "docs.jsonl"), f->max_bytes));
      const int vocab = o.quick ? 2048 : 8192;
      f->config = JoinPath(f->work, "bench.toml");
      RETURN_IF_ERROR(WriteFileAtomic(env, f->config, BenchConfig(s.path, vocab)));
      what = absl::StrFormat(
          "like configs/v1.0.toml (clean, dedup, bestfit 2048) with vocab_size %d over %s: %llu "
          "documents, %.1f MB of text",
          vocab, absl::StrJoin(f->inputs, " "), s.documents, s.text_bytes / 1e6);
    } else {
      what = f->config;
    }
    if (sweep) return RunThreadSweep(*f, *sweep, what);
    ASSIGN_OR_RETURN(Config config, Config::FromFile(env, f->config));
    ASSIGN_OR_RETURN(std::vector<std::string> inputs, config.RequireStringList("inputs.paths"));
    ASSIGN_OR_RETURN(bool clean_on, config.GetBool("clean.enabled", true));
    clean::CleanOptions clean_options;
    if (clean_on) {
      ASSIGN_OR_RETURN(clean_options, clean::CleanOptions::FromConfig(config));
    }
    const int threads = f->threads > 0 ? f->threads : ThreadPool(0).size();

    Report report("build", o);
    report.SetParam("config", what);
    report.SetParam("threads", absl::StrCat(threads));

    const std::string out = JoinPath(f->work, "release");
    std::vector<double> build_mbs, build_s, stage_sum_s, clean_mbs;
    std::map<std::string, std::vector<double>> stage_s, stage_mbs;
    std::vector<std::string> stage_order;
    uint64_t bytes_in = 0;
    std::string release_id;
    std::string clean_note = clean_on ? "" : "the config has [clean] off";
    // Interleaved (build, clean, build, clean, ...) so that load changes hit both.
    for (int i = 0; i < o.warmup + o.repetitions; ++i) {
      RETURN_IF_ERROR(env->RemoveAll(out));
      release::BuildOptions bo;
      bo.config_path = f->config;
      bo.output_dir = out;
      bo.restart = true;
      bo.run.threads = threads;
      bo.run.progress = false;
      ASSIGN_OR_RETURN(release::BuildReport r, release::BuildRelease(env, bo));
      release_id = r.release_id;
      bytes_in = r.stages.empty() ? 0 : r.stages.front().bytes_in;
      double clean_v = 0;
      if (clean_on) {
        const std::string peer_out = JoinPath(f->work, "clean-peer");
        RETURN_IF_ERROR(env->RemoveAll(peer_out));
        RunOptions run;
        run.threads = threads;
        run.progress = false;
        Stopwatch sw;
        auto c = clean::RunClean(env, inputs, peer_out, clean_options, run);
        const double secs = sw.Seconds();
        if (!c.ok()) {
          clean_note = absl::StrCat("the clean stage alone failed: ", c.status().message());
          clean_on = false;
        } else {
          clean_v = bytes_in / 1e6 / secs;
        }
        (void)env->RemoveAll(peer_out);
      }
      if (i < o.warmup) continue;
      build_mbs.push_back(bytes_in / 1e6 / r.seconds);
      build_s.push_back(r.seconds);
      double sum = 0;
      for (const release::StageSummary& s : r.stages) {
        sum += s.seconds;
        if (!stage_s.count(s.name)) stage_order.push_back(s.name);
        stage_s[s.name].push_back(s.seconds);
        stage_mbs[s.name].push_back(s.seconds > 0 ? s.bytes_in / 1e6 / s.seconds : 0);
      }
      stage_sum_s.push_back(sum);
      if (clean_on) clean_mbs.push_back(clean_v);
    }
    (void)env->RemoveAll(out);
    (void)env->RemoveAll(out + ".work");

    Figure e2e{"build end to end", "MB/s", Stats::Of(build_mbs)};
    e2e.peer_name =
        "the clean stage alone on the same inputs, same options (ceiling: the build's first stage)";
    if (!clean_mbs.empty() && clean_mbs.size() == build_mbs.size()) {
      e2e.peer = Stats::Of(clean_mbs);
    } else {
      e2e.peer_note = clean_note;
    }
    e2e.peer_is_ceiling = true;
    report.AddFigure(e2e);
    Figure wall{"build wall time", "s", Stats::Of(build_s)};
    wall.peer_name = "sum of the stage times in the build's report";
    wall.peer = Stats::Of(stage_sum_s);
    wall.higher_is_better = false;
    report.AddFigure(wall);

    std::string table =
        absl::StrCat("Per stage at ", threads,
                     " threads (medians of the measured runs, from the build report):\n\n"
                     "| stage | seconds | input MB/s | share of the build |\n|---|---|---|---|\n");
    const double total = Stats::Of(build_s).median;
    for (const std::string& name : stage_order) {
      const double secs = Stats::Of(stage_s[name]).median;
      absl::StrAppend(&table, "| ", name, " | ", absl::StrFormat("%.2f", secs), " | ",
                      absl::StrFormat("%.1f", Stats::Of(stage_mbs[name]).median), " | ",
                      absl::StrFormat("%.0f%%", total > 0 ? 100 * secs / total : 0.0), " |\n");
    }
    report.AddNote(table);
    report.AddNote(absl::StrFormat("input: %.1f MB (the first stage's bytes in); release %s",
                                   bytes_in / 1e6, release_id));
    return report.Finish();
  };
}

GRIST_REGISTER_BENCH(build, "build",
                     "grist build end to end (MB/s, per-stage time) vs the clean stage alone",
                     Setup);

}  // namespace
}  // namespace grist::bench
