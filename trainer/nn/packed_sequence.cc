#include "trainer/nn/packed_sequence.h"

#include <algorithm>
#include <numeric>
#include <string>

namespace sf {

Result<PackedLayout> PackLengths(const std::vector<int64_t>& lengths) {
  if (lengths.empty()) return InvalidArgument("packing: the batch has no sequences");
  for (size_t b = 0; b < lengths.size(); ++b) {
    if (lengths[b] < 1) {
      return InvalidArgument("packing: sequence " + std::to_string(b) + " has length " + std::to_string(lengths[b]) +
                             "; every sequence needs at least one step");
    }
  }
  PackedLayout p;
  p.order.resize(lengths.size());
  std::iota(p.order.begin(), p.order.end(), 0);
  std::stable_sort(p.order.begin(), p.order.end(), [&](int64_t a, int64_t b) { return lengths[a] > lengths[b]; });
  for (int64_t b : p.order) p.lengths.push_back(lengths[b]);
  p.offsets.push_back(0);
  for (int64_t t = 0; t < p.lengths[0]; ++t) {
    int64_t n = 0;
    while (n < static_cast<int64_t>(p.lengths.size()) && p.lengths[n] > t) ++n;
    p.batch_sizes.push_back(n);
    p.offsets.push_back(p.offsets.back() + n);
  }
  return p;
}

std::vector<int32_t> PackedLayout::Reversal() const {
  std::vector<int32_t> rev(static_cast<size_t>(rows()));
  for (int64_t t = 0; t < steps(); ++t) {
    for (int64_t i = 0; i < batch_sizes[t]; ++i) rev[Row(i, t)] = static_cast<int32_t>(Row(i, lengths[i] - 1 - t));
  }
  return rev;
}

std::vector<int32_t> PackedLayout::LastRows() const {
  std::vector<int32_t> last(order.size());
  for (size_t i = 0; i < order.size(); ++i) last[i] = static_cast<int32_t>(Row(static_cast<int64_t>(i), lengths[i] - 1));
  return last;
}

}  // namespace sf
