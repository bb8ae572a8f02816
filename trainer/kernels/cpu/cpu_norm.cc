// CpuBackend's normalisation, residual and activation kernels (the rest: cpu_backend.cc): bias +
// dropout + residual, bias + activation and their gradients, layer norm, and the fused tail of a
// residual block (residual + dropout + layer norm, forward and backward) whose rows are the
// explicit-vector kernels of hot_kernels.h.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "trainer/kernels/cpu/cpu_backend.h"
#include "trainer/kernels/cpu/cpu_parallel.h"
#include "trainer/kernels/cpu/hot_kernels.h"
#include "trainer/kernels/cpu/vector_math.h"

namespace sf {
namespace {

using cpu_internal::AddPartials;
using cpu_internal::ColumnSumImpl;
using cpu_internal::DropoutFactors;
using cpu_internal::ForEachDropoutChunk;
using cpu_internal::kMinParallelWork;
using cpu_internal::kUseAvx512;
using cpu_internal::ParallelRows;
using cpu_internal::ThreadScratch;
using cpu_internal::ZeroedPartials;
using vmath::FastErf;
using vmath::FastExp;

}  // namespace

void CpuBackend::BiasDropoutResidualForward(const float* x, const float* bias,
                                            const float* residual, float* out, int64_t rows,
                                            int64_t cols, float p, DropoutKey key) {
  ForEachDropoutChunk(rows * cols, key, p, [&](int64_t s, int64_t len, const float* factor) {
    // Walk the chunk one row segment at a time, so the bias index needs no division.
    for (int64_t g = s; g < s + len;) {
      const int64_t c0 = g % cols, seg = std::min(cols - c0, s + len - g);
      const float* xs = x + g;
      const float* fs = factor + (g - s);
      float* os = out + g;
      if (bias && residual) {
        const float* bs = bias + c0;
        const float* rs = residual + g;
#pragma omp simd
        for (int64_t i = 0; i < seg; ++i) os[i] = (xs[i] + bs[i]) * fs[i] + rs[i];
      } else if (bias) {
        const float* bs = bias + c0;
#pragma omp simd
        for (int64_t i = 0; i < seg; ++i) os[i] = (xs[i] + bs[i]) * fs[i];
      } else if (residual) {
        const float* rs = residual + g;
#pragma omp simd
        for (int64_t i = 0; i < seg; ++i) os[i] = xs[i] * fs[i] + rs[i];
      } else {
#pragma omp simd
        for (int64_t i = 0; i < seg; ++i) os[i] = xs[i] * fs[i];
      }
      g += seg;
    }
  });
}

void CpuBackend::BiasDropoutResidualBackward(const float* dout, float* dx, float* dbias,
                                             int64_t rows, int64_t cols, float p,
                                             DropoutKey key) {
  if (p > 0 || dx != dout) {
    ForEachDropoutChunk(rows * cols, key, p, [&](int64_t s, int64_t len, const float* factor) {
#pragma omp simd
      for (int64_t i = 0; i < len; ++i) dx[s + i] = dout[s + i] * factor[i];
    });
  }
  if (dbias) ColumnSumImpl(dx, dbias, rows, cols);
}

void CpuBackend::BiasActivationForward(const float* x, const float* bias, float* pre, void* out,
                                       DType out_dtype, int64_t rows, int64_t cols,
                                       Activation act) {
  const bool f32 = out_dtype == DType::kF32;
  ParallelRows(rows, cols, [&](int64_t r) {
    const float* xr = x + r * cols;
    float* pr = pre + r * cols;
    // A low-precision output is computed into this thread's scratch row, then stored.
    float* orow = f32 ? static_cast<float*>(out) + r * cols : ThreadScratch(cols);
    if (act == Activation::kRelu) {
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c) {
        const float h = xr[c] + (bias ? bias[c] : 0.0f);
        pr[c] = h;
        orow[c] = h > 0 ? h : 0.0f;
      }
    } else if (act == Activation::kTanh) {
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c) {
        const float h = xr[c] + (bias ? bias[c] : 0.0f);
        pr[c] = h;
        orow[c] = 2.0f / (1.0f + FastExp(-2.0f * h)) - 1.0f;
      }
    } else {
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c) {
        const float h = xr[c] + (bias ? bias[c] : 0.0f);
        pr[c] = h;
        orow[c] = 0.5f * h * (1.0f + FastErf(h * 0.70710678118654752f));
      }
    }
    if (!f32) StoreFloats(orow, static_cast<uint16_t*>(out) + r * cols, out_dtype, cols);
  });
}

