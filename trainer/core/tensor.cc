#include "trainer/core/tensor.h"

#include <cstring>
#include <utility>

namespace sf {
namespace {
int64_t Numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}
}  // namespace

Tensor::Tensor(std::vector<int64_t> shape, DType dtype, CachingAllocator& allocator)
    : allocator_(&allocator) {
  Resize(std::move(shape), dtype);
}

Tensor::~Tensor() { Release(); }

Tensor::Tensor(Tensor&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)),
      capacity_(std::exchange(o.capacity_, 0)),
      allocator_(o.allocator_),
      shape_(std::move(o.shape_)),
      numel_(std::exchange(o.numel_, 0)),
      dtype_(o.dtype_) {}

Tensor& Tensor::operator=(Tensor&& o) noexcept {
  if (this != &o) {
    Release();
    data_ = std::exchange(o.data_, nullptr);
    capacity_ = std::exchange(o.capacity_, 0);
    allocator_ = o.allocator_;
    shape_ = std::move(o.shape_);
    numel_ = std::exchange(o.numel_, 0);
    dtype_ = o.dtype_;
  }
  return *this;
}

Tensor Tensor::Zeros(std::vector<int64_t> shape, DType dtype, CachingAllocator& allocator) {
  Tensor t(std::move(shape), dtype, allocator);
  t.ZeroFill();
  return t;
}

void Tensor::Resize(std::vector<int64_t> shape, DType dtype) {
  const int64_t n = Numel(shape);
  const size_t bytes = static_cast<size_t>(n * DTypeSize(dtype));
  if (bytes > capacity_) {
    Release();
    data_ = allocator_->Allocate(bytes);
    capacity_ = bytes;
  }
  shape_ = std::move(shape);
  numel_ = n;
  dtype_ = dtype;
}

void Tensor::Resize(std::vector<int64_t> shape, DType dtype, CachingAllocator& allocator) {
  if (&allocator != allocator_) {
    Release();
    allocator_ = &allocator;
  }
  Resize(std::move(shape), dtype);
}

void Tensor::Release() {
  allocator_->Free(data_);
  data_ = nullptr;
  capacity_ = 0;
}

void Tensor::ZeroFill() {
  if (data_ && nbytes() > 0) allocator_->resource().Zero(data_, static_cast<size_t>(nbytes()));
}

void Tensor::CopyFromHost(const void* src) {
  if (data_ && nbytes() > 0) allocator_->resource().CopyFromHost(data_, src, static_cast<size_t>(nbytes()));
}

void Tensor::CopyToHost(void* dst) const {
  if (data_ && nbytes() > 0) allocator_->resource().CopyToHost(dst, data_, static_cast<size_t>(nbytes()));
}

std::string Tensor::ShapeString() const {
  std::string s = "[";
  for (size_t i = 0; i < shape_.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape_[i]);
  }
  return s + "]";
}

}  // namespace sf
