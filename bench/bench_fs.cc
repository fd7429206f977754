// `grist bench fs`: what the file system under a directory gives a streaming stage. Sequential
// write (buffered, then one fsync) and sequential read (page cache warm, as a stage re-reading its
// input sees it), each beside `dd` doing the same transfer in the same run. The pipeline lab
// (docs/labs/week13-pipeline.md) uses it to tell a slow stage from a slow file system. With
// --target DIR (e.g. a GlusterFS mount of scripts/gluster.sh) it measures that file system beside
// --dir (the local ext4) in the same run instead: the same streaming figures, the small-file
// metadata rates (create, stat, open, negative lookup, unlink; stat and lookup twice), the loader's start-up and `grist
// verify` on a copy of --release there; on GlusterFS with its metadata caches off and on.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/harness.h"
#include "bench/registry.h"
#include "bench/target_fs.h"
#include "common/env.h"
#include "common/status_macros.h"
#include "common/sysinfo.h"
#include "loader/loader.h"
#include "release/release.h"

namespace grist::bench {
namespace {

struct FsFlags {
  Options options;
  std::string dir;
  int64_t size_mib = 1024;
  int64_t block_kib = 1024;
  std::string target;                  // --target: measured beside `dir`
  int files = 2000;                    // small files per metadata round
  int64_t file_bytes = 4096;
  std::string release;                 // copied to both sides for the loader / verify figures
  std::string metadata_cache = "off,on";
};

absl::StatusOr<double> WriteOnce(const std::string& path, int64_t bytes, int64_t block,
                                 std::vector<char>* buf) {
  Stopwatch sw;
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError(errno, absl::StrCat("open ", path));
  for (int64_t done = 0; done < bytes;) {
    size_t n = static_cast<size_t>(std::min(block, bytes - done));
    ssize_t w = ::write(fd, buf->data(), n);
    if (w <= 0) {
      int e = errno;
      ::close(fd);
      return ErrnoError(w < 0 ? e : ENOSPC, absl::StrCat("write ", path));
    }
    done += w;
  }
  if (::fsync(fd) != 0) {
    int e = errno;
    ::close(fd);
    return ErrnoError(e, absl::StrCat("fsync ", path));
  }
  ::close(fd);
  return bytes / 1e6 / sw.Seconds();
}

absl::StatusOr<double> ReadOnce(const std::string& path, int64_t block, std::vector<char>* buf) {
  Stopwatch sw;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, absl::StrCat("open ", path));
  int64_t total = 0;
  for (;;) {
    ssize_t r = ::read(fd, buf->data(), static_cast<size_t>(block));
    if (r < 0) {
      int e = errno;
      ::close(fd);
      return ErrnoError(e, absl::StrCat("read ", path));
    }
    if (r == 0) break;
    total += r;
  }
  ::close(fd);
  return total / 1e6 / sw.Seconds();
}

// dd's own timing ("N bytes (...) copied, 0.0321 s, 2.1 GB/s"), which leaves out starting the
// process, as grist's side does.
absl::StatusOr<double> DdOnce(const std::string& args, int64_t bytes) {
  ASSIGN_OR_RETURN(CommandResult r, RunCommand(absl::StrCat("LC_ALL=C dd ", args), true));
  if (r.exit_code != 0) {
    return absl::InternalError(absl::StrCat("dd ", args, " failed: ", r.output));
  }
  auto at = r.output.rfind("copied, ");
  double seconds = 0;
  if (at == std::string::npos ||
      std::sscanf(r.output.c_str() + at + 8, "%lf", &seconds) != 1 || seconds <= 0) {
    return absl::InternalError(absl::StrCat("dd printed no timing: ", r.output));
  }
  return bytes / 1e6 / seconds;
}

absl::StatusOr<std::vector<Figure>> Measure(const FsFlags& f, int64_t block) {
  const Options& o = f.options;
  int64_t bytes = (o.quick ? std::min<int64_t>(f.size_mib, 64) : f.size_mib) << 20;
  int64_t count = (bytes + block - 1) / block;
  bytes = count * block;
  std::string ours_path = JoinPath(f.dir, absl::StrCat(".grist-bench-fs.", ::getpid()));
  std::string dd_path = ours_path + ".dd";
  std::vector<char> buf(static_cast<size_t>(block), 'g');
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<char>('a' + i % 26);
  bool have_dd = HaveProgram("dd");
  std::vector<Figure> figs;
  auto cleanup = [&] {
    ::unlink(ours_path.c_str());
    ::unlink(dd_path.c_str());
  };
  auto ours_w = Repeat(o, [&] { return WriteOnce(ours_path, bytes, block, &buf); });
  if (!ours_w.ok()) {
    cleanup();
    return ours_w.status();
  }
  Figure w{"sequential write + fsync", "MB/s", *ours_w, "dd conv=fsync", std::nullopt};
  w.peer_is_ceiling = false;
  std::string bs = absl::StrCat("bs=", block);
  if (have_dd) {
    auto dd = Repeat(o, [&] {
      return DdOnce(absl::StrCat("if=/dev/zero of=", dd_path, " ", bs, " count=", count,
                                 " conv=fsync"),
                    bytes);
    });
    if (dd.ok()) w.peer = *dd;
    else w.peer_note = std::string(dd.status().message());
  } else {
    w.peer_note = "dd not found on PATH";
  }
  figs.push_back(std::move(w));
  auto ours_r = Repeat(o, [&] { return ReadOnce(ours_path, block, &buf); });
  if (!ours_r.ok()) {
    cleanup();
    return ours_r.status();
  }
  Figure r{"sequential read (page cache warm)", "MB/s", *ours_r, "dd of=/dev/null", std::nullopt};
  if (have_dd) {
    auto dd = Repeat(o, [&] {
      return DdOnce(absl::StrCat("if=", ours_path, " of=/dev/null ", bs), bytes);
    });
    if (dd.ok()) r.peer = *dd;
    else r.peer_note = std::string(dd.status().message());
  } else {
    r.peer_note = "dd not found on PATH";
  }
  figs.push_back(std::move(r));
  cleanup();
  return figs;
}

// --target: the same transfers and metadata operations on the target and on --dir (the local
// baseline) in turn, repetition by repetition; on GlusterFS once per metadata-cache setting.
struct MetaRates {
  std::vector<double> create, stat, restat, open, missing, remissing, unlink;
};

// One round over `n` small files in a fresh folder: create+write+close, stat, stat again (what a
// metadata cache can answer), open+close, stat of names that do not exist (a negative lookup each),
// the same missing names again (what a negative lookup cache can answer), unlink; the rate of
// each, in operations/s.
absl::Status MetadataRound(const std::string& dir, int n, int64_t bytes, MetaRates* out) {
  const std::string d = JoinPath(dir, absl::StrCat(".grist-bench-meta-", ::getpid()));
  (void)Env::Default()->RemoveAll(d);
  RETURN_IF_ERROR(Env::Default()->CreateDirs(d));
  std::vector<char> buf(static_cast<size_t>(bytes), 'm');
  std::vector<std::string> names(n), missing(n);
  for (int i = 0; i < n; ++i) {
    names[i] = JoinPath(d, absl::StrFormat("f%06d", i));
    missing[i] = JoinPath(d, absl::StrFormat("absent%06d", i));
  }
  auto fail = [&](const std::string& what) {
    absl::Status s = ErrnoError(errno, what);
    (void)Env::Default()->RemoveAll(d);
    return s;
  };
  Stopwatch c;
  for (const auto& p : names) {
    int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return fail(absl::StrCat("create ", p));
    if (::write(fd, buf.data(), buf.size()) != static_cast<ssize_t>(buf.size())) {
      ::close(fd);
      return fail(absl::StrCat("write ", p));
    }
    ::close(fd);
  }
  out->create.push_back(n / c.Seconds());
  struct stat st;
  Stopwatch s;
  for (const auto& p : names) {
    if (::stat(p.c_str(), &st) != 0) return fail(absl::StrCat("stat ", p));
  }
  out->stat.push_back(n / s.Seconds());
  Stopwatch s2;
  for (const auto& p : names) {
    if (::stat(p.c_str(), &st) != 0) return fail(absl::StrCat("stat ", p));
  }
  out->restat.push_back(n / s2.Seconds());
  Stopwatch o;
  for (const auto& p : names) {
    int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return fail(absl::StrCat("open ", p));
    ::close(fd);
  }
  out->open.push_back(n / o.Seconds());
  Stopwatch m;
  for (const auto& p : missing) {
    if (::stat(p.c_str(), &st) == 0) return fail(absl::StrCat(p, " exists"));
  }
  out->missing.push_back(n / m.Seconds());
  Stopwatch m2;
  for (const auto& p : missing) {
    if (::stat(p.c_str(), &st) == 0) return fail(absl::StrCat(p, " exists"));
  }
  out->remissing.push_back(n / m2.Seconds());
  Stopwatch u;
  for (const auto& p : names) {
    if (::unlink(p.c_str()) != 0) return fail(absl::StrCat("unlink ", p));
  }
  out->unlink.push_back(n / u.Seconds());
  return Env::Default()->RemoveAll(d);
}

// The loader's start-up on a release: Open (manifest, index files, mmap) and the first batch.
absl::StatusOr<double> LoaderStartup(const std::string& release) {
  Stopwatch sw;
  loader::LoaderOptions lo;
  lo.path = release;
  lo.micro_batch_size = 4;
  lo.global_batch_size = 4;
  lo.num_workers = 1;
  lo.prefetch = 1;
  ASSIGN_OR_RETURN(std::unique_ptr<loader::Loader> l, loader::Loader::Open(lo));
  ASSIGN_OR_RETURN(auto batch, l->Next());
  (void)batch;
  return sw.Seconds();
}

absl::StatusOr<double> VerifyTime(const std::string& release) {
  Stopwatch sw;
  ASSIGN_OR_RETURN(release::VerifyReport r, release::VerifyRelease(Env::Default(), release));
  if (!r.ok()) {
    return absl::DataLossError(absl::StrCat("grist verify ", release, ": ", r.problems.front()));
  }
  return sw.Seconds();
}

absl::Status RunTarget(FsFlags& f) {
  Env* env = Env::Default();
  RETURN_IF_ERROR(CheckOutputDir(env, f.target));
  ASSIGN_OR_RETURN(TargetFs target, DescribeTargetFs(f.target));
  ASSIGN_OR_RETURN(TargetFs base, DescribeTargetFs(f.dir));
  f.options.target_dir = f.target;
  const Options& o = f.options;
  Report report("fs", o);
  report.SetParam("target", absl::StrCat(f.target, ": ", target.Describe()));
  report.SetParam("baseline (peer column)", absl::StrCat(f.dir, ": ", base.Describe()));
  const int64_t size = o.quick ? std::min<int64_t>(f.size_mib, 64) : f.size_mib;
  const int files = o.quick ? std::min(f.files, 500) : f.files;
  report.SetParam("file size", absl::StrCat(size, " MiB, block ", f.block_kib, " KiB"));
  report.SetParam("small files", absl::StrCat(files, " x ", f.file_bytes, " B"));
  const std::string peer = absl::StrCat("baseline ", base.fs_type, ", same run");

  // Streaming: the write+fsync and warm read of Measure's own side, on both.
  {
    std::vector<double> tw, bw, tr, br;
    std::vector<char> buf(static_cast<size_t>(f.block_kib << 10));
    for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<char>('a' + i % 26);
    const int64_t bytes = size << 20;
    for (int r = 0; r < o.warmup + o.repetitions; ++r) {
      for (int side = 0; side < 2; ++side) {
        const std::string p = JoinPath(side == 0 ? f.target : f.dir, absl::StrCat(".grist-bench-fs.", ::getpid()));
        auto w = WriteOnce(p, bytes, f.block_kib << 10, &buf);
        auto rd = w.ok() ? ReadOnce(p, f.block_kib << 10, &buf) : w;
        ::unlink(p.c_str());
        RETURN_IF_ERROR(rd.status());
        if (r < o.warmup) continue;
        (side == 0 ? tw : bw).push_back(*w);
        (side == 0 ? tr : br).push_back(*rd);
      }
    }
    report.AddFigure({"sequential write + fsync", "MB/s", Stats::Of(tw), peer, Stats::Of(bw)});
    report.AddFigure({"sequential read (page cache warm)", "MB/s", Stats::Of(tr), peer, Stats::Of(br)});
  }

  // The release, copied once to each side (cp -a), for the loader and verify figures.
  std::string rel[2];
  auto drop_releases = [&] {
    for (const auto& r : rel) {
      if (!r.empty()) (void)env->RemoveAll(r);
    }
  };
  if (!f.release.empty()) {
    for (int side = 0; side < 2; ++side) {
      rel[side] = JoinPath(side == 0 ? f.target : f.dir, absl::StrCat(".grist-bench-fs-release-", ::getpid()));
      (void)env->RemoveAll(rel[side]);
      ASSIGN_OR_RETURN(CommandResult cp, RunCommand(absl::StrCat("cp -a '", f.release, "' '", rel[side], "'"), true));
      if (cp.exit_code != 0) {
        drop_releases();
        return absl::InternalError(absl::StrCat("copying ", f.release, ": ", cp.output));
      }
    }
    report.SetParam("release", f.release);
  } else {
    report.AddNote("no --release: the loader start-up and verify figures were not measured");
  }

  // Metadata settings: on GlusterFS each of --metadata-cache, else the mount as it is.
  std::vector<std::string> settings = {""};
  std::unique_ptr<GlusterMetadataCache> cache;
  if (!target.gluster_volume.empty() && f.metadata_cache != "keep") {
    settings = absl::StrSplit(f.metadata_cache, ',', absl::SkipEmpty());
    cache = std::make_unique<GlusterMetadataCache>(target.gluster_volume);
  }
  MetaRates base_rates;
  std::vector<double> base_loader, base_verify;
  absl::Status status;
  for (const std::string& setting : settings) {
    if (!setting.empty() && setting != "on" && setting != "off") {
      status = FlagError("--metadata-cache takes off, on, off,on or keep");
      break;
    }
    if (cache) {
      status = cache->Set(setting == "on", target.mount_point);
      if (!status.ok()) break;
    }
    const std::string tag = setting.empty() ? "" : absl::StrCat(" (metadata cache ", setting, ")");
    MetaRates t;
    std::vector<double> t_loader, t_verify;
    const bool first = &setting == &settings.front();
    for (int r = 0; r < o.warmup + o.repetitions && status.ok(); ++r) {
      const bool keep = r >= o.warmup;
      MetaRates scratch;
      status = MetadataRound(f.target, files, f.file_bytes, keep ? &t : &scratch);
      if (status.ok() && first) status = MetadataRound(f.dir, files, f.file_bytes, keep ? &base_rates : &scratch);
      if (!status.ok() || f.release.empty()) continue;
      for (int side = 0; side < (first ? 2 : 1) && status.ok(); ++side) {
        auto l = LoaderStartup(rel[side]);
        auto v = l.ok() ? VerifyTime(rel[side]) : l;
        if (!v.ok()) {
          status = v.status();
          break;
        }
        if (!keep) continue;
        (side == 0 ? t_loader : base_loader).push_back(*l);
        (side == 0 ? t_verify : base_verify).push_back(*v);
      }
    }
    if (!status.ok()) break;
    auto rate = [&](const std::string& what, const std::vector<double>& ours, const std::vector<double>& theirs) {
      report.AddFigure({absl::StrCat(what, tag), "ops/s", Stats::Of(ours), peer, Stats::Of(theirs)});
    };
    rate(absl::StrCat("create+write+close ", f.file_bytes, " B files"), t.create, base_rates.create);
    rate("stat", t.stat, base_rates.stat);
    rate("stat, second pass", t.restat, base_rates.restat);
    rate("open+close", t.open, base_rates.open);
    rate("stat of a missing name (negative lookup)", t.missing, base_rates.missing);
    rate("stat of a missing name, second pass", t.remissing, base_rates.remissing);
    rate("unlink", t.unlink, base_rates.unlink);
    if (!f.release.empty()) {
      Figure lf{absl::StrCat("loader start-up: Open + first batch", tag), "s", Stats::Of(t_loader), peer,
                Stats::Of(base_loader)};
      lf.higher_is_better = false;
      report.AddFigure(lf);
      Figure vf{absl::StrCat("grist verify of the release", tag), "s", Stats::Of(t_verify), peer,
                Stats::Of(base_verify)};
      vf.higher_is_better = false;
      report.AddFigure(vf);
    }
  }
  if (cache) {
    absl::Status r = cache->Restore();
    if (status.ok()) status = r;
    report.AddNote(absl::StrCat(
        "metadata cache on = ", absl::StrJoin(GlusterMetadataCache::Keys(), ", "),
        " set on (timeouts 600 s); off = the caches off; the volume's settings are restored after."));
  }
  drop_releases();
  RETURN_IF_ERROR(status);
  report.AddNote(
      "Peer column: the baseline directory (--dir) measured in the same run, interleaved repetition "
      "by repetition. FUSE adds a user-space round trip to every operation the kernel does not "
      "answer from its own caches (GlusterFS mounts with 1 s attribute and entry timeouts).");
  return report.Finish();
}

BenchRunner Setup(CLI::App* app) {
  auto f = std::make_shared<FsFlags>();
  AddBenchFlags(app, &f->options);
  SweepsItself(app, {"block_size"});
  app->add_option("--dir", f->dir, "Directory on the file system to measure (default: --output, else .)");
  app->add_option("--size-mib", f->size_mib, "File size in MiB (--quick: at most 64)")
      ->check(CLI::PositiveNumber);
  app->add_option("--block-kib", f->block_kib, "Block size of each read/write in KiB")
      ->check(CLI::PositiveNumber);
  app->add_option("--target", f->target,
                  "Directory on the file system under test (e.g. a GlusterFS mount): measured beside "
                  "--dir, the local baseline, in the same run");
  app->add_option("--files", f->files, "--target: small files per metadata round (--quick: at most 500)")
      ->check(CLI::PositiveNumber);
  app->add_option("--file-bytes", f->file_bytes, "--target: bytes written to each small file")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--release", f->release,
                  "--target: a release folder, copied to both sides, for the loader start-up and "
                  "`grist verify` figures");
  app->add_option("--metadata-cache", f->metadata_cache,
                  "--target on GlusterFS: metadata cache settings to measure in turn (off, on, off,on) "
                  "or keep (leave the volume as it is)")
      ->capture_default_str();
  return [f]() -> absl::Status {
    if (f->dir.empty()) f->dir = f->options.output_dir.empty() ? "." : f->options.output_dir;
    RETURN_IF_ERROR(CheckOutputDir(Env::Default(), f->dir));
    if (!f->target.empty()) return RunTarget(*f);
    f->options.target_dir = f->dir;
    ASSIGN_OR_RETURN(auto sweep, SweepFromOptions(f->options, {"block_size"}));
    Report report("fs", f->options);
    int64_t size = f->options.quick ? std::min<int64_t>(f->size_mib, 64) : f->size_mib;
    report.SetParam("file size", absl::StrCat(size, " MiB"));
    report.SetParam("directory", f->dir);
    if (sweep) {
      RETURN_IF_ERROR(RunSweep(&report, *sweep, [&](const std::string& v) -> absl::StatusOr<std::vector<Figure>> {
        ASSIGN_OR_RETURN(int64_t block, SweepInt(*sweep, v));
        return Measure(*f, block);
      }));
    } else {
      report.SetParam("block size", absl::StrCat(f->block_kib, " KiB"));
      ASSIGN_OR_RETURN(std::vector<Figure> figs, Measure(*f, f->block_kib << 10));
      for (auto& fig : figs) report.AddFigure(std::move(fig));
    }
    report.AddNote(
        "Both sides move the same bytes in the same block size; a ratio near 1 means the file "
        "system, not grist's I/O path, sets the pace.");
    return report.Finish();
  };
}

GRIST_REGISTER_BENCH(fs, "fs",
                     "File system under a directory: sequential write+fsync and read against dd",
                     Setup);

}  // namespace
}  // namespace grist::bench
