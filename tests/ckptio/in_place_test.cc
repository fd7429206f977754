// The writer's copy pool and in-place writes (SaveInPlace): the bytes on disk must be identical to
// the staged path's for every layout, and failures must be reported as on the staged path.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"
#include "ckptio/checkpoint.h"
#include "ckptio/internal/copy_pool.h"
#include "ckptio/internal/io_util.h"
#include "ckptio/reader.h"
#include "ckptio/writer.h"
#include "common/env.h"
#include "tests/ckptio/ckpt_test_util.h"
#include "tests/test_util.h"

namespace grist::ckptio {
namespace {

using testing::MakeTensor;
using testing::OwnedTensor;

// Page-aligned memory holding each tensor at a chosen address: tensor i's first byte sits at
// the same offset modulo 4096 as its file offset (`shift` 0: aligned), plus `shift` bytes.
class PlacedTensors {
 public:
  PlacedTensors(const std::vector<OwnedTensor>& ts, const std::vector<uint64_t>& shifts,
                uint64_t data_start_mod) {
    uint64_t file_off = data_start_mod;
    std::vector<uint64_t> at;
    uint64_t cursor = 0;
    for (size_t i = 0; i < ts.size(); ++i) {
      cursor = (cursor + 4095) / 4096 * 4096 + file_off % 4096 + shifts[i];
      at.push_back(cursor);
      cursor += ts[i].bytes.size();
      file_off += ts[i].bytes.size();
    }
    size_ = std::max<uint64_t>(4096, (cursor + 4095) / 4096 * 4096);
    base_ = static_cast<char*>(
        ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    for (size_t i = 0; i < ts.size(); ++i) {
      std::memcpy(base_ + at[i], ts[i].bytes.data(), ts[i].bytes.size());
      refs_.push_back({ts[i].spec, base_ + at[i]});
    }
  }
  ~PlacedTensors() { ::munmap(base_, size_); }
  const std::vector<HostTensor>& refs() const { return refs_; }

 private:
  char* base_ = nullptr;
  uint64_t size_ = 0;
  std::vector<HostTensor> refs_;
};

std::string Slurp(Env* env, const std::string& path) {
  auto s = ReadFileToString(env, path);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : std::string();
}

struct Layout {
  std::string name;
  std::vector<OwnedTensor> tensors;
  std::vector<uint64_t> shifts;
};

std::vector<Layout> Layouts() {
  std::vector<Layout> out;
  {
    Layout l{"aligned", {}, {}};
    l.tensors.push_back(MakeTensor("a", DType::kF32, {256 << 10}, 1));  // 1 MiB
    l.tensors.push_back(MakeTensor("b", DType::kBF16, {64, 4096}, 2));  // 512 KiB
    l.tensors.push_back(MakeTensor("c", DType::kU8, {3 << 20}, 3));
    l.shifts = {0, 0, 0};
    out.push_back(std::move(l));
  }
  {
    Layout l{"unaligned memory", {}, {}};
    l.tensors.push_back(MakeTensor("a", DType::kU8, {1 << 20}, 4));
    l.tensors.push_back(MakeTensor("b", DType::kU8, {(2 << 20) + 17}, 5));
    l.shifts = {1, 3};
    out.push_back(std::move(l));
  }
  {
    // Odd sizes put tensor boundaries mid-block: heads and tails staged, interiors in place;
    // zero-size and 0-d tensors in between; one misaligned tensor staged whole.
    Layout l{"mixed", {}, {}};
    l.tensors.push_back(MakeTensor("empty0", DType::kF32, {0}, 6));
    l.tensors.push_back(MakeTensor("odd", DType::kU8, {(1 << 20) + 333}, 7));
    l.tensors.push_back(MakeTensor("scalar", DType::kI64, {}, 8));
    l.tensors.push_back(MakeTensor("empty1", DType::kBF16, {4, 0}, 9));
    l.tensors.push_back(MakeTensor("mid", DType::kF16, {300001}, 10));
    l.tensors.push_back(MakeTensor("shifted", DType::kU8, {700000}, 11));
    l.tensors.push_back(MakeTensor("small", DType::kU8, {5000}, 12));
    l.tensors.push_back(MakeTensor("tail", DType::kF64, {123457}, 13));
    l.tensors.push_back(MakeTensor("empty2", DType::kU8, {0}, 14));
    l.shifts = {0, 0, 0, 0, 0, 1, 0, 0, 0};
    out.push_back(std::move(l));
  }
  {
    Layout l{"only empty", {}, {}};
    l.tensors.push_back(MakeTensor("e", DType::kF32, {0, 3}, 15));
    l.tensors.push_back(MakeTensor("f", DType::kU8, {0}, 16));
    l.shifts = {0, 0};
    out.push_back(std::move(l));
  }
  return out;
}

// Saves `l` staged and in place with writer options `o`; the files must be byte-identical and load.
void ExpectSameBytes(const Layout& l, WriterOptions o, const std::string& dir, Env* env,
                     uint64_t* in_place_bytes) {
  SCOPED_TRACE(l.name);
  auto w = FileWriter::Create(o);
  ASSERT_TRUE(w.ok());
  std::vector<TensorSpec> specs;
  for (const auto& t : l.tensors) specs.push_back(t.spec);
  auto plan = PlanFile(specs, {{"k", "v"}}, o.checksum_block, 4096);
  ASSERT_TRUE(plan.ok());
  PlacedTensors placed(l.tensors, l.shifts, plan->data_start);
  auto staged = (*w)->Save(dir + "/staged.safetensors", placed.refs(), {{"k", "v"}});
  ASSERT_TRUE(staged.ok()) << staged.status();
  auto rs = (*staged)->Wait();
  ASSERT_TRUE(rs.ok()) << rs.status();
  EXPECT_EQ(rs->in_place_bytes, 0u);
  auto direct = (*w)->SaveInPlace(dir + "/inplace.safetensors", placed.refs(), {{"k", "v"}});
  ASSERT_TRUE(direct.ok()) << direct.status();
  auto ri = (*direct)->Wait();
  ASSERT_TRUE(ri.ok()) << ri.status();
  EXPECT_EQ(ri->data_hash, rs->data_hash);
  EXPECT_EQ(ri->header_hash, rs->header_hash);
  EXPECT_EQ(ri->size, rs->size);
  const std::string a = Slurp(env, dir + "/staged.safetensors");
  const std::string b = Slurp(env, dir + "/inplace.safetensors");
  EXPECT_EQ(a.size(), rs->size);
  EXPECT_TRUE(a == b) << "in-place file differs from the staged one";
  ReadOptions ro;
  ro.env = env;
  auto f = ReadCheckpointFile(dir + "/inplace.safetensors", ro);
  ASSERT_TRUE(f.ok()) << f.status();
  for (size_t i = 0; i < l.tensors.size(); ++i) {
    EXPECT_TRUE((*f)->Bytes((*f)->tensors()[i]) == l.tensors[i].bytes) << l.tensors[i].spec.name;
  }
  *in_place_bytes = ri->in_place_bytes;
  // The data region of the in-place file starts where the plan said (the header pads it).
  EXPECT_EQ(ri->direct ? ri->dio_align : 0, rs->direct ? rs->dio_align : 0);
}

uint64_t MemAlignOf(const std::string& dir) {
  const std::string p = dir + "/probe";
  auto f = internal::OpenForWrite(p, true);
  if (!f.ok()) return 0;
  uint64_t m = f->direct ? f->dio_mem_align : 0;
  ::close(f->fd);
  ::unlink(p.c_str());
  return m;
}

// In-place bytes expected for `l` when the file uses O_DIRECT with offset alignment `align`.
uint64_t ExpectedInPlace(const Layout& l, uint64_t data_start, uint64_t align, uint64_t mem_align,
                         uint64_t min_bytes) {
  uint64_t off = data_start;
  uint64_t total = 0;
  for (size_t i = 0; i < l.tensors.size(); ++i) {
    const uint64_t n = l.tensors[i].bytes.size();
    const uint64_t a = internal::RoundUp(off, align);
    const uint64_t b = internal::RoundDown(off + n, align);
    const bool mem_ok = mem_align <= 1 || l.shifts[i] % mem_align == 0;  // see PlacedTensors
    if (n > 0 && b > a && b - a >= min_bytes && mem_ok) total += b - a;
    off += n;
  }
  return total;
}

TEST(InPlace, BytesOnDiskEqualTheStagedPath) {
  grist::testing::TempDir tmp;
  const uint64_t mem_align = MemAlignOf(tmp.path());
  struct Setting {
    IoMode mode;
    int qd;
    uint64_t block;
    uint64_t min;
  };
  for (const Setting& st :
       {Setting{IoMode::kDirect, 16, 4ull << 20, 4096}, Setting{IoMode::kDirect, 1, 8192, 4096},
        Setting{IoMode::kDirect, 4, 64 << 10, 256 << 10},
        Setting{IoMode::kBuffered, 4, 64 << 10, 4096}}) {
    for (const Layout& l : Layouts()) {
      SCOPED_TRACE(absl::StrCat("qd ", st.qd, " block ", st.block, " min ", st.min,
                                st.mode == IoMode::kDirect ? " direct" : " buffered"));
      WriterOptions o;
      o.mode = st.mode;
      o.queue_depth = st.qd;
      o.block_size = st.block;
      o.in_place_min_bytes = st.min;
      o.copy_threads = 3;
      uint64_t in_place = 0;
      ExpectSameBytes(l, o, tmp.path(), Env::Default(), &in_place);
      std::vector<TensorSpec> specs;
      for (const auto& t : l.tensors) specs.push_back(t.spec);
      auto plan = PlanFile(specs, {{"k", "v"}}, o.checksum_block, 4096);
      ASSERT_TRUE(plan.ok());
      if (st.mode == IoMode::kBuffered) {
        // No alignment rule: every tensor of at least in_place_min_bytes comes from the caller.
        EXPECT_EQ(in_place, ExpectedInPlace(l, plan->data_start, 1, 1, st.min));
      } else if (mem_align != 0) {
        EXPECT_EQ(in_place, ExpectedInPlace(l, plan->data_start, 4096, mem_align, st.min));
      }
    }
  }
  if (mem_align == 0) {
    ASSERT_FALSE(testing::ProbeODirectWrite(tmp.path()))
        << "the file system here takes O_DIRECT writes, yet OpenForWrite found no direct mode";
    GTEST_SKIP() << "O_DIRECT not supported here: only the buffered in-place path ran";
  }
}

TEST(InPlace, ThroughAnEnvTheBytesAreTheSame) {
  MemEnv env;
  ASSERT_TRUE(env.CreateDirs("/m").ok());
  WriterOptions o;
  o.env = &env;
  o.block_size = 64 << 10;
  for (const Layout& l : Layouts()) {
    uint64_t in_place = 0;
    ExpectSameBytes(l, o, "/m", &env, &in_place);
  }
}

TEST(InPlace, SaveCheckpointWithoutSnapshotPublishes) {
  grist::testing::TempDir tmp;
  auto w = FileWriter::Create({});
  ASSERT_TRUE(w.ok());
  const Layout l = Layouts()[2];
  PlacedTensors placed(l.tensors, l.shifts, 0);
  SaveOptions so;
  so.snapshot = false;
  auto h = SaveCheckpoint(w->get(), tmp.Join("step-7"), placed.refs(), {}, so);
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_TRUE((*h)->Wait().ok());
  auto ck = LoadCheckpoint(tmp.Join("step-7"), {});
  ASSERT_TRUE(ck.ok()) << ck.status();
  EXPECT_EQ(ck->manifest.step, 7);
  for (size_t i = 0; i < l.tensors.size(); ++i) {
    EXPECT_TRUE(ck->files[0]->Bytes(ck->files[0]->tensors()[i]) == l.tensors[i].bytes);
  }
}

TEST(InPlace, WriteAndFsyncFailuresAreReportedAndTheFileRemoved) {
  grist::testing::TempDir tmp;
  const Layout l = Layouts()[2];
  PlacedTensors placed(l.tensors, l.shifts, 0);
  for (int at : {1, 2, 3}) {
    WriterOptions o;
    o.block_size = 64 << 10;
    o.in_place_min_bytes = 4096;
    o.faults.fail_write_at = at;
    o.faults.write_errno = ENOSPC;
    auto w = FileWriter::Create(o);
    ASSERT_TRUE(w.ok());
    auto p = (*w)->SaveInPlace(tmp.Join("f.safetensors"), placed.refs(), {});
    ASSERT_TRUE(p.ok());
    auto r = (*p)->Wait();
    EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted)
        << "write " << at << ": " << r.status();
    EXPECT_FALSE(Env::Default()->FileExists(tmp.Join("f.safetensors")));
  }
  WriterOptions o;
  o.faults.fail_fsync = true;
  auto w = FileWriter::Create(o);
  ASSERT_TRUE(w.ok());
  auto p = (*w)->SaveInPlace(tmp.Join("g.safetensors"), placed.refs(), {});
  ASSERT_TRUE(p.ok());
  auto r = (*p)->Wait();
  EXPECT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("fsync"), std::string::npos) << r.status();
  EXPECT_FALSE(Env::Default()->FileExists(tmp.Join("g.safetensors")));
}

TEST(InPlace, FaultInjectionEnvFailuresLeaveNoFile) {
  grist::testing::TempDir tmp;
  FaultInjectionEnv fenv(Env::Default());
  WriterOptions o;
  o.env = &fenv;
  o.block_size = 64 << 10;
  auto w = FileWriter::Create(o);
  ASSERT_TRUE(w.ok());
  const Layout l = Layouts()[2];
  PlacedTensors placed(l.tensors, l.shifts, 0);
  fenv.FailNthAppend(4);
  auto p = (*w)->SaveInPlace(tmp.Join("f.safetensors"), placed.refs(), {});
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE((*p)->Wait().ok());
  EXPECT_FALSE(Env::Default()->FileExists(tmp.Join("f.safetensors")));
  fenv.SetDiskSpace(100000);
  auto q = (*w)->SaveInPlace(tmp.Join("g.safetensors"), placed.refs(), {});
  ASSERT_TRUE(q.ok());
  EXPECT_EQ((*q)->Wait().status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(InPlace, WriteIsTheSynchronousInPlaceSave) {
  grist::testing::TempDir tmp;
  auto w = FileWriter::Create({});
  ASSERT_TRUE(w.ok());
  const Layout l = Layouts()[0];
  PlacedTensors placed(l.tensors, l.shifts, 0);
  auto r = (*w)->Write(tmp.Join("w.safetensors"), placed.refs(), {{"k", "v"}});
  ASSERT_TRUE(r.ok()) << r.status();
  auto s = (*w)->Save(tmp.Join("s.safetensors"), placed.refs(), {{"k", "v"}});
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)->Wait().ok());
  EXPECT_TRUE(Slurp(Env::Default(), tmp.Join("w.safetensors")) ==
              Slurp(Env::Default(), tmp.Join("s.safetensors")));
  if (r->direct) {
    EXPECT_GT(r->in_place_bytes, 0u);
  }
}

TEST(InPlace, MissingDataIsAnError) {
  grist::testing::TempDir tmp;
  auto w = FileWriter::Create({});
  ASSERT_TRUE(w.ok());
  std::vector<HostTensor> ts = {{{"x", DType::kU8, {10}}, nullptr}};
  auto p = (*w)->SaveInPlace(tmp.Join("x.safetensors"), ts, {});
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(Env::Default()->FileExists(tmp.Join("x.safetensors")));
}

// ---- The copy pool ----

TEST(CopyPool, CopiesEverythingAndReportsTheContiguousPrefixInOrder) {
  for (int threads : {1, 2, 5}) {
    internal::CopyPool pool(threads);
    EXPECT_EQ(pool.threads(), threads);
    for (int round = 0; round < 3; ++round) {  // the pool is reused
      const auto src = MakeTensor("s", DType::kU8, {(4 << 20) + 12345}, 20 + round);
      std::string dst(src.bytes.size(), '\0');
      std::vector<internal::CopyPiece> pieces;
      // Uneven pieces, one empty, each marking its end.
      uint64_t off = 0;
      for (uint64_t len : {100000ull, 0ull, 1ull << 20, 7ull, 1ull << 21}) {
        pieces.push_back({dst.data() + off, src.bytes.data() + off, len, off + len});
        off += len;
      }
      pieces.push_back(
          {dst.data() + off, src.bytes.data() + off, src.bytes.size() - off, src.bytes.size()});
      std::mutex mu;
      std::vector<uint64_t> marks;
      pool.Copy(pieces, 64 << 10, [&](uint64_t upto) {
        std::lock_guard<std::mutex> l(mu);
        // Everything below the mark has landed when it is reported.
        EXPECT_EQ(std::memcmp(dst.data(), src.bytes.data(), upto), 0) << upto;
        marks.push_back(upto);
      });
      EXPECT_TRUE(dst == src.bytes);
      ASSERT_FALSE(marks.empty());
      EXPECT_TRUE(std::is_sorted(marks.begin(), marks.end()));
      EXPECT_EQ(std::adjacent_find(marks.begin(), marks.end()), marks.end()) << "a mark repeated";
      EXPECT_EQ(marks.back(), src.bytes.size());
    }
    pool.Copy({}, 1 << 20, nullptr);  // nothing to do
  }
}

TEST(CopyPool, WriterSaveUsesTheConfiguredThreads) {
  WriterOptions o;
  o.copy_threads = 3;
  auto w = FileWriter::Create(o);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ((*w)->copy_threads(), 3);
  auto d = FileWriter::Create({});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ((*d)->copy_threads(), DefaultCopyThreads());
}

// The default is this process's CPUs shared by the node's ranks (LOCAL_WORLD_SIZE), in [1, 16].
TEST(CopyPool, DefaultThreadsAreTheRanksShareOfTheCpus) {
  cpu_set_t set;
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  const int cpus = CPU_COUNT(&set);
  const char* saved = std::getenv("LOCAL_WORLD_SIZE");
  const std::string restore = saved ? saved : "";
  ::unsetenv("LOCAL_WORLD_SIZE");
  EXPECT_EQ(DefaultCopyThreads(), std::clamp(cpus, 1, 16));
  ::setenv("LOCAL_WORLD_SIZE", "2", 1);
  EXPECT_EQ(DefaultCopyThreads(), std::clamp(cpus / 2, 1, 16));
  ::setenv("LOCAL_WORLD_SIZE", "100000", 1);
  EXPECT_EQ(DefaultCopyThreads(), 1);
  ::setenv("LOCAL_WORLD_SIZE", "garbage", 1);  // not a positive count: ignored
  EXPECT_EQ(DefaultCopyThreads(), std::clamp(cpus, 1, 16));
  if (saved) ::setenv("LOCAL_WORLD_SIZE", restore.c_str(), 1);
  else ::unsetenv("LOCAL_WORLD_SIZE");
}

TEST(CopyPool, CopyInWithManySmallTensorsRoundTrips) {
  grist::testing::TempDir tmp;
  WriterOptions o;
  o.copy_threads = 4;
  o.block_size = 64 << 10;
  o.overlap = Overlap::kOn;
  auto w = FileWriter::Create(o);
  ASSERT_TRUE(w.ok());
  std::vector<OwnedTensor> ts;
  for (int i = 0; i < 300; ++i) {
    ts.push_back(MakeTensor(absl::StrCat("t", i), DType::kU8, {(i * 7919) % 20000}, i));
  }
  auto p = (*w)->Save(tmp.Join("many.safetensors"), testing::Refs(ts), {});
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE((*p)->Wait().ok());
  auto f = ReadCheckpointFile(tmp.Join("many.safetensors"), {});
  ASSERT_TRUE(f.ok()) << f.status();
  for (size_t i = 0; i < ts.size(); ++i)
    EXPECT_TRUE((*f)->Bytes((*f)->tensors()[i]) == ts[i].bytes);
}

}  // namespace
}  // namespace grist::ckptio
