// CpuBackend's elementwise kernels of the recurrent and convolutional families (cpu_backend.h):
// the LSTM cell, the GLU, ScaleRowGroups and weight normalisation. Split out of cpu_backend.cc.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "trainer/kernels/cpu/cpu_backend.h"
#include "trainer/kernels/cpu/cpu_parallel.h"
#include "trainer/kernels/cpu/simd.h"

namespace sf {
namespace {
using cpu_internal::ColumnSumImpl;
using cpu_internal::ParallelRows;
}  // namespace

namespace {

// σ(x) and tanh(x) = 2σ(2x) - 1 lane by lane through simd::Exp (vmath::FastExp's polynomial):
// within 3e-7 (absolute) of the exact values. Explicit vectors: GCC 12 left the LSTM cells' and
// the GLU's `omp simd` loops scalar (16% of an lstm_small step and 8.7% of an fconv_small one).
constexpr int kLanes = simd::kWidth;

inline simd::F Sigmoid(simd::F x) {
  return simd::Set1(1.0f) / (simd::Set1(1.0f) + simd::Exp(simd::Set1(-1.0f) * x));
}
inline simd::F Tanh(simd::F x) {
  return simd::Set1(2.0f) / (simd::Set1(1.0f) + simd::Exp(simd::Set1(-2.0f) * x)) -
         simd::Set1(1.0f);
}

// Lanes [j, j + n) of a row, n <= kLanes (the last vector of a row may be partial); a null row
// reads zeros.
inline simd::F LoadLanes(const float* p, int64_t j, int n) {
  if (!p) return simd::Zero();
  return n == kLanes ? simd::Load(p + j) : simd::LoadN(p + j, n);
}
inline void StoreLanes(float* p, int64_t j, int n, simd::F x) {
  if (n == kLanes) {
    simd::Store(p + j, x);
  } else {
    simd::StoreN(p + j, x, n);
  }
}

}  // namespace

void CpuBackend::LstmCellForward(float* gates, const float* bias, const float* c_prev, float* c,
                                 float* h, int64_t rows, int64_t hidden) {
  const int64_t H = hidden;
  ParallelRows(rows, 4 * H, [&](int64_t r) {
    float* z = gates + r * 4 * H;
    const float* cp = c_prev ? c_prev + r * H : nullptr;
    float* cr = c + r * H;
    float* hr = h + r * H;
    for (int64_t j = 0; j < H; j += kLanes) {
      const int n = static_cast<int>(std::min<int64_t>(kLanes, H - j));
      const simd::F i = Sigmoid(LoadLanes(z, j, n) + LoadLanes(bias, j, n));
      const simd::F f =
          Sigmoid(LoadLanes(z + H, j, n) + LoadLanes(bias ? bias + H : nullptr, j, n));
      const simd::F g =
          Tanh(LoadLanes(z + 2 * H, j, n) + LoadLanes(bias ? bias + 2 * H : nullptr, j, n));
      const simd::F o =
          Sigmoid(LoadLanes(z + 3 * H, j, n) + LoadLanes(bias ? bias + 3 * H : nullptr, j, n));
      StoreLanes(z, j, n, i);
      StoreLanes(z + H, j, n, f);
      StoreLanes(z + 2 * H, j, n, g);
      StoreLanes(z + 3 * H, j, n, o);
      const simd::F cn = f * LoadLanes(cp, j, n) + i * g;
      StoreLanes(cr, j, n, cn);
      StoreLanes(hr, j, n, o * Tanh(cn));
    }
  });
}

void CpuBackend::LstmCellBackward(const float* gates, const float* c_prev, const float* c,
                                  const float* dh, const float* dc, float* dgates, float* dc_prev,
                                  float* dbias, int64_t rows, int64_t hidden) {
  const int64_t H = hidden;
  const simd::F one = simd::Set1(1.0f);
  ParallelRows(rows, 4 * H, [&](int64_t r) {
    const float* a = gates + r * 4 * H;
    float* dz = dgates + r * 4 * H;
    const int64_t base = r * H;
    for (int64_t j = 0; j < H; j += kLanes) {
      const int n = static_cast<int>(std::min<int64_t>(kLanes, H - j));
      // Every activation is read before dz (which may alias gates) is written.
      const simd::F i = LoadLanes(a, j, n), f = LoadLanes(a + H, j, n),
                    g = LoadLanes(a + 2 * H, j, n), o = LoadLanes(a + 3 * H, j, n);
      const simd::F tc = Tanh(LoadLanes(c + base, j, n));
      const simd::F cp = LoadLanes(c_prev ? c_prev + base : nullptr, j, n);
      const simd::F d = LoadLanes(dh + base, j, n);
      const simd::F dct = LoadLanes(dc ? dc + base : nullptr, j, n) + d * o * (one - tc * tc);
      StoreLanes(dz, j, n, dct * g * i * (one - i));
      StoreLanes(dz + H, j, n, dct * cp * f * (one - f));
      StoreLanes(dz + 2 * H, j, n, dct * i * (one - g * g));
      StoreLanes(dz + 3 * H, j, n, d * tc * o * (one - o));
      if (dc_prev) StoreLanes(dc_prev + base, j, n, dct * f);
    }
  });
  if (dbias) ColumnSumImpl(dgates, dbias, rows, 4 * H);
}

void CpuBackend::GluForward(const float* x, float* y, int64_t rows, int64_t cols) {
  ParallelRows(rows, 2 * cols, [&](int64_t r) {
    const float* a = x + r * 2 * cols;
    const float* b = a + cols;
    float* yr = y + r * cols;
    for (int64_t c = 0; c < cols; c += kLanes) {
      const int n = static_cast<int>(std::min<int64_t>(kLanes, cols - c));
      StoreLanes(yr, c, n, LoadLanes(a, c, n) * Sigmoid(LoadLanes(b, c, n)));
    }
  });
}

void CpuBackend::GluBackward(const float* x, const float* dy, float* dx, int64_t rows,
                             int64_t cols) {
  ParallelRows(rows, 2 * cols, [&](int64_t r) {
    const float* a = x + r * 2 * cols;
    const float* b = a + cols;
    const float* d = dy + r * cols;
    float* da = dx + r * 2 * cols;
    float* db = da + cols;
    for (int64_t c = 0; c < cols; c += kLanes) {
      const int n = static_cast<int>(std::min<int64_t>(kLanes, cols - c));
      // a and b are read before da and db (which may alias them) are written.
      const simd::F av = LoadLanes(a, c, n), sv = Sigmoid(LoadLanes(b, c, n)),
                    dv = LoadLanes(d, c, n);
      StoreLanes(da, c, n, dv * sv);
      StoreLanes(db, c, n, dv * av * sv * (simd::Set1(1.0f) - sv));
    }
  });
}

void CpuBackend::ScaleRowGroups(float* x, const float* factors, int64_t groups,
                                int64_t rows_per_group, int64_t cols) {
  ParallelRows(groups * rows_per_group, cols, [&](int64_t r) {
    const float f = factors[r / rows_per_group];
    float* xr = x + r * cols;
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) xr[c] *= f;
  });
}

