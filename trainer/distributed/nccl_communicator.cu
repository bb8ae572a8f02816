// NcclComm's life: the bootstrap (unique id through the rendezvous, non-blocking communicator
// creation bounded by the timeout), breaking it (abort) and shutting it down (finalise, or abort
// when that does not finish); and the public NcclAvailable and NcclConnect. nccl_internal.h
// holds the class and the design; nccl_communicator.h the contract.
#include "trainer/distributed/nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/log.h"
#include "trainer/distributed/nccl_internal.h"

namespace sf::dist::nccl {

// The bootstrap (see nccl_communicator.h).
Status NcclComm::Connect(const RendezvousFn& rendezvous) {
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

// Marks the communicator broken and aborts NCCL (its kernels in flight end, so no stream
// stays blocked on a dead peer). Returns `st`, with an abort failure appended.
Status NcclComm::Break(Status st) {
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

void NcclComm::Shutdown() {
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

void NcclComm::Warn(const std::string& message) const {
  log::Warn("dist", {{"event", "shutdown_error"},
                     {"backend", "nccl"},
                     {"rank", std::to_string(rank_)},
                     {"error", message}});
}

}  // namespace sf::dist::nccl

namespace sf::dist {

using nccl::CudaMessage;
using nccl::NcclComm;

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
