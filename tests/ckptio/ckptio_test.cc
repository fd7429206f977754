#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ckptio/checkpoint.h"
#include "ckptio/checkpoint_format.h"
#include "ckptio/reader.h"
#include "ckptio/safetensors.h"
#include "ckptio/write_amp.h"
#include "ckptio/writer.h"
#include "common/env.h"
#include "tests/ckptio/ckpt_test_util.h"
#include "tests/test_util.h"

namespace grist::ckptio {
namespace {

using testing::MakeTensor;
using testing::OwnedTensor;
using testing::Refs;
using testing::StepState;

std::unique_ptr<FileWriter> NewWriter(WriterOptions o = {}) {
  auto w = FileWriter::Create(o);
  EXPECT_TRUE(w.ok()) << w.status();
  return std::move(*w);
}

absl::Status SaveSync(FileWriter* w, const std::string& dir, const std::vector<OwnedTensor>& ts,
                      SaveOptions so = {}, Metadata file_meta = {}) {
  auto h = SaveCheckpoint(w, dir, Refs(ts), std::move(file_meta), so);
  if (!h.ok()) return h.status();
  return (*h)->Wait();
}

void ExpectLoaded(const std::string& dir, const std::vector<OwnedTensor>& ts, ReadOptions ro = {}) {
  auto ck = LoadCheckpoint(dir, ro);
  ASSERT_TRUE(ck.ok()) << ck.status();
  ASSERT_EQ(ck->files.size(), 1u);
  const LoadedFile& f = *ck->files[0];
  ASSERT_EQ(f.tensors().size(), ts.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    const TensorInfo& t = f.tensors()[i];
    EXPECT_EQ(t.name, ts[i].spec.name);
    EXPECT_EQ(t.dtype, ts[i].spec.dtype);
    EXPECT_EQ(t.shape, ts[i].spec.shape);
    EXPECT_TRUE(f.Bytes(t) == ts[i].bytes) << t.name;
  }
}

std::string ReadAll(const std::string& path) {
  auto s = ReadFileToString(Env::Default(), path);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : std::string();
}

void WriteAll(const std::string& path, const std::string& data) {
  auto f = Env::Default()->NewWritableFile(path);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE((*f)->Append(data).ok());
  ASSERT_TRUE((*f)->Close().ok());
}

TEST(Safetensors, DTypeNamesAndSizesFollowTheSpec) {
  const std::pair<const char*, size_t> want[] = {
      {"BOOL", 1}, {"U8", 1}, {"I8", 1}, {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2}, {"U16", 2},
      {"F16", 2}, {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4}, {"I64", 8}, {"U64", 8}, {"F64", 8}};
  for (int i = 0; i < kNumDTypes; ++i) {
    DType d = static_cast<DType>(i);
    EXPECT_EQ(DTypeName(d), want[i].first);
    EXPECT_EQ(DTypeSize(d), want[i].second);
    EXPECT_EQ(DTypeFromName(want[i].first), d);
  }
  EXPECT_FALSE(DTypeFromName("F128").has_value());
}

TEST(Safetensors, PlanRejectsBadInput) {
  EXPECT_FALSE(PlanFile({{"a", DType::kF32, {-1}}}, {}, 1 << 20, 4096).ok());
  EXPECT_FALSE(PlanFile({{"a", DType::kF32, {1}}, {"a", DType::kF32, {1}}}, {}, 1 << 20, 4096).ok());
  EXPECT_FALSE(PlanFile({{"", DType::kF32, {1}}}, {}, 1 << 20, 4096).ok());
  EXPECT_FALSE(PlanFile({{"__metadata__", DType::kF32, {1}}}, {}, 1 << 20, 4096).ok());
  EXPECT_FALSE(PlanFile({{"a", DType::kF64, {1ll << 40, 1ll << 40}}}, {}, 1 << 20, 4096).ok());
  EXPECT_FALSE(PlanFile({}, {{"grist.x", "1"}}, 1 << 20, 4096).ok());
  auto ok = PlanFile({{"a", DType::kF32, {2, 3}}, {"b", DType::kI8, {}}}, {{"k", "v"}}, 16, 4096);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->data_start, 4096u);
  EXPECT_EQ(ok->data_len, 25u);
  EXPECT_EQ(ok->file_size, 4121u);
  EXPECT_EQ(ok->tensors[1].begin, 24u);
  EXPECT_EQ(ok->num_blocks(), 2u);
}

class RoundTrip : public ::testing::TestWithParam<std::tuple<int, uint64_t, IoMode>> {};

TEST_P(RoundTrip, EveryDTypeAndShape) {
  grist::testing::TempDir tmp;
  WriterOptions o;
  o.queue_depth = std::get<0>(GetParam());
  o.block_size = std::get<1>(GetParam());
  o.mode = std::get<2>(GetParam());
  o.checksum_block = 64 << 10;
  o.overlap = o.queue_depth % 2 ? Overlap::kOff : Overlap::kOn;
  auto w = NewWriter(o);
  std::vector<OwnedTensor> ts;
  const std::vector<std::vector<int64_t>> shapes = {{}, {0}, {3, 0, 2}, {5}, {7, 3}, {2, 3, 4, 5}};
  for (int d = 0; d < kNumDTypes; ++d) {
    for (size_t s = 0; s < shapes.size(); ++s) {
      ts.push_back(MakeTensor(absl::StrCat("t", d, "_", s), static_cast<DType>(d),
                              shapes[s], d * 10 + s));
    }
  }
  ts.push_back(MakeTensor("big", DType::kF32, {(3 << 20) / 4 + 3}, 99));  // spans many blocks
  const std::string dir = tmp.Join("step-7");
  SaveOptions so;
  so.metadata = {{"loader", "{\"epoch\":1}"}};
  absl::Status saved = SaveSync(w.get(), dir, ts, so, {{"format", "pt"}});
  ASSERT_TRUE(saved.ok()) << saved;
  ExpectLoaded(dir, ts);
  auto m = ReadManifest(Env::Default(), dir);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->step, 7);
  EXPECT_EQ(m->metadata, (Metadata{{"loader", "{\"epoch\":1}"}}));
  auto ck = LoadCheckpoint(dir, {});
  ASSERT_TRUE(ck.ok());
  EXPECT_EQ(ck->files[0]->Metadata("format"), "pt");
}

