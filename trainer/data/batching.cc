#include "trainer/data/batching.h"

#include <algorithm>

#include "common/log.h"

namespace sf::data {

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
  global_ = PlanGlobalBatches(
      batchable_, epoch, {options_.max_tokens, options_.world_size, options_.seed, options_.shuffle},
      [&](int64_t i) { return std::max(data_->src_length(i), data_->tgt_length(i)); },
      [&](int64_t a, int64_t b) {
        const int64_t ta = data_->tgt_length(a), tb = data_->tgt_length(b);
        if (ta != tb) return ta < tb;
        return data_->src_length(a) < data_->src_length(b);
      });
  planned_epoch_ = epoch;
}

std::vector<std::vector<int64_t>> BatchIterator::EpochPlan(int64_t epoch) {
  PlanEpoch(epoch);
  std::vector<std::vector<int64_t>> out;
  out.reserve(global_.size());
  for (const auto& g : global_) out.push_back(RankShare(g, options_.rank, options_.world_size));
  return out;
}

void BatchIterator::BatchAt(int64_t epoch, int64_t index, Batch* out) {
  PlanEpoch(epoch);
  MakeBatch(*data_, RankShare(global_[size_t(index)], options_.rank, options_.world_size), out);
  out->epoch = epoch;
  out->batch_index = index;
}

void BatchIterator::Next(Batch* out) {
  BatchAt(position_.epoch, position_.batch, out);
  position_ = NextPosition(position_, batches_per_epoch_);
}

Status BatchIterator::SetPosition(DataPosition p) {
  SF_ASSIGN_OR_RETURN(position_, CheckPosition(p, batches_per_epoch_));
  return Status::Ok();
}

}  // namespace sf::data
