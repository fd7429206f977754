// `grist bench loader`: tokens/s and GB/s the loader delivers to a consumer that does nothing, and
// the share of time a consumer with a simulated compute step waits for data; beside
// torch.utils.data.DataLoader over numpy memmaps of the same .bin files (same batch shape,
// shuffle, pin_memory when CUDA is present) at each num_workers, measured in the same run.
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
#include "absl/strings/str_split.h"
#include "bench/harness.h"
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
  std::string python;
  std::string baseline_workers = "0,1,2";
};

// The DataLoader peer. argv: release seq_len micro_batch seconds step_ms step_batches workers...
// Prints one line per configuration: "<num_workers> <step_ms> <tokens/s> <wait share>".
constexpr const char* kBaseline = R"PY(
import json, os, sys, time
import numpy as np, torch
rel, S, M, secs, step_ms, step_n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6])
m = json.load(open(os.path.join(rel, "manifest.json")))
st = m["sample_tokens"]; dt = np.uint16 if m["token_dtype"] == "uint16" else np.int32
shards = [(s["first_sample"], s["samples"], os.path.join(rel, s["bin"]["path"])) for s in m["splits"]["train"]["shards"]]
class DS(torch.utils.data.Dataset):
    maps = None
    def __len__(self): return m["splits"]["train"]["samples"]
    def __getitem__(self, i):
        if self.maps is None: self.maps = [np.memmap(p, dtype=dt, mode="r") for _, _, p in shards]
        for k, (f, c, _) in enumerate(shards):
            if f <= i < f + c:
                j = i - f
                x = torch.from_numpy(self.maps[k][j * st:(j + 1) * st].astype(np.int64))
                return {"input_ids": x[:-1], "labels": x[1:]}
def forever(w):
    while True:
        for b in torch.utils.data.DataLoader(DS(), batch_size=M, shuffle=True, num_workers=w, pin_memory=torch.cuda.is_available(), drop_last=True):
            yield b
for step, n in ((0.0, 1 << 40), (step_ms / 1000, step_n)):
    for w in [int(x) for x in sys.argv[7:]]:
        it = forever(w); next(it); next(it)
        tok = 0; wait = 0.0; t0 = time.perf_counter(); i = 0
        while i < n and (step or i < 10 or time.perf_counter() - t0 < secs):
            i += 1
            w0 = time.perf_counter(); b = next(it); wait += time.perf_counter() - w0
            tok += b["input_ids"].numel()
            if step: time.sleep(step)
        total = time.perf_counter() - t0
        print(w, step * 1000, tok / total, wait / total, flush=True)
)PY";

struct Measured {
  double tokens_per_s = 0;
  double gb_per_s = 0;
  double wait_share = 0;
};

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
  return Measured{tokens / secs, bytes / secs / 1e9, wait / secs};
}

std::string PythonInterpreter(const std::string& given) { return FindPython(given, "torch, numpy"); }

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

  // The peer, all configurations in one process run per repetition.
  const std::string py = PythonInterpreter(f.python);
  std::vector<std::string> workers = absl::StrSplit(f.baseline_workers, ',', absl::SkipEmpty());
  std::map<std::string, std::vector<double>> peer_tps, peer_wait;  // key: workers
  std::string peer_note;
  {
    const std::string script = tmp.empty() ? "/tmp/grist_bench_loader_baseline.py"
                                           : tmp + "/baseline.py";
    RETURN_IF_ERROR(WriteFileAtomic(Env::Default(), script, kBaseline));
    std::string cmd = absl::StrCat(py, " ", script, " ", f.release, " ", f.seq_len, " ",
                                   f.micro_batch, " ", f.seconds, " ", f.step_ms, " ", f.step_batches);
    for (const auto& w : workers) absl::StrAppend(&cmd, " ", w);
    for (int rep = 0; rep < f.options.repetitions; ++rep) {
      auto r = RunCommand(cmd);
      if (!r.ok() || r->exit_code != 0) {
        peer_note = absl::StrCat("DataLoader peer unavailable: ", py,
                                 " with torch and numpy failed (exit ", r.ok() ? r->exit_code : -1, ")");
        break;
      }
      for (absl::string_view line : absl::StrSplit(r->output, '\n', absl::SkipEmpty())) {
        std::vector<std::string> v = absl::StrSplit(line, ' ', absl::SkipEmpty());
        if (v.size() != 4) continue;
        const std::string key = absl::StrCat(v[0], "@", std::atof(v[1].c_str()) > 0 ? "step" : "noop");
        peer_tps[key].push_back(std::atof(v[2].c_str()) / 1e6);
        peer_wait[key].push_back(std::atof(v[3].c_str()) * 100);
      }
    }
  }
  std::optional<Stats> best_tps, best_wait;
  std::string best_tps_name, best_wait_name;
  for (const auto& w : workers) {
    auto it = peer_tps.find(w + "@noop");
    if (it != peer_tps.end()) {
      Stats s = Stats::Of(it->second);
      report.AddNote(absl::StrFormat("DataLoader num_workers=%s, no-op consumer: %.1f M tokens/s",
                                     w, s.median));
      if (!best_tps || s.median > best_tps->median) {
        best_tps = s;
        best_tps_name = w;
      }
    }
    auto jt = peer_wait.find(w + "@step");
    if (jt != peer_wait.end()) {
      Stats s = Stats::Of(jt->second);
      report.AddNote(absl::StrFormat("DataLoader num_workers=%s, %.0f ms step: waits %.2f%% of the time",
                                     w, f.step_ms, s.median));
      if (!best_wait || s.median < best_wait->median) {
        best_wait = s;
        best_wait_name = w;
      }
    }
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
               absl::StrCat("DataLoader memmap, best num_workers (", best_tps_name, ")"), best_tps,
               peer_note};
    fig.target = ">= 3 x peer";
    report.AddFigure(fig);
    report.AddNote(absl::StrFormat("grist %s: %.2f GB/s of tensors delivered (median)", c.label,
                                   Stats::Of(gbs).median));
    ASSIGN_OR_RETURN(Stats wait, Repeat(f.options, [&]() -> absl::StatusOr<double> {
      ASSIGN_OR_RETURN(Measured m, RunOurs(f, c.fields, f.step_ms, f.step_batches));
      return m.wait_share * 100;
    }));
    Figure wfig{absl::StrCat("consumer waits, ", f.step_ms, " ms step, ", c.label), "% of time",
                wait, absl::StrCat("DataLoader memmap, least-waiting num_workers (", best_wait_name, ")"),
                best_wait, peer_note};
    wfig.higher_is_better = false;
    wfig.target = "< 1 %";
    report.AddFigure(wfig);
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
  app->add_option("--python", f->python, "Python with torch and numpy for the DataLoader peer");
  app->add_option("--baseline-workers", f->baseline_workers, "DataLoader num_workers to measure");
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
                     "Loader tokens/s and consumer wait vs torch DataLoader over memmap", Setup);

}  // namespace
}  // namespace grist::bench
