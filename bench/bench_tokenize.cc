// `grist bench tokenize`: end-to-end encode throughput of `grist tokenize encode` (read, encode in
// parallel, order, write MMIDIDX) against SentencePiece's own `spm_encode` on the same text, measured
// in the same run. Target: grist with T threads >= 0.9 x T x single-thread spm_encode.
//
// Two peers: T x the throughput of one spm_encode process running alone (the figure), and
// T spm_encode processes running at once, each on 1/T of the text. The second is the honest
// ceiling of T busy cores: when all cores work, each runs slower than one core alone (turbo
// frequency, shared caches and memory bandwidth), and the first peer does not see that. The same
// for grist itself, so its scaling is judged against what this machine's T cores give: T
// one-thread grist encodes of all the documents at once, sharing nothing, T x the text over their
// wall time (an encode on T threads can pass it: its threads share one chunk cache).
//
// The text is the corpus's documents cut into lines; spm_encode reads them as a plain-text file
// (one sentence per line) and grist as JSON Lines (one document per line), so both encode exactly
// the same strings.
#include <algorithm>
#include <sys/resource.h>

#include <cstdio>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/corpus_sample.h"
#include "bench/harness.h"
#include "bench/registry.h"
#include "bench/tokenize_peers.h"
#include "common/env.h"
#include "common/json_writer.h"
#include "common/records.h"
#include "common/status_macros.h"
#include "common/sysinfo.h"
#include "common/thread_pool.h"
#include "tokenize/encode.h"
#include "tokenize/tokenizer.h"

namespace grist::bench {
namespace {

double CpuSeconds(int who) {
  struct rusage u;
  getrusage(who, &u);
  return u.ru_utime.tv_sec + u.ru_utime.tv_usec * 1e-6 + u.ru_stime.tv_sec +
         u.ru_stime.tv_usec * 1e-6;
}

struct Flags {
  Options options;
  std::vector<std::string> inputs;
  std::string model;
  int threads = 0;
  uint64_t max_bytes = 32ull << 20;
  std::string work;
};

// Writes the documents' non-empty lines to text.txt and docs.jsonl; returns the text bytes and lines.
absl::StatusOr<std::pair<uint64_t, uint64_t>> Prepare(const Flags& f) {
  Env* env = Env::Default();
  ASSIGN_OR_RETURN(auto files, ListInputs(env, f.inputs));
  std::ofstream txt(JoinPath(f.work, "text.txt"), std::ios::binary);
  std::ofstream jsonl(JoinPath(f.work, "docs.jsonl"), std::ios::binary);
  uint64_t bytes = 0, lines = 0;
  for (size_t i = 0; i < files.size() && bytes < f.max_bytes; ++i) {
    InputSplit split;
    split.file_index = i;
    ASSIGN_OR_RETURN(auto r, OpenRecordReader(env, files[i], split, InputOptions{}));
    Document d;
    while (bytes < f.max_bytes) {
      ASSIGN_OR_RETURN(bool more, r->Next(&d));
      if (!more) break;
      if (!d.error.empty()) continue;
      std::string_view t = d.text;
      while (!t.empty()) {
        size_t nl = t.find('\n');
        std::string_view line = t.substr(0, nl);
        t.remove_prefix(nl == std::string_view::npos ? t.size() : nl + 1);
        if (line.empty() || line.find('\r') != std::string_view::npos) continue;
        txt << line << '\n';
        std::string j = "{\"text\":";
        AppendJsonString(&j, line);
        jsonl << j << "}\n";
        bytes += line.size();
        ++lines;
      }
    }
  }
  if (!txt || !jsonl) return absl::InternalError("bench tokenize: cannot write the text files");
  return std::make_pair(bytes, lines);
}

// Cuts text.txt at line boundaries into `parts` files text-K.txt of about equal size (the inputs of
// the concurrent spm_encode peer).
absl::Status SplitText(const std::string& work, int parts, uint64_t bytes) {
  std::ifstream in(JoinPath(work, "text.txt"), std::ios::binary);
  std::string line;
  const uint64_t per = bytes / static_cast<uint64_t>(parts) + 1;
  uint64_t written = 0;
  for (int k = 0; k < parts; ++k) {
    std::ofstream out(JoinPath(work, absl::StrCat("text-", k, ".txt")), std::ios::binary);
    while ((k == parts - 1 || written < per * static_cast<uint64_t>(k + 1)) && std::getline(in, line)) {
      out << line << '\n';
      written += line.size();
    }
    if (!out) return absl::InternalError("bench tokenize: cannot write the split text files");
  }
  return absl::OkStatus();
}


// In-process encode of every line of text.txt by one engine on `threads` threads (lines dealt
// round-robin): MB/s of wall time. Reading and writing excluded: the encoders alone.
absl::StatusOr<double> EngineMBps(const tokenize::Tokenizer& tok, tokenize::Engine engine,
                                  const std::vector<std::string>& lines, double mb, int threads) {
  std::vector<absl::Status> errs(threads);
  Stopwatch sw;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::vector<int> ids;
      for (size_t i = t; i < lines.size(); i += threads) {
        ids.clear();
        absl::Status st = tok.EncodeRaw(lines[i], &ids, engine);
        if (!st.ok()) {
          errs[t] = st;
          return;
        }
      }
    });
  }
  for (auto& th : pool) th.join();
  for (const auto& e : errs) RETURN_IF_ERROR(e);
  return mb / sw.Seconds();
}

