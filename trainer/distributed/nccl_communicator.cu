// NCCL implementation of Communicator; see nccl_communicator.h for the contract.
//
// Everything runs on one non-blocking stream owned by the communicator. The NCCL communicator
// is created in non-blocking mode (ncclConfig_t::blocking = 0): every NCCL call may return
// ncclInProgress, after which its state is polled with ncclCommGetAsyncError until it settles
// or the timeout passes, so no NCCL call can block the training thread for longer than the
// timeout. Nothing here synchronises a stream or the device (a device-wide sync would wait for
// NCCL kernels that a dead peer never lets finish): completion is observed by polling events.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "common/log.h"
#include "trainer/distributed/nccl_communicator.h"

namespace sf::dist {
namespace {

using Clock = std::chrono::steady_clock;

std::string CudaMessage(const char* call, cudaError_t e) {
  return std::string(call) + ": " + cudaGetErrorString(e);
}

// "ncclAllReduce: unhandled system error (<NCCL's last error text>)".
std::string NcclMessage(const char* call, ncclResult_t r, ncclComm_t comm) {
  std::string m = std::string(call) + ": " + ncclGetErrorString(r);
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && last[0] != '\0') m += std::string(" (") + last + ")";
  return m;
}

// "300 s", or "1500 ms" when not whole seconds.
std::string DurationText(std::chrono::milliseconds t) {
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

// ---- wire casts (f32 <-> bf16 / f16, round to nearest even), grid-stride over n elements

template <typename T>
__device__ T NarrowFloat(float x);
template <>
__device__ __nv_bfloat16 NarrowFloat<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __half NarrowFloat<__half>(float x) {
  return __float2half_rn(x);
}
__device__ float WidenFloat(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ float WidenFloat(__half x) { return __half2float(x); }

template <typename T>
__global__ void NarrowKernel(const float* __restrict__ in, T* __restrict__ out, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    out[i] = NarrowFloat<T>(in[i]);
  }
}

template <typename T>
__global__ void WidenKernel(const T* __restrict__ in, float* __restrict__ out, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    out[i] = WidenFloat(in[i]);
  }
}

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;  // the kernels stride over the rest

unsigned Blocks(int64_t n) {
  return static_cast<unsigned>(std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks));
}

