#include "pack/pack.h"

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "common/config.h"
#include "common/json_writer.h"
#include "common/status_macros.h"
#include "shard/shard_format.h"

namespace grist::pack {

using shard::SegmentWord;

const OptionTable<PackOptions>& PackOptions::Table() {
  static const OptionTable<PackOptions>* table = [] {
    auto* t = new OptionTable<PackOptions>("pack.");
    t->Int("pack.seq_len", GRIST_OPTION_FIELD(seq_len),
           "Tokens per training sample; each sample holds seq_len + 1 (inputs and the shifted target)",
           {1, static_cast<double>(shard::kMaxSampleTokens) - 1})
        .Required();
    t->Enum("pack.strategy", GRIST_OPTION_FIELD(strategy),
            "concat: concatenate and cut (Megatron); bestfit: best-fit-decreasing bins, fewer "
            "documents split (docs/pack.md)",
            std::vector<std::pair<std::string, std::string>>{{"concat", "concat"},
                                                             {"bestfit", "bestfit"}});
    t->Int("pack.bestfit_window_tokens", GRIST_OPTION_FIELD(bestfit_window_tokens),
           "bestfit: tokens of documents packed together (bounds memory; the result depends on it)",
           {1, std::numeric_limits<double>::infinity()});
    return t;
  }();
  return *table;
}

absl::StatusOr<PackOptions> PackOptions::FromConfig(const Config& c) {
  PackOptions o;
  RETURN_IF_ERROR(Table().Read(c, &o));
  absl::Status s = o.Validate();
  if (!s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("config ", c.source(), ": ", std::string(s.message())));
  }
  return o;
}

absl::Status PackOptions::Validate() const {
  if (seq_len <= 0 || seq_len >= static_cast<int64_t>(shard::kMaxSampleTokens)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "key 'pack.seq_len': must be a positive integer below ", shard::kMaxSampleTokens, ", got ",
        seq_len));
  }
  if (strategy != "concat" && strategy != "bestfit") {
    return absl::InvalidArgumentError(
        absl::StrCat("key 'pack.strategy': expected concat or bestfit, got '", strategy, "'"));
  }
  if (pad_id < 0) return absl::InvalidArgumentError("pad id must be >= 0");
  return absl::OkStatus();
}

std::string PackStats::ToJson() const {
  JsonWriter w(0);
  w.BeginObject();
  w.Field("documents", documents).Field("empty_documents", empty_documents);
  w.Field("tokens_in", tokens_in).Field("tokens_out", tokens_out).Field("samples", samples);
  w.Field("padding_tokens", padding_tokens).Field("padding_fraction", padding_fraction());
  w.Field("documents_split", documents_split).Field("truncated_documents", truncated_documents);
  w.EndObject();
  return w.Take();
}

void PackStats::Merge(const PackStats& o) {
  documents += o.documents;
  tokens_in += o.tokens_in;
  tokens_out += o.tokens_out;
  samples += o.samples;
  padding_tokens += o.padding_tokens;
  documents_split += o.documents_split;
  truncated_documents += o.truncated_documents;
  empty_documents += o.empty_documents;
  sample_tokens_ = o.sample_tokens_;
}

Packer::Packer(PackOptions options, Sink sink)
    : o_(std::move(options)), sink_(std::move(sink)), st_(o_.sample_tokens()) {
  stats_.sample_tokens_ = st_;
}

absl::Status Packer::Emit(PackedSample& s) {
  uint64_t used = s.tokens.size();
  if (used < st_) {
    s.padding = st_ - used;
    s.tokens.resize(st_, o_.pad_id);
    s.segments.push_back(SegmentWord(static_cast<uint32_t>(st_ - used), true));
  }
  stats_.samples++;
  stats_.padding_tokens += s.padding;
  stats_.tokens_out += st_ - s.padding;
  return sink_(s);
}

