// What an optimizer sees of a parameter: a named, contiguous fp32 master-weight buffer and its
// fp32 gradient, both owned by the layer that declared the parameter.
//
// A ParamRef is a non-owning view. The pointed-to buffers must stay alive and keep their
// address and size for as long as an optimizer keeps state for them (between Step calls they
// may be changed in place, which is how layers write gradients). Names are unique within one
// model and stable across runs: optimizer state is saved and restored by parameter name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace sf {

struct ParamRef {
  std::string name;  // "encoder.layers.0.self_attn.qkv.weight"
  float* value;      // numel fp32 master weights, updated in place by Optimizer::Step
  float* grad;       // numel fp32 gradients, read (and, by clipping/scaling, rescaled) in place
  size_t numel;
  bool weight_decay;  // false for biases, layernorm gains, ... (fairseq/HF "no_decay" group)
};

// One tensor of saved state (optimizer moments, step counters, loss-scaler state), in a form a
// checkpoint writer can store as-is (e.g. one safetensors tensor each). `dtype` is one of
// "F32", "F64", "I64" (safetensors names); `data` holds numel(shape) elements of that type,
// little-endian, packed.
struct NamedBuffer {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;  // {} for a scalar
  std::vector<std::byte> data;

  static NamedBuffer F32(std::string name, std::span<const float> values);
  static NamedBuffer F64Scalar(std::string name, double value);
  static NamedBuffer I64Scalar(std::string name, int64_t value);

  size_t numel() const;
  // Typed views; empty (F32) / nullopt-like false (scalars) when the dtype does not match.
  std::span<const float> AsF32() const;
  bool ScalarF64(double* out) const;
  bool ScalarI64(int64_t* out) const;
};

// Finds the buffer called `name` in `buffers` (linear scan; state lists are short), or nullptr.
const NamedBuffer* FindBuffer(std::span<const NamedBuffer> buffers, std::string_view name);

}  // namespace sf
