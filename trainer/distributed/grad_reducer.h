// GradReducer: data-parallel gradient synchronisation in buckets, overlapped with backward.
//
// The model's gradients live in one flat buffer (ParamStore), parameters in forward order, and
// backward finishes them in reverse order. The reducer cuts that buffer, from its end towards
// its start, into buckets of about `bucket_bytes` on parameter boundaries (PyTorch DDP's
// reducer does the same in reverse parameter order). During the last micro-batch's backward
// the model reports "every gradient at offset >= X is final" (Transformer's grads-final hook);
// each bucket that lies wholly above X is handed to the communicator at once, whose own thread
// reduces it while backward continues. Finish() hands over what is left, waits for every
// bucket, and sums the step's scalars (loss, tokens, ...) across ranks in one more call.
//
// Every rank must see the same sequence of GradsFinal offsets (same model, same code), so the
// buckets are launched in the same order everywhere.
//
// Gradients on a GPU (DeviceAccess given): before a bucket goes out, the device has finished
// writing it. A communicator that takes device buffers (NCCL) gets the device range itself,
// after synchronize() (the backend's stream has written it; NCCL runs on its own stream). One
// that takes host memory (MPI) gets a host copy: to_host() (which waits for the device) at
// launch, and Finish() writes every reduced bucket back with to_device() once all are done.
//
// Not thread-safe; one per training loop. The communicator and the gradient buffer must
// outlive it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "trainer/distributed/communicator.h"

namespace sf::dist {

struct GradReducerOptions {
  int64_t bucket_bytes = 25ll << 20;  // optimizations.bucket_size_mb
  DType wire = DType::kF32;           // optimizations.allreduce_dtype (bf16/f16: compression)
};

// How the reducer reaches a gradient buffer that is not host memory (the training backend's
// Synchronize / CopyToHost / CopyToDevice).
struct DeviceAccess {
  std::function<void()> synchronize;
  std::function<void(void* host, const void* device, size_t bytes)> to_host;
  std::function<void(void* device, const void* host, size_t bytes)> to_device;
};

// What one step's synchronisation cost.
struct SyncStats {
  int buckets = 0;
  int64_t bytes = 0;          // on the wire
  double busy_seconds = 0;    // the collectives' own running time
  double wait_seconds = 0;    // time the training thread waited for them (not hidden)
  double hidden_fraction() const {
    return busy_seconds > 0 ? std::max(0.0, 1.0 - wait_seconds / busy_seconds) : 0.0;
  }
};

class GradReducer {
 public:
  // `param_offsets`: each parameter's start offset in `grads` (ascending, first 0); `numel`
  // the buffer's length.
  // `device`: how to reach `grads` when it is device memory; null for host memory.
  GradReducer(Communicator* comm, float* grads, int64_t numel, std::vector<int64_t> param_offsets,
              GradReducerOptions options, const DeviceAccess* device = nullptr);
  GradReducer(const GradReducer&) = delete;
  GradReducer& operator=(const GradReducer&) = delete;

  Communicator& communicator() { return *comm_; }
  int bucket_count() const { return static_cast<int>(buckets_.size()); }

  // Opens a step's synchronisation: GradsFinal launches buckets until Finish.
  void Arm();
  bool armed() const { return armed_; }
  // Every gradient at offset >= `offset` is final: launches the buckets that lie above it.
  void GradsFinal(int64_t offset);
  // Launches the remaining buckets, waits for all, then sums `scalars` (f64) over the ranks.
  // Errors: a failed or timed-out collective (the communicator is then broken).
  Status Finish(std::span<double> scalars);

  const SyncStats& last_step() const { return last_; }
  // Buckets of the last step that GradsFinal launched during backward (the rest waited for
  // Finish). Equal to bucket_count() when the model reports every module.
  int early_buckets() const { return early_; }

 private:
  struct Bucket {
    int64_t begin = 0, end = 0;  // element range in the buffer
  };
  void Launch(size_t i);

  Communicator* comm_;
  float* grads_;
  GradReducerOptions options_;
  std::unique_ptr<DeviceAccess> device_;  // set: grads_ is device memory
  std::vector<float> host_;               // device grads through a host-memory communicator
  std::vector<Bucket> buckets_;  // from the buffer's end to its start (launch order)
  std::vector<std::unique_ptr<Work>> inflight_;
  size_t next_ = 0;
  bool armed_ = false;
  int early_ = 0;
  SyncStats last_;
};

}  // namespace sf::dist
