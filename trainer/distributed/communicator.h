// Communicator: the one interface through which the engine talks to the other ranks of a
// data-parallel trial. Two implementations: MpiCommunicator (CPU ranks, Open MPI) and
// NcclCommunicator (GPU ranks, NCCL on device buffers). The engine (TrainStep, GradReducer)
// sees only this header; bootstrapping (who the peers are, how they meet) lives with the
// implementations.
//
// Contract, for every implementation:
//  - Collectives are issued in the same order on every rank (the caller's job: every rank runs
//    the same step code). An implementation runs them in submission order.
//  - AllreduceAsync returns at once; the buffer must stay untouched by the caller until the
//    returned Work's Wait() has returned. The synchronous calls are AllreduceAsync + Wait.
//  - Sums of floating-point buffers may be sent in a narrower dtype (`wire`: bf16 or f16 for
//    an f32 buffer, gradient compression); the result is widened back into the buffer.
//  - Every wait is bounded by timeout(): a peer that died or hangs turns into a
//    kDeadlineExceeded (or kUnavailable) status naming the operation, never a hang. After any
//    error the communicator is broken(): every later call fails at once, and the process should
//    exit (a collective cannot be abandoned halfway; the cluster restarts the gang).
//  - Thread safety: calls may come from any one thread at a time (the training loop).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "trainer/core/dtype.h"

namespace sf::dist {

enum class ReduceOp { kSum, kMax };

// How independently started ranks meet: every rank calls it with the same `round` name and its
// own payload, and gets back every rank's payload (indexed by rank) once all have arrived. In a
// trial it is the master's TrialLink.Rendezvous; it must bound its own wait.
using RendezvousFn = std::function<Result<std::vector<std::string>>(const std::string& round,
                                                                    const std::string& payload)>;

// Who this rank is and how it meets the others: what every implementation's Connect takes.
// `timeout` bounds the bootstrap and, afterwards, every collective wait.
struct RankOptions {
  int rank = 0;
  int world_size = 1;
  RendezvousFn rendezvous;
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
};

// A collective in flight.
class Work {
 public:
  virtual ~Work() = default;
  // Blocks until the collective finished on this rank, or the communicator's timeout passed.
  virtual Status Wait() = 0;
  // Seconds the collective itself ran (from the moment the communication thread or stream
  // started it until it finished): what overlap hides, or the caller waits for.
  virtual double busy_seconds() const = 0;
};

// A collective that failed (or was refused) before anything was issued: Wait() returns the
// status at once.
class FailedWork : public Work {
 public:
  explicit FailedWork(Status status) : status_(std::move(status)) {}
  Status Wait() override { return status_; }
  double busy_seconds() const override { return 0; }

 private:
  Status status_;
};

struct AllreduceStats {
  int64_t calls = 0;
  int64_t bytes = 0;           // payload bytes on the wire (after compression), summed
  double busy_seconds = 0;     // time the collectives ran
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // "mpi" or "nccl".
  virtual std::string backend_name() const = 0;
  // Where the engine's big buffers (gradients, weights) must be to be handed over: false, host
  // memory (MPI; a GPU rank stages them, GradReducer's DeviceAccess); true, the rank's device
  // memory (NCCL, which stages small host buffers itself).
  virtual bool device_buffers() const { return false; }

  // In place over `count` elements of `dtype` (kF32, kF64, kBF16, kF16, kI32 for kSum/kMax).
  // `wire` narrows an f32 kSum (kBF16 or kF16); kF32 or the buffer's own dtype sends as is.
  virtual std::unique_ptr<Work> AllreduceAsync(void* data, int64_t count, DType dtype,
                                               ReduceOp op = ReduceOp::kSum,
                                               DType wire = DType::kF32) = 0;
  Status Allreduce(void* data, int64_t count, DType dtype, ReduceOp op = ReduceOp::kSum,
                   DType wire = DType::kF32) {
    return AllreduceAsync(data, count, dtype, op, wire)->Wait();
  }
  // `bytes` bytes from `root` into every rank's `data`.
  virtual Status Broadcast(void* data, int64_t bytes, int root) = 0;
  virtual Status Barrier() = 0;

  // True after a failed or timed-out collective: nothing further can be trusted.
  virtual bool broken() const = 0;
  virtual std::chrono::milliseconds timeout() const = 0;
  virtual AllreduceStats stats() const = 0;
};

// Sizes of the dtypes a Communicator accepts; errors name the dtype.
Status CheckCollectiveDType(DType dtype, ReduceOp op, DType wire);

}  // namespace sf::dist
