// The epoch plan both batch iterators share (trainer/data/batching.h for token budgets,
// trainer/speech/speech_batches.h for frame budgets): fairseq's ordered_indices + batch_by_size
// with rank sharding, and the resumable reading position's arithmetic. batching.h's header
// describes the plan in full; here it is once, parameterised by each item's padded length and
// the sort order.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "common/status.h"

namespace sf::data {

struct DataPosition {
  int64_t epoch = 1;  // 1-based
  int64_t batch = 0;  // next batch within the epoch
  bool operator==(const DataPosition&) const = default;
};

struct BatchPlanOptions {
  int64_t budget = 4096;  // per rank per micro-batch: rows * longest length
  int world_size = 1;
  uint64_t seed = 0;
  bool shuffle = true;  // false: the items' given order before the sort, same every epoch
};

// The global batches of `epoch`: `items` permuted by (seed, epoch) when shuffling, stably
// sorted by `before`, cut greedily into batches of at most world_size * max(1, budget / L) rows
// (L the batch's longest `length`; an item longer than the budget on its own is a batch of one
// per rank), the last batch borrowing from the one before until it has world_size rows, then
// the batches' order permuted by (seed, epoch) when shuffling.
std::vector<std::vector<int64_t>> PlanGlobalBatches(std::vector<int64_t> items, int64_t epoch,
                                                    const BatchPlanOptions& options,
                                                    const std::function<int64_t(int64_t)>& length,
                                                    const std::function<bool(int64_t, int64_t)>& before);

// Rank `rank`'s rows of a global batch: rows rank, rank + world_size, ...
std::vector<int64_t> RankShare(const std::vector<int64_t>& global, int rank, int world_size);

// The position after `p` in an epoch of `batches` batches (the end of an epoch is the start of
// the next).
DataPosition NextPosition(DataPosition p, int64_t batches);
// `p` checked and normalised: kOutOfRange when epoch < 1 or batch is not in [0, batches].
Result<DataPosition> CheckPosition(DataPosition p, int64_t batches);

}  // namespace sf::data
