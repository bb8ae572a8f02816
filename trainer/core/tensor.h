// Tensor: a contiguous, row-major, dense n-dimensional array with a dtype and a device.
//
// A Tensor owns its storage (a block of a CachingAllocator: the CPU one by default, or a
// backend's device allocator, Backend::allocator()) and frees it when destroyed; it is
// move-only. Device tensors are not host-accessible: read and write them through CopyFromHost /
// CopyToHost or backend ops only. There are no strides and no views:
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
  // Uninitialised storage for `shape` from `allocator` (the host heap by default).
  Tensor(std::vector<int64_t> shape, DType dtype,
         CachingAllocator& allocator = CachingAllocator::Cpu());
  ~Tensor();
  Tensor(Tensor&& other) noexcept;
  Tensor& operator=(Tensor&& other) noexcept;
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  // Same as constructing, but filled with zero bytes.
  static Tensor Zeros(std::vector<int64_t> shape, DType dtype,
                      CachingAllocator& allocator = CachingAllocator::Cpu());

  // Re-shapes to `shape`, keeping the block when it is big enough (no reallocation when a
  // buffer is re-planned for a smaller or equal size). Contents are undefined afterwards.
  void Resize(std::vector<int64_t> shape, DType dtype);
  // The same, moving the storage to `allocator` when it is another one.
  void Resize(std::vector<int64_t> shape, DType dtype, CachingAllocator& allocator);

  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_[i]; }
  int64_t numel() const { return numel_; }
  int64_t nbytes() const { return numel_ * DTypeSize(dtype_); }
  DType dtype() const { return dtype_; }
  // False for device memory: data() must then only be handed to the backend's ops.
  bool host_accessible() const { return allocator_->host_accessible(); }
  CachingAllocator& allocator() const { return *allocator_; }
  bool empty() const { return data_ == nullptr; }

  void* raw() { return data_; }
  const void* raw() const { return data_; }
  template <typename T> T* data() { return static_cast<T*>(data_); }
  template <typename T> const T* data() const { return static_cast<const T*>(data_); }

  void ZeroFill();
  // Whole-tensor copies to or from host memory of nbytes() bytes.
  void CopyFromHost(const void* src);
  void CopyToHost(void* dst) const;
  std::string ShapeString() const;  // "[4, 7, 16]"

 private:
  void Release();

  void* data_ = nullptr;
  size_t capacity_ = 0;
  CachingAllocator* allocator_ = &CachingAllocator::Cpu();
  std::vector<int64_t> shape_;
  int64_t numel_ = 0;
  DType dtype_ = DType::kF32;
};

}  // namespace sf
