// `grist bench fs`: what the file system under a directory gives a streaming stage. Sequential
// write (buffered, then one fsync) and sequential read (page cache warm, as a stage re-reading its
// input sees it), each beside `dd` doing the same transfer in the same run. The pipeline lab
// (docs/labs/week13-pipeline.md) uses it to tell a slow stage from a slow file system.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/harness.h"
#include "bench/registry.h"
#include "common/env.h"
#include "common/status_macros.h"
#include "common/sysinfo.h"

namespace grist::bench {
namespace {

struct FsFlags {
  Options options;
  std::string dir;
  int64_t size_mib = 1024;
  int64_t block_kib = 1024;
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

BenchRunner Setup(CLI::App* app) {
  auto f = std::make_shared<FsFlags>();
  AddBenchFlags(app, &f->options);
  app->add_option("--dir", f->dir, "Directory on the file system to measure (default: --output, else .)");
  app->add_option("--size-mib", f->size_mib, "File size in MiB (--quick: at most 64)")
      ->check(CLI::PositiveNumber);
  app->add_option("--block-kib", f->block_kib, "Block size of each read/write in KiB")
      ->check(CLI::PositiveNumber);
  return [f]() -> absl::Status {
    if (f->dir.empty()) f->dir = f->options.output_dir.empty() ? "." : f->options.output_dir;
    RETURN_IF_ERROR(CheckOutputDir(Env::Default(), f->dir));
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
