#include "trainer/optim/param.h"

#include <cstring>

namespace sf {
namespace {

template <typename T>
NamedBuffer Scalar(std::string name, const char* dtype, T value) {
  NamedBuffer b;
  b.name = std::move(name);
  b.dtype = dtype;
  b.data.resize(sizeof(T));
  std::memcpy(b.data.data(), &value, sizeof(T));
  return b;
}

template <typename T>
bool ReadScalar(const NamedBuffer& b, const char* dtype, T* out) {
  if (b.dtype != dtype || !b.shape.empty() || b.data.size() != sizeof(T)) return false;
  std::memcpy(out, b.data.data(), sizeof(T));
  return true;
}

}  // namespace

NamedBuffer NamedBuffer::F32(std::string name, std::span<const float> values) {
  NamedBuffer b;
  b.name = std::move(name);
  b.dtype = "F32";
  b.shape = {static_cast<int64_t>(values.size())};
  b.data.resize(values.size_bytes());
  if (!values.empty()) std::memcpy(b.data.data(), values.data(), values.size_bytes());
  return b;
}

NamedBuffer NamedBuffer::F64Scalar(std::string name, double value) {
  return Scalar(std::move(name), "F64", value);
}

NamedBuffer NamedBuffer::I64Scalar(std::string name, int64_t value) {
  return Scalar(std::move(name), "I64", value);
}

size_t NamedBuffer::numel() const {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

std::span<const float> NamedBuffer::AsF32() const {
  if (dtype != "F32" || data.size() != numel() * sizeof(float)) return {};
  // std::vector<std::byte> storage comes from operator new, which is suitably aligned for float.
  return {reinterpret_cast<const float*>(data.data()), numel()};
}

bool NamedBuffer::ScalarF64(double* out) const { return ReadScalar(*this, "F64", out); }
bool NamedBuffer::ScalarI64(int64_t* out) const { return ReadScalar(*this, "I64", out); }

const NamedBuffer* FindBuffer(std::span<const NamedBuffer> buffers, std::string_view name) {
  for (const NamedBuffer& b : buffers) {
    if (b.name == name) return &b;
  }
  return nullptr;
}

}  // namespace sf