INSTANTIATE_TEST_SUITE_P(QueueDepthBlockMode, RoundTrip,
                         ::testing::Values(std::make_tuple(1, 4096, IoMode::kDirect),
                                           std::make_tuple(16, 1 << 20, IoMode::kDirect),
                                           std::make_tuple(64, 64 << 10, IoMode::kDirect),
                                           std::make_tuple(8, 1 << 20, IoMode::kBuffered)));

TEST(Writer, FileLayoutIsExactAndAligned) {
  grist::testing::TempDir tmp;
  auto w = NewWriter();
  auto ts = StepState(3, 12345 * 4);
  ASSERT_TRUE(SaveSync(w.get(), tmp.Join("c"), ts).ok());
  const std::string bytes = ReadAll(tmp.Join("c/rank-00000.safetensors"));
  ASSERT_GE(bytes.size(), 8u);
  uint64_t n = 0;
  for (int b = 0; b < 8; ++b) n |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[b])) << (8 * b);
  EXPECT_EQ((8 + n) % 4096, 0u);
  uint64_t data = 0;
  for (const auto& t : ts) data += t.bytes.size();
  EXPECT_EQ(bytes.size(), 8 + n + data);  // truncated to the exact length
  const std::string json = bytes.substr(8, n);
  size_t last = json.find_last_not_of(' ');
  EXPECT_EQ(json[last], '}');
  EXPECT_EQ(json[0], '{');
  EXPECT_EQ(bytes.substr(8 + n, ts[0].bytes.size()), ts[0].bytes);  // data in order, no holes
}

