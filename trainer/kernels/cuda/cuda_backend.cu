// CudaBackend (see cuda_backend.h): construction and teardown, device memory (a CachingAllocator
// over cudaMalloc; host copies through two pinned staging buffers), the multi-tensor passes of
// multi_tensor.cu, and MakeCudaBackend. The ops live with their kernels, one file per op family
// (cuda_internal.cuh lists them); backend.h and kernels/cpu/reference.h define each op.
#include "trainer/kernels/cuda/cuda_backend.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include "trainer/kernels/cuda/cuda_internal.cuh"
#include "trainer/kernels/cuda/multi_tensor.h"

namespace sf {
namespace cuda {

// Device memory of one GPU for CachingAllocator: cudaMalloc blocks; zeroing and copies are
// ordered on the backend's stream.
class CudaMemory final : public MemoryResource {
 public:
  CudaMemory(int ordinal, cudaStream_t stream) : ordinal_(ordinal), stream_(stream) {}
  void* Allocate(size_t bytes) override {
    cudaSetDevice(ordinal_);
    void* p = nullptr;
    if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
      cudaGetLastError();  // clear the sticky out-of-memory error
      return nullptr;
    }
    return p;
  }
  void Free(void* ptr) override { cudaFree(ptr); }
  void Zero(void* ptr, size_t bytes) override {
    SF_CUDA_CHECK(cudaMemsetAsync(ptr, 0, bytes, stream_));
  }
  void CopyFromHost(void* dst, const void* src, size_t bytes) override {
    SF_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
    SF_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  void CopyToHost(void* dst, const void* src, size_t bytes) override {
    SF_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
    SF_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  bool host_accessible() const override { return false; }

 private:
  int ordinal_;
  cudaStream_t stream_;
};

CudaBackend::CudaBackend(int ordinal) : ordinal_(ordinal) {
  SF_CUDA_CHECK(cudaSetDevice(ordinal));
  SF_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  SF_CUBLAS_CHECK(cublasLtCreate(&lt_));
  SF_CUDA_CHECK(cudaMalloc(&workspace_, kWorkspace));
  SF_CUDA_CHECK(cudaMalloc(&sum_scratch_, cuda::SumSquaresScratchBytes()));
  SF_CUDA_CHECK(cudaMalloc(&ce_totals_, 3 * sizeof(double)));
  for (Staging& st : staging_) SF_CUDA_CHECK(cudaEventCreateWithFlags(&st.done, cudaEventDisableTiming));
  memory_ = std::make_unique<CudaMemory>(ordinal, stream_);
  allocator_ = std::make_unique<CachingAllocator>(memory_.get());
}

CudaBackend::~CudaBackend() {
  cudaStreamSynchronize(stream_);
  DropGemmPlans();
  for (Staging& st : staging_) {
    cudaFreeHost(st.host);
    cudaEventDestroy(st.done);
  }
  for (cudaEvent_t e : marks_) cudaEventDestroy(e);
  allocator_.reset();  // frees every block before the stream goes
  cudaFree(workspace_);
  cudaFree(row_stats_);
  cudaFree(sum_scratch_);
  cudaFree(ce_totals_);
  cublasLtDestroy(lt_);
  cudaStreamDestroy(stream_);
}

std::string CudaBackend::description() const {
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, ordinal_) != cudaSuccess) return "cuda";
  char buf[384];
  std::snprintf(buf, sizeof(buf), "%s (sm_%d%d, %.1f GiB)", p.name, p.major, p.minor,
                static_cast<double>(p.totalGlobalMem) / (1ull << 30));
  return buf;
}

void CudaBackend::Synchronize() { SF_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

int CudaBackend::Mark() {
  if (marks_used_ == marks_.size()) {
    cudaEvent_t e;
    SF_CUDA_CHECK(cudaEventCreate(&e));
    marks_.push_back(e);
  }
  SF_CUDA_CHECK(cudaEventRecord(marks_[marks_used_], stream_));
  return static_cast<int>(marks_used_++);
}

double CudaBackend::SecondsBetween(int a, int b) {
  SF_CUDA_CHECK(cudaEventSynchronize(marks_.at(static_cast<size_t>(b))));
  float ms = 0;
  SF_CUDA_CHECK(cudaEventElapsedTime(&ms, marks_.at(static_cast<size_t>(a)), marks_.at(static_cast<size_t>(b))));
  return ms / 1e3;
}

void* CudaBackend::AllocateDevice(size_t bytes) {
  void* p = allocator_->Allocate(bytes ? bytes : 1);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

// Through pinned memory, two buffers in turn: returns once `src` is copied into one (after
// the copy that last used it finished), without waiting for the device.
void CudaBackend::CopyToDevice(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  Staging& st = staging_[next_staging_];
  next_staging_ ^= 1;
  if (st.pending) SF_CUDA_CHECK(cudaEventSynchronize(st.done));
  if (st.capacity < bytes) {
    cudaFreeHost(st.host);
    st.capacity = bytes + bytes / 4;
    SF_CUDA_CHECK(cudaMallocHost(&st.host, st.capacity));
  }
  std::memcpy(st.host, src, bytes);
  SF_CUDA_CHECK(cudaMemcpyAsync(dst, st.host, bytes, cudaMemcpyHostToDevice, stream_));
  SF_CUDA_CHECK(cudaEventRecord(st.done, stream_));
  st.pending = true;
}

void CudaBackend::CopyToHost(void* dst, const void* src, size_t bytes) {
  SF_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
  SF_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

VectorStats CudaBackend::SumSquares(const float* x, int64_t n) {
  VectorStats s;
  if (n <= 0) return s;
  cuda::LaunchSumSquares(x, n, sum_scratch_, stream_);
  SF_CUDA_CHECK(cudaMemcpyAsync(&s.sum_squares, sum_scratch_, sizeof(double),
                                cudaMemcpyDeviceToHost, stream_));
  SF_CUDA_CHECK(cudaStreamSynchronize(stream_));
  s.non_finite = !std::isfinite(s.sum_squares);
  return s;
}

void CudaBackend::Scale(float* x, int64_t n, float factor) {
  cuda::LaunchScale(x, n, factor, stream_);
}

void CudaBackend::ApplyOptimizerUpdate(const OptimizerUpdate& u) {
  cuda::LaunchOptimizerUpdate(u, stream_);
}

}  // namespace cuda

int CudaDeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;  // no driver: zero GPUs
  return n;
}

std::unique_ptr<Backend<float>> MakeCudaBackend(int ordinal) {
  if (ordinal < 0 || ordinal >= CudaDeviceCount()) return nullptr;
  return std::make_unique<cuda::CudaBackend>(ordinal);
}

}  // namespace sf
