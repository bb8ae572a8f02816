// NcclComm's buffers: whether a caller's buffer is pageable host memory (staged) or device memory
// of its GPU, the synchronous staging of host-memory collectives through a pinned and a device
// stage, and the growth of the stages and of the device wire buffer, stream-ordered.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <utility>

#include "trainer/distributed/nccl_internal.h"

namespace sf::dist::nccl {

// Whether `data` is pageable host memory (which NCCL would turn into an illegal memory access
// that ruins the whole CUDA context: such buffers are staged, see Staged). Memory of another
// device is refused.
Result<bool> NcclComm::IsHostMemory(const void* data, int64_t bytes,
                                    const std::string& what) const {
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
Status NcclComm::Staged(std::string what, void* data, int64_t bytes, int64_t wire_bytes,
                        bool counted, const std::function<Status(void*)>& body) {
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
Status NcclComm::EnsureStage(int64_t bytes) {
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
Status NcclComm::EnsureWire(int64_t bytes) {
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

}  // namespace sf::dist::nccl
