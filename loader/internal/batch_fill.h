// Filling one row of a batch from one sample (loader/loader.h): the sample's segment words checked
// (docs/formats/release.md, ".seg"), then input_ids, labels, position_ids, loss_mask and the row's
// cu_seqlens entries written from its tokens and segments. Pure functions of their arguments.
#ifndef GRIST_LOADER_INTERNAL_BATCH_FILL_H_
#define GRIST_LOADER_INTERNAL_BATCH_FILL_H_

#include <cstdint>

#include "absl/status/status.h"
#include "loader/source.h"

namespace grist::loader::internal {

// Where one row's fields go (nullptr: not requested).
struct RowOut {
  void* input = nullptr;
  void* labels = nullptr;
  void* positions = nullptr;
  float* loss_mask = nullptr;
  int32_t* cu = nullptr;  // next cu_seqlens entry to write
  int64_t cu_base = 0;    // flattened offset of this row
  int64_t cu_count = 0;   // entries written by this row
};

// DataLoss naming the sample (SampleSource::Describe) when its segments are not a valid cover of
// `sample_tokens`: none, one of length 0, padding that is not last, or lengths not summing to it.
absl::Status CheckSegments(const SampleSource& src, uint64_t index, const SampleView& v,
                           uint32_t sample_tokens);

// Fills row `out` from sample `v` of `src` (checked by CheckSegments) for `s` = sample_tokens - 1
// positions; Id is the ids' type, int32_t or int64_t. Advances out->cu_count by the row's
// cu_seqlens entries.
template <typename Id>
void FillRow(const SampleSource& src, const SampleView& v, int64_t s, RowOut* out);

extern template void FillRow<int32_t>(const SampleSource&, const SampleView&, int64_t, RowOut*);
extern template void FillRow<int64_t>(const SampleSource&, const SampleView&, int64_t, RowOut*);

}  // namespace grist::loader::internal

#endif  // GRIST_LOADER_INTERNAL_BATCH_FILL_H_
