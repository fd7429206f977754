#include "pack/pack.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "shard/shard_format.h"

namespace grist::pack {
namespace {

using shard::SegmentWord;

std::vector<PackedSample> PackAll(PackOptions o, const std::vector<std::vector<int32_t>>& docs,
                              PackStats* stats = nullptr) {
  std::vector<PackedSample> out;
  Packer p(o, [&](const PackedSample& s) {
    out.push_back(s);
    return absl::OkStatus();
  });
  for (const auto& d : docs) EXPECT_TRUE(p.Add(d).ok());
  EXPECT_TRUE(p.Finish().ok());
  if (stats) *stats = p.stats();
  return out;
}

std::vector<int32_t> Doc(int first, int n) {
  std::vector<int32_t> d;
  for (int i = 0; i < n; ++i) d.push_back(first + i);
  return d;
}

TEST(PackTest, ConcatChunksInOrderAndPadsTheTail) {
  PackOptions o;
  o.seq_len = 3;  // samples of 4
  o.strategy = "concat";
  o.pad_id = 0;
  PackStats st;
  auto s = PackAll(o, {Doc(10, 3), Doc(20, 6), Doc(30, 1)}, &st);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].tokens, (std::vector<int32_t>{10, 11, 12, 20}));
  EXPECT_EQ(s[0].segments, (std::vector<uint32_t>{SegmentWord(3, false), SegmentWord(1, false)}));
  EXPECT_EQ(s[1].tokens, (std::vector<int32_t>{21, 22, 23, 24}));
  EXPECT_EQ(s[1].segments, (std::vector<uint32_t>{SegmentWord(4, false)}));
  EXPECT_EQ(s[2].tokens, (std::vector<int32_t>{25, 30, 0, 0}));
  EXPECT_EQ(s[2].segments, (std::vector<uint32_t>{SegmentWord(1, false), SegmentWord(1, false),
                                                  SegmentWord(2, true)}));
  EXPECT_EQ(st.documents, 3u);
  EXPECT_EQ(st.tokens_in, 10u);
  EXPECT_EQ(st.tokens_out, 10u);
  EXPECT_EQ(st.samples, 3u);
  EXPECT_EQ(st.padding_tokens, 2u);
  EXPECT_EQ(st.documents_split, 1u);
  EXPECT_EQ(st.truncated_documents, 0u);
  EXPECT_DOUBLE_EQ(st.padding_fraction(), 2.0 / 12.0);
}

TEST(PackTest, BestFitDecreasingPlacesLongestFirstIntoTightestBin) {
  PackOptions o;
  o.seq_len = 9;  // samples of 10
  o.strategy = "bestfit";
  o.pad_id = 3;
  PackStats st;
  // Lengths 6, 4, 5, 3, 2, 12 (12 = one full sample + remainder 2).
  auto s = PackAll(o, {Doc(100, 6), Doc(200, 4), Doc(300, 5), Doc(400, 3), Doc(500, 2), Doc(600, 12)},
               &st);
  // The full sample of the long document comes first; then BFD over {6,4,5,3,2,2}:
  // 6 -> bin0 (4 left); 5 -> bin1 (5 left); 4 -> bin0 (0 left); 3 -> bin1 (2 left);
  // 2 (doc 500) -> bin1 (0 left); 2 (doc 600 tail) -> bin2.
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0].tokens, Doc(600, 10));
  EXPECT_EQ(s[1].tokens, (std::vector<int32_t>{100, 101, 102, 103, 104, 105, 200, 201, 202, 203}));
  EXPECT_EQ(s[1].segments, (std::vector<uint32_t>{SegmentWord(6, false), SegmentWord(4, false)}));
  EXPECT_EQ(s[2].tokens, (std::vector<int32_t>{300, 301, 302, 303, 304, 400, 401, 402, 500, 501}));
  EXPECT_EQ(s[3].tokens, (std::vector<int32_t>{610, 611, 3, 3, 3, 3, 3, 3, 3, 3}));
  EXPECT_EQ(s[3].segments, (std::vector<uint32_t>{SegmentWord(2, false), SegmentWord(8, true)}));
  EXPECT_EQ(st.samples, 4u);
  EXPECT_EQ(st.padding_tokens, 8u);
  EXPECT_EQ(st.documents_split, 1u);
  EXPECT_EQ(st.tokens_out, 32u);
  EXPECT_EQ(st.truncated_documents, 0u);
}

