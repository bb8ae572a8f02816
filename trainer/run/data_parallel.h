// Data parallelism for a model on any backend: the gradient reducer and the initial weight
// broadcast, wired to where the model's buffers live and what the communicator takes
// (communicator.h, device_buffers()):
//   - a host model (CPU engine): its buffers go to the communicator as they are;
//   - a device model with a device-buffer communicator (GPU ranks on NCCL): device pointers,
//     handed over once the backend's stream has written them (Backend::Synchronize);
//   - a device model with a host-memory communicator (GPU ranks under mpirun, e.g. the bench):
//     staged through host memory with the backend's copies.
// The same step code then runs on every rank whatever the device (TrainStep, GradReducer).
#pragma once

#include <memory>

#include "common/status.h"
#include "trainer/distributed/communicator.h"
#include "trainer/distributed/grad_reducer.h"
#include "trainer/models/seq2seq_model.h"

namespace sf {

// A reducer over `model`'s flat gradient buffer, buckets on parameter boundaries.
std::unique_ptr<dist::GradReducer> MakeGradReducer(dist::Communicator& comm, TrainableModel<float>& model,
                                                   const dist::GradReducerOptions& options);

// Every rank takes rank 0's weights (equal by seed already; this makes it a fact), then the
// low-precision mirror is refreshed.
Status BroadcastWeights(dist::Communicator& comm, TrainableModel<float>& model);

}  // namespace sf