// Weight norms are over parameter tensors (thousands to millions of elements, once per step):
// each vector's sums in double, vectors in parallel.
// Weight normalisation over vectors that are rows (contiguous) or columns (element j of vector i
// at j*n + i). Columns are walked a block of them at a time, row by row, so every access is
// contiguous; each vector's sums still run over j in order, so the results are the same
// either way (a column at a time read one float per cache line).
namespace {
constexpr int64_t kWeightNormBlock = 256;  // columns per block
}  // namespace

void CpuBackend::WeightNormForward(const float* v, const float* g, float* w, float* norms,
                                   int64_t n, int64_t d, bool columns) {
  if (!columns) {
#pragma omp parallel for schedule(static) if (n * d > 65536)
    for (int64_t i = 0; i < n; ++i) {
      const float* vi = v + i * d;
      double ss = 0;
      for (int64_t j = 0; j < d; ++j) ss += static_cast<double>(vi[j]) * vi[j];
      norms[i] = static_cast<float>(std::sqrt(ss));
      const float k = g[i] / norms[i];
      for (int64_t j = 0; j < d; ++j) w[i * d + j] = k * vi[j];
    }
    return;
  }
  const int64_t blocks = (n + kWeightNormBlock - 1) / kWeightNormBlock;
#pragma omp parallel for schedule(static) if (n * d > 65536)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t i0 = blk * kWeightNormBlock, m = std::min(kWeightNormBlock, n - i0);
    double ss[kWeightNormBlock] = {};
    float k[kWeightNormBlock];
    for (int64_t j = 0; j < d; ++j) {
      const float* row = v + j * n + i0;
      for (int64_t i = 0; i < m; ++i) ss[i] += static_cast<double>(row[i]) * row[i];
    }
    for (int64_t i = 0; i < m; ++i) {
      norms[i0 + i] = static_cast<float>(std::sqrt(ss[i]));
      k[i] = g[i0 + i] / norms[i0 + i];
    }
    for (int64_t j = 0; j < d; ++j) {
      const float* row = v + j * n + i0;
      float* out = w + j * n + i0;
      for (int64_t i = 0; i < m; ++i) out[i] = k[i] * row[i];
    }
  }
}

void CpuBackend::WeightNormBackward(const float* dw, const float* v, const float* g,
                                    const float* norms, float* dv, float* dg, int64_t n, int64_t d,
                                    bool columns) {
  if (!columns) {
#pragma omp parallel for schedule(static) if (n * d > 65536)
    for (int64_t i = 0; i < n; ++i) {
      const float* dwi = dw + i * d;
      const float* vi = v + i * d;
      double s = 0;
      for (int64_t j = 0; j < d; ++j) s += static_cast<double>(dwi[j]) * vi[j];
      const double nrm = norms[i];
      dg[i] += static_cast<float>(s / nrm);
      const float a = static_cast<float>(g[i] / nrm), b = static_cast<float>(s / (nrm * nrm));
      for (int64_t j = 0; j < d; ++j) dv[i * d + j] += a * (dwi[j] - b * vi[j]);
    }
    return;
  }
  const int64_t blocks = (n + kWeightNormBlock - 1) / kWeightNormBlock;
#pragma omp parallel for schedule(static) if (n * d > 65536)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t i0 = blk * kWeightNormBlock, m = std::min(kWeightNormBlock, n - i0);
    double s[kWeightNormBlock] = {};
    float a[kWeightNormBlock], b[kWeightNormBlock];
    for (int64_t j = 0; j < d; ++j) {
      const float* dwr = dw + j * n + i0;
      const float* vr = v + j * n + i0;
      for (int64_t i = 0; i < m; ++i) s[i] += static_cast<double>(dwr[i]) * vr[i];
    }
    for (int64_t i = 0; i < m; ++i) {
      const double nrm = norms[i0 + i];
      dg[i0 + i] += static_cast<float>(s[i] / nrm);
      a[i] = static_cast<float>(g[i0 + i] / nrm);
      b[i] = static_cast<float>(s[i] / (nrm * nrm));
    }
    for (int64_t j = 0; j < d; ++j) {
      const float* dwr = dw + j * n + i0;
      const float* vr = v + j * n + i0;
      float* out = dv + j * n + i0;
      for (int64_t i = 0; i < m; ++i) out[i] += a[i] * (dwr[i] - b[i] * vr[i]);
    }
  }
}

}  // namespace sf
