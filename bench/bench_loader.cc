// `grist bench loader`: tokens/s and GB/s the loader delivers to a consumer that does nothing, the
// share of time a consumer with a simulated compute step waits for data, and the CPU time the
// loader takes per billion tokens during that step; beside the peers of bench/python/bench_loader.py
// (--peers-only): torch.utils.data.DataLoader and torchdata's StatefulDataLoader over numpy memmaps
// of the same .bin files and LitData's StreamingDataLoader over the same samples converted to its
// chunks (same batch shape, shuffle, pin_memory when CUDA is present) at each num_workers, measured
// in the same run.
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/harness.h"
#include "bench/python_peer.h"
#include "bench/registry.h"
#include "common/env.h"
#include "common/status_macros.h"
#include "common/sysinfo.h"
#include "loader/loader.h"
#include "loader/synthetic.h"

namespace grist::bench {
namespace {

struct LoaderBenchFlags {
  Options options;
  std::string release;
  uint64_t samples = 4096;
  uint32_t seq_len = 2048;
  int64_t micro_batch = 8;
  double seconds = 1.0;  // measured time per no-op configuration
  double step_ms = 50;
  int step_batches = 40;
  int workers = 0;
  int prefetch = 4;
  std::string device = "cpu";
  std::string baseline_workers = "0,1,2";
  std::string peers = "dataloader,stateful,litdata";
};

struct Measured {
  double tokens_per_s = 0;
  double gb_per_s = 0;
  double wait_share = 0;
  double cpu_s_per_btok = 0;  // CPU seconds of the whole process (every thread) per 1e9 tokens
};

double ProcessCpuSeconds() {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// Runs `batches` batches, or with batches < 0 for f.seconds (at least 10 batches).
absl::StatusOr<Measured> RunOurs(const LoaderBenchFlags& f, uint32_t fields, double step_ms,
                                 int batches) {
  loader::LoaderOptions o;
  o.path = f.release;
  o.micro_batch_size = f.micro_batch;
  o.global_batch_size = f.micro_batch;
  o.epochs = 0;
  o.prefetch = f.prefetch;
  o.num_workers = f.workers;
  o.fields = fields;
  o.device = f.device == "cuda" ? loader::Device::kCuda : loader::Device::kCpu;
  ASSIGN_OR_RETURN(auto l, loader::Loader::Open(o));
  for (int i = 0; i < 3; ++i) RETURN_IF_ERROR(l->Next().status());
  double wait = 0;
  uint64_t tokens = 0, bytes = 0;
  const double cpu0 = ProcessCpuSeconds();
  Stopwatch total;
  for (int i = 0; batches >= 0 ? i < batches : (i < 10 || total.Seconds() < f.seconds); ++i) {
    Stopwatch w;
    ASSIGN_OR_RETURN(auto b, l->Next());
    if (b->on_cuda()) RETURN_IF_ERROR(b->WaitOn(0));
    wait += w.Seconds();
    for (const auto& t : b->tensors()) bytes += t.bytes;
    tokens += static_cast<uint64_t>(f.micro_batch * (l->source().sample_tokens() - 1));
    if (step_ms > 0) std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int64_t>(step_ms * 1000)));
  }
  const double secs = total.Seconds();
  const double cpu = ProcessCpuSeconds() - cpu0;
  return Measured{tokens / secs, bytes / secs / 1e9, wait / secs, cpu / tokens * 1e9};
}

// One peer configuration's figures over the repetitions.
struct PeerSamples {
  std::vector<double> tokens_per_s, wait_pct, cpu_s_per_btok;
};

absl::Status Run(LoaderBenchFlags f) {
  Report report("loader", f.options);
  std::string tmp;
  if (f.release.empty()) {
    char tmpl[] = "/tmp/grist_bench_loader_XXXXXX";
    if (!mkdtemp(tmpl)) return absl::InternalError("mkdtemp failed");
    tmp = tmpl;
    f.release = tmp + "/release";
    loader::SyntheticReleaseOptions so;
    so.samples = f.samples;
    so.seq_len = f.seq_len;
    so.samples_per_shard = 1024;
    so.mean_document_tokens = 500;
    RETURN_IF_ERROR(loader::WriteSyntheticRelease(Env::Default(), f.release, so));
  }
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      if (!dir.empty()) (void)Env::Default()->RemoveAll(dir);
    }
  } cleanup{tmp};

  report.SetParam("release", tmp.empty() ? f.release : "synthetic (grist::loader::WriteSyntheticRelease)");
  report.SetParam("seq_len x micro_batch", absl::StrCat(f.seq_len, " x ", f.micro_batch));
  report.SetParam("device", f.device);
  report.SetParam("grist workers / prefetch", absl::StrCat(f.workers, " (0 = auto) / ", f.prefetch));
  report.SetParam("simulated step", absl::StrCat(f.step_ms, " ms"));

  // Start-up: open + first batch.
  ASSIGN_OR_RETURN(Stats startup, Repeat(f.options, [&]() -> absl::StatusOr<double> {
    loader::LoaderOptions o;
    o.path = f.release;
    o.micro_batch_size = f.micro_batch;
    o.global_batch_size = f.micro_batch;
    Stopwatch sw;
    ASSIGN_OR_RETURN(auto l, loader::Loader::Open(o));
    RETURN_IF_ERROR(l->Next().status());
    return sw.Seconds() * 1000;
  }));

  // The peers: bench/python/bench_loader.py --peers-only, one run per repetition (each run measures
  // every peer at every num_workers once; the median is over runs).
  std::vector<std::string> workers = absl::StrSplit(f.baseline_workers, ',', absl::SkipEmpty());
  std::map<std::string, PeerSamples> peer;  // key: "<peer> w=<workers>"
  std::vector<std::string> peer_names;
  std::string peer_note;
  for (int rep = 0; rep < f.options.repetitions; ++rep) {
    auto r = RunPythonPeer(
        "bench_loader.py", "torch,numpy",
        {"--peers-only", "--release", f.release, "--micro-batch", absl::StrCat(f.micro_batch),
         "--seconds", absl::StrCat(f.seconds), "--step-ms", absl::StrCat(f.step_ms),
         "--step-batches", absl::StrCat(f.step_batches), "--workers", f.baseline_workers,
         "--peers", f.peers, "--repetitions", "1", "--device", f.device});
    if (!r.ok()) {  // one line: the last of the script's output
      std::vector<absl::string_view> lines =
          absl::StrSplit(r.status().message(), '\n', absl::SkipWhitespace());
      peer_note = absl::StrCat("peers unavailable: ", lines.empty() ? "" : lines.front(),
                               lines.size() > 1 ? " ... " : "", lines.size() > 1 ? lines.back() : "");
      break;
    }
    if (rep == 0) {
      peer_names = absl::StrSplit(PeerJsonString(r->json, "peers"), ',', absl::SkipEmpty());
      std::string versions = absl::StrCat("torch ", PeerJsonString(r->json, "torch"));
      for (const char* v : {"torchdata", "litdata"}) {
        std::string ver = PeerJsonString(r->json, v);
        if (!ver.empty()) absl::StrAppend(&versions, ", ", v, " ", ver);
      }
      report.SetParam("peers (bench/python/bench_loader.py)", absl::StrCat(
          absl::StrJoin(peer_names, ", "), " (", versions, "; ", r->python, ")"));
    }
    for (const auto& p : peer_names) {
      for (const auto& w : workers) {
        const std::string key = absl::StrCat(p, " w=", w);
        PeerSamples& ps = peer[key];
        const double tps = PeerJsonNumber(r->json, key + " noop tokens_per_s", -1);
        const double wait = PeerJsonNumber(r->json, key + " step wait_share", -1);
        const double cpu = PeerJsonNumber(r->json, key + " step cpu_s_per_btok", -1);
        if (tps >= 0) ps.tokens_per_s.push_back(tps / 1e6);
        if (wait >= 0) ps.wait_pct.push_back(wait * 100);
        if (cpu >= 0) ps.cpu_s_per_btok.push_back(cpu);
      }
    }
  }
  // The strongest peer configuration for each figure: most tokens/s, least wait, least CPU.
  std::optional<Stats> best_tps, best_wait, best_cpu;
  std::string best_tps_name, best_wait_name, best_cpu_name;
  for (const auto& [key, ps] : peer) {
    if (ps.tokens_per_s.empty()) continue;
    Stats t = Stats::Of(ps.tokens_per_s);
    std::string line = absl::StrFormat("%s: no-op consumer %.1f M tokens/s", key, t.median);
    if (!best_tps || t.median > best_tps->median) {
      best_tps = t;
      best_tps_name = key;
    }
    if (!ps.wait_pct.empty()) {
      Stats w = Stats::Of(ps.wait_pct);
      absl::StrAppendFormat(&line, "; %.0f ms step: waits %.2f%% of the time", f.step_ms, w.median);
      if (!best_wait || w.median < best_wait->median) {
        best_wait = w;
        best_wait_name = key;
      }
    }
    if (!ps.cpu_s_per_btok.empty()) {
      Stats c = Stats::Of(ps.cpu_s_per_btok);
      absl::StrAppendFormat(&line, ", %.1f CPU s per 1e9 tokens", c.median);
      if (!best_cpu || c.median < best_cpu->median) {
        best_cpu = c;
        best_cpu_name = key;
      }
    }
    report.AddNote(line);
  }

  struct Config {
    const char* label;
    uint32_t fields;
  };
  for (Config c : {Config{"input_ids+labels", loader::kInputIds | loader::kLabels},
                   Config{"all fields", loader::kAllFields}}) {
    std::vector<double> gbs;
    ASSIGN_OR_RETURN(Stats tps, Repeat(f.options, [&]() -> absl::StatusOr<double> {
      ASSIGN_OR_RETURN(Measured m, RunOurs(f, c.fields, 0, -1));
      gbs.push_back(m.gb_per_s);
      return m.tokens_per_s / 1e6;
    }));
    Figure fig{absl::StrCat("tokens/s, no-op consumer, ", c.label), "M tokens/s", tps,
               absl::StrCat("fastest peer (", best_tps_name, ")"), best_tps, peer_note};
    fig.target = ">= 3 x peer";
    report.AddFigure(fig);
    report.AddNote(absl::StrFormat("grist %s: %.2f GB/s of tensors delivered (median)", c.label,
                                   Stats::Of(gbs).median));
    std::vector<double> cpus;
    ASSIGN_OR_RETURN(Stats wait, Repeat(f.options, [&]() -> absl::StatusOr<double> {
      ASSIGN_OR_RETURN(Measured m, RunOurs(f, c.fields, f.step_ms, f.step_batches));
      cpus.push_back(m.cpu_s_per_btok);
      return m.wait_share * 100;
    }));
    Figure wfig{absl::StrCat("consumer waits, ", f.step_ms, " ms step, ", c.label), "% of time",
                wait, absl::StrCat("least-waiting peer (", best_wait_name, ")"), best_wait, peer_note};
    wfig.higher_is_better = false;
    wfig.target = "< 1 %";
    report.AddFigure(wfig);
    Figure cfig{absl::StrCat("loader CPU per 1e9 tokens, ", f.step_ms, " ms step, ", c.label),
                "CPU s", Stats::Of(cpus), absl::StrCat("least-CPU peer (", best_cpu_name, ")"),
                best_cpu, peer_note};
    cfig.higher_is_better = false;
    cfig.target = "< peer";
    report.AddFigure(cfig);
  }
  Figure sfig{"start-up: open + first batch", "ms", startup, "", std::nullopt,
              "no peer; see scripts/gpu/loader.sh for start-up versus dataset size"};
  sfig.higher_is_better = false;
  report.AddFigure(sfig);
  return report.Finish();
}

