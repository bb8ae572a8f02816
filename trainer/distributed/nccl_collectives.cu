// NcclComm's collectives: allreduce (f32 sums optionally cast to bf16/f16 on the wire by the
// kernels here), broadcast and barrier; issuing a collective between a start and an end event,
// settling a non-blocking NCCL call, polling NCCL's asynchronous errors, and a Work's bounded
// wait for its end event.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "trainer/distributed/nccl_internal.h"

namespace sf::dist::nccl {
namespace {

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

}  // namespace

std::unique_ptr<Work> NcclComm::AllreduceAsync(void* data, int64_t count, DType dtype, ReduceOp op,
                                               DType wire) {
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

Status NcclComm::Broadcast(void* data, int64_t bytes, int root) {
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
Status NcclComm::Barrier() {
  return Issue("barrier", sizeof(int32_t), /*counted=*/false,
               [this]() -> Status {
                 return Settle(
                     ncclAllReduce(barrier_, barrier_, 1, ncclInt32, ncclSum, comm_, stream_),
                     "ncclAllReduce");
               })
      ->Wait();
}

// Waits (bounded) for a collective's end event; its running time into *busy.
Status NcclComm::Await(const EventPair& events, const std::string& what, double* busy) {
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

void NcclComm::Count(int64_t wire_bytes, double busy) {
  std::lock_guard<std::mutex> lock(stats_mu_);
  stats_.calls++;
  stats_.bytes += wire_bytes;
  stats_.busy_seconds += busy;
}

// Issues `body` on the stream between a start and an end event. A failure breaks the
// communicator (something may have been issued on some ranks and not on others).
std::unique_ptr<Work> NcclComm::Issue(std::string what, int64_t wire_bytes, bool counted,
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
Status NcclComm::Settle(ncclResult_t rc, const char* call) {
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

Status NcclComm::CheckAsyncError(const std::string& what) {
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

Status NcclComm::BrokenWhileInFlight(const std::string& what) const {
  return Unavailable(what +
                     ": the communicator broke while it was in flight (an error or timeout "
                     "of another collective)");
}

Status NcclWork::Wait() {
  if (!finished_) {
    status_ = comm_->Await(events_, what_, &busy_seconds_);
    finished_ = true;
    if (status_.ok() && counted_) comm_->Count(wire_bytes_, busy_seconds_);
  }
  return status_;
}

}  // namespace sf::dist::nccl
