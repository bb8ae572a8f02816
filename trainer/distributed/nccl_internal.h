// Internal to sf_dist_nccl: NcclComm, the NCCL implementation of Communicator (see
// nccl_communicator.h for the contract), and what its three .cu files share. Nothing outside
// trainer/distributed/ includes it.
//   nccl_communicator.cu  bootstrap (Connect), break and shutdown, NcclAvailable, NcclConnect
//   nccl_collectives.cu   allreduce (with the f32 <-> bf16/f16 wire casts), broadcast, barrier:
//                         issuing on the stream, settling NCCL calls, awaiting a Work
//   nccl_buffers.cu       where a caller's buffer lives, the staging of host memory through
//                         pinned and device stages, and the device wire buffer
//
// Everything runs on one non-blocking stream owned by the communicator. The NCCL communicator
// is created in non-blocking mode (ncclConfig_t::blocking = 0): every NCCL call may return
// ncclInProgress, after which its state is polled with ncclCommGetAsyncError until it settles
// or the timeout passes, so no NCCL call can block the training thread for longer than the
// timeout. Nothing here synchronises a stream or the device (a device-wide sync would wait for
// NCCL kernels that a dead peer never lets finish): completion is observed by polling events.
//
// Helpers: CudaMessage / NcclMessage / DurationText write the error texts; SF_CUDA_OR_RETURN
// returns kUnavailable naming the call; Backoff paces a polling loop; DeviceScope makes a device
// current for a scope (check its status()); EventPool recycles the start/end event pairs of
// collectives and outlives the communicator when a Work still holds a pair.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "trainer/distributed/nccl_communicator.h"

namespace sf::dist::nccl {

using Clock = std::chrono::steady_clock;

inline std::string CudaMessage(const char* call, cudaError_t e) {
  return std::string(call) + ": " + cudaGetErrorString(e);
}

// "ncclAllReduce: unhandled system error (<NCCL's last error text>)".
inline std::string NcclMessage(const char* call, ncclResult_t r, ncclComm_t comm) {
  std::string m = std::string(call) + ": " + ncclGetErrorString(r);
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && last[0] != '\0') m += std::string(" (") + last + ")";
  return m;
}

// "300 s", or "1500 ms" when not whole seconds.
inline std::string DurationText(std::chrono::milliseconds t) {
  if (t.count() % 1000 == 0) return std::to_string(t.count() / 1000) + " s";
  return std::to_string(t.count()) + " ms";
}

#define SF_CUDA_OR_RETURN(call, name)                                                   \
  do {                                                                                  \
    cudaError_t sf_cuda_rc_ = (call);                                                   \
    if (sf_cuda_rc_ != cudaSuccess) return Unavailable(CudaMessage(name, sf_cuda_rc_)); \
  } while (0)

// Waits by spinning briefly (a collective of a small bucket takes microseconds), then by short
// sleeps, so a long wait does not burn a core the input pipeline could use.
class Backoff {
 public:
  void Pause() {
    if (Clock::now() - start_ < std::chrono::milliseconds(2)) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

 private:
  Clock::time_point start_ = Clock::now();
};

// Makes `device` current for a scope and restores the caller's device after it.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    cudaError_t e = cudaGetDevice(&previous_);
    if (e != cudaSuccess) {
      status_ = Unavailable(CudaMessage("cudaGetDevice", e));
      return;
    }
    if (previous_ == device) return;
    e = cudaSetDevice(device);
    if (e != cudaSuccess) {
      status_ =
          Unavailable(CudaMessage("cudaSetDevice", e) + " (device " + std::to_string(device) + ")");
      return;
    }
    switched_ = true;
  }
  ~DeviceScope() {
    if (switched_)
      cudaSetDevice(previous_);  // restoring a device that was current cannot fail usefully
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

  const Status& status() const { return status_; }

 private:
  int previous_ = 0;
  bool switched_ = false;
  Status status_;
};

// ---- events: a start/end pair per collective, reused across calls

struct EventPair {
  cudaEvent_t start = nullptr;
  cudaEvent_t end = nullptr;
};

// Shared by the communicator and its Works, so a Work may return its pair whatever the order
// of destruction.
class EventPool {
 public:
  EventPool() = default;
  EventPool(const EventPool&) = delete;
  EventPool& operator=(const EventPool&) = delete;
  ~EventPool() {
    // cudaEventDestroy does not wait: an event still pending is released once it completes.
    for (const EventPair& p : free_) {
      cudaEventDestroy(p.start);
      cudaEventDestroy(p.end);
    }
  }