TEST(Writer, UsesODirectAndIoUringWhereAvailable) {
  grist::testing::TempDir tmp;
  auto w = NewWriter();
  auto pending = w->Save(tmp.Join("f.safetensors"), Refs(StepState(1)), {});
  ASSERT_TRUE(pending.ok());
  auto r = (*pending)->Wait();
  ASSERT_TRUE(r.ok()) << r.status();
  if (!r->direct) {
    ASSERT_FALSE(testing::ProbeODirectWrite(tmp.path()))
        << "the file system here takes O_DIRECT writes, yet the writer fell back: "
        << (r->notes.empty() ? "" : r->notes[0]);
    GTEST_SKIP() << "O_DIRECT not supported here: " << (r->notes.empty() ? "" : r->notes[0]);
  }
  EXPECT_GE(r->dio_align, 512u);
  EXPECT_TRUE(r->fixed_buffers) << (r->notes.empty() ? "" : r->notes.back());
  EXPECT_NE(r->ring_flags, 0u) << "kernel accepted no optional ring flag";
}

TEST(Writer, SnapshotRuleCallerMayModifyAfterSave) {
  grist::testing::TempDir tmp;
  auto w = NewWriter();
  auto ts = StepState(5, 8 << 20);
  const auto original = ts;
  auto h = SaveCheckpoint(w.get(), tmp.Join("s-5"), Refs(ts), {}, {});
  ASSERT_TRUE(h.ok());
  for (auto& t : ts) std::fill(t.bytes.begin(), t.bytes.end(), '\x55');  // training goes on
  ASSERT_TRUE((*h)->Wait().ok());
  EXPECT_TRUE((*h)->Done());
  ExpectLoaded(tmp.Join("s-5"), original);
}

TEST(Writer, PiecewiseFillWithAndWithoutOverlap) {
  for (Overlap overlap : {Overlap::kOn, Overlap::kOff}) {
    grist::testing::TempDir tmp;
    WriterOptions o;
    o.block_size = 64 << 10;
    o.overlap = overlap;
    auto w = NewWriter(o);
    auto t = MakeTensor("x", DType::kU8, {4 << 20}, 1);
    auto p = w->Begin(tmp.Join("p.safetensors"), {t.spec}, {});
    ASSERT_TRUE(p.ok());
    std::thread filler([&] {
      for (uint64_t off = 0; off < t.bytes.size(); off += 100000) {
        uint64_t n = std::min<uint64_t>(100000, t.bytes.size() - off);
        std::memcpy((*p)->data() + off, t.bytes.data() + off, n);
        (*p)->MarkReady(off + n);
      }
    });
    filler.join();
    auto r = (*p)->Wait();
    ASSERT_TRUE(r.ok()) << r.status();
    auto f = ReadCheckpointFile(tmp.Join("p.safetensors"), {});
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_TRUE(f.value()->Bytes(f.value()->tensors()[0]) == t.bytes);
  }
}

TEST(Writer, AbortRemovesThePartialFile) {
  grist::testing::TempDir tmp;
  auto w = NewWriter();
  auto t = MakeTensor("x", DType::kU8, {1 << 20}, 1);
  auto p = w->Begin(tmp.Join("a.safetensors"), {t.spec}, {});
  ASSERT_TRUE(p.ok());
  (*p)->MarkReady(4096);
  (*p)->Abort(absl::CancelledError("stop"));
  EXPECT_EQ((*p)->Wait().status().code(), absl::StatusCode::kCancelled);
  EXPECT_FALSE(Env::Default()->FileExists(tmp.Join("a.safetensors")));
  // The writer is reusable afterwards.
  auto p2 = w->Save(tmp.Join("b.safetensors"), Refs({t}), {});
  ASSERT_TRUE(p2.ok());
  EXPECT_TRUE((*p2)->Wait().ok());
}

TEST(Checkpoint, ManifestRoundTripAndChecksum) {
  Manifest m;
  m.step = 42;
  m.world_size = 2;
  m.metadata = {{"a", "b"}};
  m.files = {{0, "rank-00000.safetensors", 5000, 904, 3, {1, 2}, 7},
             {1, "rank-00001.safetensors", 4096, 0, 0, {3, 4}, 8}};
  const std::string text = ManifestJson(m);
  auto back = ParseManifest(text, "m");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->step, 42);
  EXPECT_EQ(back->files[1].data_hash, (Hash128{3, 4}));
  EXPECT_EQ(back->files[0].header_hash, 7u);
  std::string bad = text;
  bad[bad.find("5000")] = '6';
  EXPECT_EQ(ParseManifest(bad, "m").status().code(), absl::StatusCode::kDataLoss);
  auto rec = ParseFileRecord(FileRecordJson(m.files[1]));
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(rec->name, "rank-00001.safetensors");
}

