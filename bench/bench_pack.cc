// `grist bench pack`: throughput of the pack stage (grist's Packer, concat and bestfit) over real
// tokenized documents held in memory, in input tokens per second and samples per second, beside
// peers measured in the same run on the same tokens:
//   - a plain memcpy of the same token bytes into one buffer (the ceiling: packing moves every
//   token
//     at least once);
//   - numpy's concatenate-and-chunk (np.concatenate of the documents, padded and reshaped into
//     samples) via /usr/bin/python3, for concat, when numpy is installed.
// Padding fraction, documents split across samples and truncated documents are reported as notes.
//
// Tokens: --tokens DIR (the output of `grist tokenize encode`, e.g. OUT.work/tokens of a build), or
// the default corpus (../shared/corpus/wikinews-en, else the demo corpus .demo/corpus) encoded here
// with --model (default: the shared corpus's Mistral 32k model; without it a small BPE tokenizer is
// trained on the sample first).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/corpus_sample.h"
#include "bench/harness.h"
#include "bench/registry.h"
#include "common/env.h"
#include "common/status_macros.h"
#include "common/sysinfo.h"
#include "pack/pack.h"
#include "tokenize/encode.h"
#include "tokenize/indexed_dataset.h"
#include "tokenize/tokenizer.h"

namespace grist::bench {
namespace {

struct PackBenchFlags {
  Options options;
  std::string tokens_dir;
  std::vector<std::string> inputs;
  std::string model;
  uint64_t max_bytes = 32ull << 20;
  int64_t seq_len = 2048;
  uint64_t window = 16ull << 20;
  std::string work;
  std::string python;
};

using Docs = std::vector<std::vector<int32_t>>;

absl::StatusOr<Docs> ReadTokens(const std::string& dir) {
  Env* env = Env::Default();
  ASSIGN_OR_RETURN(std::vector<std::string> parts, tokenize::ListTokenParts(env, dir));
  Docs docs;
  for (const std::string& prefix : parts) {
    ASSIGN_OR_RETURN(auto r, tokenize::IndexedDatasetReader::Open(env, prefix));
    for (uint64_t i = 0; i < r->sequences(); ++i) {
      docs.emplace_back();
      r->Read(i, &docs.back());
    }
  }
  return docs;
}

// Encodes the sample (training a small tokenizer first when there is no model); returns the tokens
// folder and describes the source in *what.
absl::StatusOr<std::string> EncodeSample(PackBenchFlags& f, std::string* what) {
  Env* env = Env::Default();
  if (f.inputs.empty()) {
    ASSIGN_OR_RETURN(std::string in, DefaultCorpus());
    f.inputs = {in};
  }
  ASSIGN_OR_RETURN(CorpusSample s,
                   WriteCorpusSample(f.inputs, JoinPath(f.work, "docs.jsonl"), f.max_bytes));
  if (f.model.empty()) {
    f.model =
        FirstExistingPath({"../shared/corpus/tokenizers/mistral-v1-spm-32k/tokenizer.model.v1"});
  }
  std::string model_note = f.model;
  if (f.model.empty()) {
    f.model = JoinPath(f.work, "bench.model");
    RETURN_IF_ERROR(TrainBenchTokenizer(s.path, f.model, 4096));
    model_note = "a BPE 4096 tokenizer trained on the sample";
  }
  tokenize::EncodeStageOptions eo;
  eo.model_path = f.model;
  eo.encode.add_eos = true;  // as a release build: EOS separates documents
  RunOptions run;
  run.progress = false;
  const std::string dir = JoinPath(f.work, "tokens");
  RETURN_IF_ERROR(env->RemoveAll(dir));
  RETURN_IF_ERROR(tokenize::RunEncode(env, {s.path}, dir, eo, run).status());
  *what =
      absl::StrFormat("%s: %llu documents, %.1f MB of text, encoded with %s",
                      absl::StrJoin(f.inputs, " "), s.documents, s.text_bytes / 1e6, model_note);
  return dir;
}

BenchRunner Setup(CLI::App* app) {
  auto f = std::make_shared<PackBenchFlags>();
  AddBenchFlags(app, &f->options);
  app->add_option("--tokens", f->tokens_dir,
                  "Output folder of grist tokenize encode to pack (default: encode --input here)");
  app->add_option("--input", f->inputs,
                  "Corpus to encode (default ../shared/corpus/wikinews-en, else .demo/corpus)");
  app->add_option("--model", f->model,
                  "SentencePiece model for --input (default: the shared Mistral 32k model, else "
                  "train a small one)");
  app->add_option("--max-bytes", f->max_bytes,
                  "Text bytes of --input to encode (default 32 MiB; "
                  "--quick: 2 MiB)");
  app->add_option("--seq-len", f->seq_len, "Sample length (default 2048, as configs/v1.0.toml)");
  app->add_option("--window", f->window, "bestfit window in tokens (default 16 Mi, as v1.0)");
  app->add_option("--work", f->work, "Scratch folder (default $TMPDIR/grist-bench-pack)");
  app->add_option("--python", f->python, "Python with numpy for the peer (default: found)");
  return [f]() -> absl::Status {
    const Options& o = f->options;
    ASSIGN_OR_RETURN(f->work, ScratchDir(f->work, "pack"));
    if (o.quick && f->max_bytes == (32ull << 20)) f->max_bytes = 2ull << 20;
    std::string source;
    std::string dir = f->tokens_dir;
    if (dir.empty()) {
      ASSIGN_OR_RETURN(dir, EncodeSample(*f, &source));
    } else {
      source = dir;
    }
    ASSIGN_OR_RETURN(Docs docs, ReadTokens(dir));
    uint64_t tokens = 0;
    for (const auto& d : docs) tokens += d.size();
    if (tokens == 0) return absl::FailedPreconditionError("bench pack: no tokens to pack");

    Report report("pack", o);
    report.SetParam("tokens", source);
    report.SetParam("documents", absl::StrCat(docs.size()));
    report.SetParam("input tokens", absl::StrCat(tokens));
    report.SetParam("seq_len", absl::StrCat(f->seq_len));
    report.SetParam("bestfit_window_tokens", absl::StrCat(f->window));

    // A measured run packs the documents `passes` times over (as one stream), so that it handles
    // at least 32 Mi tokens and lasts long enough to time even for a --quick sample. Every run
    // writes the samples' tokens into the same buffer (allocated and touched by the warm-up), as
    // the memcpy ceiling writes the documents' tokens.
    const uint64_t passes = std::max<uint64_t>(1, ((32ull << 20) + tokens - 1) / tokens);
    const double mtok = static_cast<double>(tokens * passes) / 1e6;
    report.SetParam("passes per measured run", absl::StrCat(passes));
    const size_t st = static_cast<size_t>(f->seq_len + 1);
    std::vector<int32_t> out(std::max<size_t>(tokens, st) + st);
    pack::PackStats stream_concat, stream_bestfit;  // of a measured run (all passes)
    auto run_pack = [&](const std::string& strategy, uint64_t n,
                        pack::PackStats* stats_out) -> absl::StatusOr<double> {
      pack::PackOptions po;
      po.seq_len = f->seq_len;
      po.strategy = strategy;
      po.pad_id = 3;
      po.bestfit_window_tokens = f->window;
      RETURN_IF_ERROR(po.Validate());
      size_t pos = 0;
      Stopwatch sw;
      pack::Packer p(po, [&](const pack::PackedSample& s) -> absl::Status {
        if (pos + s.tokens.size() > out.size()) pos = 0;
        std::memcpy(out.data() + pos, s.tokens.data(), s.tokens.size() * sizeof(int32_t));
        pos += s.tokens.size();
        return absl::OkStatus();
      });
      for (uint64_t k = 0; k < n; ++k) {
        for (const auto& d : docs) RETURN_IF_ERROR(p.Add(d));
      }
      RETURN_IF_ERROR(p.Finish());
      double secs = sw.Seconds();
      *stats_out = p.stats();
      return secs;
    };
    auto run_memcpy = [&](uint64_t n) -> double {
      Stopwatch sw;
      for (uint64_t k = 0; k < n; ++k) {
        int32_t* dst = out.data();
        for (const auto& d : docs) {
          std::memcpy(dst, d.data(), d.size() * sizeof(int32_t));
          dst += d.size();
        }
      }
      double secs = sw.Seconds();
      if (out[tokens / 2] == -12345) std::printf(" ");  // keep the copy observable
      return secs;
    };
    // Interleaved (concat, bestfit, memcpy, ...) so that load changes on a shared machine hit all.
    std::vector<double> concat_s, bestfit_s, memcpy_s;
    for (int i = 0; i < o.warmup + o.repetitions; ++i) {
      ASSIGN_OR_RETURN(double c, run_pack("concat", passes, &stream_concat));
      ASSIGN_OR_RETURN(double b, run_pack("bestfit", passes, &stream_bestfit));
      double m = run_memcpy(passes);
      if (i < o.warmup) continue;
      concat_s.push_back(c);
      bestfit_s.push_back(b);
      memcpy_s.push_back(m);
    }
    auto per_s = [](const std::vector<double>& secs, double amount) {
      std::vector<double> v;
      for (double s : secs) v.push_back(s > 0 ? amount / s : 0);
      return Stats::Of(v);
    };

    // The numpy peer: concatenate the documents, pad, reshape into samples.
    std::optional<Stats> numpy_s;
    std::string numpy_note;
    std::string py;
    {
      const std::string flat = JoinPath(f->work, "tokens.i32");
      const std::string lens = JoinPath(f->work, "lengths.i64");
      std::vector<int64_t> lengths;
      for (const auto& d : docs) lengths.push_back(static_cast<int64_t>(d.size()));
      (void)run_memcpy(1);
      std::string a(reinterpret_cast<const char*>(out.data()), tokens * sizeof(int32_t));
      std::string b(reinterpret_cast<const char*>(lengths.data()),
                    lengths.size() * sizeof(int64_t));
      RETURN_IF_ERROR(WriteFileAtomic(Env::Default(), flat, a));
      RETURN_IF_ERROR(WriteFileAtomic(Env::Default(), lens, b));
      const std::string script = JoinPath(f->work, "numpy_pack.py");
      RETURN_IF_ERROR(WriteFileAtomic(
          Env::Default(), script,
          "import sys, time\n"
          "import numpy as np\n"
          "flat = np.fromfile(sys.argv[1], dtype=np.int32)\n"
          "lens = np.fromfile(sys.argv[2], dtype=np.int64)\n"
          "S, warm, reps, passes = (int(a) for a in sys.argv[3:7])\n"
          "docs = np.split(flat, np.cumsum(lens)[:-1])\n"
          "total = int(lens.sum())\n"
          "n = -(-total // S)\n"
          "buf = np.full(n * S, 3, dtype=np.int32)  # reused, as grist's output buffer\n"
          "times = []\n"
          "for i in range(warm + reps):\n"
          "    t = time.perf_counter()\n"
          "    for k in range(passes):\n"
          "        np.concatenate(docs, out=buf[:total])\n"
          "        buf[total:] = 3\n"
          "        samples = buf.reshape(n, S)\n"
          "    times.append(time.perf_counter() - t)\n"
          "print(' '.join(repr(x) for x in times[warm:]))\n"));
      py = FindPython(f->python, "numpy");
      auto r = RunCommand(absl::StrCat(py, " ", script, " ", flat, " ", lens, " ", f->seq_len + 1,
                                       " ", o.warmup, " ", o.repetitions, " ", passes),
                          /*merge_stderr=*/true);
      std::vector<double> secs;
      if (r.ok() && r->exit_code == 0) {
        for (absl::string_view t : absl::StrSplit(r->output, ' ', absl::SkipWhitespace())) {
          secs.push_back(std::atof(std::string(t).c_str()));
        }
      }
      if (secs.size() == static_cast<size_t>(o.repetitions)) {
        numpy_s = per_s(secs, mtok);
      } else {
        numpy_note = absl::StrCat(
            "numpy peer unavailable (", py,
            "): ", r.ok() ? r->output.substr(0, 200) : std::string(r.status().message()));
      }
      (void)Env::Default()->RemoveFile(flat);
      (void)Env::Default()->RemoveFile(lens);
    }

    Stats mem = per_s(memcpy_s, mtok);
    Figure c1{"concat throughput", "Mtok/s", per_s(concat_s, mtok)};
    c1.peer_name = absl::StrCat("numpy concatenate + pad + reshape (", py, ")");
    c1.peer = numpy_s;
    c1.peer_note = numpy_note;
    report.AddFigure(c1);
    Figure c2{"concat throughput vs memcpy", "Mtok/s", per_s(concat_s, mtok)};
    c2.peer_name = "memcpy of the same tokens (ceiling)";
    c2.peer = mem;
    c2.peer_is_ceiling = true;
    report.AddFigure(c2);
    Figure b1{"bestfit throughput vs memcpy", "Mtok/s", per_s(bestfit_s, mtok)};
    b1.peer_name = "memcpy of the same tokens (ceiling)";
    b1.peer = mem;
    b1.peer_is_ceiling = true;
    report.AddFigure(b1);
    // Samples per second, against the memcpy ceiling expressed in samples of the same strategy.
    const double stf = static_cast<double>(st);
    for (const auto& [name, secs, stats] :
         {std::tuple{"concat samples/s", &concat_s, &stream_concat},
          std::tuple{"bestfit samples/s", &bestfit_s, &stream_bestfit}}) {
      const double ksamples = stats->samples / 1e3;
      Figure fs{name, "k samples/s", per_s(*secs, ksamples)};
      fs.peer_name = "memcpy of the samples' bytes (ceiling)";
      std::vector<double> v;
      for (double s : memcpy_s) {
        v.push_back(s > 0 ? ksamples / (s * stats->samples * stf / (tokens * passes)) : 0);
      }
      fs.peer = Stats::Of(v);
      fs.peer_is_ceiling = true;
      report.AddFigure(fs);
    }
    // The notes describe one pass over the documents (what a release of them would hold).
    pack::PackStats last_concat, last_bestfit;
    RETURN_IF_ERROR(run_pack("concat", 1, &last_concat).status());
    RETURN_IF_ERROR(run_pack("bestfit", 1, &last_bestfit).status());
    for (const auto& [name, s] :
         {std::pair{"concat", &last_concat}, std::pair{"bestfit", &last_bestfit}}) {
      report.AddNote(absl::StrFormat(
          "%s: %llu samples of %lld tokens, padding %.2f%% (%llu tokens), %llu documents split "
          "across samples, %llu truncated, %llu empty",
          name, s->samples, static_cast<long long>(f->seq_len + 1), 100 * s->padding_fraction(),
          s->padding_tokens, s->documents_split, s->truncated_documents, s->empty_documents));
    }
    report.AddNote(absl::StrFormat(
        "a measured run packs the documents %llu times over as one stream (%.1f M tokens), so "
        "bestfit's window holds min(window, stream) = %.1f M tokens, as in a release build of "
        "that size; the memcpy ceiling reads %.1f MB per pass (cache-resident when small)",
        passes, mtok, std::min<double>(f->window, tokens * passes) / 1e6, tokens * 4 / 1e6));
    report.AddNote(
        "ours: grist's Packer (pack/pack.h) over documents in memory, writing every "
        "sample's tokens to one reused buffer; shard writing is not included "
        "(bench build times the whole stage)");
    return report.Finish();
  };
}

GRIST_REGISTER_BENCH(pack, "pack",
                     "grist pack (concat, bestfit) vs memcpy and numpy concatenate-and-chunk "
                     "(Mtok/s, samples/s)",
                     Setup);

}  // namespace
}  // namespace grist::bench