  // A free pair, or a new one (timing events) on the current device.
  Result<EventPair> Take() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!free_.empty()) {
        EventPair p = free_.back();
        free_.pop_back();
        return p;
      }
    }
    EventPair p;
    cudaError_t e = cudaEventCreate(&p.start);
    if (e != cudaSuccess) return Unavailable(CudaMessage("cudaEventCreate", e));
    e = cudaEventCreate(&p.end);
    if (e != cudaSuccess) {
      cudaEventDestroy(p.start);
      return Unavailable(CudaMessage("cudaEventCreate", e));
    }
    return p;
  }

  void Give(EventPair p) {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(p);
  }

 private:
  std::mutex mu_;
  std::vector<EventPair> free_;
};

class NcclComm;

class NcclWork : public Work {
 public:
  NcclWork(NcclComm* comm, std::shared_ptr<EventPool> pool, EventPair events, std::string what,
           int64_t wire_bytes, bool counted)
      : comm_(comm),
        pool_(std::move(pool)),
        events_(events),
        what_(std::move(what)),
        wire_bytes_(wire_bytes),
        counted_(counted) {}
  ~NcclWork() override { pool_->Give(events_); }
  NcclWork(const NcclWork&) = delete;
  NcclWork& operator=(const NcclWork&) = delete;

  Status Wait() override;
  double busy_seconds() const override { return busy_seconds_; }

 private:
  NcclComm* comm_;
  std::shared_ptr<EventPool> pool_;
  EventPair events_;
  std::string what_;
  int64_t wire_bytes_;
  bool counted_;
  bool finished_ = false;
  Status status_;
  double busy_seconds_ = 0;
};

class NcclComm : public Communicator {
 public:
  explicit NcclComm(const NcclConnectOptions& o)
      : rank_(o.rank), world_(o.world_size), device_(o.device), timeout_(o.timeout) {}
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;
  ~NcclComm() override { Shutdown(); }

  // nccl_communicator.cu
  Status Connect(const RendezvousFn& rendezvous);

  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  std::string backend_name() const override { return "nccl"; }
  bool device_buffers() const override { return true; }
  bool broken() const override { return broken_; }
  std::chrono::milliseconds timeout() const override { return timeout_; }
  AllreduceStats stats() const override {
    std::lock_guard<std::mutex> lock(stats_mu_);
    return stats_;
  }

  // nccl_collectives.cu
  std::unique_ptr<Work> AllreduceAsync(void* data, int64_t count, DType dtype, ReduceOp op,
                                       DType wire) override;
  Status Broadcast(void* data, int64_t bytes, int root) override;
  Status Barrier() override;
  Status Await(const EventPair& events, const std::string& what, double* busy);
  void Count(int64_t wire_bytes, double busy);

 private:
  using Body = std::function<Status()>;

  // nccl_collectives.cu
  std::unique_ptr<Work> Issue(std::string what, int64_t wire_bytes, bool counted, const Body& body);
  Status Settle(ncclResult_t rc, const char* call);
  Status CheckAsyncError(const std::string& what);
  Status BrokenWhileInFlight(const std::string& what) const;

  // nccl_buffers.cu
  Result<bool> IsHostMemory(const void* data, int64_t bytes, const std::string& what) const;
  Status Staged(std::string what, void* data, int64_t bytes, int64_t wire_bytes, bool counted,
                const std::function<Status(void*)>& body);
  Status EnsureStage(int64_t bytes);
  Status EnsureWire(int64_t bytes);

  // nccl_communicator.cu
  Status Break(Status st);
  void Shutdown();
  void Warn(const std::string& message) const;

  const int rank_, world_, device_;
  const std::chrono::milliseconds timeout_;
  std::atomic<bool> broken_{false};
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  std::shared_ptr<EventPool> pool_ = std::make_shared<EventPool>();
  void* wire_ = nullptr;  // f32 sums sent narrow: cast here, reduced here, widened back
  int64_t wire_capacity_ = 0;
  void* barrier_ = nullptr;  // one int32 for Barrier
  void* stage_ = nullptr;       // device stage of host-memory collectives
  void* host_stage_ = nullptr;  // its pinned host side
  std::vector<void*> old_host_stages_;
  int64_t stage_capacity_ = 0;
  mutable std::mutex stats_mu_;
  AllreduceStats stats_;
};

}  // namespace sf::dist::nccl
