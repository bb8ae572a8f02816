// Tensor: a contiguous, row-major, dense n-dimensional array with a dtype and a device.
//
// A Tensor owns its storage (a block of the CPU caching allocator, or of the CUDA backend's
// allocator) and frees it when destroyed; it is move-only. There are no strides and no views:
// layers address sub-blocks with plain pointers and documented (B,T,C) layouts.
// Not thread-safe for concurrent mutation; concurrent reads of the data are fine.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainer/core/allocator.h"
#include "trainer/core/dtype.h"

namespace sf {

class Tensor {
 public:
  Tensor() = default;
  // Uninitialised storage for `shape` on the CPU.
  Tensor(std::vector<int64_t> shape, DType dtype);
  ~Tensor();
  Tensor(Tensor&& other) noexcept;
  Tensor& operator=(Tensor&& other) noexcept;
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  // Same as constructing, but filled with zero bytes.
  static Tensor Zeros(std::vector<int64_t> shape, DType dtype);

  // Re-shapes to `shape`, keeping the block when it is big enough (no reallocation when a
  // buffer is re-planned for a smaller or equal size). Contents are undefined afterwards.
  void Resize(std::vector<int64_t> shape, DType dtype);

  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_[i]; }
  int64_t numel() const { return numel_; }
  int64_t nbytes() const { return numel_ * DTypeSize(dtype_); }
  DType dtype() const { return dtype_; }
  Device device() const { return Device::kCpu; }
  bool empty() const { return data_ == nullptr; }

  void* raw() { return data_; }
  const void* raw() const { return data_; }
  template <typename T> T* data() { return static_cast<T*>(data_); }
  template <typename T> const T* data() const { return static_cast<const T*>(data_); }

  void ZeroFill();
  std::string ShapeString() const;  // "[4, 7, 16]"

 private:
  void Release();

  void* data_ = nullptr;
  size_t capacity_ = 0;
  std::vector<int64_t> shape_;
  int64_t numel_ = 0;
  DType dtype_ = DType::kF32;
};

}  // namespace sf
