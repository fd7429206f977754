#include "loader/loader.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <set>
#include <vector>

#include "loader/internal/cuda.h"
#include "tests/loader/memory_source.h"

namespace grist::loader {
namespace {

using testing::MemorySource;

LoaderOptions Opts(int64_t m, int64_t g, int64_t r = 0, int64_t d = 1) {
  LoaderOptions o;
  o.micro_batch_size = m;
  o.global_batch_size = g;
  o.dp_rank = r;
  o.dp_size = d;
  o.has_seed = true;
  o.seed = 5;
  return o;
}

// The host bytes of every tensor of a batch, by name (device batches are read back).
std::map<std::string, std::vector<char>> Contents(const Batch& b) {
  std::map<std::string, std::vector<char>> out;
  for (const TensorInfo& t : b.tensors()) {
    std::vector<char> bytes(t.bytes);
    if (b.on_cuda()) {
      EXPECT_TRUE(cuda::MemcpyDeviceToHost(bytes.data(), t.data, t.bytes).ok());
    } else {
      std::memcpy(bytes.data(), t.data, t.bytes);
    }
    out[t.name] = std::move(bytes);
  }
  return out;
}

std::vector<std::map<std::string, std::vector<char>>> Drain(Loader& l, int64_t max = -1) {
  std::vector<std::map<std::string, std::vector<char>>> out;
  while (max < 0 || static_cast<int64_t>(out.size()) < max) {
    auto b = l.Next();
    if (absl::IsOutOfRange(b.status())) break;
    EXPECT_TRUE(b.ok()) << b.status();
    if (!b.ok()) break;
    if (b.value()->on_cuda()) {
      EXPECT_TRUE(b.value()->WaitOn(0).ok());
    }
    out.push_back(Contents(**b));
  }
  return out;
}

template <typename T>
std::vector<T> As(const std::vector<char>& v) {
  std::vector<T> out(v.size() / sizeof(T));
  std::memcpy(out.data(), v.data(), v.size());
  return out;
}

TEST(Loader, ContentsMatchTheSamplesAndTheirDocumentBoundaries) {
  auto src = std::make_shared<MemorySource>(30, 17);
  auto l = Loader::Create(src, 0, Opts(3, 6));
  ASSERT_TRUE(l.ok()) << l.status();
  const int64_t s = 16;
  auto batches = Drain(**l);
  ASSERT_EQ(batches.size(), 30u / 6 * 2);
  for (auto& b : batches) {
    auto idx = As<int64_t>(b["sample_index"]);
    auto in = As<int64_t>(b["input_ids"]);
    auto lab = As<int64_t>(b["labels"]);
    auto pos = As<int64_t>(b["position_ids"]);
    auto mask = As<float>(b["loss_mask"]);
    auto cu = As<int32_t>(b["cu_seqlens"]);
    ASSERT_EQ(idx.size(), 3u);
    std::vector<int32_t> want_cu = {0};
    for (size_t r = 0; r < 3; ++r) {
      const uint16_t* t = src->tokens(static_cast<uint64_t>(idx[r]));
      std::vector<int64_t> want_pos(s), want_mask_zero(s, 0);
      int64_t start = 0;
      for (uint32_t seg : src->segments(static_cast<uint64_t>(idx[r]))) {
        int64_t len = seg & kSegmentLengthMask;
        for (int64_t j = start; j < start + len && j < s; ++j) want_pos[j] = j - start;
        if (start < s) want_cu.push_back(static_cast<int32_t>(r * s + std::min(start + len, s)));
        if (seg & kSegmentPaddingBit) {
          for (int64_t p = start; p < start + len; ++p) {
            if (p >= 1 && p - 1 < s) want_mask_zero[p - 1] = 1;
          }
        }
        start += len;
      }
      for (int64_t j = 0; j < s; ++j) {
        ASSERT_EQ(in[r * s + j], t[j]);
        ASSERT_EQ(lab[r * s + j], t[j + 1]);
        ASSERT_EQ(pos[r * s + j], want_pos[j]) << "row " << r << " pos " << j;
        ASSERT_EQ(mask[r * s + j], want_mask_zero[j] ? 0.0f : 1.0f) << "row " << r << " j " << j;
      }
    }
    EXPECT_EQ(cu, want_cu);
  }
}

TEST(Loader, SameBatchesWhateverTheWorkersAndPrefetch) {
  auto src = std::make_shared<MemorySource>(64, 9);
  std::vector<std::map<std::string, std::vector<char>>> ref;
  for (int workers : {1, 3}) {
    for (int prefetch : {1, 7}) {
      LoaderOptions o = Opts(2, 8);
      o.num_workers = workers;
      o.prefetch = prefetch;
      o.epochs = 2;
      auto l = Loader::Create(src, 0, o);
      ASSERT_TRUE(l.ok());
      auto got = Drain(**l);
      if (ref.empty()) ref = got;
      EXPECT_EQ(got, ref) << workers << " workers, prefetch " << prefetch;
    }
  }
  EXPECT_EQ(ref.size(), 64u);
}

TEST(Loader, EverySampleOncePerEpochAcrossRanks) {
  auto src = std::make_shared<MemorySource>(48, 5);
  std::multiset<int64_t> seen;
  for (int64_t r = 0; r < 3; ++r) {
    auto l = Loader::Create(src, 0, Opts(2, 12, r, 3));
    ASSERT_TRUE(l.ok());
    EXPECT_EQ((*l)->size(), 8);
    for (auto& b : Drain(**l)) {
      for (int64_t i : As<int64_t>(b["sample_index"])) seen.insert(i);
    }
  }
  ASSERT_EQ(seen.size(), 48u);
  for (int64_t i = 0; i < 48; ++i) EXPECT_EQ(seen.count(i), 1u) << i;
}

TEST(Loader, ResumeGivesBitIdenticalBatches) {
  auto src = std::make_shared<MemorySource>(50, 13);
  LoaderOptions o = Opts(2, 8);
  o.epochs = 3;
  auto full = Loader::Create(src, 0, o);
  ASSERT_TRUE(full.ok());
  auto all = Drain(**full);
  for (int k : {0, 1, 3, 4, 9}) {  // mid-step and step-aligned
    auto a = Loader::Create(src, 0, o);
    ASSERT_TRUE(a.ok());
    Drain(**a, k);
    std::string saved = (*a)->state().ToJson();
    auto b = Loader::Create(src, 0, o);
    ASSERT_TRUE(b.ok());
    auto st = LoaderState::FromJson(saved);
    ASSERT_TRUE(st.ok());
    ASSERT_TRUE((*b)->LoadState(*st).ok());
    EXPECT_EQ((*b)->remaining(), static_cast<int64_t>(all.size()) - k);
    auto rest = Drain(**b);
    ASSERT_EQ(rest.size(), all.size() - static_cast<size_t>(k));
    for (size_t i = 0; i < rest.size(); ++i) ASSERT_EQ(rest[i], all[k + i]) << "k=" << k << " i=" << i;
  }
}

TEST(Loader, LoadStateMidRunDiscardsPrefetchedBatches) {
  auto src = std::make_shared<MemorySource>(40, 7);
  LoaderOptions o = Opts(2, 4);
  o.prefetch = 6;
  auto l = Loader::Create(src, 0, o);
  ASSERT_TRUE(l.ok());
  LoaderState start = (*l)->state();
  auto first = Drain(**l, 5);
  ASSERT_TRUE((*l)->LoadState(start).ok());
  EXPECT_EQ(Drain(**l, 5), first);
}

TEST(Loader, ElasticResumeWithAnotherDpSizeContinuesTheGlobalOrder) {
  auto src = std::make_shared<MemorySource>(96, 5);
  auto global_order = [&](int64_t d, const LoaderState* from, int64_t steps) {
    // Interleave the ranks' batches step by step into the global sample order.
    std::vector<std::vector<std::vector<int64_t>>> per_rank;
    for (int64_t r = 0; r < d; ++r) {
      auto l = Loader::Create(src, 0, Opts(2, 8, r, d));
      EXPECT_TRUE(l.ok());
      if (from) {
        EXPECT_TRUE((*l)->LoadState(*from).ok());
      }
      std::vector<std::vector<int64_t>> batches;
      for (auto& b : Drain(**l, steps * (8 / d / 2))) batches.push_back(As<int64_t>(b["sample_index"]));
      per_rank.push_back(batches);
    }
    std::vector<int64_t> order;
    const int64_t a = 8 / d / 2;
    for (int64_t t = 0; t < steps; ++t) {
      for (int64_t r = 0; r < d; ++r) {
        for (int64_t m = 0; m < a; ++m) {
          auto& v = per_rank[r][t * a + m];
          order.insert(order.end(), v.begin(), v.end());
        }
      }
    }
    return order;
  };
  std::vector<int64_t> reference = global_order(1, nullptr, 12);
  // Run 5 steps on 4 ranks, save rank 0's state, resume on 2 ranks.
  auto l = Loader::Create(src, 0, Opts(2, 8, 0, 4));
  ASSERT_TRUE(l.ok());
  Drain(**l, 5);  // 5 steps of one micro batch each
  LoaderState st = (*l)->state();
  EXPECT_EQ(st.position.consumed_samples, 40u);
  EXPECT_EQ(st.position.micro_index, 0);
  std::vector<int64_t> first = global_order(4, nullptr, 5);
  std::vector<int64_t> rest = global_order(2, &st, 7);
  first.insert(first.end(), rest.begin(), rest.end());
  EXPECT_EQ(first, reference);
}

TEST(Loader, BadStateIsRejected) {
  auto src = std::make_shared<MemorySource>(40, 7);
  auto l = Loader::Create(src, 0, Opts(2, 8, 0, 2));
  ASSERT_TRUE(l.ok());
  Drain(**l, 1);  // mid-step
  LoaderState st = (*l)->state();
  auto other = std::make_shared<MemorySource>(40, 7, "rel-B");
  auto l2 = Loader::Create(other, 0, Opts(2, 8, 0, 2));
  absl::Status s = (*l2)->LoadState(st);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(std::string(s.message()),
            "loader state belongs to release rel-A, but this loader reads release rel-B");
  auto l3 = Loader::Create(src, 0, Opts(2, 8, 0, 1));
  EXPECT_EQ((*l3)->LoadState(st).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(Loader, OptionErrors) {
  auto src = std::make_shared<MemorySource>(40, 7);
  EXPECT_EQ(Loader::Create(src, 0, Opts(3, 8)).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Loader::Create(src, 0, Opts(2, 8, 4, 4)).status().code(),
            absl::StatusCode::kInvalidArgument);
  LoaderOptions o = Opts(2, 8);
  o.prefetch = 0;
  EXPECT_EQ(Loader::Create(src, 0, o).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseFields("input_ids,bogus").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*ParseFields("input_ids, labels"), kInputIds | kLabels);
}

TEST(Loader, EndOfDataIsOutOfRangeAndSizeCountsBatches) {
  auto src = std::make_shared<MemorySource>(21, 5);
  LoaderOptions o = Opts(1, 4);
  o.epochs = 2;
  auto l = Loader::Create(src, 0, o);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ((*l)->size(), 42 / 4 * 4);
  EXPECT_EQ(Drain(**l).size(), 40u);
  EXPECT_TRUE(absl::IsOutOfRange((*l)->Next().status()));
}

TEST(Loader, CorruptSegmentsAreAnErrorFromNextThatStays) {
  auto src = std::make_shared<MemorySource>(8, 5);
  for (uint32_t& seg : src->mutable_segments()) seg = (seg & kSegmentPaddingBit) | 7;  // sum != 5
  auto l = Loader::Create(src, 0, Opts(1, 1));
  ASSERT_TRUE(l.ok());
  auto b = (*l)->Next();
  ASSERT_EQ(b.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(std::string(b.status().message()).find("mem sample"), std::string::npos);
  EXPECT_EQ((*l)->Next().status().code(), absl::StatusCode::kDataLoss);
}

TEST(Loader, ConsumerMayHoldEveryBatch) {
  auto src = std::make_shared<MemorySource>(64, 9);
  LoaderOptions o = Opts(1, 1);
  o.prefetch = 2;
  auto l = Loader::Create(src, 0, o);
  ASSERT_TRUE(l.ok());
  std::vector<std::shared_ptr<const Batch>> held;
  while (true) {
    auto b = (*l)->Next();
    if (!b.ok()) break;
    held.push_back(*b);
  }
  ASSERT_EQ(held.size(), 64u);
  std::set<int64_t> idx;
  for (auto& b : held) idx.insert(*static_cast<const int64_t*>(b->tensor("sample_index")->data));
  EXPECT_EQ(idx.size(), 64u);
  l->reset();  // batches outlive the loader
  EXPECT_EQ(held[3]->tensor("input_ids")->shape[1], 8);
}

TEST(Loader, Int32IdsAndFieldSelection) {
  auto src = std::make_shared<MemorySource>(16, 9);
  LoaderOptions o = Opts(2, 2);
  o.int32_ids = true;
  o.fields = kInputIds | kLabels;
  auto l = Loader::Create(src, 0, o);
  ASSERT_TRUE(l.ok());
  auto b = (*l)->Next();
  ASSERT_TRUE(b.ok());
  ASSERT_EQ((*b)->tensors().size(), 2u);
  EXPECT_EQ((*b)->tensor("input_ids")->dtype, DType::kInt32);
  EXPECT_EQ((*b)->tensor("position_ids"), nullptr);
  LoaderOptions o64 = Opts(2, 2);
  auto l64 = Loader::Create(src, 0, o64);
  auto b64 = (*l64)->Next();
  const int32_t* a = static_cast<const int32_t*>((*b)->tensor("labels")->data);
  const int64_t* c = static_cast<const int64_t*>((*b64)->tensor("labels")->data);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(a[i], c[i]);
}

TEST(Loader, CudaFallsBackToCpuWithTheReasonWhenNoGpu) {
  auto src = std::make_shared<MemorySource>(16, 9);
  LoaderOptions o = Opts(2, 4);
  o.device = Device::kCuda;
  absl::Status have = cuda::CheckDevice(0);
  auto l = Loader::Create(src, 0, o);
  ASSERT_TRUE(l.ok());
  if (have.ok()) {
    EXPECT_TRUE((*l)->on_cuda());
    EXPECT_EQ((*l)->device_note(), "");
  } else {
    EXPECT_FALSE((*l)->on_cuda());
    EXPECT_NE((*l)->device_note().find("using CPU"), std::string::npos);
    o.cuda_fallback = false;
    EXPECT_EQ(Loader::Create(src, 0, o).status().code(), absl::StatusCode::kUnavailable);
  }
}

TEST(Loader, CudaBatchesEqualCpuBatches) {
  absl::Status have = cuda::CheckDevice(0);
  if (!have.ok()) GTEST_SKIP() << have.message();
  auto src = std::make_shared<MemorySource>(64, 33);
  LoaderOptions o = Opts(4, 8);
  o.epochs = 2;
  o.prefetch = 3;
  auto cpu = Loader::Create(src, 0, o);
  o.device = Device::kCuda;
  o.cuda_fallback = false;
  auto gpu = Loader::Create(src, 0, o);
  ASSERT_TRUE(cpu.ok());
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  ASSERT_TRUE((*gpu)->on_cuda());
  auto a = Drain(**cpu);
  auto b = Drain(**gpu);
  EXPECT_EQ(a.size(), 32u);
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace grist::loader
