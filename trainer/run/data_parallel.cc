#include "trainer/run/data_parallel.h"

#include <vector>

namespace sf {

std::unique_ptr<dist::GradReducer> MakeGradReducer(dist::Communicator& comm, TrainableModel<float>& model,
                                                   const dist::GradReducerOptions& options) {
  ParamStore<float>& store = model.params();
  std::vector<int64_t> offsets;
  for (const ParamInfo& p : store.params()) offsets.push_back(p.offset);
  Backend<float>& be = model.context().backend();
  if (be.host_accessible()) {
    return std::make_unique<dist::GradReducer>(&comm, store.grads(), store.total_numel(), std::move(offsets),
                                               options);
  }
  dist::DeviceAccess device;
  device.synchronize = [&be] { be.Synchronize(); };
  device.to_host = [&be](void* host, const void* dev, size_t bytes) { be.CopyToHost(host, dev, bytes); };
  device.to_device = [&be](void* dev, const void* host, size_t bytes) { be.CopyToDevice(dev, host, bytes); };
  return std::make_unique<dist::GradReducer>(&comm, store.grads(), store.total_numel(), std::move(offsets),
                                             options, &device);
}

Status BroadcastWeights(dist::Communicator& comm, TrainableModel<float>& model) {
  ParamStore<float>& store = model.params();
  Backend<float>& be = model.context().backend();
  const int64_t bytes = store.total_numel() * static_cast<int64_t>(sizeof(float));
  if (be.host_accessible() || comm.device_buffers()) {
    be.Synchronize();  // initialisation's copies are on the device
    SF_RETURN_IF_ERROR(comm.Broadcast(store.values(), bytes, 0).WithContext("broadcasting the weights"));
  } else {
    store.PullValues();
    SF_RETURN_IF_ERROR(comm.Broadcast(store.host_values(), bytes, 0).WithContext("broadcasting the weights"));
    store.PushValues();
  }
  model.WeightsUpdated();
  return Status::Ok();
}

}  // namespace sf
