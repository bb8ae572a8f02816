#include "trainer/data/batching.h"

#include <algorithm>

#include "common/log.h"
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

void MakeBatch(const ParallelDataset& data, const std::vector<int64_t>& indices, Batch* out) {
  int64_t b = int64_t(indices.size());
  int64_t ts = 0, tt = 0;
  for (int64_t i : indices) {
    ts = std::max(ts, data.src_length(i));
    tt = std::max(tt, data.tgt_length(i));
  }
  out->batch = b;
  out->src_len = ts;
  out->tgt_len = tt;
  out->indices = indices;
  out->src.assign(size_t(b * ts), kPadId);
  out->tgt_in.assign(size_t(b * tt), kPadId);
  out->tgt_out.assign(size_t(b * tt), kPadId);
  out->num_source_tokens = 0;
  out->num_target_tokens = 0;
  for (int64_t r = 0; r < b; ++r) {
    auto s = data.src(indices[r]);
    auto t = data.tgt(indices[r]);
    int32_t* src_row = out->src.data() + r * ts;
    std::copy(s.begin(), s.end(), src_row);
    src_row[s.size()] = kEosId;
    int32_t* in_row = out->tgt_in.data() + r * tt;
    int32_t* out_row = out->tgt_out.data() + r * tt;
    in_row[0] = kEosId;
    std::copy(t.begin(), t.end(), in_row + 1);
    std::copy(t.begin(), t.end(), out_row);
    out_row[t.size()] = kEosId;
    out->num_source_tokens += int64_t(s.size()) + 1;
    out->num_target_tokens += int64_t(t.size()) + 1;
  }
}

BatchIterator::BatchIterator(const ParallelDataset* data, const BatchingOptions& options)
    : data_(data), options_(options) {}

Result<BatchIterator> BatchIterator::Create(const ParallelDataset* data,
                                            const BatchingOptions& options) {
  if (data == nullptr) return InvalidArgument("batching: no dataset");
  if (options.max_tokens < 1) {
    return InvalidArgument("max_tokens: " + std::to_string(options.max_tokens) + " must be >= 1");
  }
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return InvalidArgument("rank " + std::to_string(options.rank) + " is not in [0, " +
                           std::to_string(options.world_size) + ")");
  }
  BatchIterator it(data, options);
  for (int64_t i = 0; i < data->size(); ++i) {
    if (std::max(data->src_length(i), data->tgt_length(i)) <= options.max_tokens) {
      it.batchable_.push_back(i);
    } else {
      ++it.skipped_;
    }
  }
  if (it.skipped_ > 0) {
    log::Warn("data", {{"event", "skipped_over_max_tokens"},
                       {"split", data->name()},
                       {"pairs", std::to_string(it.skipped_)},
                       {"max_tokens", std::to_string(options.max_tokens)}});
  }
  if (int64_t(it.batchable_.size()) < options.world_size) {
    return InvalidArgument("split " + data->name() + ": " + std::to_string(it.batchable_.size()) +
                           " batchable pairs for " + std::to_string(options.world_size) + " ranks");
  }
  it.PlanEpoch(1);
  it.batches_per_epoch_ = int64_t(it.global_.size());
  return it;
}

void BatchIterator::PlanEpoch(int64_t epoch) {
  if (planned_epoch_ == epoch && !global_.empty()) return;
  const int64_t world = options_.world_size;
  std::vector<int64_t> order = batchable_;
  if (options_.shuffle) {
    SplitMix64 rng = EpochRng(options_.seed, epoch, 1);
    Shuffle(order, rng);
  }
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    int64_t ta = data_->tgt_length(a), tb = data_->tgt_length(b);
    if (ta != tb) return ta < tb;
    return data_->src_length(a) < data_->src_length(b);
  });
  auto length = [&](int64_t i) { return std::max(data_->src_length(i), data_->tgt_length(i)); };
  auto capacity = [&](int64_t longest) { return world * (options_.max_tokens / longest); };

  global_.clear();
  std::vector<int64_t> current;
  int64_t current_max = 0;
  for (int64_t i : order) {
    int64_t longest = std::max(current_max, length(i));
    if (!current.empty() && int64_t(current.size()) + 1 > capacity(longest)) {
      global_.push_back(std::move(current));
      current.clear();
      longest = length(i);
    }
    current.push_back(i);
    current_max = longest;
  }
  if (!current.empty()) global_.push_back(std::move(current));

  // Give the last (longest) batch at least `world` rows, so no rank gets an empty share.
  if (global_.size() >= 2 && int64_t(global_.back().size()) < world) {
    auto& prev = global_[global_.size() - 2];
    auto& last = global_.back();
    int64_t last_cap = capacity(length(last.back()));
    if (int64_t(prev.size() + last.size()) <= last_cap) {
      prev.insert(prev.end(), last.begin(), last.end());
      global_.pop_back();
    } else {
      while (int64_t(last.size()) < world && int64_t(prev.size()) > world) {
        last.insert(last.begin(), prev.back());
        prev.pop_back();
      }
    }
  }
  if (options_.shuffle) {
    SplitMix64 rng = EpochRng(options_.seed, epoch, 2);
    Shuffle(global_, rng);
  }
  planned_epoch_ = epoch;
}

std::vector<std::vector<int64_t>> BatchIterator::EpochPlan(int64_t epoch) {
  PlanEpoch(epoch);
  std::vector<std::vector<int64_t>> out;
  out.reserve(global_.size());
  for (const auto& g : global_) {
    std::vector<int64_t> mine;
    for (size_t j = size_t(options_.rank); j < g.size(); j += size_t(options_.world_size)) {
      mine.push_back(g[j]);
    }
    out.push_back(std::move(mine));
  }
  return out;
}

void BatchIterator::BatchAt(int64_t epoch, int64_t index, Batch* out) {
  PlanEpoch(epoch);
  const auto& g = global_[size_t(index)];
  std::vector<int64_t> mine;
  for (size_t j = size_t(options_.rank); j < g.size(); j += size_t(options_.world_size)) {
    mine.push_back(g[j]);
  }
  MakeBatch(*data_, mine, out);
  out->epoch = epoch;
  out->batch_index = index;
}

void BatchIterator::Next(Batch* out) {
  if (position_.batch >= batches_per_epoch_) {
    ++position_.epoch;
    position_.batch = 0;
  }
  BatchAt(position_.epoch, position_.batch, out);
  if (++position_.batch == batches_per_epoch_) {
    ++position_.epoch;
    position_.batch = 0;
  }
}

Status BatchIterator::SetPosition(DataPosition p) {
  if (p.epoch < 1 || p.batch < 0 || p.batch > batches_per_epoch_) {
    return OutOfRange("data position (epoch " + std::to_string(p.epoch) + ", batch " +
                      std::to_string(p.batch) + ") is outside 1.. x [0, " +
                      std::to_string(batches_per_epoch_) + "]");
  }
  if (p.batch == batches_per_epoch_) {
    ++p.epoch;
    p.batch = 0;
  }
  position_ = p;
  return Status::Ok();
}

}  // namespace sf::data
