// NcclCommunicator: the Communicator of GPU ranks, on NCCL. One rank per process, one GPU per
// rank.
//
// Bootstrap: rank 0 calls ncclGetUniqueId and publishes the 128-byte id (its raw bytes as the
// payload) through `rendezvous("nccl-id", payload)`; every other rank sends an empty payload
// and takes rank 0's. Every rank then creates its NCCL communicator on `device` in NCCL's
// non-blocking mode, so the creation, like every later wait, is bounded by `timeout`: a rank
// that never arrives turns into kUnavailable, never a hang. `rendezvous` is the same function
// type as MpiConnect's (communicator.h) and must bound its own wait.
//
// Buffers: the gradient and weight buffers of GPU ranks are DEVICE memory on `device`
// (cudaMalloc, cudaMallocAsync or managed memory), reduced in place; device_buffers() is true.
// Pageable host memory (the trainer's scalars, flags and messages) is staged: copied through a
// pinned buffer into a device buffer, reduced or broadcast there, and copied back, with the
// call finished (bounded by the timeout) before it returns; its Work is already complete.
// Memory of another device is refused with kInvalidArgument.
//
// Ordering: the communicator owns one CUDA stream (non-blocking: it does not synchronise with
// the legacy default stream) and issues every collective on it, in submission order. It does
// not know the stream that produced a buffer: the caller must make sure the buffer's contents
// are complete on the device before AllreduceAsync/Broadcast (e.g. by synchronising the
// producing stream), and must neither read nor write the buffer until Wait() has returned. Once
// Wait() returned OK the result is complete on the device and visible to every stream.
//
// Work: each AllreduceAsync records a pair of CUDA events around its work on the stream;
// busy_seconds() is the time between them (cudaEventElapsedTime), the collective's own running
// time including the wire casts. Wait() polls the end event and NCCL's asynchronous error state
// until timeout() has passed; on expiry (or any CUDA/NCCL error) it aborts the NCCL communicator
// (ncclCommAbort), marks it broken() and returns kUnavailable naming the operation. stats()
// counts an allreduce (calls, wire bytes, busy seconds) when its Wait() returns OK; a Work
// dropped without Wait() is not counted. Broadcast and Barrier are synchronous and not counted.
// A Work must be waited for (or dropped) before its communicator is destroyed.
//
// Wire compression: an f32 kSum with wire kBF16 or kF16 is cast on the stream into a device
// wire buffer (owned by the communicator, grown stream-ordered only when a call needs more),
// reduced by NCCL in the narrow type (so partial sums are rounded to it as well), and widened
// back into the buffer. Accepted dtypes: kF32, kF64, kI32 (kSum, kMax), kBF16, kF16 (kSum).
//
// Errors: invalid arguments (dtype, pointer, root) return kInvalidArgument and leave the
// communicator usable (no rank issued anything). Any CUDA or NCCL failure, or a timeout, breaks
// it (communicator.h): later calls fail at once, and the process should exit.
//
// Thread safety: as communicator.h: calls from one thread at a time. Each call makes `device`
// current for its duration and restores the caller's device afterwards. Construction and
// destruction happen on one thread; the destructor finalises NCCL (bounded by the timeout), or
// only releases what it can without waiting after a break.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "trainer/distributed/communicator.h"

namespace sf::dist {

struct NcclConnectOptions : RankOptions {
  // The CUDA device ordinal this rank uses (as numbered in this process, after
  // CUDA_VISIBLE_DEVICES).
  int device = 0;
};

// Connects this rank (see above). kInvalidArgument for bad options, kUnavailable when there is
// no such GPU, the rendezvous gives no usable id, or the ranks do not meet within the timeout.
Result<std::unique_ptr<Communicator>> NcclConnect(const NcclConnectOptions& options);

// True when at least one CUDA device is visible to this process. Otherwise false, and `why`
// (when not null) says why: no driver, or no device (cudaGetDeviceCount failing counts as zero
// GPUs, as in cuda_backend.h).
bool NcclAvailable(std::string* why);

}  // namespace sf::dist
