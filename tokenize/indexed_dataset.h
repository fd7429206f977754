// Megatron-LM indexed datasets (MMIDIDX version 1) of variable-length sequences: what
// `grist tokenize encode` writes, one sequence (and one Megatron document) per input document.
// Grammar: docs/formats/mmidx.md. grist has one MMIDIDX reader/writer, in shard/indexed_dataset.h;
// tokenize uses it under these names.
#ifndef GRIST_TOKENIZE_INDEXED_DATASET_H_
#define GRIST_TOKENIZE_INDEXED_DATASET_H_

#include "shard/indexed_dataset.h"

namespace grist::tokenize {

using shard::DatasetInfo;
using shard::IndexedDatasetReader;
using shard::IndexedDatasetWriter;

}  // namespace grist::tokenize

#endif  // GRIST_TOKENIZE_INDEXED_DATASET_H_
