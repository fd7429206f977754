// `grist bench ckpt`: checkpoint write throughput, write amplification and the time the caller is
// blocked, beside the peers measured in the same run on the same directory: fio with O_DIRECT and
// io_uring (the disk's ceiling), plain buffered write()+fsync, torch.save (+fsync) through
// /usr/bin/python3, and memcpy of the same bytes (the snapshot floor for --async). --sweep
// queue_depth=1,4,16,64 (or block_size=256K,1M,4M, or mode=direct,buffered) gives the week-13 lab
// its table and plots; --quick caps the size at 64 MiB. --target DIR (a network or parallel file
// system, e.g. a GlusterFS mount of scripts/gluster.sh) reports each figure there beside --dir (the
// local ext4) measured in the same run: write GB/s direct/buffered x sync/async, read + verify
// GB/s, and write amplification counted at the block devices under the bricks.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/python_peer.h"
#include "bench/registry.h"
#include "bench/target_fs.h"
#include "ckptio/checkpoint.h"
#include "ckptio/plain_writer.h"
#include "ckptio/reader.h"
#include "ckptio/write_amp.h"
#include "ckptio/writer.h"
#include "common/env.h"
#include "common/status_macros.h"
#include "common/sysinfo.h"

namespace grist::bench {
namespace {

namespace ck = grist::ckptio;

struct CkptFlags {
  Options options;
  std::string dir;
  std::string size = "1G";
  std::string mode = "direct";
  int queue_depth = 16;
  std::string block_size = "4M";
  int threads = 1;
  int files = 1;
  int tensors = 16;
  bool async = false;
  bool no_peers = false;
  bool no_python_peers = false;
  int python_world = 2;
  std::string overlap = "auto";
  int copy_threads = 0;  // 0: the writer's default
  std::string python;  // empty: FindPython picks one that imports torch
  std::string target;  // --target: measured beside `dir`
  bool mode_given = false;  // --mode on the command line: --target measures that mode only
};

absl::StatusOr<uint64_t> ParseBytes(const std::string& s) {
  if (s.empty()) return FlagError("empty size");
  uint64_t mult = 1;
  std::string num = s;
  switch (s.back()) {
    case 'K': case 'k': mult = 1ull << 10; num.pop_back(); break;
    case 'M': case 'm': mult = 1ull << 20; num.pop_back(); break;
    case 'G': case 'g': mult = 1ull << 30; num.pop_back(); break;
    default: break;
  }
  uint64_t v;
  if (!absl::SimpleAtoi(num, &v) || v == 0) {
    return FlagError(absl::StrCat("bad size '", s, "' (use e.g. 4096, 512M, 4G)"));
  }
  return v * mult;
}

std::string Human(uint64_t b) {
  if (b >= (1ull << 30) && b % (1ull << 30) == 0) return absl::StrCat(b >> 30, " GiB");
  if (b >= (1ull << 20) && b % (1ull << 20) == 0) return absl::StrCat(b >> 20, " MiB");
  if (b >= (1ull << 10) && b % (1ull << 10) == 0) return absl::StrCat(b >> 10, " KiB");
  return absl::StrCat(b, " B");
}

// The checkpoint's host tensors: `files` shards of `tensors` tensors, deterministic bytes, touched
// once (first touch is slow on these VMs) and reused by every run.
struct HostState {
  char* base = nullptr;
  uint64_t bytes = 0;
  std::vector<std::vector<ck::HostTensor>> files;
  ~HostState() {
    if (base) ::munmap(base, bytes);
  }
};

absl::Status MakeState(uint64_t size, int files, int tensors, HostState* st) {
  st->bytes = size;
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return ErrnoError(errno, "allocating the benchmark state");
  (void)::madvise(p, size, MADV_HUGEPAGE);
  st->base = static_cast<char*>(p);
  uint64_t x = 0x9E3779B97F4A7C15ull;
  auto* w = reinterpret_cast<uint64_t*>(st->base);
  for (uint64_t i = 0; i < size / 8; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    w[i] = x;
  }
  const uint64_t per_file = size / files;
  uint64_t off = 0;
  for (int f = 0; f < files; ++f) {
    std::vector<ck::HostTensor> ts;
    const uint64_t fbytes = f + 1 == files ? size - off : per_file;
    const uint64_t per_tensor = fbytes / tensors / 4 * 4;
    uint64_t used = 0;
    for (int t = 0; t < tensors; ++t) {
      uint64_t n = t + 1 == tensors ? fbytes - used : per_tensor;
      ck::HostTensor h;
      h.spec = {absl::StrCat("layers.", t, ".weight"), n % 4 == 0 ? ck::DType::kF32 : ck::DType::kU8,
                {static_cast<int64_t>(n % 4 == 0 ? n / 4 : n)}};
      h.data = st->base + off + used;
      ts.push_back(h);
      used += n;
    }
    off += fbytes;
    st->files.push_back(std::move(ts));
  }
  return absl::OkStatus();
}

struct RunResult {
  double total_s = 0;     // start to published
  double blocked_s = 0;   // caller blocked (snapshot) with --async; = total otherwise
  ck::WriteAmp wa;
  std::vector<std::string> notes;
  std::string dir;  // the published checkpoint, when SaveOnce was asked to keep it
};

// One checkpoint save of every file (one FileWriter per file, `threads` at a time), published.
absl::StatusOr<RunResult> SaveOnce(const CkptFlags& f, const HostState& st,
                                   std::vector<std::unique_ptr<ck::FileWriter>>& writers,
                                   const ck::WriteAmpMeter* meter_proto, int run, bool in_place,
                                   bool keep = false) {
  Env* env = Env::Default();
  const std::string dir = JoinPath(f.dir, absl::StrCat("grist-bench-ckpt-", ::getpid(), "-", run));
  (void)env->RemoveAll(dir);
  ck::WriteAmpMeter meter = *meter_proto;
  meter.Start();
  RunResult rr;
  Stopwatch clock;
  RETURN_IF_ERROR(ck::PrepareCheckpointDir(env, dir));
  const double prepared_s = clock.Seconds();
  const int files = static_cast<int>(st.files.size());
  std::vector<std::unique_ptr<ck::PendingFile>> pending(files);
  std::vector<absl::Status> errors(files);
  std::vector<ck::FileResult> results(files);
  std::vector<double> snap_done(files, 0);
  // Snapshot phase: each thread takes files in turn and returns once its snapshot is in staging.
  auto snapshot = [&](int t) {
    for (int i = t; i < files; i += f.threads) {
      const std::string path = JoinPath(dir, ck::RankFileName(i));
      auto p = in_place ? writers[i]->SaveInPlace(path, st.files[i], {})
                        : writers[i]->Save(path, st.files[i], {});
      if (!p.ok()) {
        errors[i] = p.status();
        continue;
      }
      pending[i] = std::move(*p);
      if (!f.async) {  // synchronous: each file durable before the next
        auto r = pending[i]->Wait();
        if (!r.ok()) errors[i] = r.status();
        else results[i] = *r;
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < std::min(f.threads, files); ++t) pool.emplace_back(snapshot, t);
  snapshot(0);
  for (auto& t : pool) t.join();
  rr.blocked_s = clock.Seconds();
  ck::Manifest m;
  m.world_size = files;
  for (int i = 0; i < files; ++i) {
    RETURN_IF_ERROR(errors[i]);
    if (f.async) {
      ASSIGN_OR_RETURN(results[i], pending[i]->Wait());
    }
    m.files.push_back(ck::ToManifestFile(results[i], i));
  }
  const double durable_s = clock.Seconds();
  RETURN_IF_ERROR(ck::PublishCheckpoint(env, dir, m));
  rr.total_s = clock.Seconds();
  if (std::getenv("GRIST_CKPT_TRACE") != nullptr) {  // where the save's time goes (ms)
    std::fprintf(stderr, "bench ckpt trace: %s: folder prepared %.2f, snapshot done %.2f, files "
                 "durable %.2f, published %.2f ms\n", dir.c_str(), prepared_s * 1e3,
                 rr.blocked_s * 1e3, durable_s * 1e3, rr.total_s * 1e3);
  }
  if (!f.async) rr.blocked_s = rr.total_s;
  uint64_t logical = 0;
  for (const auto& r : results) logical += r.size;
  rr.wa = meter.Stop(logical);
  rr.notes = results[0].notes;
  if (!results[0].direct && f.mode == "direct") rr.notes.push_back("O_DIRECT not used");
  if (keep) {
    rr.dir = dir;
    return rr;
  }
  RETURN_IF_ERROR(env->RemoveAll(dir));
  return rr;
}

// What a user writes without grist: one write() loop over the (warm) tensors in `chunk`-byte calls,
// then fsync. GB/s to durable.
absl::StatusOr<double> BufferedPeer(const CkptFlags& f, const HostState& st, uint64_t chunk) {
  const uint64_t bs = chunk;
  const std::string path = JoinPath(f.dir, absl::StrCat("grist-bench-buffered-", ::getpid()));
  Stopwatch clock;
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError(errno, absl::StrCat("creating ", path));
  uint64_t off = 0;
  while (off < st.bytes) {
    ssize_t w = ::write(fd, st.base + off, std::min<uint64_t>(bs, st.bytes - off));
    if (w < 0) {
      int e = errno;
      ::close(fd);
      return ErrnoError(e, absl::StrCat("writing ", path));
    }
    off += static_cast<uint64_t>(w);
  }
  if (::fsync(fd) != 0) {
    int e = errno;
    ::close(fd);
    return ErrnoError(e, absl::StrCat("fsync ", path));
  }
  ::close(fd);
  double s = clock.Seconds();
  ::unlink(path.c_str());
  return static_cast<double>(st.bytes) / s / 1e9;
}

// The ceiling written here: a plain io_uring writer of the same bytes (one file, `qd` writes of
// `bs` in flight, O_DIRECT where allowed, then fsync). GB/s to durable.
absl::StatusOr<double> PlainUringPeer(const CkptFlags& f, const HostState& st, int qd, uint64_t bs,
                                      bool direct) {
  const std::string path = JoinPath(f.dir, absl::StrCat("grist-bench-uring-", ::getpid()));
  auto r = ck::PlainUringWrite(path, st.base, st.bytes, qd, bs, direct);
  ::unlink(path.c_str());
  if (!r.ok()) return r.status();
  return static_cast<double>(st.bytes) / r->seconds / 1e9;
}

// Per-repetition ratios a[i] / b[i].
std::vector<double> Ratios(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> out;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    if (b[i] > 0) out.push_back(a[i] / b[i]);
  }
  return out;
}

// A row holding a per-repetition ratio (median [min, max]); it has no peer of its own.
Figure RatioFigure(const std::string& name, const std::vector<double>& ratios, const std::string& target,
                   bool higher_is_better = true) {
  Figure r{name, "x", Stats::Of(ratios), "", std::nullopt};
  r.peer_note = "the row is a per-repetition ratio";
  r.target = target;
  r.higher_is_better = higher_is_better;
  return r;
}

// The Python peers in one multi-process run (bench/python/bench_ckpt_peers.py with --json):
// grist.ckpt.save beside dcp.save / dcp.async_save with FileSystemWriter, torch.save + fsync,
// safetensors save_file + fsync, and a resharding load against a same-topology load. Slowest rank
// per repetition.
absl::Status PythonPeers(const CkptFlags& f, uint64_t size, Report* report, std::vector<Figure>* figs) {
  const std::string dir = JoinPath(f.dir, absl::StrCat("grist-bench-py-", ::getpid()));
  const uint64_t mib = std::max<uint64_t>(16, size >> 20);
  // grist's Python package in this binary's build tree (build/grist -> build/python), unless
  // GRIST_PYTHON_PATH says where.
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n > 0 && std::getenv("GRIST_PYTHON_PATH") == nullptr) {
    const std::string bin = DirName(std::string(exe, static_cast<size_t>(n)));
    for (const std::string& py : {JoinPath(bin, "python"), JoinPath(DirName(bin), "python")}) {
      if (Env::Default()->FileExists(JoinPath(py, "grist/__init__.py"))) {
        ::setenv("GRIST_PYTHON_PATH", py.c_str(), 0);
        break;
      }
    }
  }
  auto run = RunPythonPeer("bench_ckpt_peers.py", "torch,safetensors",
                           {"--world", std::to_string(f.python_world), "--mib", std::to_string(mib),
                            "--dir", dir, "--repetitions", std::to_string(f.options.repetitions),
                            "--warmup", std::to_string(f.options.warmup), "--json"});
  (void)Env::Default()->RemoveAll(dir);
  if (!run.ok()) return run.status();
  const std::string& j = run->json;
  const std::string where = absl::StrCat(f.python_world, " CPU ranks, gloo");
  report->SetParam("python peers", absl::StrCat(run->python, ", ", where, ", ", mib,
                                                " MiB of bf16 DTensors Shard(0)"));
  auto series = [&](const std::string& method, const std::string& what) {
    // "methods": {"<method>": {"blocked": [...], "durable": [...]}}
    const size_t at = j.find(absl::StrCat("\"", method, "\": {"));
    if (at == std::string::npos) return std::vector<double>{};
    return PeerJsonNumbers(j.substr(at + method.size() + 4), what);
  };
  const auto g_blocked = series("grist.ckpt.save", "blocked");
  const auto g_durable = series("grist.ckpt.save", "durable");
  if (g_durable.empty()) return absl::InternalError("bench_ckpt_peers.py printed no grist.ckpt.save figures");
  struct Peer {
    std::string method, label;
  };
  const Peer peers[] = {{"dcp.save(FileSystemWriter)", "dcp.save (FileSystemWriter)"},
                        {"dcp.async_save(FileSystemWriter)", "dcp.async_save (FileSystemWriter)"},
                        {"torch.save+fsync", "torch.save + fsync"},
                        {"safetensors save_file+fsync", "safetensors save_file + fsync"},
                        {"dcp.save(grist StorageWriter)", "dcp.save (grist StorageWriter)"}};
  for (const Peer& p : peers) {
    const auto durable = series(p.method, "durable");
    const auto blocked = series(p.method, "blocked");
    if (durable.empty()) continue;
    Figure d{absl::StrCat("python (", where, "): time to durable, grist.ckpt.save vs ", p.label), "s",
             Stats::Of(g_durable), p.label, Stats::Of(durable)};
    d.higher_is_better = false;
    figs->push_back(d);
    figs->push_back(RatioFigure(absl::StrCat("ratio: ", p.label, " durable / grist.ckpt.save durable"),
                                Ratios(durable, g_durable), "-"));
    if (p.method == "dcp.async_save(FileSystemWriter)") {
      Figure b{absl::StrCat("python (", where, "): caller blocked, grist.ckpt.save vs ", p.label), "s",
               Stats::Of(g_blocked), p.label, Stats::Of(blocked)};
      b.higher_is_better = false;
      figs->push_back(b);
      figs->push_back(RatioFigure(absl::StrCat("ratio: ", p.label, " blocked / grist.ckpt.save blocked"),
                                  Ratios(blocked, g_blocked), "-"));
    }
  }
  const auto same = series("grist.ckpt.load same placements", "durable");
  const auto resh = series("grist.ckpt.load resharded (Shard(1))", "durable");
  if (!same.empty() && !resh.empty()) {
    std::vector<double> same_gbps, resh_gbps;
    for (double s : same) same_gbps.push_back(static_cast<double>(mib << 20) / s / 1e9);
    for (double s : resh) resh_gbps.push_back(static_cast<double>(mib << 20) / s / 1e9);
    Figure l{absl::StrCat("python (", where, "): resharding load (Shard(0) -> Shard(1)) vs same-topology load"),
             "GB/s", Stats::Of(resh_gbps), "grist.ckpt.load, same placements", Stats::Of(same_gbps)};
    l.target = ">= 0.8 x same-topology";
    figs->push_back(l);
    figs->push_back(RatioFigure("ratio: resharding load / same-topology load", Ratios(resh_gbps, same_gbps),
                                ">= 0.8"));
  }
  return absl::OkStatus();
}

// fio's bandwidth (GB/s) for the same bytes, queue depth and block size with O_DIRECT + io_uring.
absl::StatusOr<double> FioPeer(const CkptFlags& f, uint64_t size, int qd, uint64_t bs, bool direct) {
  const std::string name = absl::StrCat("grist-bench-fio-", ::getpid());
  std::string cmd = absl::StrFormat(
      "fio --name=%s --directory=%s --size=%d --bs=%d --iodepth=%d --rw=write --direct=%d "
      "--ioengine=io_uring --numjobs=%d --end_fsync=1 --fallocate=native --group_reporting "
      "--output-format=json",
      name, f.dir, size / f.files, bs, qd, direct ? 1 : 0, f.files);
  ASSIGN_OR_RETURN(CommandResult r, RunCommand(cmd));
  (void)RunCommand(absl::StrCat("rm -f ", f.dir, "/", name, ".*"));
  if (r.exit_code != 0) return absl::UnavailableError(absl::StrCat("fio exited with ", r.exit_code));
  size_t w = r.output.find("\"write\" : {");
  size_t b = w == std::string::npos ? w : r.output.find("\"bw_bytes\"", w);
  if (b == std::string::npos) return absl::UnavailableError("fio printed no write bandwidth");
  size_t colon = r.output.find(':', b);
  double bw = std::strtod(r.output.c_str() + colon + 1, nullptr);
  if (bw <= 0) return absl::UnavailableError("fio reported zero bandwidth");
  return bw / 1e9;
}

// torch.save of the same bytes (one float32 tensor per grist tensor) + fsync, GB/s per repetition.
absl::StatusOr<std::vector<double>> TorchPeer(const CkptFlags& f, uint64_t size) {
  const std::string path = JoinPath(f.dir, absl::StrCat("grist-bench-torch-", ::getpid(), ".pt"));
  std::string script = absl::StrFormat(
      "import os, sys, time\n"
      "import torch\n"
      "n = %d // 4 // %d\n"
      "sd = {'layers.%%d.weight' %% i: torch.rand(n) for i in range(%d)}\n"
      "out = []\n"
      "for r in range(%d):\n"
      "    t0 = time.perf_counter()\n"
      "    with open('%s', 'wb') as fh:\n"
      "        torch.save(sd, fh)\n"
      "        fh.flush()\n"
      "        os.fsync(fh.fileno())\n"
      "    dt = time.perf_counter() - t0\n"
      "    os.unlink('%s')\n"
      "    if r >= %d: out.append(%d / dt / 1e9)\n"
      "print(' '.join(repr(x) for x in out))\n",
      size, f.tensors, f.tensors, f.options.warmup + f.options.repetitions, path, path,
      f.options.warmup, size);
  const std::string script_path = path + ".py";
  RETURN_IF_ERROR(WriteFileAtomic(Env::Default(), script_path, script));
  const std::string python = FindPython(f.python, "torch");
  auto r = RunCommand(absl::StrCat(python, " ", script_path));
  ::unlink(script_path.c_str());
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) return absl::UnavailableError("torch not importable by " + python);
  std::vector<double> v;
  for (absl::string_view tok : absl::StrSplit(r->output, absl::ByAnyChar(" \n"), absl::SkipEmpty())) {
    double x;
    if (absl::SimpleAtod(tok, &x)) v.push_back(x);
  }
  if (v.empty()) return absl::UnavailableError("torch.save printed no figure");
  return v;
}

// The snapshot floor: a parallel memcpy of the same bytes with the writer's copy thread count.
double MemcpyPeer(const HostState& st, char* dst, int threads) {
  Stopwatch clock;
  ck::CopyBytes(dst, st.base, st.bytes, threads);
  return clock.Seconds();
}

// The buffered peer's write() size: what a user would pick (4-16 MiB), whatever grist's block is.
uint64_t BufferedChunk(uint64_t block) { return std::clamp<uint64_t>(block, 4ull << 20, 16ull << 20); }

std::vector<std::unique_ptr<ck::FileWriter>> MakeWriters(const CkptFlags& f, int qd, uint64_t bs,
                                                         bool direct) {
  std::vector<std::unique_ptr<ck::FileWriter>> w;
  for (int i = 0; i < f.files; ++i) {
    ck::WriterOptions o;
    o.mode = direct ? ck::IoMode::kDirect : ck::IoMode::kBuffered;
    o.queue_depth = qd;
    o.block_size = bs;
    o.overlap = f.overlap == "on" ? ck::Overlap::kOn : f.overlap == "off" ? ck::Overlap::kOff : ck::Overlap::kAuto;
    o.copy_threads = f.copy_threads;
    w.push_back(std::move(*ck::FileWriter::Create(o)));
  }
  return w;
}

// --target: the same checkpoint written to the target and to --dir (the local baseline) in turn,
// repetition by repetition, for direct/buffered x sync/async (or one of them per sweep value); the
// bytes the block devices under each side took, and a read + checksum verify of what was written.
absl::Status RunTarget(CkptFlags f, uint64_t size, uint64_t bs) {
  Env* env = Env::Default();
  RETURN_IF_ERROR(env->CreateDirs(f.target));
  ASSIGN_OR_RETURN(TargetFs target, DescribeTargetFs(f.target));
  ASSIGN_OR_RETURN(TargetFs base, DescribeTargetFs(f.dir));
  ASSIGN_OR_RETURN(ck::WriteAmpMeter target_meter, ck::WriteAmpMeter::ForDirectory(f.target));
  ASSIGN_OR_RETURN(ck::WriteAmpMeter base_meter, ck::WriteAmpMeter::ForDirectory(f.dir));
  f.options.target_dir = f.target;
  if (!f.options.quiet) {
    std::fprintf(stderr, "preparing %s of tensors (first touch of fresh memory is slow)...\n",
                 Human(size).c_str());
  }
  HostState st;
  RETURN_IF_ERROR(MakeState(size, f.files, f.tensors, &st));
  Report report("ckpt", f.options);
  report.SetParam("target", absl::StrCat(f.target, ": ", target.Describe()));
  report.SetParam("baseline (peer column)", absl::StrCat(f.dir, ": ", base.Describe()));
  report.SetParam("size", Human(size));
  report.SetParam("files", std::to_string(f.files));
  report.SetParam("tensors per file", std::to_string(f.tensors));

  struct Side {
    std::string dir;
    const TargetFs* fs;
    const ck::WriteAmpMeter* meter;
    std::vector<double> gbps, read_gbps, wa, blocked, extra;
    std::vector<std::string> notes;
  };
  int run = 0;
  std::set<std::string> noted;
  // The copies each byte is stored in: replica N stores N (the bricks' devices take N x logical).
  int copies = 1;
  if (target.gluster_type == "Replicate") {
    auto info = RunCommand(absl::StrCat("gluster --mode=script volume info ", target.gluster_volume));
    copies = 2;
    if (info.ok()) {
      size_t at = info->output.find(" x ");
      int n = 0;
      if (at != std::string::npos && std::sscanf(info->output.c_str() + at + 3, "%d", &n) == 1 && n > 0) copies = n;
    }
  }
  auto measure = [&](int qd, uint64_t block, bool direct, bool async) -> absl::StatusOr<std::vector<Figure>> {
    CkptFlags g = f;
    g.mode = direct ? "direct" : "buffered";
    g.async = async;
    auto writers = MakeWriters(g, qd, block, direct);
    Side sides[2] = {{f.target, &target, &target_meter, {}, {}, {}, {}, {}},
                     {f.dir, &base, &base_meter, {}, {}, {}, {}, {}}};
    for (int r = 0; r < f.options.warmup + f.options.repetitions; ++r) {
      const bool keep = r >= f.options.warmup;
      for (Side& s : sides) {
        g.dir = s.dir;
        DeviceSetMeter dev(s.fs->devices);
        dev.Start();
        ASSIGN_OR_RETURN(RunResult rr, SaveOnce(g, st, writers, s.meter, run++, false, /*keep=*/true));
        std::optional<uint64_t> written = dev.Stop();
        ck::ReadOptions ro;
        ro.direct = direct;
        ro.queue_depth = qd;
        ro.block_size = block;
        ro.pin_for_cuda = false;
        Stopwatch rd;
        absl::Status v = ck::VerifyCheckpoint(rr.dir, ro);
        const double read_s = rd.Seconds();
        RETURN_IF_ERROR(env->RemoveAll(rr.dir));
        RETURN_IF_ERROR(v);
        if (!keep) continue;
        s.gbps.push_back(static_cast<double>(size) / rr.total_s / 1e9);
        s.read_gbps.push_back(static_cast<double>(size) / read_s / 1e9);
        s.blocked.push_back(rr.blocked_s);
        if (written) {
          s.wa.push_back(static_cast<double>(*written) / static_cast<double>(size));
          if (&s == &sides[0]) {
            s.extra.push_back(static_cast<double>(*written) - static_cast<double>(copies) * static_cast<double>(size));
          }
        }
        s.notes = rr.notes;
      }
    }
    for (const Side& s : sides) {
      for (const auto& n : s.notes) {
        if (noted.insert(absl::StrCat(s.dir, ": ", n)).second) report.AddNote(absl::StrCat(s.dir, ": ", n));
      }
    }
    const std::string how = absl::StrCat(direct ? "direct" : "buffered", async ? " async" : " sync");
    if (!sides[0].extra.empty()) {
      report.AddNote(absl::StrFormat(
          "%s (qd %d, block %s): the target's devices took %d x logical %+.0f KiB per checkpoint "
          "(median; the bytes beyond the %d cop%s: metadata, journal, xattrs)",
          how, qd, Human(block), copies, Stats::Of(sides[0].extra).median / 1024, copies,
          copies == 1 ? "y" : "ies"));
    }
    const std::string peer = absl::StrCat("baseline ", base.fs_type, ", same run");
    std::vector<Figure> figs;
    auto add = [&](Figure fig, const std::vector<double>& ours, const std::vector<double>& theirs,
                   const std::string& why_none) {
      if (ours.empty()) {
        report.AddNote(absl::StrCat(fig.name, ": not measured on the target: ", why_none));
        return;
      }
      fig.ours = Stats::Of(ours);
      if (!theirs.empty()) fig.peer = Stats::Of(theirs);
      else fig.peer_note = why_none;
      figs.push_back(std::move(fig));
    };
    add({absl::StrCat("checkpoint write, ", how), "GB/s", {}, peer, std::nullopt}, sides[0].gbps,
        sides[1].gbps, "");
    if (async) {
      Figure b{absl::StrCat("caller blocked, ", how), "s", {}, peer, std::nullopt};
      b.higher_is_better = false;
      add(b, sides[0].blocked, sides[1].blocked, "");
    }
    add({absl::StrCat("checkpoint read + verify, ", how), "GB/s", {}, peer, std::nullopt},
        sides[0].read_gbps, sides[1].read_gbps, "");
    Figure wa{absl::StrCat("write amplification at the devices, ", how), "x", {}, peer, std::nullopt};
    wa.higher_is_better = false;
    wa.target = target.gluster_type == "Replicate" ? "~2 for replica 2" : "~1";
    add(wa, sides[0].wa, sides[1].wa,
        sides[0].fs->devices.empty() ? "no local block device under the target"
                                     : "no local block device under the baseline");
    return figs;
  };

  // A --sweep over queue_depth, block_size or mode reaches here once per value, as a child process
  // that the harness's sweep driver runs with that flag (bench/sweep_driver.h).
  const bool direct = f.mode == "direct";
  report.SetParam("queue depth", std::to_string(f.queue_depth));
  report.SetParam("block size", Human(bs));
  for (bool d : {true, false}) {
    if (f.mode_given && d != direct) continue;
    for (bool a : {false, true}) {
      ASSIGN_OR_RETURN(std::vector<Figure> figs, measure(f.queue_depth, bs, d, a));
      for (auto& fig : figs) report.AddFigure(std::move(fig));
    }
  }
  report.AddNote(
      "Write amplification = bytes the block devices took (sectors written, after sync) / logical "
      "checkpoint bytes, over the devices under the target's local bricks; the baseline's is the "
      "whole device it lives on, so other writers on it (builds) add to it. On GlusterFS replica 2 "
      "each brick gets a full copy (2x); the brick file systems add their journal (XFS log), inode "
      "updates and xattrs (trusted.gfid, trusted.afr.* changelog, trusted.glusterfs.mdata, "
      "gfid2path), the .glusterfs/ gfid hard links, and AFR's pre-/post-op dirty marks (the "
      "self-heal metadata) on every write transaction.");
  return report.Finish();
}

absl::Status Run(CkptFlags f) {
  if (f.dir.empty()) f.dir = f.options.output_dir.empty() ? "." : f.options.output_dir;
  if (f.mode != "direct" && f.mode != "buffered") {
    return FlagError("--mode must be direct or buffered");
  }
  if (f.files < 1 || f.threads < 1 || f.tensors < 1 || f.queue_depth < 1) {
    return FlagError("--files, --threads, --tensors and --queue-depth must be >= 1");
  }
  ASSIGN_OR_RETURN(uint64_t size, ParseBytes(f.size));
  if (f.options.quick) size = std::min<uint64_t>(size, 64ull << 20);
  ASSIGN_OR_RETURN(uint64_t bs, ParseBytes(f.block_size));
  if (bs % 4096) return FlagError("--block-size must be a multiple of 4096");
  RETURN_IF_ERROR(Env::Default()->CreateDirs(f.dir));
  if (!f.target.empty()) return RunTarget(f, size, bs);
  ASSIGN_OR_RETURN(ck::WriteAmpMeter meter, ck::WriteAmpMeter::ForDirectory(f.dir));
  f.options.target_dir = f.dir;
  if (!f.options.quiet) {
    std::fprintf(stderr, "preparing %s of tensors (first touch of fresh memory is slow)...\n",
                 Human(size).c_str());
  }
  HostState st;
  RETURN_IF_ERROR(MakeState(size, f.files, f.tensors, &st));

  Report report("ckpt", f.options);
  report.SetParam("dir", f.dir);
  report.SetParam("file system", meter.fs_type());
  report.SetParam("device", meter.device().empty() ? "none (network/parallel fs?)" : meter.device());
  report.SetParam("size", Human(size));
  report.SetParam("mode", f.mode);
  report.SetParam("queue depth", std::to_string(f.queue_depth));
  report.SetParam("block size", Human(bs));
  report.SetParam("files", std::to_string(f.files));
  report.SetParam("threads", std::to_string(f.threads));
  report.SetParam("tensors per file", std::to_string(f.tensors));
  report.SetParam("async", f.async ? "yes" : "no");
  report.SetParam("copy/write overlap", absl::StrCat(f.overlap, " (", std::thread::hardware_concurrency(), " CPUs)"));

  // The figures at one setting; peers at the same setting, measured in the same run, interleaved
  // repetition by repetition with grist's own runs (this VM's disk drifts over minutes).
  // `full` adds the in-place path and torch.save (left out of sweeps to keep them short).
  auto measure = [&](int qd, uint64_t block, bool direct, bool full)
      -> absl::StatusOr<std::vector<Figure>> {
    std::vector<Figure> figs;
    auto writers = MakeWriters(f, qd, block, direct);
    const int copy_threads = writers[0]->copy_threads();
    report.SetParam("copy threads", absl::StrCat(copy_threads, " (writer and memcpy peer)"));
    report.SetParam("buffered peer", absl::StrCat("write() of ", Human(BufferedChunk(block)),
                                                  " then fsync"));
    std::vector<double> gbps, blocked, dev_wa, proc_wa, ip_gbps, ip_blocked, buf_gbps, fio_gbps, mc_s,
        uring_gbps;
    std::string uring_note = f.no_peers ? "--no-peers" : "";
    std::vector<std::string> notes;
    std::string fio_note = f.no_peers ? "--no-peers" : HaveProgram("fio") ? "" : "fio not installed";
    std::string buf_note = f.no_peers ? "--no-peers" : "";
    char* mc_dst = nullptr;
    if (f.async) {
      void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) return ErrnoError(errno, "allocating the memcpy peer buffer");
      (void)::madvise(p, size, MADV_HUGEPAGE);  // as the writer's arena
      mc_dst = static_cast<char*>(p);
      std::memset(mc_dst, 0, size);  // first touch outside the measurement
    }
    static int run = 0;
    absl::Status status;
    for (int r = 0; r < f.options.warmup + f.options.repetitions && status.ok(); ++r) {
      const bool keep = r >= f.options.warmup;
      auto rr = SaveOnce(f, st, writers, &meter, run++, /*in_place=*/false);
      if (!rr.ok()) {
        status = rr.status();
        break;
      }
      if (keep) {
        gbps.push_back(static_cast<double>(size) / rr->total_s / 1e9);
        blocked.push_back(rr->blocked_s);
        dev_wa.push_back(rr->wa.device_ratio());
        proc_wa.push_back(rr->wa.process_ratio());
        notes = rr->notes;
      }
      if (full) {
        auto ri = SaveOnce(f, st, writers, &meter, run++, /*in_place=*/true);
        if (!ri.ok()) {
          status = ri.status();
          break;
        }
        if (keep) {
          ip_gbps.push_back(static_cast<double>(size) / ri->total_s / 1e9);
          ip_blocked.push_back(ri->blocked_s);
        }
      }
      if (mc_dst != nullptr) {
        double t = MemcpyPeer(st, mc_dst, copy_threads);
        if (keep) mc_s.push_back(t);
      }
      if (buf_note.empty()) {
        auto b = BufferedPeer(f, st, BufferedChunk(block));
        if (!b.ok()) buf_note = std::string(b.status().message());
        else if (keep) buf_gbps.push_back(*b);
      }
      if (uring_note.empty()) {
        auto u = PlainUringPeer(f, st, qd, block, direct);
        if (!u.ok()) uring_note = std::string(u.status().message());
        else if (keep) uring_gbps.push_back(*u);
      }
      if (fio_note.empty()) {
        auto x = FioPeer(f, size, qd, block, direct);
        if (!x.ok()) fio_note = std::string(x.status().message());
        else if (keep) fio_gbps.push_back(*x);
      }
    }
    if (mc_dst != nullptr) ::munmap(mc_dst, size);
    RETURN_IF_ERROR(status);
    for (const auto& n : notes) report.AddNote(n);
    auto with_peer = [&](Figure fig, const std::vector<double>& peer, const std::string& note) {
      if (!note.empty()) fig.peer_note = note;
      else if (!peer.empty()) fig.peer = Stats::Of(peer);
      figs.push_back(std::move(fig));
    };
    Figure plain{"checkpoint write vs plain io_uring writer (ceiling)", "GB/s", Stats::Of(gbps),
                 absl::StrCat("io_uring ", direct ? "O_DIRECT" : "buffered", ", qd ", qd, ", ",
                              Human(block), " blocks, fsync")};
    plain.target = ">= 0.9 x plain io_uring";
    plain.peer_is_ceiling = true;
    with_peer(plain, uring_gbps, uring_note);
    if (uring_note.empty()) {
      figs.push_back(RatioFigure("ratio: checkpoint write / plain io_uring writer", Ratios(gbps, uring_gbps),
                                 ">= 0.9"));
    }
    Figure write{"checkpoint write vs fio (ceiling)", "GB/s", Stats::Of(gbps),
                 direct ? "fio O_DIRECT io_uring, same qd/block" : "fio buffered io_uring, same qd/block"};
    write.target = ">= 0.9 x fio";
    write.peer_is_ceiling = true;
    with_peer(write, fio_gbps, fio_note);
    if (fio_note.empty()) {
      figs.push_back(RatioFigure("ratio: checkpoint write / fio", Ratios(gbps, fio_gbps), ">= 0.9"));
    }
    Figure buffered{"checkpoint write vs buffered write()+fsync", "GB/s", Stats::Of(gbps),
                    absl::StrCat("write() loop of ", Human(BufferedChunk(block)), " + fsync")};
    buffered.target = ">= 2 x buffered";
    with_peer(buffered, buf_gbps, buf_note);
    if (full) {
      Figure torch{"checkpoint write vs torch.save", "GB/s", Stats::Of(gbps), "torch.save + fsync"};
      torch.target = ">= 2 x torch.save";
      if (f.no_peers) {
        torch.peer_note = "--no-peers";
        figs.push_back(torch);
      } else {
        auto t = TorchPeer(f, size);
        if (t.ok()) torch.peer = Stats::Of(*t);
        else torch.peer_note = std::string(t.status().message());
        figs.push_back(torch);
      }
      Figure ip{"checkpoint write in place (caller's memory) vs staged", "GB/s", Stats::Of(ip_gbps),
                "staged: snapshot into the arena, then write (the rows above)"};
      ip.peer = Stats::Of(gbps);
      figs.push_back(ip);
    }
    Figure wa{"write amplification (device sectors / logical)", "x", Stats::Of(dev_wa), ""};
    wa.higher_is_better = false;
    wa.target = "<= 1.02 on ext4 (4 GiB)";
    wa.peer_note = meter.device().empty() ? "no local block device" : "whole-device counter";
    figs.push_back(wa);
    report.AddNote(absl::StrFormat("write amplification (median, qd %d, block %s, %s): device %.5f, "
                                   "/proc/self/io %.5f", qd, Human(block), direct ? "direct" : "buffered",
                                   Stats::Of(dev_wa).median, Stats::Of(proc_wa).median));
    Figure pwa{"write amplification (/proc/self/io)", "x", Stats::Of(proc_wa), ""};
    pwa.higher_is_better = false;
    figs.push_back(pwa);
    if (f.async) {
      Figure blk{"caller blocked (--async, snapshot)", "s", Stats::Of(blocked),
                 absl::StrCat("memcpy of the same bytes, ", copy_threads, " threads")};
      blk.higher_is_better = false;
      blk.target = "<= 1.2 x memcpy";
      blk.peer_is_ceiling = true;
      with_peer(blk, mc_s, "");
      figs.push_back(RatioFigure("ratio: caller blocked / memcpy", Ratios(blocked, mc_s), "<= 1.2",
                                 /*higher_is_better=*/false));
      if (full) {
        Figure ipb{"caller blocked (--async, in place: no snapshot)", "s", Stats::Of(ip_blocked),
                   absl::StrCat("memcpy of the same bytes, ", copy_threads, " threads")};
        ipb.higher_is_better = false;
        with_peer(ipb, mc_s, "");
      }
    }
    if (full && !f.no_peers && !f.no_python_peers) {
      if (absl::Status p = PythonPeers(f, size, &report, &figs); !p.ok()) {
        report.AddNote(absl::StrCat("Python peers (bench/python/bench_ckpt_peers.py) not measured: ",
                                    p.message()));
      }
    }
    return figs;
  };