ncclDataType_t NcclType(DType t) {
  switch (t) {
    case DType::kF32:
      return ncclFloat32;
    case DType::kF64:
      return ncclFloat64;
    case DType::kI32:
      return ncclInt32;
    case DType::kBF16:
      return ncclBfloat16;
    case DType::kF16:
      return ncclFloat16;
    case DType::kU8:
      return ncclUint8;
  }
  return ncclInt8;
}

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

  // The bootstrap (see nccl_communicator.h).
  Status Connect(const RendezvousFn& rendezvous) {
    DeviceScope scope(device_);
    SF_RETURN_IF_ERROR(scope.status());
    // Local resources first: a GPU that cannot even do this fails before the peers wait on it.
    SF_CUDA_OR_RETURN(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
                      "cudaStreamCreateWithFlags");
    SF_CUDA_OR_RETURN(cudaMallocAsync(&barrier_, sizeof(int32_t), stream_), "cudaMallocAsync");
    SF_CUDA_OR_RETURN(cudaMemsetAsync(barrier_, 0, sizeof(int32_t), stream_), "cudaMemsetAsync");

    ncclUniqueId id;
    std::memset(&id, 0, sizeof(id));
    std::string payload;
    if (rank_ == 0) {
      const ncclResult_t rc = ncclGetUniqueId(&id);
      if (rc != ncclSuccess) return Unavailable(NcclMessage("ncclGetUniqueId", rc, nullptr));
      payload.assign(reinterpret_cast<const char*>(&id), sizeof(id));
    }
    SF_ASSIGN_OR_RETURN(std::vector<std::string> got, rendezvous("nccl-id", payload));
    if (got.empty() || got[0].size() != sizeof(ncclUniqueId)) {
      return Unavailable("rendezvous gave no NCCL id for rank 0 (" +
                         std::to_string(got.empty() ? 0 : got[0].size()) + " bytes, expected " +
                         std::to_string(sizeof(ncclUniqueId)) + ")");
    }
    std::memcpy(&id, got[0].data(), sizeof(id));

    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // every call returns at once; we poll, bounded by the timeout
    const auto deadline = Clock::now() + timeout_;
    ncclResult_t rc = ncclCommInitRankConfig(&comm_, world_, id, rank_, &config);
    Backoff backoff;
    while (rc == ncclInProgress) {
      if (Clock::now() >= deadline) {
        Break(Status());
        return Unavailable(
            "NCCL communicator creation did not finish within " + DurationText(timeout_) +
            ": not every rank arrived (a rank that never started, or a network between "
            "the ranks that does not let them connect)");
      }
      backoff.Pause();
      ncclResult_t state = ncclSuccess;
      const ncclResult_t q = ncclCommGetAsyncError(comm_, &state);
      rc = q == ncclSuccess ? state : q;
    }
    if (rc != ncclSuccess) {
      const std::string m = NcclMessage("ncclCommInitRankConfig", rc, comm_);
      Break(Status());
      return Unavailable(m);
    }
    return Status::Ok();
  }

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

  std::unique_ptr<Work> AllreduceAsync(void* data, int64_t count, DType dtype, ReduceOp op,
                                       DType wire) override {
    Status st = CheckCollectiveDType(dtype, op, wire);
    if (!st.ok()) return std::make_unique<FailedWork>(st);
    const bool narrow = dtype == DType::kF32 && (wire == DType::kBF16 || wire == DType::kF16);
    const DType sent = narrow ? wire : dtype;
    const int64_t wire_bytes = count * DTypeSize(sent);
    std::string what = "allreduce of " + std::to_string(wire_bytes) + " bytes";
    if (count < 0) return std::make_unique<FailedWork>(InvalidArgument(what + ": negative count"));
    const int64_t bytes = count * DTypeSize(dtype);
    Result<bool> host = IsHostMemory(data, bytes, what);
    if (!host.ok()) return std::make_unique<FailedWork>(host.status());
    auto body = [this, count, dtype, op, sent, narrow, wire_bytes](void* buf) -> Status {
      if (count == 0) return Status::Ok();  // same on every rank: nothing to send
      const size_t n = static_cast<size_t>(count);
      if (!narrow) {
        return Settle(ncclAllReduce(buf, buf, n, NcclType(dtype),
                                    op == ReduceOp::kMax ? ncclMax : ncclSum, comm_, stream_),
                      "ncclAllReduce");
      }
      SF_RETURN_IF_ERROR(EnsureWire(wire_bytes));
      float* f = static_cast<float*>(buf);
      if (sent == DType::kBF16) {
        auto* b = static_cast<__nv_bfloat16*>(wire_);
        NarrowKernel<<<Blocks(count), kThreads, 0, stream_>>>(f, b, count);
      } else {
        auto* h = static_cast<__half*>(wire_);
        NarrowKernel<<<Blocks(count), kThreads, 0, stream_>>>(f, h, count);
      }
      SF_CUDA_OR_RETURN(cudaGetLastError(), "launching the f32 to wire cast kernel");
      SF_RETURN_IF_ERROR(
          Settle(ncclAllReduce(wire_, wire_, n, NcclType(sent), ncclSum, comm_, stream_),
                 "ncclAllReduce"));
      if (sent == DType::kBF16) {
        WidenKernel<<<Blocks(count), kThreads, 0, stream_>>>(
            static_cast<const __nv_bfloat16*>(wire_), f, count);
      } else {
        WidenKernel<<<Blocks(count), kThreads, 0, stream_>>>(static_cast<const __half*>(wire_),
                                                             f, count);
      }
      SF_CUDA_OR_RETURN(cudaGetLastError(), "launching the wire to f32 cast kernel");
      return Status::Ok();
    };
    if (*host) {
      return std::make_unique<FailedWork>(
          Staged(std::move(what), data, bytes, wire_bytes, /*counted=*/true, body));
    }
    return Issue(std::move(what), wire_bytes, /*counted=*/true, [data, body] { return body(data); });
  }

  Status Broadcast(void* data, int64_t bytes, int root) override {
    std::string what =
        "broadcast of " + std::to_string(bytes) + " bytes from rank " + std::to_string(root);
    if (root < 0 || root >= world_) {
      return InvalidArgument(what + ": the root is not a rank in [0, " + std::to_string(world_) +
                             ")");
    }
    if (bytes < 0) return InvalidArgument(what + ": negative size");
    SF_ASSIGN_OR_RETURN(const bool host, IsHostMemory(data, bytes, what));
    auto body = [this, bytes, root](void* buf) -> Status {
      if (bytes == 0) return Status::Ok();
      return Settle(
          ncclBroadcast(buf, buf, static_cast<size_t>(bytes), ncclInt8, root, comm_, stream_),
          "ncclBroadcast");
    };
    if (host) return Staged(std::move(what), data, bytes, bytes, /*counted=*/false, body);
    return Issue(std::move(what), bytes, /*counted=*/false, [data, body] { return body(data); })
        ->Wait();
  }

  // NCCL has no barrier: a one-element allreduce does the same (no rank finishes it before
  // every rank has started it).
  Status Barrier() override {
    return Issue("barrier", sizeof(int32_t), /*counted=*/false,
                 [this]() -> Status {
                   return Settle(
                       ncclAllReduce(barrier_, barrier_, 1, ncclInt32, ncclSum, comm_, stream_),
                       "ncclAllReduce");
                 })
        ->Wait();
  }

  // Waits (bounded) for a collective's end event; its running time into *busy.
  Status Await(const EventPair& events, const std::string& what, double* busy) {
    const auto deadline = Clock::now() + timeout_;
    Backoff backoff;
    while (true) {
      if (broken_) return BrokenWhileInFlight(what);
      const cudaError_t q = cudaEventQuery(events.end);
      if (q == cudaSuccess) break;
      if (q != cudaErrorNotReady)
        return Break(Unavailable(what + ": " + CudaMessage("cudaEventQuery", q)));
      // A peer lost mid-collective shows up here (NCCL's proxy thread reports it) before the
      // deadline does.
      SF_RETURN_IF_ERROR(CheckAsyncError(what));
      if (Clock::now() >= deadline) {
        return Break(Unavailable(what + " did not finish within " + DurationText(timeout_) +
                                 ": a peer rank died, hangs, or cannot be reached"));
      }
      backoff.Pause();
    }
    // An abort lets the kernels of every collective in flight end early, with garbage.
    if (broken_) return BrokenWhileInFlight(what);
    float ms = 0;
    const cudaError_t e = cudaEventElapsedTime(&ms, events.start, events.end);
    if (e != cudaSuccess)
      return Break(Unavailable(what + ": " + CudaMessage("cudaEventElapsedTime", e)));
    *busy = static_cast<double>(ms) / 1000.0;
    return Status::Ok();
  }

  void Count(int64_t wire_bytes, double busy) {
    std::lock_guard<std::mutex> lock(stats_mu_);
    stats_.calls++;
    stats_.bytes += wire_bytes;
    stats_.busy_seconds += busy;
  }

 private:
  using Body = std::function<Status()>;

  // Issues `body` on the stream between a start and an end event. A failure breaks the
  // communicator (something may have been issued on some ranks and not on others).
  std::unique_ptr<Work> Issue(std::string what, int64_t wire_bytes, bool counted,
                              const Body& body) {
    if (broken_) {
      return std::make_unique<FailedWork>(
          Unavailable(what + ": the communicator is broken by an earlier error or timeout"));
    }
    DeviceScope scope(device_);
    if (!scope.status().ok())
      return std::make_unique<FailedWork>(Break(scope.status().WithContext(what)));
    Result<EventPair> taken = pool_->Take();
    if (!taken.ok()) return std::make_unique<FailedWork>(Break(taken.status().WithContext(what)));
    const EventPair events = *taken;
    Status st = [&]() -> Status {
      SF_CUDA_OR_RETURN(cudaEventRecord(events.start, stream_), "cudaEventRecord");
      SF_RETURN_IF_ERROR(body());
      SF_CUDA_OR_RETURN(cudaEventRecord(events.end, stream_), "cudaEventRecord");
      return Status::Ok();
    }();
    if (!st.ok()) {
      pool_->Give(events);
      return std::make_unique<FailedWork>(Break(st.WithContext(what)));
    }
    return std::make_unique<NcclWork>(this, pool_, events, std::move(what), wire_bytes, counted);
  }

  // The result of an NCCL call on a non-blocking communicator: ncclInProgress means "still
  // being issued"; it is polled until it settles, at most for the timeout.
  Status Settle(ncclResult_t rc, const char* call) {
    const auto deadline = Clock::now() + timeout_;
    Backoff backoff;
    while (rc == ncclInProgress) {
      if (Clock::now() >= deadline) {
        return Unavailable(std::string(call) + " was not issued within " + DurationText(timeout_));
      }
      backoff.Pause();
      ncclResult_t state = ncclSuccess;
      const ncclResult_t q = ncclCommGetAsyncError(comm_, &state);
      if (q != ncclSuccess) return Unavailable(NcclMessage("ncclCommGetAsyncError", q, comm_));
      rc = state;
    }
    if (rc != ncclSuccess) return Unavailable(NcclMessage(call, rc, comm_));
    return Status::Ok();
  }

  Status CheckAsyncError(const std::string& what) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t q = ncclCommGetAsyncError(comm_, &state);
    if (q != ncclSuccess)
      return Break(Unavailable(what + ": " + NcclMessage("ncclCommGetAsyncError", q, comm_)));
    if (state != ncclSuccess && state != ncclInProgress) {
      return Break(Unavailable(what + ": NCCL reported an asynchronous error: " +
                               NcclMessage("ncclCommGetAsyncError", state, comm_)));
    }
    return Status::Ok();
  }

  // Whether `data` is pageable host memory (which NCCL would turn into an illegal memory access
  // that ruins the whole CUDA context: such buffers are staged, see Staged). Memory of another
  // device is refused.
  Result<bool> IsHostMemory(const void* data, int64_t bytes, const std::string& what) const {
    if (bytes == 0) return false;
    if (data == nullptr) return InvalidArgument(what + ": null buffer");
    cudaPointerAttributes attr;
    const cudaError_t e = cudaPointerGetAttributes(&attr, data);
    if (e != cudaSuccess) {
      cudaGetLastError();  // not sticky: clear it
      return InvalidArgument(what + ": " + CudaMessage("cudaPointerGetAttributes", e));
    }
    if (attr.type == cudaMemoryTypeUnregistered) return true;
    if (attr.type == cudaMemoryTypeDevice && attr.device != device_) {
      return InvalidArgument(what + ": the buffer is on device " + std::to_string(attr.device) +
                             ", the communicator on device " + std::to_string(device_));
    }
    return false;
  }

  // A collective over pageable host memory (the trainer's scalars, flags and messages), done
  // synchronously: host -> pinned stage (memcpy) -> device stage -> `body` there -> pinned ->
  // host, on the stream, waited for (bounded by the timeout) before the result is copied out.
  // No copy touches pageable memory asynchronously, so none can block on a hung peer.
  Status Staged(std::string what, void* data, int64_t bytes, int64_t wire_bytes, bool counted,
                const std::function<Status(void*)>& body) {
    if (broken_) {
      return Unavailable(what + ": the communicator is broken by an earlier error or timeout");
    }
    {
      DeviceScope scope(device_);
      if (!scope.status().ok()) return Break(scope.status().WithContext(what));
      Status st = EnsureStage(bytes);
      if (!st.ok()) return Break(st.WithContext(what));
    }
    std::memcpy(host_stage_, data, static_cast<size_t>(bytes));
    void* dev = stage_;
    void* pinned = host_stage_;
    Status st = Issue(what, wire_bytes, counted, [this, dev, pinned, bytes, &body]() -> Status {
                  SF_CUDA_OR_RETURN(cudaMemcpyAsync(dev, pinned, static_cast<size_t>(bytes),
                                                    cudaMemcpyHostToDevice, stream_),
                                    "cudaMemcpyAsync");
                  SF_RETURN_IF_ERROR(body(dev));
                  SF_CUDA_OR_RETURN(cudaMemcpyAsync(pinned, dev, static_cast<size_t>(bytes),
                                                    cudaMemcpyDeviceToHost, stream_),
                                    "cudaMemcpyAsync");
                  return Status::Ok();
                })->Wait();
    if (st.ok()) std::memcpy(data, host_stage_, static_cast<size_t>(bytes));
    return st;
  }

  // The host-memory stages hold at least `bytes`. Staged collectives are synchronous, so no
  // collective uses the old stages when they are replaced; the device one is freed
  // stream-ordered, the pinned ones are kept until shutdown (cudaFreeHost may wait for the
  // device, which could be blocked on a hung peer).
  Status EnsureStage(int64_t bytes) {
    if (bytes <= stage_capacity_) return Status::Ok();
    const int64_t capacity = std::max<int64_t>(bytes, 2 * stage_capacity_);
    if (stage_ != nullptr) {
      SF_CUDA_OR_RETURN(cudaFreeAsync(stage_, stream_), "cudaFreeAsync");
      stage_ = nullptr;
    }
    if (host_stage_ != nullptr) old_host_stages_.push_back(host_stage_);
    host_stage_ = nullptr;
    stage_capacity_ = 0;
    SF_CUDA_OR_RETURN(cudaMallocAsync(&stage_, static_cast<size_t>(capacity), stream_),
                      "cudaMallocAsync");
    SF_CUDA_OR_RETURN(cudaMallocHost(&host_stage_, static_cast<size_t>(capacity)),
                      "cudaMallocHost");
    stage_capacity_ = capacity;
    return Status::Ok();
  }

  // The wire buffer holds at least `bytes`. It is replaced stream-ordered, so collectives still
  // in flight keep the old one until they are done, and nothing waits for the device.
  Status EnsureWire(int64_t bytes) {
    if (bytes <= wire_capacity_) return Status::Ok();
    if (wire_ != nullptr) {
      SF_CUDA_OR_RETURN(cudaFreeAsync(wire_, stream_), "cudaFreeAsync");
      wire_ = nullptr;
      wire_capacity_ = 0;
    }
    SF_CUDA_OR_RETURN(cudaMallocAsync(&wire_, static_cast<size_t>(bytes), stream_),
                      "cudaMallocAsync");
    wire_capacity_ = bytes;
    return Status::Ok();
  }

  Status BrokenWhileInFlight(const std::string& what) const {
    return Unavailable(what +
                       ": the communicator broke while it was in flight (an error or timeout "
                       "of another collective)");
  }

  // Marks the communicator broken and aborts NCCL (its kernels in flight end, so no stream
  // stays blocked on a dead peer). Returns `st`, with an abort failure appended.
  Status Break(Status st) {
    broken_ = true;
    if (comm_ != nullptr) {
      DeviceScope scope(device_);
      const ncclResult_t rc = ncclCommAbort(comm_);
      comm_ = nullptr;
      if (rc != ncclSuccess && !st.ok()) {
        st = Status(st.code(),
                    st.message() + " (then " + NcclMessage("ncclCommAbort", rc, nullptr) + ")");
      }
    }
    return st;
  }

  void Shutdown() {
    DeviceScope scope(device_);
    if (comm_ != nullptr && !broken_) {
      // Flush what was issued, then free; an abort if that does not finish in time.
      ncclResult_t rc = ncclCommFinalize(comm_);
      const auto deadline = Clock::now() + timeout_;
      Backoff backoff;
      while (rc == ncclInProgress && Clock::now() < deadline) {
        backoff.Pause();
        ncclResult_t state = ncclSuccess;
        const ncclResult_t q = ncclCommGetAsyncError(comm_, &state);
        rc = q == ncclSuccess ? state : q;
      }
      if (rc == ncclSuccess) {
        rc = ncclCommDestroy(comm_);
        if (rc != ncclSuccess) Warn(NcclMessage("ncclCommDestroy", rc, nullptr));
        comm_ = nullptr;
      } else {
        Warn(rc == ncclInProgress
                 ? "ncclCommFinalize did not finish within " + DurationText(timeout_)
                 : NcclMessage("ncclCommFinalize", rc, comm_));
      }
    }
    if (comm_ != nullptr) {
      const ncclResult_t rc = ncclCommAbort(comm_);
      if (rc != ncclSuccess) Warn(NcclMessage("ncclCommAbort", rc, nullptr));
      comm_ = nullptr;
    }
    // Stream-ordered frees and a stream destroy do not wait for the device.
    if (stream_ != nullptr) {
      for (void* p : {wire_, barrier_, stage_}) {
        if (p == nullptr) continue;
        const cudaError_t e = cudaFreeAsync(p, stream_);
        if (e != cudaSuccess) Warn(CudaMessage("cudaFreeAsync", e));
      }
      const cudaError_t e = cudaStreamDestroy(stream_);
      if (e != cudaSuccess) Warn(CudaMessage("cudaStreamDestroy", e));
    }
    if (host_stage_ != nullptr) old_host_stages_.push_back(host_stage_);
    for (void* p : old_host_stages_) cudaFreeHost(p);
    old_host_stages_.clear();
    wire_ = barrier_ = stage_ = host_stage_ = nullptr;
    stream_ = nullptr;
  }

  void Warn(const std::string& message) const {
    log::Warn("dist", {{"event", "shutdown_error"},
                       {"backend", "nccl"},
                       {"rank", std::to_string(rank_)},
                       {"error", message}});
  }

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

