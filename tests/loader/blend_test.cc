// Weighted blends of releases (loader/schedule.h, "Blends"): per-step shares, each release's own
// exactly-once order, ranks, resume, weight changes at a step boundary, per-release epochs, and
// the errors for mismatched releases and states.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "loader/loader.h"
#include "loader/permutation.h"
#include "loader/schedule.h"
#include "tests/loader/memory_source.h"

namespace grist::loader {
namespace {

using testing::MemorySource;

ScheduleOptions BlendOpts(std::vector<BlendComponent> blend, int64_t m, int64_t g, int64_t r = 0,
                          int64_t d = 1, int64_t epochs = 0) {
  ScheduleOptions o;
  o.blend = std::move(blend);
  o.micro_batch_size = m;
  o.global_batch_size = g;
  o.dp_rank = r;
  o.dp_size = d;
  o.seed = 5;
  o.epochs = epochs;
  return o;
}

// Component k's c-th draw, by definition: its own Feistel order, epoch after epoch.
uint64_t Expected(const Schedule& s, int k, uint64_t c) {
  const uint64_t n = s.component_samples(k);
  return FeistelPermutation(n, EpochKey(s.component_seed(k), c / n)).Map(c % n);
}

TEST(Blend, ApportionIsWithinOneOfEveryQuotaAndSumsToTheTotal) {
  EXPECT_EQ(Apportion({0.7, 0.3}, 10), (std::vector<uint64_t>{7, 3}));
  EXPECT_EQ(Apportion({1, 1, 1}, 8), (std::vector<uint64_t>{3, 3, 2}));
  EXPECT_EQ(Apportion({0.5, 0.0, 0.5}, 7), (std::vector<uint64_t>{4, 0, 3}));
  for (uint64_t g : {1, 2, 7, 64, 1000, 4096}) {
    for (const std::vector<double>& w : std::vector<std::vector<double>>{
             {0.7, 0.3}, {0.2, 0.3, 0.5}, {1, 2, 3, 4}, {0.999, 0.001}, {1e-9, 1, 1}}) {
      auto n = Apportion(w, g);
      double sum = 0;
      for (double x : w) sum += x;
      uint64_t total = 0;
      for (size_t k = 0; k < w.size(); ++k) {
        total += n[k];
        EXPECT_LT(std::fabs(static_cast<double>(n[k]) - w[k] / sum * static_cast<double>(g)), 1.0)
            << "g " << g << " k " << k;
      }
      EXPECT_EQ(total, g);
    }
  }
}

TEST(Blend, EveryStepHoldsTheSharesAndEachReleaseFollowsItsOwnOrder) {
  const std::vector<BlendComponent> blend = {{50, 0.7}, {23, 0.2}, {9, 0.1}};
  auto s = Schedule::Create(BlendOpts(blend, 2, 16));
  ASSERT_TRUE(s.ok()) << s.status();
  const std::vector<uint64_t> n = s->draws_per_step();
  EXPECT_EQ(n, (std::vector<uint64_t>{11, 3, 2}));
  std::vector<uint64_t> drawn(3, 0);
  for (uint64_t step = 0; step < 40; ++step) {
    std::vector<uint64_t> in_step(3, 0);
    for (uint64_t j = 0; j < 16; ++j) {
      const Draw d = s->DrawAt(step * 16 + j);
      EXPECT_EQ(d.index, Expected(*s, static_cast<int>(d.component), drawn[d.component]))
          << "step " << step << " position " << j;
      ++drawn[d.component];
      ++in_step[d.component];
    }
    EXPECT_EQ(in_step, n);  // |n_k / G - w_k| < 1/G in every global batch
    EXPECT_EQ(s->ConsumedAt((step + 1) * 16), drawn);
  }
  // The interleave spreads a release over the step (error-greedy), not in one run.
  std::vector<uint32_t> first;
  for (uint64_t j = 0; j < 16; ++j) first.push_back(s->DrawAt(j).component);
  EXPECT_EQ(first, (std::vector<uint32_t>{0, 0, 1, 0, 2, 0, 0, 0, 1, 0, 0, 2, 0, 0, 1, 0}));
  // Each release: exactly once per epoch of its own (release 2 has 9 samples: 80 draws).
  std::set<uint64_t> epoch0;
  for (uint64_t c = 0; c < 9; ++c) epoch0.insert(Expected(*s, 2, c));
  EXPECT_EQ(epoch0.size(), 9u);
  // Releases are shuffled independently even when they have the same size.
  auto same = Schedule::Create(BlendOpts({{50, 1}, {50, 1}}, 1, 2));
  ASSERT_TRUE(same.ok());
  EXPECT_NE(same->component_seed(0), same->component_seed(1));
}

TEST(Blend, RanksSliceTheSameGlobalOrder) {
  const std::vector<BlendComponent> blend = {{40, 0.6}, {30, 0.4}};
  auto one = Schedule::Create(BlendOpts(blend, 2, 16));
  ASSERT_TRUE(one.ok());
  std::vector<std::pair<uint32_t, uint64_t>> global;
  for (uint64_t q = 0; q < 160; ++q) global.push_back({one->DrawAt(q).component, one->DrawAt(q).index});
  for (int64_t d : {2, 4, 8}) {
    std::vector<std::pair<uint32_t, uint64_t>> merged(160);
    for (int64_t r = 0; r < d; ++r) {
      auto s = Schedule::Create(BlendOpts(blend, 2, 16, r, d));
      ASSERT_TRUE(s.ok());
      Position p;
      for (int i = 0; i < 10 * s->micro_batches_per_step(); ++i, p = s->Advance(p)) {
        for (int64_t j = 0; j < 2; ++j) {
          const uint64_t q = s->StreamPosition(p, j);
          merged[q] = {s->DrawAt(q).component, s->DrawAt(q).index};
        }
      }
    }
    EXPECT_EQ(merged, global) << "dp_size " << d;
  }
}

TEST(Blend, EpochsAreCountedPerReleaseAndTheRunEndsWithTheFirstToFinish) {
  // n = {8, 4} per step of 12; release 1 (10 samples, 2 epochs = 20 draws) allows 5 steps,
  // release 0 (100 samples) would allow 25.
  auto s = Schedule::Create(BlendOpts({{100, 2}, {10, 1}}, 2, 12, 0, 1, /*epochs=*/2));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->draws_per_step(), (std::vector<uint64_t>{8, 4}));
  EXPECT_EQ(s->RemainingBatches(Position{}), 5 * 6);
  EXPECT_TRUE(s->HasBatch(Position{48, 0}));
  EXPECT_FALSE(s->HasBatch(Position{60, 0}));
  EXPECT_EQ(s->ConsumedAt(60), (std::vector<uint64_t>{40, 20}));
  auto too_small = Schedule::Create(BlendOpts({{100, 1}, {3, 1}}, 2, 12, 0, 1, 1));
  ASSERT_EQ(too_small.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(too_small.status().message()),
            "blend: release 1's 3 samples x 1 epochs are fewer than its 6 draws in one global "
            "batch of 12");
  EXPECT_EQ(Schedule::Create(BlendOpts({{10, -1}, {10, 1}}, 1, 4)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Schedule::Create(BlendOpts({{10, 0}, {10, 0}}, 1, 4)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Schedule::Create(BlendOpts({{10, NAN}, {10, 1}}, 1, 4)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// ---- Loader over blended sources ----

class TokenizerSource : public MemorySource {
 public:
  TokenizerSource(uint64_t n, uint32_t st, std::string id, std::string tok)
      : MemorySource(n, st, std::move(id)), tok_(std::move(tok)) {}
  std::string TokenizerId() const override { return tok_; }
  std::string Location() const override { return "/data/" + release_id(); }

 private:
  std::string tok_;
};

std::vector<std::shared_ptr<const SampleSource>> Sources() {
  return {std::make_shared<MemorySource>(40, 9, "web"), std::make_shared<MemorySource>(17, 9, "code"),
          std::make_shared<MemorySource>(11, 9, "math")};
}

LoaderOptions LOpts(int64_t m, int64_t g, int64_t r = 0, int64_t d = 1) {
  LoaderOptions o;
  o.micro_batch_size = m;
  o.global_batch_size = g;
  o.dp_rank = r;
  o.dp_size = d;
  o.epochs = 0;
  o.prefetch = 3;
  o.num_workers = 2;
  o.fields = kSampleIndex | kReleaseIndex | kInputIds;
  return o;
}

// (release, sample) of every row of the next `batches` micro batches.
std::vector<std::pair<int64_t, int64_t>> Rows(Loader& l, int batches) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int i = 0; i < batches; ++i) {
    auto b = l.Next();
    EXPECT_TRUE(b.ok()) << b.status();
    if (!b.ok()) return out;
    const TensorInfo* rel = (*b)->tensor("release_index");
    const TensorInfo* idx = (*b)->tensor("sample_index");
    const TensorInfo* ids = (*b)->tensor("input_ids");
    for (int64_t r = 0; r < idx->shape[0]; ++r) {
      const int64_t k = static_cast<const int64_t*>(rel->data)[r];
      const int64_t s = static_cast<const int64_t*>(idx->data)[r];
      // The row's tokens are that release's sample (MemorySource: (s*131 + j) % 65521).
      EXPECT_EQ(static_cast<const int64_t*>(ids->data)[r * ids->shape[1] + 1], (s * 131 + 1) % 65521);
      out.push_back({k, s});
    }
  }
  return out;
}

TEST(BlendLoader, BatchesFollowTheScheduleAndResumeExactly) {
  const std::vector<double> w = {0.5, 0.3, 0.2};
  auto a = Loader::CreateBlend(Sources(), w, 3, LOpts(2, 10));
  ASSERT_TRUE(a.ok()) << a.status();
  const auto ref = Rows(**a, 60);
  const Schedule& sch = (*a)->schedule();
  for (size_t q = 0; q < ref.size(); ++q) {
    EXPECT_EQ(ref[q].first, sch.DrawAt(q).component);
    EXPECT_EQ(ref[q].second, static_cast<int64_t>(sch.DrawAt(q).index));
  }
  for (int k : {0, 1, 4, 5, 7, 23}) {  // mid-step and at step boundaries (5 micro batches a step)
    auto b = Loader::CreateBlend(Sources(), w, 3, LOpts(2, 10));
    ASSERT_TRUE(b.ok());
    Rows(**b, k);
    const std::string json = (*b)->state().ToJson();
    auto st = LoaderState::FromJson(json);
    ASSERT_TRUE(st.ok()) << st.status() << json;
    ASSERT_EQ(st->blend.size(), 3u);
    EXPECT_EQ(st->release_id, "blend:web+code+math");
    auto c = Loader::CreateBlend(Sources(), w, 3, LOpts(2, 10));
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE((*c)->LoadState(*st).ok());
    const auto rest = Rows(**c, 60 - k);
    const std::vector<std::pair<int64_t, int64_t>> want(ref.begin() + 2 * k, ref.end());
    EXPECT_EQ(rest, want) << "after " << k;
  }
}

TEST(BlendLoader, StateJsonCarriesEachReleasesDrawsAndEpoch) {
  auto a = Loader::CreateBlend(Sources(), {0.5, 0.3, 0.2}, 3, LOpts(2, 10));
  ASSERT_TRUE(a.ok());
  Rows(**a, 5 * 4);  // 4 steps: n = {5, 3, 2}
  EXPECT_EQ((*a)->state().ToJson(),
            "{\"format\":\"grist-loader-state\",\"version\":1,\"release_id\":\"blend:web+code+math\","
            "\"split\":\"train\",\"seed\":3,\"consumed_samples\":40,\"micro_index\":0,"
            "\"global_batch_size\":10,\"micro_batch_size\":2,\"dp_size\":1,\"num_samples\":68,"
            "\"epoch\":0,\"blend\":[{\"release_id\":\"web\",\"split\":\"train\",\"weight\":0.5,"
            "\"consumed\":20,\"num_samples\":40,\"epoch\":0},{\"release_id\":\"code\",\"split\":"
            "\"train\",\"weight\":0.3,\"consumed\":12,\"num_samples\":17,\"epoch\":0},{\"release_id\":"
            "\"math\",\"split\":\"train\",\"weight\":0.2,\"consumed\":8,\"num_samples\":11,"
            "\"epoch\":0}]}");
}

// Each release's draws, in order, from a row list.
std::map<int64_t, std::vector<int64_t>> PerRelease(const std::vector<std::pair<int64_t, int64_t>>& rows) {
  std::map<int64_t, std::vector<int64_t>> out;
  for (auto [k, s] : rows) out[k].push_back(s);
  return out;
}

TEST(BlendLoader, ChangingWeightsAtAStepBoundaryNeitherRepeatsNorSkips) {
  // Reference: each release's own stream, from a loader that draws every release often.
  auto ref_loader = Loader::CreateBlend(Sources(), {1, 1, 1}, 3, LOpts(2, 12));
  ASSERT_TRUE(ref_loader.ok());
  const auto ref = PerRelease(Rows(**ref_loader, 6 * 40));
  auto l = Loader::CreateBlend(Sources(), {0.6, 0.3, 0.1}, 3, LOpts(2, 12));
  ASSERT_TRUE(l.ok());
  auto rows = Rows(**l, 6 * 3);
  // Mid-step is refused.
  auto one_more = Rows(**l, 1);
  rows.insert(rows.end(), one_more.begin(), one_more.end());
  auto mid = (*l)->SetWeights({0.1, 0.1, 0.8});
  EXPECT_EQ(mid.code(), absl::StatusCode::kFailedPrecondition);
  auto tail = Rows(**l, 5);
  rows.insert(rows.end(), tail.begin(), tail.end());
  ASSERT_TRUE((*l)->SetWeights({0.1, 0.1, 0.8}).ok());
  EXPECT_EQ((*l)->schedule().draws_per_step(), (std::vector<uint64_t>{1, 1, 10}));
  tail = Rows(**l, 6 * 5);
  rows.insert(rows.end(), tail.begin(), tail.end());
  // Through a saved state with other weights (the restart-with-new-weights flow).
  LoaderState st = (*l)->state();
  auto m = Loader::CreateBlend(Sources(), {0.2, 0.7, 0.1}, 3, LOpts(2, 12));
  ASSERT_TRUE(m.ok());
  ASSERT_TRUE((*m)->LoadState(st).ok());
  tail = Rows(**m, 6 * 5);
  rows.insert(rows.end(), tail.begin(), tail.end());
  for (auto& [k, seq] : PerRelease(rows)) {
    ASSERT_LE(seq.size(), ref.at(k).size());
    EXPECT_EQ(seq, std::vector<int64_t>(ref.at(k).begin(), ref.at(k).begin() + seq.size()))
        << "release " << k;
  }
  // A mid-step state with other weights is refused, naming the field.
  Rows(**m, 1);
  auto n = Loader::CreateBlend(Sources(), {0.3, 0.3, 0.4}, 3, LOpts(2, 12));
  ASSERT_TRUE(n.ok());
  auto bad = (*n)->LoadState((*m)->state());
  EXPECT_EQ(bad.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(bad.message()).find("\"weight\""), std::string::npos) << bad;
}

TEST(BlendLoader, ElasticResumeWithAnotherDpSizeContinuesTheGlobalOrder) {
  const std::vector<double> w = {0.5, 0.3, 0.2};
  auto one = Loader::CreateBlend(Sources(), w, 3, LOpts(2, 8));
  ASSERT_TRUE(one.ok());
  const auto ref = Rows(**one, 4 * 10);
  std::vector<std::unique_ptr<Loader>> four;
  for (int r = 0; r < 4; ++r) {
    auto l = Loader::CreateBlend(Sources(), w, 3, LOpts(2, 8, r, 4));
    ASSERT_TRUE(l.ok());
    four.push_back(std::move(*l));
  }
  std::vector<std::pair<int64_t, int64_t>> got;
  for (int step = 0; step < 3; ++step) {
    for (auto& l : four) {
      auto rows = Rows(*l, 1);
      got.insert(got.end(), rows.begin(), rows.end());
    }
  }
  const LoaderState st = four[0]->state();
  std::vector<std::unique_ptr<Loader>> two;
  for (int r = 0; r < 2; ++r) {
    auto l = Loader::CreateBlend(Sources(), w, 3, LOpts(2, 8, r, 2));
    ASSERT_TRUE(l.ok());
    ASSERT_TRUE((*l)->LoadState(st).ok());
    two.push_back(std::move(*l));
  }
  for (int step = 3; step < 10; ++step) {
    for (auto& l : two) {
      auto rows = Rows(*l, 2);
      got.insert(got.end(), rows.begin(), rows.end());
    }
  }
  EXPECT_EQ(got, ref);
}

TEST(BlendLoader, MismatchesAreErrorsNamingTheField) {
  // seq_len and tokenizer mismatches name both releases.
  auto st = Loader::CreateBlend({std::make_shared<TokenizerSource>(20, 9, "a", "t1"),
                                 std::make_shared<TokenizerSource>(20, 17, "b", "t1")},
                                {1, 1}, 0, LOpts(1, 2));
  ASSERT_EQ(st.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(st.status().message()),
            "blend: release /data/a has seq_len 8 but release /data/b has seq_len 16");
  auto tok = Loader::CreateBlend({std::make_shared<TokenizerSource>(20, 9, "a", "t1"),
                                  std::make_shared<TokenizerSource>(20, 9, "b", "t2")},
                                 {1, 1}, 0, LOpts(1, 2));
  ASSERT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(tok.status().message()),
            "blend: release /data/a has tokenizer t1 but release /data/b has tokenizer t2");

  auto blend = Loader::CreateBlend(Sources(), {0.5, 0.3, 0.2}, 3, LOpts(2, 10));
  ASSERT_TRUE(blend.ok());
  const LoaderState bs = (*blend)->state();
  // Another release at position 1.
  auto other = Loader::CreateBlend({std::make_shared<MemorySource>(40, 9, "web"),
                                    std::make_shared<MemorySource>(17, 9, "books"),
                                    std::make_shared<MemorySource>(11, 9, "math")},
                                   {0.5, 0.3, 0.2}, 3, LOpts(2, 10));
  ASSERT_TRUE(other.ok());
  auto e = (*other)->LoadState(bs);
  EXPECT_EQ(e.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(std::string(e.message()),
            "loader state's blend[1].release_id is code, but this loader's release 1 is books");
  // A blend's state into one release, and back.
  auto single = Loader::Create(std::make_shared<MemorySource>(40, 9, "web"), 3, [] {
    LoaderOptions o = LOpts(2, 10);
    o.fields = kSampleIndex | kInputIds;
    return o;
  }());
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_NE(std::string((*single)->LoadState(bs).message()).find("field \"blend\""), std::string::npos);
  EXPECT_NE(std::string((*blend)->LoadState((*single)->state()).message()).find("blend of 3"),
            std::string::npos);
  // Seed and split.
  LoaderState seed = bs;
  seed.seed = 4;
  EXPECT_NE(std::string((*blend)->LoadState(seed).message()).find("seed 4"), std::string::npos);
  LoaderState split = bs;
  split.blend[2].split = "validation";
  EXPECT_NE(std::string((*blend)->LoadState(split).message()).find("blend[2].split"),
            std::string::npos);
  // release_index is for blends only.
  EXPECT_EQ(Loader::Create(std::make_shared<MemorySource>(40, 9, "web"), 3, LOpts(2, 10))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(BlendLoader, NotElasticRefusesAnotherGlobalBatchNamingIt) {
  LoaderOptions o = LOpts(2, 8);
  auto a = Loader::CreateBlend(Sources(), {1, 1, 1}, 3, o);
  ASSERT_TRUE(a.ok());
  const LoaderState st = (*a)->state();
  o.global_batch_size = 12;
  auto elastic = Loader::CreateBlend(Sources(), {1, 1, 1}, 3, o);
  ASSERT_TRUE(elastic.ok());
  EXPECT_TRUE((*elastic)->LoadState(st).ok());
  o.elastic = false;
  auto strict = Loader::CreateBlend(Sources(), {1, 1, 1}, 3, o);
  ASSERT_TRUE(strict.ok());
  auto e = (*strict)->LoadState(st);
  EXPECT_EQ(e.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(e.message()).find("global_batch_size 8"), std::string::npos) << e;
}

TEST(BlendLoader, RunEndsWhenTheFirstReleaseRunsOut) {
  LoaderOptions o = LOpts(2, 10);
  o.epochs = 1;
  auto l = Loader::CreateBlend(Sources(), {0.5, 0.3, 0.2}, 3, o);
  ASSERT_TRUE(l.ok()) << l.status();
  // n = {5, 3, 2}: web 40/5 = 8 steps, code 17/3 = 5, math 11/2 = 5 -> 5 steps of 5 micro batches.
  EXPECT_EQ((*l)->size(), 25);
  Rows(**l, 25);
  EXPECT_EQ((*l)->Next().status().code(), absl::StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace grist::loader