TEST(PackTest, BestFitWindowBoundsWhatIsBuffered) {
  PackOptions o;
  o.seq_len = 9;
  o.strategy = "bestfit";
  o.bestfit_window_tokens = 5;
  int emitted_before_finish = 0;
  bool finished = false;
  Packer p(o, [&](const PackedSample&) {
    if (!finished) ++emitted_before_finish;
    return absl::OkStatus();
  });
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(p.Add(Doc(i * 10, 3)).ok());
  EXPECT_GT(emitted_before_finish, 0);
  finished = true;
  ASSERT_TRUE(p.Finish().ok());
  EXPECT_EQ(p.stats().tokens_out, 18u);
}

// The bound itself: after every Add() the document tokens buffered (added, not yet emitted in a
// sample) stay below bestfit_window_tokens, for documents shorter and longer than a sample.
TEST(PackTest, BestFitBuffersFewerTokensThanTheWindow) {
  PackOptions o;
  o.seq_len = 63;  // 64-token samples
  o.strategy = "bestfit";
  o.bestfit_window_tokens = 500;
  uint64_t emitted = 0;
  Packer p(o, [&](const PackedSample& s) {
    emitted += s.tokens.size() - s.padding;
    return absl::OkStatus();
  });
  uint64_t added = 0, most = 0;
  uint64_t x = 12345;
  for (int i = 0; i < 400; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const int n = 1 + static_cast<int>((x >> 33) % 200);  // up to 3 samples long
    ASSERT_TRUE(p.Add(Doc(i * 1000, n)).ok());
    added += static_cast<uint64_t>(n);
    ASSERT_LE(emitted, added);
    const uint64_t buffered = added - emitted;
    ASSERT_LT(buffered, o.bestfit_window_tokens) << "after document " << i;
    most = std::max(most, buffered);
  }
  EXPECT_GT(most, o.bestfit_window_tokens / 2) << "the window was never nearly full";
  ASSERT_TRUE(p.Finish().ok());
  EXPECT_EQ(emitted, added);
}