Status NcclWork::Wait() {
  if (!finished_) {
    status_ = comm_->Await(events_, what_, &busy_seconds_);
    finished_ = true;
    if (status_.ok() && counted_) comm_->Count(wire_bytes_, busy_seconds_);
  }
  return status_;
}

}  // namespace

bool NcclAvailable(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear it: no driver counts as zero GPUs, not as an error
    if (why != nullptr)
      *why = "no usable CUDA device (" + CudaMessage("cudaGetDeviceCount", e) + ")";
    return false;
  }
  if (n == 0) {
    if (why != nullptr) *why = "no CUDA device is visible to this process";
    return false;
  }
  return true;
}

Result<std::unique_ptr<Communicator>> NcclConnect(const NcclConnectOptions& options) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return InvalidArgument("rank " + std::to_string(options.rank) + " is not in [0, " +
                           std::to_string(options.world_size) + ")");
  }
  if (!options.rendezvous) return InvalidArgument("NcclConnect needs a rendezvous function");
  if (options.timeout.count() <= 0) return InvalidArgument("NcclConnect needs a positive timeout");
  const std::string where =
      "rank " + std::to_string(options.rank) + " of " + std::to_string(options.world_size);
  std::string why;
  if (!NcclAvailable(&why)) return Unavailable(why).WithContext(where);
  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess) return Unavailable(CudaMessage("cudaGetDeviceCount", e)).WithContext(where);
  if (options.device < 0 || options.device >= devices) {
    return Unavailable("CUDA device " + std::to_string(options.device) +
                       " does not exist (this process sees " + std::to_string(devices) + ")")
        .WithContext(where);
  }
  auto c = std::make_unique<NcclComm>(options);
  Status st = c->Connect(options.rendezvous);
  if (!st.ok()) return st.WithContext(where);
  log::Info("dist", {{"event", "connected"},
                     {"backend", "nccl"},
                     {"rank", std::to_string(c->rank())},
                     {"world_size", std::to_string(c->world_size())},
                     {"device", std::to_string(options.device)}});
  return std::unique_ptr<Communicator>(std::move(c));
}

}  // namespace sf::dist