// The Python module's batch encode (sp.encode(list, num_threads=T)) of text.txt, timed inside
// Python: MB/s, or an error saying why it could not run.
absl::StatusOr<double> PythonMBps(const std::string& python, const std::string& model,
                                  const std::string& text, double mb, int threads, int reps) {
  std::string cmd = absl::StrCat(
      python, " -c 'import sys, time, sentencepiece as s\n"
      "p = s.SentencePieceProcessor(model_file=sys.argv[1])\n"
      "L = open(sys.argv[2], encoding=\"utf-8\").read().split(\"\\n\")[:-1]\n"
      "best = 0\n"
      "for _ in range(int(sys.argv[4])):\n"
      "    t = time.perf_counter(); p.encode(L, num_threads=int(sys.argv[3])); t = time.perf_counter() - t\n"
      "    best = max(best, 1 / t)\n"
      "print(best)' ",
      model, " ", text, " ", threads, " ", reps);
  ASSIGN_OR_RETURN(auto r, RunCommand(cmd));
  double inv = 0;
  if (r.exit_code != 0 || std::sscanf(r.output.c_str(), "%lf", &inv) != 1) {
    return absl::UnavailableError("the Python module sentencepiece did not run");
  }
  return mb * inv;
}

BenchRunner Setup(CLI::App* app) {
  auto f = std::make_shared<Flags>();
  AddBenchFlags(app, &f->options);
  app->add_option("--input", f->inputs,
                  "Corpus files or folders (default ../shared/corpus/wikinews-en, else .demo/corpus)");
  app->add_option("--model", f->model,
                  "SentencePiece model (default ../shared/corpus/tokenizers/mistral-v1-spm-32k, else "
                  "a BPE model trained on the text first)");
  app->add_option("--threads", f->threads, "grist encode threads (0 = all CPUs)");
  app->add_option("--max-bytes", f->max_bytes, "Text bytes to encode (default 32 MiB)");
  app->add_option("--work", f->work, "Scratch folder (default $TMPDIR/grist-bench-tokenize)");
  return [f]() -> absl::Status {
    Env* env = Env::Default();
    if (f->inputs.empty()) {  // the shared corpus, else the demo corpus
      ASSIGN_OR_RETURN(std::string in, DefaultCorpus());
      f->inputs = {in};
    }
    bool train_model = false;
    if (f->model.empty()) {
      f->model = FirstExistingPath(
          {"../shared/corpus/tokenizers/mistral-v1-spm-32k/tokenizer.model.v1"});
      train_model = f->model.empty();  // no shared model: train one on the text below
    }
    if (f->work.empty()) {
      const char* t = std::getenv("TMPDIR");
      f->work = JoinPath(t && *t ? t : "/tmp", "grist-bench-tokenize");
    }
    RETURN_IF_ERROR(env->CreateDirs(f->work));
    // --quick (grist bench all): 2 MiB of text unless --max-bytes says otherwise.
    if (f->options.quick && f->max_bytes == (32ull << 20)) f->max_bytes = 2ull << 20;
    ASSIGN_OR_RETURN(auto prepared, Prepare(*f));
    if (train_model) {
      f->model = JoinPath(f->work, "bench.model");
      RETURN_IF_ERROR(TrainBenchTokenizer(JoinPath(f->work, "docs.jsonl"), f->model,
                                          f->options.quick ? 4096 : 8192));
    }
    const double mb = prepared.first / 1e6;
    int threads = f->threads > 0 ? f->threads : ThreadPool(0).size();

    Report report("tokenize", f->options);
    report.SetParam("model", f->model);
    report.SetParam("text", absl::StrFormat("%.1f MB in %d lines", mb, prepared.second));
    report.SetParam("threads", absl::StrCat(threads));
    uint64_t tokens = 0;
    std::vector<double> ours_cpu, peer_cpu;  // MB per CPU-second, every run (warm-up included)
    auto run_ours = [&]() -> absl::StatusOr<double> {
      tokenize::EncodeStageOptions o;
      o.model_path = f->model;
      o.encode.add_eos = false;
      // The default split size (8 MiB at most, smaller for small inputs: EffectiveSplitBytes), as
      // in a build.
      RunOptions run;
      run.threads = threads;
      run.progress = false;
      Stopwatch sw;
      double cpu0 = CpuSeconds(RUSAGE_SELF);
      ASSIGN_OR_RETURN(auto rep, tokenize::RunEncode(env, {JoinPath(f->work, "docs.jsonl")},
                                                     JoinPath(f->work, "out"), o, run));
      tokens = rep.tokens;
      ours_cpu.push_back(mb / (CpuSeconds(RUSAGE_SELF) - cpu0));
      return mb / sw.Seconds();
    };
    const bool have_spm = HaveProgram("spm_encode");
    const bool concurrent_peer = have_spm && threads > 1;
    if (concurrent_peer) RETURN_IF_ERROR(SplitText(f->work, threads, prepared.first));
    // The ceiling of T busy cores for grist itself: T one-thread encodes at once in this process,
    // each a whole `grist tokenize encode` of all the documents (own model load, reading, writing),
    // sharing nothing; T x the text over the wall time of all. What T threads of one encode would
    // reach if they never had to coordinate, on this machine, now: each core runs slower when all
    // work (frequency, shared caches, memory bandwidth) and a one-thread figure times T ignores it.
    const bool own_ceiling = threads > 1;
    auto run_own_ceiling = [&]() -> absl::StatusOr<double> {
      std::vector<absl::Status> errs(threads);
      Stopwatch sw;
      std::vector<std::thread> encodes;
      for (int k = 0; k < threads; ++k) {
        encodes.emplace_back([&, k] {
          tokenize::EncodeStageOptions o;
          o.model_path = f->model;
          o.encode.add_eos = false;
          RunOptions run;
          run.threads = 1;
          run.progress = false;
          errs[k] = tokenize::RunEncode(env, {JoinPath(f->work, "docs.jsonl")},
                                        JoinPath(f->work, absl::StrCat("out-", k)), o, run)
                        .status();
        });
      }
      for (auto& th : encodes) th.join();
      for (const auto& e : errs) RETURN_IF_ERROR(e);
      return threads * mb / sw.Seconds();
    };
    // T spm_encode processes started together, each on its 1/T of the text; wall time of all.
    auto run_concurrent = [&]() -> absl::StatusOr<double> {
      std::string cmd = "rc=0; pids=;";
      for (int k = 0; k < threads; ++k) {
        absl::StrAppend(&cmd, " spm_encode --model=", f->model, " --output_format=id < ",
                        JoinPath(f->work, absl::StrCat("text-", k, ".txt")), " > /dev/null & pids=\"$pids $!\";");
      }
      absl::StrAppend(&cmd, " for p in $pids; do wait $p || rc=1; done; exit $rc");
      Stopwatch sw;
      ASSIGN_OR_RETURN(auto r, RunCommand(cmd));
      if (r.exit_code != 0) return absl::InternalError("concurrent spm_encode failed");
      return mb / sw.Seconds();
    };
    auto run_peer = [&]() -> absl::StatusOr<double> {
      Stopwatch sw;
      double cpu0 = CpuSeconds(RUSAGE_CHILDREN);
      ASSIGN_OR_RETURN(auto r, RunCommand(absl::StrCat("spm_encode --model=", f->model,
                                                       " --output_format=id < ",
                                                       JoinPath(f->work, "text.txt"),
                                                       " > /dev/null")));
      if (r.exit_code != 0) return absl::InternalError("spm_encode failed");
      peer_cpu.push_back(mb / (CpuSeconds(RUSAGE_CHILDREN) - cpu0));
      return mb / sw.Seconds();
    };
    // Interleaved (ours, peer, ours, peer, ...) so that load changes on a shared machine hit both.
    std::vector<double> ours_v, peer_v, conc_v, ceil_v;
    for (int i = 0; i < f->options.warmup + f->options.repetitions; ++i) {
      ASSIGN_OR_RETURN(double a, run_ours());
      double b = 0, c = 0, d = 0;
      if (own_ceiling) {
        ASSIGN_OR_RETURN(d, run_own_ceiling());
      }
      if (have_spm) {
        ASSIGN_OR_RETURN(b, run_peer());
      }
      if (concurrent_peer) {
        ASSIGN_OR_RETURN(c, run_concurrent());
      }
      if (i >= f->options.warmup) {
        ours_v.push_back(a);
        if (have_spm) peer_v.push_back(b);
        if (concurrent_peer) conc_v.push_back(c);
        if (own_ceiling) ceil_v.push_back(d);
      }
    }
    Stats ours = Stats::Of(ours_v);
    Figure fig{"encode throughput", "MB/s", ours};
    fig.peer_name = absl::StrCat(threads, " x spm_encode (1 thread, measured)");
    fig.target = ">= 0.9 x peer";
    std::optional<Stats> spm_single;
    if (have_spm) {
      spm_single = Stats::Of(peer_v);
      std::vector<double> scaled;
      for (double v : peer_v) scaled.push_back(v * threads);
      fig.peer = Stats::Of(scaled);
    } else {
      fig.peer_note = "spm_encode not installed (Debian package sentencepiece)";
    }
    report.AddFigure(fig);
    if (concurrent_peer) {
      Figure conc{"encode throughput, all cores busy", "MB/s", ours};
      conc.peer_name = absl::StrCat(threads, " spm_encode processes at once, 1/", threads, " of the text each");
      conc.peer = Stats::Of(conc_v);
      conc.target = ">= 0.9 x peer";
      report.AddFigure(conc);
    }
    if (own_ceiling) {
      Figure ceil{absl::StrCat("encode throughput, ", threads, " threads, against ", threads,
                               " independent encodes"),
                  "MB/s", ours};
      ceil.peer_name = absl::StrCat(threads, " one-thread grist encodes of all the text at once, ",
                                    threads, " x text / wall (", threads,
                                    " busy cores, nothing shared)");
      ceil.peer = Stats::Of(ceil_v);
      ceil.target = ">= 0.9 x peer";
      report.AddFigure(ceil);
    }
    Figure tps{"encode tokens/s", "Mtok/s", Stats::Of({})};
    std::vector<double> t;
    for (double v : ours.samples) t.push_back(v / mb * tokens / 1e6);
    tps.ours = Stats::Of(t);
    if (spm_single) {
      std::vector<double> p;
      for (double v : spm_single->samples) p.push_back(v / mb * tokens / 1e6);
      tps.peer = Stats::Of(p);
      tps.peer_name = "spm_encode, 1 thread";
    }
    report.AddFigure(tps);
    // CPU efficiency: robust on a shared, oversubscribed machine where wall time is mostly waiting.
    auto drop_warmup = [&](std::vector<double> v) {
      v.erase(v.begin(), v.begin() + std::min<size_t>(v.size(), f->options.warmup));
      return v;
    };
    Figure cpu{"encode MB per CPU-second", "MB/CPU-s", Stats::Of(drop_warmup(ours_cpu))};
    if (have_spm) {
      cpu.peer = Stats::Of(drop_warmup(peer_cpu));
      cpu.peer_name = "spm_encode (user+sys of the child)";
    }
    cpu.target = ">= 0.9 x peer (per-thread efficiency)";
    report.AddFigure(cpu);
    report.AddNote(absl::StrCat("tokens: ", tokens, "; grist reads JSON Lines, spm_encode plain text"));

    // The encoders alone, in the same run: grist's engine vs the SentencePiece library grist
    // links (in process, same lines) and the Python module's batch encode, at 1 and T threads.
    ASSIGN_OR_RETURN(auto tok, tokenize::Tokenizer::Load(env, f->model));
    report.AddNote(tok->native() ? absl::StrCat("grist engine: native", tok->native_chunk_cache()
                                                                            ? ", chunk cache on"
                                                                            : "")
                                 : absl::StrCat("grist engine falls back to SentencePiece: ",
                                                tok->native_why_not()));
    std::vector<std::string> lines;
    {
      std::ifstream in(JoinPath(f->work, "text.txt"), std::ios::binary);
      std::string line;
      while (std::getline(in, line)) lines.push_back(line);
    }
    const std::string python = FindPython("", "sentencepiece");
    for (int t : threads > 1 ? std::vector<int>{1, threads} : std::vector<int>{1}) {
      std::vector<double> g, l, py;
      for (int i = 0; i < f->options.warmup + f->options.repetitions; ++i) {
        ASSIGN_OR_RETURN(double a, EngineMBps(*tok, tokenize::Engine::kGrist, lines, mb, t));
        ASSIGN_OR_RETURN(double b, EngineMBps(*tok, tokenize::Engine::kSentencePiece, lines, mb, t));
        if (i >= f->options.warmup) {
          g.push_back(a);
          l.push_back(b);
        }
      }
      Figure lib{absl::StrCat("encoder alone, ", t, " thread", t > 1 ? "s" : ""), "MB/s",
                 Stats::Of(g)};
      lib.peer_name = absl::StrCat("SentencePiece library (linked), ", t, " thread", t > 1 ? "s" : "");
      lib.peer = Stats::Of(l);
      lib.target = t == 1 ? ">= 3 x peer" : "";
      report.AddFigure(lib);
      Figure pyf{absl::StrCat("encoder alone vs Python, ", t, " thread", t > 1 ? "s" : ""), "MB/s",
                 Stats::Of(g)};
      pyf.peer_name = absl::StrCat("sentencepiece Python module, encode(list, num_threads=", t, ")");
      auto pm = PythonMBps(python, f->model, JoinPath(f->work, "text.txt"), mb, t,
                           std::max(1, f->options.repetitions));
      if (pm.ok()) {
        pyf.peer = Stats::Of({*pm});
      } else {
        pyf.peer_note = std::string(pm.status().message());
      }
      pyf.target = t == 1 ? ">= 3 x peer" : "";
      report.AddFigure(pyf);
    }
    RETURN_IF_ERROR(AddTokenizePeerFigures(&report, f->options, f->model,
                                           JoinPath(f->work, "text.txt"), threads,
                                           Stats::Of(drop_warmup(ours_cpu)), ours));
    return report.Finish();
  };
}

GRIST_REGISTER_BENCH(tokenize, "tokenize",
                     "grist tokenize encode vs spm_encode; grist's encoder vs SentencePiece's "
                     "library and Python module (MB/s, tokens/s)", Setup);

}  // namespace
}  // namespace grist::bench