// Documents handed over with their owner (kept, not copied, in bestfit's window) pack to the same
// samples as copied ones, through several windows, with documents longer than a sample; a sink
// that swaps the samples' buffers for its own dirty ones changes nothing (the packer resets
// them); an owner is held only while a document it holds waits in the window; and the owners
// held never come to more than twice the window, also where each buffer is mostly a long
// document (whose full samples go out at once) with a short one beside it.
TEST(PackTest, DocumentsKeptByTheirOwnerPackAsCopiesDo) {
  for (const char* corpus : {"mixed", "long"}) {
    // The documents in batches, each batch one buffer owned by a shared_ptr that only the packer
    // holds once Add returns: "mixed", 1 to 9 documents of 0 to 2.3 samples a batch; "long", a
    // document of 5 to 10 samples and one of up to 40 tokens a batch.
    std::vector<std::vector<std::vector<int32_t>>> batches;
    uint64_t x = 99;
    auto next = [&x](int n) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      return static_cast<int>((x >> 33) % static_cast<uint64_t>(n));
    };
    for (int b = 0, i = 0; i < 300; ++b) {
      batches.emplace_back();
      if (std::string(corpus) == "mixed") {
        for (int n = 1 + b % 9; n > 0 && i < 300; --n, ++i) {
          batches.back().push_back(Doc(i * 1000, next(150)));
        }
      } else {
        batches.back().push_back(Doc(i++ * 1000, 64 * (5 + next(6)) + next(64)));
        batches.back().push_back(Doc(i++ * 1000, 1 + next(40)));
      }
    }
    std::vector<std::vector<int32_t>> docs;
    for (const auto& batch : batches) docs.insert(docs.end(), batch.begin(), batch.end());
    for (const char* strategy : {"concat", "bestfit"}) {
      PackOptions o;
      o.seq_len = 63;  // 64-token samples
      o.strategy = strategy;
      o.pad_id = 7;
      o.bestfit_window_tokens = 700;
      const std::vector<PackedSample> copied = PackAll(o, docs);
      ASSERT_GT(copied.size(), 20u);

      std::vector<PackedSample> kept;
      PackedSample dirty;  // what the sink hands back: another sample's leftovers
      dirty.tokens.assign(64, -1);
      dirty.segments.assign(3, SegmentWord(5, false));
      dirty.padding = 11;
      Packer p(o, [&](PackedSample& s) {
        kept.push_back(s);
        std::swap(s, dirty);
        return absl::OkStatus();
      });
      std::vector<std::weak_ptr<std::vector<int32_t>>> owners;
      int max_held = 0;
      uint64_t max_held_tokens = 0;
      for (const auto& docs_of_batch : batches) {
        auto batch = std::make_shared<std::vector<int32_t>>();
        std::vector<std::pair<size_t, size_t>> spans;
        for (const auto& d : docs_of_batch) {
          spans.emplace_back(batch->size(), d.size());
          batch->insert(batch->end(), d.begin(), d.end());
        }
        for (const auto& [at, len] : spans) {
          ASSERT_TRUE(
              p.Add(std::span<const int32_t>(batch->data() + at, len), batch, batch->size()).ok());
        }
        owners.push_back(batch);
        batch.reset();
        int held = 0;
        uint64_t held_tokens = 0;
        for (const auto& w : owners) {
          if (auto o = w.lock()) {
            ++held;
            held_tokens += o->size();
          }
        }
        max_held = std::max(max_held, held);
        max_held_tokens = std::max(max_held_tokens, held_tokens);
      }
      ASSERT_TRUE(p.Finish().ok());
      const std::string what = std::string(corpus) + " " + strategy;
      for (size_t i = 0; i < owners.size(); ++i) EXPECT_TRUE(owners[i].expired()) << what << i;
      if (std::string(strategy) == "bestfit") {
        EXPECT_GT(max_held, 1) << what << ": the window held no batches";
        EXPECT_LT(max_held, static_cast<int>(owners.size()) / 4) << what << ": windows kept theirs";
        EXPECT_LE(max_held_tokens, 2 * o.bestfit_window_tokens) << what;
      } else {
        EXPECT_EQ(max_held, 0) << what << ": concat copies what it keeps";
      }
      ASSERT_EQ(kept.size(), copied.size()) << what;
      for (size_t i = 0; i < kept.size(); ++i) {
        EXPECT_EQ(kept[i].tokens, copied[i].tokens) << what << " sample " << i;
        EXPECT_EQ(kept[i].segments, copied[i].segments) << what << " sample " << i;
        EXPECT_EQ(kept[i].padding, copied[i].padding) << what << " sample " << i;
      }
    }
  }
}

TEST(PackTest, EveryTokenSurvivesBothStrategies) {
  for (const char* strategy : {"concat", "bestfit"}) {
    PackOptions o;
    o.seq_len = 63;
    o.strategy = strategy;
    o.pad_id = 0;
    std::vector<std::vector<int32_t>> docs;
    uint64_t total = 0;
    for (int i = 0; i < 200; ++i) {
      docs.push_back(Doc(1 + i * 1000, 1 + (i * 37) % 150));
      total += docs.back().size();
    }
    PackStats st;
    auto s = PackAll(o, docs, &st);
    uint64_t non_pad = 0;
    for (const auto& x : s) {
      ASSERT_EQ(x.tokens.size(), 64u);
      uint64_t sum = 0;
      for (uint32_t w : x.segments) {
        sum += shard::SegmentLength(w);
        if (!shard::SegmentIsPadding(w)) non_pad += shard::SegmentLength(w);
      }
      EXPECT_EQ(sum, 64u);
    }
    EXPECT_EQ(non_pad, total) << strategy;
    EXPECT_EQ(st.tokens_out, total);
  }
}

TEST(PackTest, InvalidOptions) {
  PackOptions o;
  o.seq_len = 0;
  EXPECT_EQ(o.Validate().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(o.Validate().message()).find("pack.seq_len"), std::string::npos);
  o.seq_len = -5;
  EXPECT_FALSE(o.Validate().ok());
  o.seq_len = 8;
  o.strategy = "greedy";
  EXPECT_NE(std::string(o.Validate().message()).find("pack.strategy"), std::string::npos);
}

}  // namespace
}  // namespace grist::pack
