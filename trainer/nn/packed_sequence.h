// How a batch of sequences of different lengths is packed for the recurrent layers: PyTorch's
// PackedSequence layout (pack_padded_sequence with enforce_sorted=False). The sequences are
// sorted longest first (ties keep their batch order); step t holds one row for each sequence
// longer than t, in sorted order, right after the rows of step t-1. No padding is stored or
// computed, and the rows of step t are a prefix of those of step t-1.
//
// Host-side bookkeeping only: the layers read batch_sizes, and the index vectors below go to the
// device as int32 row indices for the backend's row gather (EmbeddingForward with scale 1).
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"

namespace sf {

struct PackedLayout {
  std::vector<int64_t> batch_sizes;  // rows per step, non-increasing
  std::vector<int64_t> offsets;      // first row of each step; offsets.back() = rows()
  std::vector<int64_t> order;        // sorted position -> the sequence's index in the batch
  std::vector<int64_t> lengths;      // by sorted position, non-increasing

  int64_t rows() const { return offsets.empty() ? 0 : offsets.back(); }
  int64_t steps() const { return static_cast<int64_t>(batch_sizes.size()); }
  int64_t sequences() const { return static_cast<int64_t>(order.size()); }
  // The row of sorted sequence i at step t (t < lengths[i]).
  int64_t Row(int64_t i, int64_t t) const { return offsets[t] + i; }
  // For every row (i, t), the row (i, lengths[i] - 1 - t): the same sequences read backwards,
  // packed alike. Its own inverse.
  std::vector<int32_t> Reversal() const;
  // The row of each sorted sequence's last step.
  std::vector<int32_t> LastRows() const;
};

// The layout of sequences of these lengths (in batch order). kInvalidArgument for an empty batch
// or a length below 1, naming the sequence.
Result<PackedLayout> PackLengths(const std::vector<int64_t>& lengths);

}  // namespace sf
