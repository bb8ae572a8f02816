// CudaBackend's 2-D convolution (Backend::Conv2dForward / Conv2dBackward, backend.h) as explicit
// GEMMs: the images' patches unfolded into columns (im2col, [K = cin·kh·kw, P = oh·ow] per
// image), the forward y = W · col and the data gradient dcol = Wᵀ · dy through the backend's
// cuBLASLt Gemm, folded back into dx by a gather (col2im: each input pixel sums the columns that
// read it, no atomics); dW += dy · colᵀ per image; the bias and its gradient by small kernels.
// Images go in chunks whose columns fit a bounded buffer.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "trainer/kernels/cuda/cuda_internal.cuh"

namespace sf::cuda {
namespace {

constexpr int64_t kMaxColumnFloats = int64_t{64} << 20;  // 256 MiB of columns at most

// Conv2dShape::oh() / ow() for device code.
__device__ inline int64_t OutH(const Conv2dShape& s) { return (s.h + 2 * s.ph - s.kh) / s.sh + 1; }
__device__ inline int64_t OutW(const Conv2dShape& s) { return (s.w + 2 * s.pw - s.kw) / s.sw + 1; }

// col[img, k, p] for images [0, count) of x (already offset to the chunk's first image).
__global__ void Im2ColKernel(const float* x, float* col, Conv2dShape s, int64_t count) {
  const int64_t K = s.cin * s.kh * s.kw, OW = OutW(s), P = OutH(s) * OW;
  const int64_t total = count * K * P;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t p = e % P, k = (e / P) % K, img = e / (P * K);
    const int64_t c = k / (s.kh * s.kw), a = (k / s.kw) % s.kh, b = k % s.kw;
    const int64_t hi = (p / OW) * s.sh - s.ph + a, wj = (p % OW) * s.sw - s.pw + b;
    const bool inside = hi >= 0 && hi < s.h && wj >= 0 && wj < s.w;
    col[e] = inside ? x[((img * s.cin + c) * s.h + hi) * s.w + wj] : 0.0f;
  }
}

// dx[img, c, hi, wj] = Σ over the taps (a, b) and output positions (i, j) that read it of
// dcol[img, (c, a, b), (i, j)].
__global__ void Col2ImKernel(const float* dcol, float* dx, Conv2dShape s, int64_t count) {
  const int64_t K = s.cin * s.kh * s.kw, OH = OutH(s), OW = OutW(s), P = OH * OW;
  const int64_t total = count * s.cin * s.h * s.w;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t wj = e % s.w, hi = (e / s.w) % s.h, c = (e / (s.w * s.h)) % s.cin, img = e / (s.w * s.h * s.cin);
    float acc = 0.0f;
    for (int64_t a = 0; a < s.kh; ++a) {
      const int64_t ti = hi + s.ph - a;
      if (ti < 0 || ti % s.sh != 0 || ti / s.sh >= OH) continue;
      for (int64_t b = 0; b < s.kw; ++b) {
        const int64_t tj = wj + s.pw - b;
        if (tj < 0 || tj % s.sw != 0 || tj / s.sw >= OW) continue;
        const int64_t k = (c * s.kh + a) * s.kw + b, p = (ti / s.sh) * OW + tj / s.sw;
        acc += dcol[(img * K + k) * P + p];
      }
    }
    dx[e] = acc;
  }
}

// y[img, o, p] += bias[o] over n images.
__global__ void AddChannelBiasKernel(float* y, const float* bias, int64_t total, int64_t channels, int64_t plane) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[e] += bias[(e / plane) % channels];
  }
}

// dbias[o] += Σ_{img, p} dy[img, o, p] (one block per channel, a fixed summation order).
__global__ void ChannelSumKernel(const float* dy, float* dbias, int64_t images, int64_t channels, int64_t plane) {
  const int64_t o = blockIdx.x;
  float acc = 0.0f;
  for (int64_t e = threadIdx.x; e < images * plane; e += blockDim.x) {
    acc += dy[((e / plane) * channels + o) * plane + e % plane];
  }
  acc = BlockSum(acc);
  if (threadIdx.x == 0) dbias[o] += acc;
}

