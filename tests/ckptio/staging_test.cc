// Background staging preparation (FileWriter::PrepareStaging): the prepared arena is what the next
// save uses (no reallocation), the header bound covers what PlanFile plans, the prepare limit is
// honoured (a larger request prepares nothing; headroom never passes it), a save that comes while
// the preparation runs waits for it and writes correct bytes, and the first save after a finished
// preparation touches no fresh memory (FileResult::staging_fresh_bytes, counted by the writer; the
// blocked time against a memcpy is a benchmark: bench/python/bench_ckpt_first_save.py).
#include <gtest/gtest.h>

#include <utility>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ckptio/reader.h"
#include "ckptio/writer.h"
#include "tests/ckptio/ckpt_test_util.h"
#include "tests/test_util.h"

namespace grist::ckptio {
namespace {

using testing::MakeTensor;
using testing::OwnedTensor;
using testing::Refs;

constexpr uint64_t kMiB = 1ull << 20;

std::vector<OwnedTensor> State(uint64_t bytes, int tensors, uint64_t seed) {
  std::vector<OwnedTensor> ts;
  for (int i = 0; i < tensors; ++i) {
    ts.push_back(MakeTensor(absl::StrCat("model.layers.", i, ".weight"), DType::kF32,
                            {static_cast<int64_t>(bytes / tensors / 4)}, seed));
  }
  return ts;
}

StagingEstimate EstimateOf(const std::vector<OwnedTensor>& ts, const Metadata& meta) {
  StagingEstimate e;
  for (const auto& t : ts) {
    e.data_bytes += t.bytes.size();
    e.text_bytes += t.spec.name.size();
  }
  for (const auto& [k, v] : meta) e.text_bytes += k.size() + v.size();
  e.tensors = ts.size();
  return e;
}

void ExpectFileHolds(const std::string& path, const std::vector<OwnedTensor>& ts) {
  auto f = ReadCheckpointFile(path, {});
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ((*f)->tensors().size(), ts.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    const TensorInfo& t = (*f)->tensors()[i];
    ASSERT_TRUE((*f)->Bytes(t) == ts[i].bytes) << t.name;
  }
}

TEST(Staging, HeaderBoundCoversThePlannedFile) {
  // Many tensors with long names and 8 large dimensions, hashes for many blocks, metadata full of
  // characters JSON escapes.
  std::vector<TensorSpec> specs;
  StagingEstimate e;
  for (int i = 0; i < 300; ++i) {
    TensorSpec s{absl::StrCat(std::string(100, 'n'), ".", i), DType::kU8,
                 {1, 1, 1, 1, 1, 1, 1, 1000000007}};
    e.text_bytes += s.name.size();
    specs.push_back(std::move(s));
  }
  Metadata meta{{"structure", std::string(50000, '"')}, {"note", std::string(3000, '\\')}};
  for (const auto& [k, v] : meta) e.text_bytes += k.size() + v.size();
  e.tensors = specs.size();
  e.data_bytes = 300ull * 1000000007;
  auto plan = PlanFile(specs, meta, kMiB, 4096);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_GE(StagingBytesFor(e, kMiB), plan->file_size);
  // And for a file with one small tensor and nothing else.
  auto small = PlanFile({{"w", DType::kF32, {3}}}, {}, kMiB, 4096);
  ASSERT_TRUE(small.ok());
  EXPECT_GE(StagingBytesFor({12, 1, 1}, kMiB), small->file_size);
}

TEST(Staging, ThePreparedArenaIsTheOneTheNextSaveUses) {
  grist::testing::TempDir tmp;
  WriterOptions o;
  o.prepare_limit = 256 * kMiB;
  auto w = FileWriter::Create(o);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ((*w)->prepare_limit(), 256 * kMiB);
  EXPECT_EQ((*w)->arena_bytes(), 0u);
  auto ts = State(24 * kMiB, 6, 1);
  const Metadata meta{{"format", "pt"}};
  auto prepared = (*w)->PrepareStaging(EstimateOf(ts, meta));
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  (*w)->WaitStaging();
  const uint64_t held = (*w)->arena_bytes();
  EXPECT_EQ(held, *prepared);
  EXPECT_GE(held, StagingBytesFor(EstimateOf(ts, meta)));
  EXPECT_LE(held, o.prepare_limit);
  // The save fits the prepared arena: nothing is reallocated, now or by a slightly larger file
  // (the headroom), and preparing again for the same size is immediate.
  auto r = (*w)->Save(tmp.Join("a.safetensors"), Refs(ts), meta);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE((*r)->Wait().ok());
  EXPECT_EQ((*w)->arena_bytes(), held);
  ExpectFileHolds(tmp.Join("a.safetensors"), ts);
  auto bigger = State(24 * kMiB + 512 * 1024, 6, 2);
  auto r2 = (*w)->Save(tmp.Join("b.safetensors"), Refs(bigger), meta);
  ASSERT_TRUE(r2.ok());
  ASSERT_TRUE((*r2)->Wait().ok());
  EXPECT_EQ((*w)->arena_bytes(), held);
  ExpectFileHolds(tmp.Join("b.safetensors"), bigger);
  auto again = (*w)->PrepareStaging(EstimateOf(ts, meta));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, held);
}

TEST(Staging, TheLimitIsHonoured) {
  grist::testing::TempDir tmp;
  WriterOptions o;
  o.prepare_limit = 16 * kMiB;
  auto w = FileWriter::Create(o);
  ASSERT_TRUE(w.ok());
  // Above the limit: refused, nothing allocated.
  auto over = (*w)->PrepareStaging({32 * kMiB, 1, 8});
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(over.status().message().find("prepare limit"), std::string_view::npos) << over.status();
  (*w)->WaitStaging();
  EXPECT_EQ((*w)->arena_bytes(), 0u);
  // Below it: prepared, and the headroom stops at the limit.
  auto under = (*w)->PrepareStaging({14 * kMiB, 1, 8});
  ASSERT_TRUE(under.ok()) << under.status();
  (*w)->WaitStaging();
  EXPECT_GT((*w)->arena_bytes(), 14 * kMiB);
  EXPECT_LE((*w)->arena_bytes(), 16 * kMiB);
  // A save larger than the limit still works: its own image is allocated (no headroom then).
  auto ts = State(40 * kMiB, 4, 3);
  auto r = (*w)->Save(tmp.Join("big.safetensors"), Refs(ts), {});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE((*r)->Wait().ok());
  EXPECT_EQ((*w)->arena_bytes(), 42 * kMiB);  // 40 MiB + the header block, in 2 MiB steps
  ExpectFileHolds(tmp.Join("big.safetensors"), ts);

  // Limit 0: nothing is prepared ahead, and no headroom is kept.
  WriterOptions off;
  off.prepare_limit = 0;
  auto w0 = FileWriter::Create(off);
  ASSERT_TRUE(w0.ok());
  EXPECT_EQ((*w0)->PrepareStaging({kMiB, 1, 1}).status().code(),
            absl::StatusCode::kResourceExhausted);
  auto small = State(6 * kMiB, 2, 4);
  auto r0 = (*w0)->Save(tmp.Join("small.safetensors"), Refs(small), {});
  ASSERT_TRUE(r0.ok());
  ASSERT_TRUE((*r0)->Wait().ok());
  EXPECT_EQ((*w0)->arena_bytes(), 8 * kMiB);
}

TEST(Staging, SavesDuringAndAroundPreparationWriteTheirBytes) {
  grist::testing::TempDir tmp;
  WriterOptions o;
  o.prepare_limit = 512 * kMiB;
  auto w = FileWriter::Create(o);
  ASSERT_TRUE(w.ok());
  auto small = State(4 * kMiB, 3, 5);
  auto big = State(96 * kMiB, 8, 6);
  // A save in flight, then a preparation for a larger file (served once the file is done), then
  // a save that comes while the preparation may still run (it waits for it).
  auto r1 = (*w)->Save(tmp.Join("1.safetensors"), Refs(small), {});
  ASSERT_TRUE(r1.ok());
  ASSERT_TRUE((*w)->PrepareStaging(EstimateOf(big, {})).ok());
  auto r2 = (*w)->Save(tmp.Join("2.safetensors"), Refs(big), {});
  ASSERT_TRUE(r2.ok()) << r2.status();
  ASSERT_TRUE((*r1)->Wait().ok());
  ASSERT_TRUE((*r2)->Wait().ok());
  ExpectFileHolds(tmp.Join("1.safetensors"), small);
  ExpectFileHolds(tmp.Join("2.safetensors"), big);
  EXPECT_GE((*w)->arena_bytes(), StagingBytesFor(EstimateOf(big, {})));
  // A writer destroyed with a preparation queued or running shuts down cleanly.
  auto w2 = FileWriter::Create(o);
  ASSERT_TRUE(w2.ok());
  ASSERT_TRUE((*w2)->PrepareStaging({256 * kMiB, 1, 1}).ok());
  w2->reset();
}

TEST(Staging, TheFirstSaveAfterPreparationTouchesNoFreshMemory) {
  grist::testing::TempDir tmp;
  constexpr uint64_t kBytes = 32 * kMiB;
  auto ts = State(kBytes, 8, 7);
  WriterOptions o;
  auto w = FileWriter::Create(o);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ((*w)->arena_allocations(), 0u);
  ASSERT_TRUE((*w)->PrepareStaging(EstimateOf(ts, {})).ok());
  (*w)->WaitStaging();
  EXPECT_EQ((*w)->arena_allocations(), 1u);
  auto r = (*w)->Save(tmp.Join("first.safetensors"), Refs(ts), {});
  ASSERT_TRUE(r.ok()) << r.status();
  auto first = (*r)->Wait();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->staging_fresh_bytes, 0u);  // every page of its image was resident
  EXPECT_EQ((*w)->arena_allocations(), 1u);
  ExpectFileHolds(tmp.Join("first.safetensors"), ts);

