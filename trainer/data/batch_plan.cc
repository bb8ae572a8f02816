#include "trainer/data/batch_plan.h"

#include <algorithm>
#include <string>

#include "trainer/core/splitmix64.h"

namespace sf::data {
namespace {

template <typename T>
void Shuffle(std::vector<T>& v, SplitMix64& rng) {
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng.Below(i)]);
}

SplitMix64 EpochRng(uint64_t seed, int64_t epoch, uint64_t stream) {
  SplitMix64 mix{seed ^ (uint64_t(epoch) * 0xd1b54a32d192ed03ULL) ^ (stream << 56)};
  return SplitMix64{mix.Next()};
}

}  // namespace

std::vector<std::vector<int64_t>> PlanGlobalBatches(std::vector<int64_t> order, int64_t epoch,
                                                    const BatchPlanOptions& options,
                                                    const std::function<int64_t(int64_t)>& length,
                                                    const std::function<bool(int64_t, int64_t)>& before) {
  const int64_t world = options.world_size;
  if (options.shuffle) {
    SplitMix64 rng = EpochRng(options.seed, epoch, 1);
    Shuffle(order, rng);
  }
  std::stable_sort(order.begin(), order.end(), before);
  auto capacity = [&](int64_t longest) { return world * std::max<int64_t>(1, options.budget / longest); };

  std::vector<std::vector<int64_t>> global;
  std::vector<int64_t> current;
  int64_t current_max = 0;
  for (int64_t i : order) {
    int64_t longest = std::max(current_max, length(i));
    if (!current.empty() && int64_t(current.size()) + 1 > capacity(longest)) {
      global.push_back(std::move(current));
      current.clear();
      longest = length(i);
    }
    current.push_back(i);
    current_max = longest;
  }
  if (!current.empty()) global.push_back(std::move(current));

  // Give the last (longest) batch at least `world` rows, so no rank gets an empty share.
  if (global.size() >= 2 && int64_t(global.back().size()) < world) {
    auto& prev = global[global.size() - 2];
    auto& last = global.back();
    const int64_t last_cap = capacity(length(last.back()));
    if (int64_t(prev.size() + last.size()) <= last_cap) {
      prev.insert(prev.end(), last.begin(), last.end());
      global.pop_back();
    } else {
      while (int64_t(last.size()) < world && int64_t(prev.size()) > world) {
        last.insert(last.begin(), prev.back());
        prev.pop_back();
      }
    }
  }
  if (options.shuffle) {
    SplitMix64 rng = EpochRng(options.seed, epoch, 2);
    Shuffle(global, rng);
  }
  return global;
}

std::vector<int64_t> RankShare(const std::vector<int64_t>& global, int rank, int world_size) {
  std::vector<int64_t> mine;
  for (size_t j = size_t(rank); j < global.size(); j += size_t(world_size)) mine.push_back(global[j]);
  return mine;
}

DataPosition NextPosition(DataPosition p, int64_t batches) {
  if (++p.batch >= batches) {
    ++p.epoch;
    p.batch = 0;
  }
  return p;
}

Result<DataPosition> CheckPosition(DataPosition p, int64_t batches) {
  if (p.epoch < 1 || p.batch < 0 || p.batch > batches) {
    return OutOfRange("data position (epoch " + std::to_string(p.epoch) + ", batch " + std::to_string(p.batch) +
                      ") is outside 1.. x [0, " + std::to_string(batches) + "]");
  }
  if (p.batch == batches) {
    ++p.epoch;
    p.batch = 0;
  }
  return p;
}

}  // namespace sf::data