TEST(Checkpoint, LatestRetentionAndTornFolders) {
  grist::testing::TempDir tmp;
  auto w = NewWriter();
  for (int step : {10, 20, 30, 40}) {
    SaveOptions so;
    so.keep_last = 2;
    ASSERT_TRUE(SaveSync(w.get(), tmp.Join(absl::StrCat("step-", step)), StepState(step), so).ok());
  }
  auto list = ListCheckpoints(Env::Default(), tmp.path());
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].step, 30);
  EXPECT_FALSE(Env::Default()->IsDirectory(tmp.Join("step-10")));
  // A torn save with a higher step is ignored.
  ASSERT_TRUE(Env::Default()->CreateDirs(tmp.Join("step-50")).ok());
  WriteAll(tmp.Join("step-50/rank-00000.safetensors"), "partial");
  auto latest = LatestCheckpoint(Env::Default(), tmp.path(), /*verify=*/true);
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(*latest, tmp.Join("step-40"));
  ExpectLoaded(*latest, StepState(40));
  // Saving into a published folder is refused; into a torn one clears it.
  EXPECT_EQ(SaveSync(w.get(), tmp.Join("step-40"), StepState(41)).code(), absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(SaveSync(w.get(), tmp.Join("step-50"), StepState(50)).ok());
  EXPECT_EQ(*LatestCheckpoint(Env::Default(), tmp.path(), false), tmp.Join("step-50"));
  EXPECT_EQ(LatestCheckpoint(Env::Default(), tmp.Join("nothing"), false).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(Checkpoint, BitFlipsAreDetected) {
  grist::testing::TempDir tmp;
  auto w = NewWriter();
  auto ts = StepState(1, 3 << 20);
  ASSERT_TRUE(SaveSync(w.get(), tmp.Join("c-1"), ts).ok());
  const std::string path = tmp.Join("c-1/rank-00000.safetensors");
  const std::string good = ReadAll(path);
  for (uint64_t pos : {uint64_t{4096 + 17}, uint64_t{4096 + (2 << 20) + 5}, uint64_t(good.size() - 1)}) {
    std::string bad = good;
    bad[pos] ^= 0x10;
    WriteAll(path, bad);
    auto ck = LoadCheckpoint(tmp.Join("c-1"), {});
    ASSERT_FALSE(ck.ok()) << pos;
    EXPECT_EQ(ck.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_NE(std::string(ck.status().message()).find("checksum mismatch in block"), std::string::npos)
        << ck.status();
    EXPECT_FALSE(VerifyCheckpoint(tmp.Join("c-1"), {}).ok());
  }
  std::string bad = good;
  bad[100] = bad[100] == ' ' ? 'x' : ' ';  // inside the JSON header
  WriteAll(path, bad);
  EXPECT_EQ(LoadCheckpoint(tmp.Join("c-1"), {}).status().code(), absl::StatusCode::kDataLoss);
  WriteAll(path, good.substr(0, good.size() - 1));  // truncated
  auto trunc = LoadCheckpoint(tmp.Join("c-1"), {});
  EXPECT_EQ(trunc.status().code(), absl::StatusCode::kDataLoss);
  WriteAll(path, good);
  ExpectLoaded(tmp.Join("c-1"), ts);
}

TEST(Reader, StreamingReadDeliversDataInOrderThenVerifies) {
  grist::testing::TempDir tmp;
  auto w = NewWriter();
  auto ts = StepState(2, 5 << 20);
  ASSERT_TRUE(SaveSync(w.get(), tmp.Join("c-2"), ts).ok());
  const std::string path = tmp.Join("c-2/rank-00000.safetensors");
  ReadOptions ro;
  ro.block_size = 256 << 10;
  ro.queue_depth = 4;
  auto sr = StreamingRead::Start(path, ro);
  ASSERT_TRUE(sr.ok()) << sr.status();
  auto h = (*sr)->Header();
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ((*h)->tensors.size(), ts.size());
  const TensorInfo& first = (*h)->tensors[0];
  ASSERT_TRUE((*sr)->WaitData(first.end).ok());
  EXPECT_EQ(std::string((*sr)->data() + first.begin, first.nbytes()), ts[0].bytes);
  auto f = (*sr)->Finish();
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE((*f)->Bytes((*f)->tensors()[2]) == ts[2].bytes);
  // A flipped byte late in the file: the early data still streams, Finish() reports it.
  std::string bad = ReadAll(path);
  bad[bad.size() - 3] ^= 1;
  WriteAll(path, bad);
  auto sr2 = StreamingRead::Start(path, ro);
  ASSERT_TRUE(sr2.ok());
  EXPECT_TRUE((*sr2)->WaitData(1000).ok());
  EXPECT_EQ((*sr2)->Finish().status().code(), absl::StatusCode::kDataLoss);
  EXPECT_FALSE((*sr2)->WaitData(bad.size()).ok());  // past the end of the data: an error, no hang
}

// ---- Fault injection: a failed save leaves the previous checkpoint intact and loadable. ----

class Faults : public ::testing::Test {
 protected:
  void SetUp() override {
    fenv_ = std::make_unique<FaultInjectionEnv>(Env::Default());
    WriterOptions o;
    o.env = fenv_.get();
    o.block_size = 64 << 10;
    writer_ = NewWriter(o);
    ASSERT_TRUE(SaveSync(writer_.get(), tmp_.Join("step-1"), StepState(1)).ok());
  }
  void ExpectPreviousIntact() {
    auto latest = LatestCheckpoint(Env::Default(), tmp_.path(), /*verify=*/true);
    ASSERT_TRUE(latest.ok()) << latest.status();
    EXPECT_EQ(*latest, tmp_.Join("step-1"));
    ExpectLoaded(*latest, StepState(1));
    EXPECT_FALSE(Env::Default()->FileExists(tmp_.Join("step-2/manifest.json")));
  }
  // The names in step-2 (the failed save's folder), sorted.
  std::vector<std::string> LeftInStep2() {
    auto names = Env::Default()->ListDir(tmp_.Join("step-2"));
    EXPECT_TRUE(names.ok()) << names.status();
    std::vector<std::string> v = names.ok() ? *names : std::vector<std::string>{};
    std::sort(v.begin(), v.end());
    return v;
  }
  // With the fault cleared, the same writer saves step-2 into the same folder and publishes it.
  void ExpectWriterSavesNext() {
    ASSERT_TRUE(SaveSync(writer_.get(), tmp_.Join("step-2"), StepState(2)).ok());
    EXPECT_EQ(*LatestCheckpoint(Env::Default(), tmp_.path(), /*verify=*/true), tmp_.Join("step-2"));
    ExpectLoaded(tmp_.Join("step-2"), StepState(2));
  }
  grist::testing::TempDir tmp_;
  std::unique_ptr<FaultInjectionEnv> fenv_;
  std::unique_ptr<FileWriter> writer_;
};

TEST_F(Faults, WriteFails) {
  fenv_->FailNthAppend(3);
  absl::Status s = SaveSync(writer_.get(), tmp_.Join("step-2"), StepState(2));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(std::string(s.message()).find("step-2"), std::string::npos) << s;
  ExpectPreviousIntact();
}

TEST_F(Faults, DiskFills) {
  fenv_->SetDiskSpace(100000);
  absl::Status s = SaveSync(writer_.get(), tmp_.Join("step-2"), StepState(2));
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  ExpectPreviousIntact();
}

TEST_F(Faults, FsyncFails) {
  fenv_->SetFailSync(true);
  absl::Status s = SaveSync(writer_.get(), tmp_.Join("step-2"), StepState(2));
  fenv_->SetFailSync(false);
  // The rank file's fsync is the first to fail: reported as is, and the unsynced file removed.
  EXPECT_EQ(s, absl::DataLossError(absl::StrCat("fsync ", tmp_.Join("step-2/rank-00000.safetensors"),
                                                ": Input/output error (injected)")));
  EXPECT_EQ(LeftInStep2(), std::vector<std::string>{});
  ExpectPreviousIntact();
  ExpectWriterSavesNext();
}

TEST_F(Faults, RenameOfManifestFails) {
  fenv_->SetFailRename(true);
  absl::Status s = SaveSync(writer_.get(), tmp_.Join("step-2"), StepState(2));
  fenv_->SetFailRename(false);
  const std::string tmp_manifest =
      absl::StrCat(tmp_.Join("step-2/manifest.json"), ".tmp.", ::getpid());
  EXPECT_EQ(s, absl::DataLossError(absl::StrCat("rename ", tmp_manifest, ": Input/output error (injected)")));
  // The rank file stays (durable, unpublished), the temporary manifest is removed: not published.
  EXPECT_EQ(LeftInStep2(), std::vector<std::string>{"rank-00000.safetensors"});
  ExpectPreviousIntact();
  ExpectWriterSavesNext();
}

TEST(UringFaults, WriteErrorAndFsyncErrorAreReported) {
  grist::testing::TempDir tmp;
  auto good = NewWriter();
  ASSERT_TRUE(SaveSync(good.get(), tmp.Join("step-1"), StepState(1)).ok());
  WriterOptions o;
  o.block_size = 64 << 10;
  o.faults.fail_write_at = 2;
  o.faults.write_errno = ENOSPC;
  auto w = NewWriter(o);
  absl::Status s = SaveSync(w.get(), tmp.Join("step-2"), StepState(2));
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_NE(std::string(s.message()).find("rank-00000.safetensors"), std::string::npos) << s;
  WriterOptions o2;
  o2.faults.fail_fsync = true;
  auto w2 = NewWriter(o2);
  s = SaveSync(w2.get(), tmp.Join("step-3"), StepState(3));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(std::string(s.message()).find("fsync"), std::string::npos) << s;
  EXPECT_EQ(*LatestCheckpoint(Env::Default(), tmp.path(), true), tmp.Join("step-1"));
  EXPECT_FALSE(Env::Default()->FileExists(tmp.Join("step-2/rank-00000.safetensors")));
}

TEST(MemEnvCheckpoint, SurvivesDroppingUnsyncedData) {
  MemEnv env;
  WriterOptions o;
  o.env = &env;
  auto w = NewWriter(o);
  ASSERT_TRUE(SaveSync(w.get(), "/ck/step-3", StepState(3)).ok());
  env.DropUnsyncedData();
  ReadOptions ro;
  ro.env = &env;
  auto latest = LatestCheckpoint(&env, "/ck", true);
  ASSERT_TRUE(latest.ok()) << latest.status();
  ExpectLoaded(*latest, StepState(3), ro);
}

TEST(WriteAmpMeter, MeasuresThisProcessAndTheDevice) {
  grist::testing::TempDir tmp;
  auto meter = WriteAmpMeter::ForDirectory(tmp.path());
  ASSERT_TRUE(meter.ok()) << meter.status();
  EXPECT_FALSE(meter->fs_type().empty());
  EXPECT_EQ(FileSystemTypeName(0xEF53), "ext4");
  EXPECT_EQ(FileSystemTypeName(0x0BD00BD0), "lustre");
  if (ProcessWriteBytes() == 0 && ::access("/proc/self/io", R_OK) != 0) {
    GTEST_SKIP() << "/proc/self/io not readable here";
  }
  meter->Start();
  auto w = NewWriter();
  auto ts = StepState(1, 4 << 20);
  ASSERT_TRUE(SaveSync(w.get(), tmp.Join("c-1"), ts).ok());
  WriteAmp wa = meter->Stop(4 << 20);
  if (meter->fs_type() == "tmpfs") GTEST_SKIP() << "tmpfs does not account written bytes";
  EXPECT_GE(wa.process_write_bytes, uint64_t{4} << 20);
  EXPECT_LE(wa.process_ratio(), 1.02);  // the documented level (4 MiB: header and padding included)
  if (wa.device_write_bytes) {
    EXPECT_GE(*wa.device_write_bytes, uint64_t{4} << 20);
  }
}

}  // namespace
}  // namespace grist::ckptio