  ASSIGN_OR_RETURN(auto sweep, SweepFromOptions(f.options, {"queue_depth", "block_size", "mode"}));
  if (sweep) {
    RETURN_IF_ERROR(RunSweep(&report, *sweep, [&](const std::string& v) -> absl::StatusOr<std::vector<Figure>> {
      int qd = f.queue_depth;
      uint64_t block = bs;
      bool direct = f.mode == "direct";
      if (sweep->param == "mode") {
        if (v != "direct" && v != "buffered") return absl::InvalidArgumentError("mode values: direct, buffered");
        direct = v == "direct";
      } else {
        ASSIGN_OR_RETURN(int64_t x, SweepInt(*sweep, v));
        if (sweep->param == "queue_depth") qd = static_cast<int>(x);
        else block = static_cast<uint64_t>(x);
        if (block % 4096) return absl::InvalidArgumentError("block sizes must be multiples of 4096");
      }
      return measure(qd, block, direct, /*full=*/false);
    }));
  } else {
    ASSIGN_OR_RETURN(std::vector<Figure> figs, measure(f.queue_depth, bs, f.mode == "direct", true));
    for (auto& fig : figs) report.AddFigure(std::move(fig));
  }
  return report.Finish();
}

BenchRunner Setup(CLI::App* app) {
  auto f = std::make_shared<CkptFlags>();
  AddBenchFlags(app, &f->options);
  app->add_option("--dir", f->dir,
                  "Directory to write checkpoints into (its file system is measured; default: "
                  "--output, else .). --sweep takes queue_depth=..., block_size=... or mode=...");
  app->add_option("--size", f->size, "Checkpoint bytes (suffix K, M, G), split over --files")
      ->capture_default_str();
  CLI::Option* mode = app->add_option("--mode", f->mode, "direct (O_DIRECT, falls back where refused) or buffered")
      ->capture_default_str();
  app->add_option("--queue-depth", f->queue_depth, "Writes in flight per file")->capture_default_str();
  app->add_option("--block-size", f->block_size, "Bytes per write (multiple of 4096; K/M/G)")
      ->capture_default_str();
  app->add_option("--threads", f->threads, "Files snapshotted and written concurrently")
      ->capture_default_str();
  app->add_option("--files", f->files, "Rank files per checkpoint")->capture_default_str();
  app->add_option("--tensors", f->tensors, "Tensors per file")->capture_default_str();
  app->add_flag("--async", f->async, "Return after the snapshot; report the time the caller is blocked");
  app->add_flag("--no-peers", f->no_peers, "Skip every peer (fio, plain io_uring, buffered, torch.save, Python)");
  app->add_flag("--no-python-peers", f->no_python_peers,
                "Skip the multi-process Python peers (DCP, torch.save, safetensors, resharding load)");
  app->add_option("--python-world", f->python_world, "Ranks of the Python peers' run (CPU, gloo)")
      ->capture_default_str();
  app->add_option("--copy-threads", f->copy_threads,
                  "Snapshot copy threads (0: the writer's default, min(8, CPUs)); the memcpy peer uses as many");
  app->add_option("--overlap", f->overlap,
                  "Write while the snapshot is copied: on, off, or auto (the writer's default: on)")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  app->add_option("--target", f->target,
                  "A directory on another file system (e.g. a GlusterFS mount): every figure is "
                  "measured there beside --dir (the local baseline) in the same run, direct and "
                  "buffered (or --mode), sync and async; --sweep takes queue_depth, block_size, mode");
  app->add_option("--python", f->python, "Interpreter for the torch.save peer")->capture_default_str();
  return [f, mode]() {
    f->mode_given = mode->count() > 0;
    return Run(*f);
  };
}

GRIST_REGISTER_BENCH(ckpt, "ckpt",
                     "Checkpoint write GB/s, write amplification and blocked time vs fio, buffered, torch.save",
                     Setup);

}  // namespace
}  // namespace grist::bench
