#include "trainer/distributed/grad_reducer.h"

#include <algorithm>
#include <chrono>

namespace sf::dist {

GradReducer::GradReducer(Communicator* comm, float* grads, int64_t numel, std::vector<int64_t> offsets,
                         GradReducerOptions options, const DeviceAccess* device)
    : comm_(comm), grads_(grads), options_(options) {
  if (device) {
    device_ = std::make_unique<DeviceAccess>(*device);
    if (!comm_->device_buffers()) host_.resize(static_cast<size_t>(numel));
  }
  const int64_t target = std::max<int64_t>(1, options_.bucket_bytes / DTypeSize(options_.wire));
  // Walk the parameters from the last to the first, closing a bucket once it holds `target`
  // elements (on the wire); bucket edges are parameter starts, so no parameter is split. The
  // last bucket starts at 0 and takes whatever is left.
  int64_t end = numel;
  for (size_t i = offsets.size(); i-- > 1;) {
    if (end - offsets[i] >= target) {
      buckets_.push_back({offsets[i], end});
      end = offsets[i];
    }
  }
  if (end > 0) buckets_.push_back({0, end});
  inflight_.reserve(buckets_.size());
}

void GradReducer::Arm() {
  armed_ = true;
  next_ = 0;
  early_ = 0;
  inflight_.clear();
  last_ = SyncStats{};
}

void GradReducer::Launch(size_t i) {
  const Bucket& b = buckets_[i];
  float* data = grads_ + b.begin;
  const size_t bytes = static_cast<size_t>(b.end - b.begin) * sizeof(float);
  if (device_ && host_.empty()) {
    device_->synchronize();  // the bucket is complete on the device
  } else if (device_) {
    device_->to_host(host_.data() + b.begin, data, bytes);
    data = host_.data() + b.begin;
  }
  inflight_.push_back(comm_->AllreduceAsync(data, b.end - b.begin, DType::kF32, ReduceOp::kSum, options_.wire));
  last_.buckets++;
  last_.bytes += (b.end - b.begin) * DTypeSize(options_.wire);
}

void GradReducer::GradsFinal(int64_t offset) {
  if (!armed_) return;
  while (next_ < buckets_.size() && buckets_[next_].begin >= offset) {
    Launch(next_++);
    ++early_;
  }
}

Status GradReducer::Finish(std::span<double> scalars) {
  if (!armed_) Arm();
  while (next_ < buckets_.size()) Launch(next_++);
  armed_ = false;
  const auto t0 = std::chrono::steady_clock::now();
  Status first;
  for (auto& w : inflight_) {
    Status st = w->Wait();
    last_.busy_seconds += w->busy_seconds();
    if (!st.ok() && first.ok()) first = st;
  }
  last_.wait_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  inflight_.clear();
  SF_RETURN_IF_ERROR(first);
  if (!host_.empty()) device_->to_device(grads_, host_.data(), host_.size() * sizeof(float));
  if (!scalars.empty()) {
    SF_RETURN_IF_ERROR(comm_->Allreduce(scalars.data(), static_cast<int64_t>(scalars.size()), DType::kF64));
  }
  return Status::Ok();
}

}  // namespace sf::dist