absl::Status Packer::Add(std::span<const int32_t> doc, std::shared_ptr<const void> owner,
                         uint64_t owner_tokens) {
  stats_.documents++;
  stats_.tokens_in += doc.size();
  if (doc.empty()) {
    stats_.empty_documents++;
    return absl::OkStatus();
  }
  if (o_.strategy == "concat") {
    bool split = false;
    size_t off = 0;
    while (off < doc.size()) {
      size_t room = st_ - cur_.tokens.size();
      size_t n = std::min(room, doc.size() - off);
      cur_.tokens.insert(cur_.tokens.end(), doc.begin() + off, doc.begin() + off + n);
      cur_.segments.push_back(SegmentWord(static_cast<uint32_t>(n), false));
      off += n;
      if (cur_.tokens.size() == st_) {
        RETURN_IF_ERROR(Emit(cur_));
        cur_.tokens.clear();
        cur_.segments.clear();
        cur_.padding = 0;
        if (off < doc.size()) split = true;
      }
    }
    if (split) stats_.documents_split++;
    return absl::OkStatus();
  }
  // bestfit: full samples of a long document go out at once; the remainder joins the window.
  size_t off = 0;
  bool split = doc.size() > st_;
  while (doc.size() - off >= st_ && doc.size() - off > 0) {
    out_.tokens.assign(doc.begin() + off, doc.begin() + off + st_);
    out_.segments.assign(1, SegmentWord(st_, false));
    out_.padding = 0;
    RETURN_IF_ERROR(Emit(out_));
    off += st_;
    if (off == doc.size()) break;
  }
  if (split) stats_.documents_split++;
  if (off < doc.size()) {
    const std::span<const int32_t> rest = doc.subspan(off);
    const int32_t* at = rest.data();
    bool held = owner != nullptr && !owners_.empty() && owners_.back() == owner;
    if (owner != nullptr && !held && owned_tokens_ + owner_tokens <= 2 * o_.bestfit_window_tokens) {
      owners_.push_back(std::move(owner));
      owned_tokens_ += owner_tokens;
      held = true;
    }
    if (!held) {
      // Into the chunk being filled, else the next one (made once: 4 MiB, or one remainder).
      const size_t chunk_tokens = std::max<size_t>(size_t{1} << 20, st_);
      if (chunks_.empty() || chunk_used_ + rest.size() > chunk_tokens) {
        if (!chunks_.empty()) ++chunk_;
        if (chunk_ == chunks_.size()) {
          chunks_.push_back(std::make_unique_for_overwrite<int32_t[]>(chunk_tokens));
        }
        chunk_used_ = 0;
      }
      int32_t* copy = chunks_[chunk_].get() + chunk_used_;
      std::copy(rest.begin(), rest.end(), copy);
      chunk_used_ += rest.size();
      at = copy;
    }
    window_docs_.emplace_back(at, static_cast<uint32_t>(rest.size()));
    window_tokens_ += rest.size();
    if (window_tokens_ >= o_.bestfit_window_tokens) RETURN_IF_ERROR(FlushWindow());
  }
  return absl::OkStatus();
}

absl::Status Packer::FlushWindow() {
  const size_t n = window_docs_.size();
  order_.resize(n);
  std::iota(order_.begin(), order_.end(), 0u);
  std::stable_sort(order_.begin(), order_.end(), [&](uint32_t a, uint32_t b) {
    return window_docs_[a].second > window_docs_[b].second;
  });
  // Place every document first (samples as lists of documents), then assemble and emit each
  // sample in creation order in one reused buffer.
  constexpr uint32_t kNone = UINT32_MAX;
  next_.assign(n, kNone);
  bins_.clear();
  std::vector<uint32_t> used;
  std::multimap<uint32_t, size_t> room;  // remaining room -> sample; equal keys in creation order
  for (uint32_t i : order_) {
    const uint32_t len = window_docs_[i].second;
    auto it = room.lower_bound(len);
    size_t b;
    if (it == room.end()) {
      b = bins_.size();
      bins_.emplace_back(i, i);
      used.push_back(0);
    } else {
      b = it->second;
      room.erase(it);
      next_[bins_[b].second] = i;
      bins_[b].second = i;
    }
    used[b] += len;
    const uint32_t left = st_ - used[b];
    if (left > 0) room.emplace(left, b);
  }
  for (const auto& [first, last] : bins_) {
    out_.tokens.clear();
    out_.segments.clear();
    out_.padding = 0;
    for (uint32_t d = first; d != kNone; d = next_[d]) {
      const auto [at, len] = window_docs_[d];
      out_.tokens.insert(out_.tokens.end(), at, at + len);
      out_.segments.push_back(SegmentWord(len, false));
    }
    RETURN_IF_ERROR(Emit(out_));
  }
  window_docs_.clear();
  window_tokens_ = 0;
  owners_.clear();  // the callers' buffers go back to them
  owned_tokens_ = 0;
  chunk_ = 0;
  chunk_used_ = 0;
  return absl::OkStatus();
}

absl::Status Packer::Finish() {
  if (o_.strategy == "concat") {
    if (!cur_.tokens.empty()) RETURN_IF_ERROR(Emit(cur_));
    cur_ = PackedSample();
    return absl::OkStatus();
  }
  return FlushWindow();
}

}  // namespace grist::pack
