#include "trainer/speech/speech_batches.h"

#include <algorithm>
#include <cstring>

#include "common/log.h"

namespace sf::speech {

Result<SpeechBatchIterator> SpeechBatchIterator::Create(std::vector<int64_t> frames,
                                                        std::vector<int64_t> target_lengths,
                                                        const SpeechBatchingOptions& options) {
  if (options.max_frames < 1) {
    return InvalidArgument("max_frames: " + std::to_string(options.max_frames) + " must be >= 1");
  }
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return InvalidArgument("rank " + std::to_string(options.rank) + " is not in [0, " +
                           std::to_string(options.world_size) + ")");
  }
  if (frames.size() != target_lengths.size()) {
    return InvalidArgument("speech batching: " + std::to_string(frames.size()) +
                           " frame counts but " + std::to_string(target_lengths.size()) +
                           " target lengths");
  }
  if (int64_t(frames.size()) < options.world_size) {
    return InvalidArgument("speech batching: " + std::to_string(frames.size()) +
                           " utterances for " + std::to_string(options.world_size) + " ranks");
  }
  SpeechBatchIterator it;
  for (size_t i = 0; i < frames.size(); ++i) {
    if (frames[i] < 1 || target_lengths[i] < 0) {
      return InvalidArgument("speech batching: utterance " + std::to_string(i) + " has " +
                             std::to_string(frames[i]) + " frames and " +
                             std::to_string(target_lengths[i]) + " targets");
    }
    if (frames[i] > options.max_frames) ++it.oversize_;
  }
  it.frames_ = std::move(frames);
  it.target_lengths_ = std::move(target_lengths);
  it.options_ = options;
  if (it.oversize_ > 0) {
    log::Warn("speech", {{"event", "over_max_frames"},
                         {"utterances", std::to_string(it.oversize_)},
                         {"max_frames", std::to_string(options.max_frames)},
                         {"note", "each forms a batch of one"}});
  }
  it.PlanEpoch(1);
  it.batches_per_epoch_ = int64_t(it.global_.size());
  return it;
}

void SpeechBatchIterator::PlanEpoch(int64_t epoch) {
  if (planned_epoch_ == epoch && !global_.empty()) return;
  std::vector<int64_t> order(frames_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = int64_t(i);
  global_ = data::PlanGlobalBatches(
      std::move(order), epoch, {options_.max_frames, options_.world_size, options_.seed, options_.shuffle},
      [&](int64_t i) { return frames_[size_t(i)]; },
      [&](int64_t a, int64_t b) {
        if (frames_[size_t(a)] != frames_[size_t(b)]) return frames_[size_t(a)] < frames_[size_t(b)];
        return target_lengths_[size_t(a)] < target_lengths_[size_t(b)];
      });
  planned_epoch_ = epoch;
}

std::vector<int64_t> SpeechBatchIterator::Share(const std::vector<int64_t>& g) const {
  return data::RankShare(g, options_.rank, options_.world_size);
}

std::vector<std::vector<int64_t>> SpeechBatchIterator::EpochPlan(int64_t epoch) {
  PlanEpoch(epoch);
  std::vector<std::vector<int64_t>> out;
  out.reserve(global_.size());
  for (const auto& g : global_) out.push_back(Share(g));
  return out;
}

std::vector<int64_t> SpeechBatchIterator::BatchAt(int64_t epoch, int64_t index) {
  PlanEpoch(epoch);
  return Share(global_[size_t(index)]);
}

std::vector<int64_t> SpeechBatchIterator::Next(int64_t* epoch, int64_t* index) {
  if (epoch) *epoch = position_.epoch;
  if (index) *index = position_.batch;
  std::vector<int64_t> out = BatchAt(position_.epoch, position_.batch);
  position_ = data::NextPosition(position_, batches_per_epoch_);
  return out;
}

Status SpeechBatchIterator::SetPosition(DataPosition p) {
  SF_ASSIGN_OR_RETURN(position_, data::CheckPosition(p, batches_per_epoch_));
  return Status::Ok();
}

void MakeSpeechBatch(const SpeechFeatures& features,
                     const std::vector<std::vector<int32_t>>& targets,
                     const std::vector<int64_t>& indices, const SpeechBatchOptions& options,
                     int64_t epoch, SpeechBatch* out) {
  const int64_t b = int64_t(indices.size());
  const int64_t mels = features.mels();
  int64_t t_max = 0, u_max = 0;
  for (int64_t i : indices) {
    t_max = std::max(t_max, features.frames(i));
    u_max = std::max(u_max, int64_t(targets[size_t(i)].size()));
  }
  out->batch = b;
  out->max_frames = t_max;
  out->mels = mels;
  out->max_target = u_max;
  out->indices = indices;
  out->epoch = epoch;
  out->features.assign(size_t(b * t_max * mels), 0.0f);
  out->frames.assign(size_t(b), 0);
  out->targets.assign(size_t(b * u_max), 0);
  out->target_lengths.assign(size_t(b), 0);
  out->num_frames = 0;
  out->num_target_tokens = 0;
  for (int64_t r = 0; r < b; ++r) {
    const int64_t i = indices[size_t(r)];
    const int64_t t = features.frames(i);
    float* x = out->features.data() + r * t_max * mels;
    std::memcpy(x, features.features(i), size_t(t * mels) * sizeof(float));
    if (options.utterance_cmvn) UtteranceCmvn(x, t, mels);
    if (options.spec_augment)
      SpecAugment(x, t, mels, options.spec, SpecAugmentSeed(options.seed, epoch, i));
    const std::vector<int32_t>& y = targets[size_t(i)];
    std::copy(y.begin(), y.end(), out->targets.begin() + r * u_max);
    out->frames[size_t(r)] = int32_t(t);
    out->target_lengths[size_t(r)] = int32_t(y.size());
    out->num_frames += t;
    out->num_target_tokens += int64_t(y.size());
  }
}

}  // namespace sf::speech