BenchRunner Setup(CLI::App* app) {
  auto f = std::make_shared<LoaderBenchFlags>();
  AddBenchFlags(app, &f->options);
  app->add_option("--release", f->release, "Release folder to read (default: a synthetic one)");
  app->add_option("--samples", f->samples, "Samples of the synthetic release");
  app->add_option("--seq-len", f->seq_len, "seq_len of the synthetic release");
  app->add_option("--micro-batch", f->micro_batch, "Samples per batch");
  app->add_option("--seconds", f->seconds, "Measured seconds per no-op-consumer configuration");
  app->add_option("--step-ms", f->step_ms, "Simulated compute step");
  app->add_option("--step-batches", f->step_batches, "Measured batches with the simulated step");
  app->add_option("--workers", f->workers, "grist fill threads (0: min(4, CPUs))");
  app->add_option("--prefetch", f->prefetch, "Batches prefetched");
  app->add_option("--device", f->device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  app->add_option("--baseline-workers", f->baseline_workers, "Peer num_workers to measure");
  app->add_option("--peers", f->peers,
                  "Peers of bench/python/bench_loader.py: dataloader, stateful (torchdata), "
                  "litdata (Python: $GRIST_PYTHON, see docs/bench.md)");
  return [f]() {
    // --quick (grist bench all): a smaller synthetic release, shorter measurements, fewer peers.
    // Values given on the command line are kept.
    if (f->options.quick) {
      LoaderBenchFlags d;
      if (f->samples == d.samples) f->samples = 1024;
      if (f->seconds == d.seconds) f->seconds = 0.3;
      if (f->step_batches == d.step_batches) f->step_batches = 10;
      if (f->baseline_workers == d.baseline_workers) f->baseline_workers = "0,2";
    }
    return Run(*f);
  };
}

GRIST_REGISTER_BENCH(loader, "loader",
                     "Loader tokens/s, consumer wait and CPU vs DataLoader, StatefulDataLoader, "
                     "LitData", Setup);

}  // namespace
}  // namespace grist::bench
