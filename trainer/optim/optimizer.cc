#include "trainer/optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "trainer/core/tensor.h"
#include "trainer/kernels/backend.h"
#include "trainer/optim/multi_tensor.h"
#include "trainer/optim/optimizer_impl.h"

namespace sf {

struct Optimizer::Slot {
  std::string name;
  size_t numel = 0;
  std::vector<std::vector<float>> buffers;  // one per buffer name, numel each
  float* ptrs[kMaxOptimizerBuffers] = {};
};

// The device path: flat state buffers in the store's layout and the chunk table of the fused
// update, all in the backend's memory.
struct Optimizer::DeviceState {
  Backend<float>* backend = nullptr;
  std::vector<std::string> names;   // parameter names, in layout order
  std::vector<int64_t> offsets;     // elements from the first parameter's value
  std::vector<size_t> numels;
  const float* base_value = nullptr;
  const float* base_grad = nullptr;
  int64_t total = 0;
  std::vector<Tensor> buffers;      // one per buffer name, [total]
  Tensor chunks;                    // ParamChunk [num_chunks] (as bytes)
  int64_t num_chunks = 0;
};

Optimizer::Optimizer(OptimizerOptions options, std::vector<std::string> buffer_names)
    : options_(std::move(options)), buffer_names_(std::move(buffer_names)) {
  if (buffer_names_.size() > kMaxOptimizerBuffers) std::abort();
}

Optimizer::~Optimizer() = default;

void Optimizer::PlaceOn(Backend<float>* backend) {
  if (backend == nullptr) {
    device_.reset();
    return;
  }
  device_ = std::make_unique<DeviceState>();
  device_->backend = backend;
}

Status Optimizer::EnsureDeviceLayout(std::span<const ParamRef> params) {
  DeviceState& d = *device_;
  if (!d.names.empty()) {
    bool same = params.size() == d.names.size();
    for (size_t i = 0; i < params.size() && same; ++i) {
      same = params[i].name == d.names[i] && params[i].numel == d.numels[i] &&
             params[i].value == d.base_value + d.offsets[i] &&
             params[i].grad == d.base_grad + d.offsets[i];
    }
    if (same) return Status::Ok();
    return FailedPrecondition("optimizer: on a device the parameter list must stay the one of "
                              "the first step (same names, buffers and order)");
  }
  if (params.empty()) return Status::Ok();
  std::unordered_set<std::string_view> seen;
  const float* base_value = params[0].value;
  const float* base_grad = params[0].grad;
  int64_t end = 0;
  std::vector<ParamChunk> chunks;
  for (const ParamRef& p : params) {
    if (p.name.empty()) return InvalidArgument("optimizer: a parameter has an empty name");
    if (!seen.insert(p.name).second) {
      return InvalidArgument("optimizer: parameter name '" + p.name + "' appears twice");
    }
    const int64_t offset = p.value - base_value;
    if (offset < end || p.grad - base_grad != offset) {
      return FailedPrecondition("optimizer: parameter '" + p.name +
                                "' is not the next slice of one flat value/gradient buffer");
    }
    for (int64_t b = 0; b < static_cast<int64_t>(p.numel); b += kParamChunkElements) {
      ParamChunk c;
      c.begin = offset + b;
      c.end = offset + std::min<int64_t>(static_cast<int64_t>(p.numel), b + kParamChunkElements);
      c.decay = p.weight_decay ? 1 : 0;
      chunks.push_back(c);
    }
    end = offset + static_cast<int64_t>(p.numel);
    d.names.push_back(p.name);
    d.offsets.push_back(offset);
    d.numels.push_back(p.numel);
  }
  d.base_value = base_value;
  d.base_grad = base_grad;
  d.total = end;
  CachingAllocator& memory = d.backend->allocator();
  d.buffers.clear();
  for (size_t k = 0; k < buffer_names_.size(); ++k) {
    d.buffers.push_back(Tensor::Zeros({d.total}, DType::kF32, memory));
  }
  d.num_chunks = static_cast<int64_t>(chunks.size());
  d.chunks = Tensor({d.num_chunks * static_cast<int64_t>(sizeof(ParamChunk))}, DType::kU8, memory);
  d.chunks.CopyFromHost(chunks.data());
  return Status::Ok();
}

Status Optimizer::EnsureLayout(std::span<const ParamRef> params) {
  if (device_) return EnsureDeviceLayout(params);
  if (params.size() == slot_of_.size()) {
    bool same = true;
    for (size_t i = 0; i < params.size() && same; ++i) {
      same = params[i].value == last_values_[i] && params[i].numel == slot_of_[i]->numel &&
             params[i].name == slot_of_[i]->name;
    }
    if (same) return Status::Ok();
  }
  // Slow path (first step, or the list changed): match by name.
  std::unordered_map<std::string_view, Slot*> by_name;
  for (auto& slot : slots_) by_name.emplace(slot->name, slot.get());
  std::unordered_set<std::string_view> seen;
  for (const ParamRef& p : params) {
    if (p.name.empty()) return InvalidArgument("optimizer: a parameter has an empty name");
    if (!seen.insert(p.name).second) {
      return InvalidArgument("optimizer: parameter name '" + p.name + "' appears twice");
    }
    auto it = by_name.find(p.name);
    if (it != by_name.end() && it->second->numel != p.numel) {
      return FailedPrecondition("optimizer: parameter '" + p.name + "' has " +
                                std::to_string(p.numel) + " elements but its state has " +
                                std::to_string(it->second->numel));
    }
  }
  std::vector<Slot*> slot_of;
  std::vector<const float*> values;
  slot_of.reserve(params.size());
  values.reserve(params.size());
  for (const ParamRef& p : params) {
    auto it = by_name.find(p.name);
    Slot* slot;
    if (it != by_name.end()) {
      slot = it->second;
    } else {
      auto fresh = std::make_unique<Slot>();
      fresh->name = p.name;
      fresh->numel = p.numel;
      fresh->buffers.resize(buffer_names_.size());
      for (size_t k = 0; k < buffer_names_.size(); ++k) {
        fresh->buffers[k].assign(p.numel, 0.0f);
        fresh->ptrs[k] = fresh->buffers[k].data();
      }
      slot = fresh.get();
      slots_.push_back(std::move(fresh));
      by_name.emplace(slot->name, slot);
    }
    slot_of.push_back(slot);
    values.push_back(p.value);
  }
  slot_of_ = std::move(slot_of);
  last_values_ = std::move(values);
  return Status::Ok();
}

Status Optimizer::Prepare(std::span<const ParamRef> params) { return EnsureLayout(params); }

void Optimizer::Step(std::span<const ParamRef> params, float lr, const StepFusion& fusion) {
  if (Status s = EnsureLayout(params); !s.ok()) {
    // A parameter list that contradicts the optimizer state is a bug in the caller.
    std::fprintf(stderr, "fatal: Optimizer::Step: %s\n", s.ToString().c_str());
    std::abort();
  }
  ++step_;
  const UpdateScalars scalars = ComputeScalars(step_, lr);
  if (device_) {
    if (device_->num_chunks == 0) return;
    OptimizerUpdate u;
    u.rule = rule();
    u.scalars = scalars;
    u.values = const_cast<float*>(device_->base_value);
    u.grads = device_->base_grad;
    u.grad_factor = fusion.grad_factor;
    u.mirror = fusion.mirror;
    u.mirror_dtype = fusion.mirror_dtype;
    for (size_t k = 0; k < device_->buffers.size() && k < 2; ++k) {
      u.state[k] = device_->buffers[k].data<float>();
    }
    u.chunks = static_cast<const ParamChunk*>(device_->chunks.raw());
    u.num_chunks = device_->num_chunks;
    device_->backend->ApplyOptimizerUpdate(u);
    return;
  }
  const int threads = optim_internal::SliceThreads(optim_internal::TotalElements(params));
  optim_internal::ForEachSlice(params, threads, [&](int, size_t i, size_t b, size_t e) {
    if (!fusion.on_updated) {
      return UpdateSlice(params[i], slot_of_[i]->ptrs, b, e, scalars, fusion.grad_factor);
    }
    // Chunks small enough that the updated values are still in cache when the hook reads them.
    constexpr size_t kChunk = 4096;
    for (size_t c = b; c < e; c += kChunk) {
      const size_t ce = std::min(e, c + kChunk);
      UpdateSlice(params[i], slot_of_[i]->ptrs, c, ce, scalars, fusion.grad_factor);
      fusion.on_updated(params[i].value + c, ce - c);
    }
  });
}

std::vector<NamedBuffer> Optimizer::State() const {
  std::vector<NamedBuffer> out;
  out.reserve(1 + slots_.size() * buffer_names_.size());
  out.push_back(NamedBuffer::I64Scalar("step", step_));
  if (device_) {
    std::vector<std::vector<float>> host(device_->buffers.size());
    for (size_t k = 0; k < host.size(); ++k) {
      host[k].resize(static_cast<size_t>(device_->total));
      device_->buffers[k].CopyToHost(host[k].data());
    }
    for (size_t i = 0; i < device_->names.size(); ++i) {
      for (size_t k = 0; k < buffer_names_.size(); ++k) {
        out.push_back(NamedBuffer::F32(
            device_->names[i] + "." + buffer_names_[k],
            std::span<const float>(host[k].data() + device_->offsets[i], device_->numels[i])));
      }
    }
    return out;
  }
  for (const auto& slot : slots_) {
    for (size_t k = 0; k < buffer_names_.size(); ++k) {
      out.push_back(NamedBuffer::F32(slot->name + "." + buffer_names_[k], slot->buffers[k]));
    }
  }
  return out;
}

Status Optimizer::LoadState(std::span<const NamedBuffer> state, std::span<const ParamRef> params) {
  const std::string where = "optimizer " + std::string(type()) + " state";
  std::unordered_map<std::string_view, const NamedBuffer*> by_name;
  for (const NamedBuffer& b : state) {
    if (!by_name.emplace(b.name, &b).second) {
      return DataLoss(where + ": buffer '" + b.name + "' appears twice");
    }
  }
  auto step_it = by_name.find("step");
  int64_t step = 0;
  if (step_it == by_name.end()) return DataLoss(where + ": no 'step' buffer");
  if (!step_it->second->ScalarI64(&step) || step < 0) {
    return DataLoss(where + ": 'step' is not a non-negative I64 scalar");
  }
  size_t used = 1;
  std::unordered_set<std::string_view> seen;
  for (const ParamRef& p : params) {
    if (!seen.insert(p.name).second) {
      return InvalidArgument("optimizer: parameter name '" + p.name + "' appears twice");
    }
    for (const std::string& buffer : buffer_names_) {
      const std::string name = p.name + "." + buffer;
      auto it = by_name.find(name);
      if (it == by_name.end()) return DataLoss(where + ": no buffer '" + name + "'");
      const NamedBuffer& b = *it->second;
      if (b.dtype != "F32" || b.shape.size() != 1 || b.AsF32().size() != p.numel) {
        return DataLoss(where + ": buffer '" + name + "' should be F32 [" +
                        std::to_string(p.numel) + "] for parameter '" + p.name + "'");
      }
      ++used;
    }
  }
  if (used != state.size()) {
    for (const NamedBuffer& b : state) {
      bool known = b.name == "step";
      for (const ParamRef& p : params) {
        for (const std::string& buffer : buffer_names_) known |= b.name == p.name + "." + buffer;
      }
      if (!known) {
        return DataLoss(where + ": buffer '" + b.name + "' belongs to no parameter of this " +
                        std::string(type()) + " optimizer");
      }
    }
  }
  // Everything checked: replace the state.
  if (device_) {
    SF_RETURN_IF_ERROR(EnsureDeviceLayout(params));
    for (size_t k = 0; k < buffer_names_.size(); ++k) {
      std::vector<float> host(static_cast<size_t>(device_->total), 0.0f);
      for (size_t i = 0; i < params.size(); ++i) {
        std::span<const float> src = by_name.at(params[i].name + "." + buffer_names_[k])->AsF32();
        std::copy(src.begin(), src.end(), host.begin() + device_->offsets[i]);
      }
      device_->buffers[k].CopyFromHost(host.data());
    }
    step_ = step;
    return Status::Ok();
  }
  slots_.clear();
  slot_of_.clear();
  last_values_.clear();
  SF_RETURN_IF_ERROR(EnsureLayout(params));
  for (size_t i = 0; i < params.size(); ++i) {
    Slot* slot = slot_of_[i];
    for (size_t k = 0; k < buffer_names_.size(); ++k) {
      std::span<const float> src = by_name.at(params[i].name + "." + buffer_names_[k])->AsF32();
      if (!src.empty()) std::memcpy(slot->buffers[k].data(), src.data(), src.size_bytes());
    }
  }
  step_ = step;
  return Status::Ok();
}

namespace {

struct Entry {
  const char* name;
  std::unique_ptr<Optimizer> (*make)(const OptimizerOptions&);
};

// The registry: adding an optimizer is one file plus one line here.
constexpr Entry kRegistry[] = {
    {"adamw", &optim_internal::MakeAdamW},
    {"radam", &optim_internal::MakeRAdam},
    {"sgd", &optim_internal::MakeSgd},
};

Status Validate(const OptimizerOptions& o) {
  auto bad = [&](const std::string& field, double v, const char* want) {
    return InvalidArgument("optimizer." + field + ": " + std::to_string(v) + " " + want);
  };
  auto finite = [](double v) { return std::isfinite(v); };
  if (!finite(o.beta1) || o.beta1 < 0 || o.beta1 >= 1)
    return bad("beta1", o.beta1, "is not in [0, 1)");
  if (!finite(o.beta2) || o.beta2 < 0 || o.beta2 >= 1)
    return bad("beta2", o.beta2, "is not in [0, 1)");
  if (!finite(o.eps) || o.eps < 0) return bad("eps", o.eps, "is negative");
  if (!finite(o.weight_decay) || o.weight_decay < 0) {
    return bad("weight_decay", o.weight_decay, "is negative");
  }
  if (o.type == "sgd") {
    if (!finite(o.momentum) || o.momentum < 0) return bad("momentum", o.momentum, "is negative");
    if (o.nesterov && o.momentum <= 0) {
      return InvalidArgument("optimizer.nesterov: needs momentum > 0");
    }
  }
  if (o.type == "radam") {
    if (!finite(o.radam_rho_threshold) || o.radam_rho_threshold < 4) {
      return bad("rho_threshold", o.radam_rho_threshold,
                 "is below 4 (the rectifier is undefined for rho_t <= 4)");
    }
  }
  return Status::Ok();
}

}  // namespace

std::vector<std::string> OptimizerNames() {
  std::vector<std::string> names;
  for (const Entry& e : kRegistry) names.emplace_back(e.name);
  return names;
}

Result<std::unique_ptr<Optimizer>> MakeOptimizer(const OptimizerOptions& options) {
  for (const Entry& e : kRegistry) {
    if (options.type == e.name) {
      SF_RETURN_IF_ERROR(Validate(options));
      return e.make(options);
    }
  }
  std::string known;
  for (const Entry& e : kRegistry) known += std::string(known.empty() ? "" : ", ") + e.name;
  return InvalidArgument("optimizer.type: unknown optimizer '" + options.type +
                         "' (known: " + known + ")");
}

}  // namespace sf