  // The same first save through a writer nobody prepared: allocated and touched on the caller's
  // time, all of its image; the next save of the same size finds it resident.
  auto w2 = FileWriter::Create(o);
  ASSERT_TRUE(w2.ok());
  auto r2 = (*w2)->Save(tmp.Join("unprepared.safetensors"), Refs(ts), {});
  ASSERT_TRUE(r2.ok()) << r2.status();
  auto unprepared = (*r2)->Wait();
  ASSERT_TRUE(unprepared.ok()) << unprepared.status();
  EXPECT_EQ(unprepared->staging_fresh_bytes, (unprepared->size + 4095) / 4096 * 4096);
  EXPECT_EQ((*w2)->arena_allocations(), 1u);
  auto r3 = (*w2)->Save(tmp.Join("second.safetensors"), Refs(ts), {});
  ASSERT_TRUE(r3.ok()) << r3.status();
  auto second = (*r3)->Wait();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->staging_fresh_bytes, 0u);
  EXPECT_EQ((*w2)->arena_allocations(), 1u);

  // An in-place save counts its whole image: which pages it touched is not known.
  auto r4 = (*w2)->SaveInPlace(tmp.Join("in_place.safetensors"), Refs(ts), {});
  ASSERT_TRUE(r4.ok()) << r4.status();
  auto in_place = (*r4)->Wait();
  ASSERT_TRUE(in_place.ok()) << in_place.status();
  EXPECT_EQ(in_place->staging_fresh_bytes, (in_place->size + 4095) / 4096 * 4096);
}

}  // namespace
}  // namespace grist::ckptio
