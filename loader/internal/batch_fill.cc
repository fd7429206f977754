#include "loader/internal/batch_fill.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace grist::loader::internal {
namespace {

template <typename Tok, typename Id>
void CopyTokens(const Tok* t, int64_t s, Id* input, Id* labels) {
  if (input) {
    for (int64_t j = 0; j < s; ++j) input[j] = static_cast<Id>(t[j]);
  }
  if (labels) {
    for (int64_t j = 0; j < s; ++j) labels[j] = static_cast<Id>(t[j + 1]);
  }
}

template <typename Id>
void FillPositions(Id* pos, int64_t start, int64_t end) {
  for (int64_t j = start; j < end; ++j) pos[j] = static_cast<Id>(j - start);
}

}  // namespace

absl::Status CheckSegments(const SampleSource& src, uint64_t index, const SampleView& v,
                           uint32_t sample_tokens) {
  if (v.num_segments == 0) {
    return absl::DataLossError(absl::StrCat(src.Describe(index), ": sample has no segments"));
  }
  uint64_t sum = 0;
  for (uint64_t k = 0; k < v.num_segments; ++k) {
    const uint32_t seg = v.segments[k];
    const uint32_t len = seg & kSegmentLengthMask;
    if (len == 0) {
      return absl::DataLossError(
          absl::StrCat(src.Describe(index), ": segment ", k, " has length 0"));
    }
    if ((seg & kSegmentPaddingBit) && k + 1 != v.num_segments) {
      return absl::DataLossError(
          absl::StrCat(src.Describe(index), ": padding segment ", k, " is not the last"));
    }
    sum += len;
  }
  if (sum != sample_tokens) {
    return absl::DataLossError(absl::StrCat(src.Describe(index), ": segment lengths sum to ", sum,
                                            ", expected sample_tokens ", sample_tokens));
  }
  return absl::OkStatus();
}

template <typename Id>
void FillRow(const SampleSource& src, const SampleView& v, int64_t s, RowOut* out) {
  const uint32_t* segs = v.segments;
  if (src.token_dtype() == TokenDtype::kUint16) {
    CopyTokens(static_cast<const uint16_t*>(v.tokens), s, static_cast<Id*>(out->input),
               static_cast<Id*>(out->labels));
  } else {
    CopyTokens(static_cast<const int32_t*>(v.tokens), s, static_cast<Id*>(out->input),
               static_cast<Id*>(out->labels));
  }
  if (out->loss_mask) std::fill(out->loss_mask, out->loss_mask + s, 1.0f);
  int64_t start = 0;
  for (uint64_t k = 0; k < v.num_segments; ++k) {
    const int64_t len = segs[k] & kSegmentLengthMask;
    const bool pad = segs[k] & kSegmentPaddingBit;
    const int64_t end = start + len;  // segment covers sample positions [start, end)
    const int64_t in_end = std::min(end, s);
    if (start < s) {
      if (out->positions) FillPositions(static_cast<Id*>(out->positions), start, in_end);
      if (out->cu) {
        out->cu[out->cu_count++] = static_cast<int32_t>(out->cu_base + in_end);
      }
    }
    if (pad && out->loss_mask) {
      // labels[j] = t[j + 1] is padding for j + 1 in [start, end).
      const int64_t lo = std::max<int64_t>(start - 1, 0);
      for (int64_t j = lo; j < std::min(end - 1, s); ++j) out->loss_mask[j] = 0.0f;
    }
    start = end;
  }
}

template void FillRow<int32_t>(const SampleSource&, const SampleView&, int64_t, RowOut*);
template void FillRow<int64_t>(const SampleSource&, const SampleView&, int64_t, RowOut*);

}  // namespace grist::loader::internal