void CpuBackend::LayerNormBackward(const float* dy, const float* x, const float* gamma,
                                   const float* mean, const float* rstd, float* dx,
                                   float* dgamma, float* dbeta, int64_t rows, int64_t cols,
                                   bool accumulate_dx) {
  const int nt = omp_get_max_threads();
  float* partials = ZeroedPartials(nt, 2 * cols);  // dgamma | dbeta partial rows
#pragma omp parallel if (rows * cols >= kMinParallelWork)
  {
    float* pg = partials + static_cast<int64_t>(omp_get_thread_num()) * 2 * cols;
    float* pb = pg + cols;
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x + r * cols;
      const float* d = dy + r * cols;
      const float mu = mean[r], rs = rstd[r];
      float mg = 0, mgx = 0;
#pragma omp simd reduction(+ : mg, mgx)
      for (int64_t c = 0; c < cols; ++c) {
        const float xh = (xr[c] - mu) * rs;
        const float g = d[c] * gamma[c];
        mg += g;
        mgx += g * xh;
        pg[c] += d[c] * xh;
        pb[c] += d[c];
      }
      mg /= static_cast<float>(cols);
      mgx /= static_cast<float>(cols);
      float* o = dx + r * cols;
      if (accumulate_dx) {
#pragma omp simd
        for (int64_t c = 0; c < cols; ++c)
          o[c] += rs * (d[c] * gamma[c] - mg - (xr[c] - mu) * rs * mgx);
      } else {
#pragma omp simd
        for (int64_t c = 0; c < cols; ++c)
          o[c] = rs * (d[c] * gamma[c] - mg - (xr[c] - mu) * rs * mgx);
      }
    }
  }
  AddPartials(partials, nt, 2 * cols, 0, cols, dgamma);
  AddPartials(partials, nt, 2 * cols, cols, cols, dbeta);
}

void CpuBackend::LayerNormForward(const float* x, const float* gamma, const float* beta,
                                  float* y, float* mean, float* rstd, int64_t rows, int64_t cols,
                                  float eps) {
  ResidualLayerNormForward(nullptr, nullptr, nullptr, 0.0f, DropoutKey{}, const_cast<float*>(x),
                           gamma, beta, y, nullptr, DType::kF32, mean, rstd, rows, cols, eps);
}

void CpuBackend::ResidualLayerNormForward(const float* x, const float* bias,
                                          const float* residual, float p, DropoutKey key,
                                          float* h, const float* gamma, const float* beta,
                                          float* y, void* y_low, DType low_dtype, float* mean,
                                          float* rstd, int64_t rows, int64_t cols, float eps) {
  const bool drop = x && p > 0;
  const int64_t low_size = y_low ? DTypeSize(low_dtype) : 0;
  ParallelRows(rows, cols, [&](int64_t r) {
    float* factor = nullptr;
    if (drop) {
      factor = ThreadScratch(cols);
      DropoutFactors(key, r * cols, cols, p, factor);
    }
    const int64_t o = r * cols;
    auto row = kUseAvx512 ? avx512::ResidualNormRow : portable::ResidualNormRow;
    row(x ? x + o : nullptr, bias, residual ? residual + o : nullptr, factor, h + o, gamma, beta,
        eps, cols, y + o, y_low ? static_cast<char*>(y_low) + o * low_size : nullptr, low_dtype,
        mean + r, rstd + r);
  });
}