int GridFor(int64_t n) { return static_cast<int>(std::min<int64_t>(Blocks(n), 4096)); }

GemmOperand F32(const float* p, bool transposed, int64_t ld, int64_t batch_stride) {
  return GemmOperand{p, DType::kF32, transposed, ld, batch_stride};
}

}  // namespace

void CudaBackend::Conv2dForward(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s) {
  const int64_t K = s.cin * s.kh * s.kw, P = s.oh() * s.ow();
  if (s.n <= 0 || P <= 0) return;
  const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(s.n, kMaxColumnFloats / std::max<int64_t>(1, K * P)));
  float* col = static_cast<float*>(allocator_->Allocate(static_cast<size_t>(chunk * K * P) * sizeof(float)));
  for (int64_t n0 = 0; n0 < s.n; n0 += chunk) {
    const int64_t count = std::min(chunk, s.n - n0);
    Im2ColKernel<<<GridFor(count * K * P), kThreads, 0, stream_>>>(x + n0 * s.cin * s.h * s.w, col, s, count);
    SF_CUDA_CHECK(cudaGetLastError());
    // y_img [cout, P] = W [cout, K] · col_img [K, P]
    Gemm(count, s.cout, P, K, F32(w, false, K, 0), F32(col, false, P, K * P), y + n0 * s.cout * P, P, s.cout * P,
         1.0f, 0.0f);
  }
  allocator_->Free(col);
  if (bias) {
    const int64_t total = s.n * s.cout * P;
    AddChannelBiasKernel<<<GridFor(total), kThreads, 0, stream_>>>(y, bias, total, s.cout, P);
    SF_CUDA_CHECK(cudaGetLastError());
  }
}

void CudaBackend::Conv2dBackward(const float* x, const float* w, const float* dy, float* dx, float* dw, float* dbias,
                                 const Conv2dShape& s) {
  const int64_t K = s.cin * s.kh * s.kw, P = s.oh() * s.ow();
  if (s.n <= 0 || P <= 0) return;
  if (dbias) {
    ChannelSumKernel<<<static_cast<unsigned>(s.cout), kThreads, 0, stream_>>>(dy, dbias, s.n, s.cout, P);
    SF_CUDA_CHECK(cudaGetLastError());
  }
  const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(s.n, kMaxColumnFloats / std::max<int64_t>(1, K * P)));
  float* col = static_cast<float*>(allocator_->Allocate(static_cast<size_t>(chunk * K * P) * sizeof(float)));
  for (int64_t n0 = 0; n0 < s.n; n0 += chunk) {
    const int64_t count = std::min(chunk, s.n - n0);
    const float* dy0 = dy + n0 * s.cout * P;
    Im2ColKernel<<<GridFor(count * K * P), kThreads, 0, stream_>>>(x + n0 * s.cin * s.h * s.w, col, s, count);
    SF_CUDA_CHECK(cudaGetLastError());
    // dW [cout, K] += dy_img [cout, P] · col_imgᵀ [P, K], image after image (one accumulator).
    for (int64_t i = 0; i < count; ++i) {
      Gemm(1, s.cout, K, P, F32(dy0 + i * s.cout * P, false, P, 0), F32(col + i * K * P, true, P, 0), dw, K, 0, 1.0f,
           1.0f);
    }
    if (dx) {
      // dcol_img [K, P] = Wᵀ [K, cout] · dy_img [cout, P], into the same buffer, then folded.
      Gemm(count, K, P, s.cout, F32(w, true, K, 0), F32(dy0, false, P, s.cout * P), col, P, K * P, 1.0f, 0.0f);
      const int64_t total = count * s.cin * s.h * s.w;
      Col2ImKernel<<<GridFor(total), kThreads, 0, stream_>>>(col, dx + n0 * s.cin * s.h * s.w, s, count);
      SF_CUDA_CHECK(cudaGetLastError());
    }
  }
  allocator_->Free(col);
}

}  // namespace sf::cuda