void CpuBackend::ResidualLayerNormBackward(const float* dy, const float* h, const float* gamma,
                                           const float* mean, const float* rstd, float* dh,
                                           void* d_branch, DType branch_dtype, float* dbias,
                                           float* dgamma, float* dbeta, float p, DropoutKey key,
                                           int64_t rows, int64_t cols) {
  const bool parallel = rows * cols >= kMinParallelWork;
  const int nt = parallel ? omp_get_max_threads() : 1;
  const int64_t width = 3 * cols;  // dgamma | dbeta | dbias partial rows
  float* partials = ZeroedPartials(nt, width);
  const int64_t bsize = DTypeSize(branch_dtype);
  auto row = kUseAvx512 ? avx512::ResidualNormRowBackward : portable::ResidualNormRowBackward;
#pragma omp parallel if (parallel)
  {
    float* mine = partials + static_cast<int64_t>(omp_get_thread_num()) * width;
    float* factor = p > 0 ? ThreadScratch(cols) : nullptr;
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t o = r * cols;
      if (factor) DropoutFactors(key, o, cols, p, factor);
      row(dy + o, h + o, gamma, mean[r], rstd[r], factor, cols, dh + o,
          static_cast<char*>(d_branch) + o * bsize, branch_dtype, dbias ? mine + 2 * cols : nullptr,
          mine, mine + cols);
    }
  }
  AddPartials(partials, nt, width, 0, cols, dgamma);
  AddPartials(partials, nt, width, cols, cols, dbeta);
  AddPartials(partials, nt, width, 2 * cols, cols, dbias);
}

void CpuBackend::BiasActivationBackward(const float* dout, const void* saved, DType saved_dtype,
                                        float* dpre, float* dbias, int64_t rows, int64_t cols,
                                        Activation act) {
  BiasActivationBackwardTo(dout, DType::kF32, saved, saved_dtype, dpre, DType::kF32, dbias, rows,
                           cols, act);
}

namespace {
// Row r of a [rows, cols] buffer of dtype dt as fp32: the row itself, or widened into `into`.
const float* RowAsFloat(const void* base, DType dt, int64_t r, int64_t cols, float* into) {
  if (dt == DType::kF32) return static_cast<const float*>(base) + r * cols;
  const uint16_t* s = static_cast<const uint16_t*>(base) + r * cols;
  if (dt == DType::kBF16) {
    for (int64_t c = 0; c < cols; ++c) into[c] = Bf16ToFloat(s[c]);
  } else {
    for (int64_t c = 0; c < cols; ++c) into[c] = F16ToFloat(s[c]);
  }
  return into;
}
}  // namespace

void CpuBackend::BiasActivationBackwardTo(const void* dout, DType dout_dtype, const void* saved,
                                          DType saved_dtype, void* dpre, DType dpre_dtype,
                                          float* dbias, int64_t rows, int64_t cols,
                                          Activation act) {
  const bool parallel = rows * cols >= kMinParallelWork;
  const int nt = parallel ? omp_get_max_threads() : 1;
  float* partials = dbias ? ZeroedPartials(nt, cols) : nullptr;
  const int64_t psize = DTypeSize(dpre_dtype);
  auto row = kUseAvx512 ? avx512::ActivationGradRow : portable::ActivationGradRow;
#pragma omp parallel if (parallel)
  {
    float* mine = partials ? partials + static_cast<int64_t>(omp_get_thread_num()) * cols : nullptr;
    // bf16 / f16 rows widen exactly into this thread's scratch (two rows: dout, saved).
    float* widened = ThreadScratch(2 * cols);
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const float* d = RowAsFloat(dout, dout_dtype, r, cols, widened);
      const float* s = RowAsFloat(saved, saved_dtype, r, cols, widened + cols);
      row(d, s, act, cols, static_cast<char*>(dpre) + r * cols * psize, dpre_dtype, mine);
    }
  }
  if (dbias) AddPartials(partials, nt, cols, 0, cols, dbias);
}

}  // namespace sf
