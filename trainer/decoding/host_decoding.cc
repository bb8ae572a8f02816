#include "trainer/decoding/host_decoding.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace sf::host {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
typedef float v8f __attribute__((vector_size(32)));

inline v8f Load8(const float* p) {
  v8f v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
inline float Sum8(v8f v) {
  return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
}

}  // namespace

void Linear(const float* x, int64_t m, int64_t k, const float* w, const float* b, int64_t n,
            float* y) {
  constexpr int64_t kBlock = 16;  // weight rows per task: 16 * k floats stay in L1
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  const int64_t k8 = k / 8 * 8;
#pragma omp parallel for schedule(static) if (m * n * k > 32768)
  for (int64_t jb = 0; jb < blocks; ++jb) {
    const int64_t j0 = jb * kBlock, j1 = std::min(n, j0 + kBlock);
    for (int64_t i = 0; i < m; ++i) {
      const float* xi = x + i * k;
      int64_t j = j0;
      for (; j + 4 <= j1; j += 4) {
        const float* w0 = w + j * k;
        const float* w1 = w0 + k;
        const float* w2 = w1 + k;
        const float* w3 = w2 + k;
        v8f a0 = {}, a1 = {}, a2 = {}, a3 = {};
        for (int64_t p = 0; p < k8; p += 8) {
          const v8f xv = Load8(xi + p);
          a0 += xv * Load8(w0 + p);
          a1 += xv * Load8(w1 + p);
          a2 += xv * Load8(w2 + p);
          a3 += xv * Load8(w3 + p);
        }
        float s0 = Sum8(a0), s1 = Sum8(a1), s2 = Sum8(a2), s3 = Sum8(a3);
        for (int64_t p = k8; p < k; ++p) {
          s0 += xi[p] * w0[p];
          s1 += xi[p] * w1[p];
          s2 += xi[p] * w2[p];
          s3 += xi[p] * w3[p];
        }
        float* yi = y + i * n + j;
        yi[0] = s0 + (b ? b[j] : 0.0f);
        yi[1] = s1 + (b ? b[j + 1] : 0.0f);
        yi[2] = s2 + (b ? b[j + 2] : 0.0f);
        yi[3] = s3 + (b ? b[j + 3] : 0.0f);
      }
      for (; j < j1; ++j) {
        const float* wj = w + j * k;
        v8f a = {};
        for (int64_t p = 0; p < k8; p += 8) a += Load8(xi + p) * Load8(wj + p);
        float s = Sum8(a);
        for (int64_t p = k8; p < k; ++p) s += xi[p] * wj[p];
        y[i * n + j] = s + (b ? b[j] : 0.0f);
      }
    }
  }
}

void RowLayerNorm(const float* x, const float* gamma, const float* beta, float* y, int64_t rows,
               int64_t cols) {
#pragma omp parallel for schedule(static) if (rows > 16)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    double mean = 0, var = 0;
    for (int64_t c = 0; c < cols; ++c) mean += xr[c];
    mean /= static_cast<double>(cols);
    for (int64_t c = 0; c < cols; ++c) var += (xr[c] - mean) * (xr[c] - mean);
    var /= static_cast<double>(cols);
    const float m = static_cast<float>(mean);
    const float rstd = static_cast<float>(1.0 / std::sqrt(var + 1e-5));
    float* yr = y + r * cols;
    for (int64_t c = 0; c < cols; ++c) yr[c] = (xr[c] - m) * rstd * gamma[c] + beta[c];
  }
}

void AttendRow(const float* q, const float* k, const float* v, int64_t kv_stride, int64_t nkeys,
               const uint8_t* key_pad, int64_t heads, int64_t head_dim, float scale, float* out,
               float* scores) {
  for (int64_t h = 0; h < heads; ++h) {
    const float* qh = q + h * head_dim;
    float mx = kNegInf;
    for (int64_t t = 0; t < nkeys; ++t) {
      if (key_pad && key_pad[t]) {
        scores[t] = kNegInf;
        continue;
      }
      const float* kt = k + t * kv_stride + h * head_dim;
      float s = 0;
      for (int64_t d = 0; d < head_dim; ++d) s += qh[d] * kt[d];
      scores[t] = s * scale;
      mx = std::max(mx, scores[t]);
    }
    float* oh = out + h * head_dim;
    std::fill(oh, oh + head_dim, 0.0f);
    if (mx == kNegInf) continue;  // every key masked
    float sum = 0;
    for (int64_t t = 0; t < nkeys; ++t) {
      scores[t] = scores[t] == kNegInf ? 0.0f : std::exp(scores[t] - mx);
      sum += scores[t];
    }
    const float inv = 1.0f / sum;
    for (int64_t t = 0; t < nkeys; ++t) {
      if (scores[t] == 0.0f) continue;
      const float p = scores[t] * inv;
      const float* vt = v + t * kv_stride + h * head_dim;
      for (int64_t d = 0; d < head_dim; ++d) oh[d] += p * vt[d];
    }
  }
}

void Activate(float* x, int64_t n, Activation act) {
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) {
    x[i] = act == Activation::kRelu ? std::max(x[i], 0.0f)
                                    : static_cast<float>(0.5 * x[i] * (1.0 + std::erf(x[i] / std::sqrt(2.0))));
  }
}

void AddInPlace(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void FeedForwardBlock(float* x, int64_t rows, int64_t c, int64_t ff, bool pre, const float* ln_g,
                      const float* ln_b, const float* w1, const float* b1, const float* w2, const float* b2,
                      Activation act, float* h, float* f, float* o) {
  const float* src = x;
  if (pre) {
    RowLayerNorm(x, ln_g, ln_b, h, rows, c);
    src = h;
  }
  Linear(src, rows, c, w1, b1, ff, f);
  Activate(f, rows * ff, act);
  Linear(f, rows, ff, w2, b2, c, o);
  AddInPlace(x, o, rows * c);
  if (!pre) RowLayerNorm(x, ln_g, ln_b, x, rows, c);
}

void CachedSelfAttentionBlock(float* x, int64_t m, const int64_t* row, const int64_t* pos, float* k_cache,
                              float* v_cache, int64_t cap, int64_t c, int64_t heads, bool pre,
                              const SelfAttentionWeights& w, float* h, float* qkv, float* ctx, float* o) {
  const int64_t d = c / heads;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  const float* src = x;
  if (pre) {
    RowLayerNorm(x, w.ln_g, w.ln_b, h, m, c);
    src = h;
  }
  Linear(src, m, c, w.in_w, w.in_b, 3 * c, qkv);
  int64_t longest = 0;
  for (int64_t q = 0; q < m; ++q) {
    const float* r = qkv + q * 3 * c;
    std::copy(r + c, r + 2 * c, k_cache + (row[q] * cap + pos[q]) * c);
    std::copy(r + 2 * c, r + 3 * c, v_cache + (row[q] * cap + pos[q]) * c);
    longest = std::max(longest, pos[q] + 1);
  }
#pragma omp parallel
  {
    std::vector<float> scores(static_cast<size_t>(longest));
#pragma omp for schedule(static)
    for (int64_t q = 0; q < m; ++q) {
      AttendRow(qkv + q * 3 * c, k_cache + row[q] * cap * c, v_cache + row[q] * cap * c, c, pos[q] + 1, nullptr,
                heads, d, scale, ctx + q * c, scores.data());
    }
  }
  Linear(ctx, m, c, w.out_w, w.out_b, c, o);
  AddInPlace(x, o, m * c);
  if (!pre) RowLayerNorm(x, w.ln_g, w.ln_b, x, m, c);
}

void CrossKeysValues(const float* enc, int64_t rows, int64_t c, const DecoderLayerWeights& w, float* k, float* v) {
  Linear(enc, rows, c, w.cross_in_w + c * c, w.cross_in_b + c, c, k);
  Linear(enc, rows, c, w.cross_in_w + 2 * c * c, w.cross_in_b + 2 * c, c, v);
}

void DecoderLayerStep(float* x, int64_t m, const int64_t* row, const int64_t* pos, float* k_cache, float* v_cache,
                      int64_t cap, const float* cross_k, const float* cross_v, const int64_t* memory,
                      int64_t mem_len, const uint8_t* mem_pad, int64_t c, int64_t heads, int64_t ff, bool pre,
                      Activation act, const DecoderLayerWeights& w, float* h, float* qkv, float* ctx, float* o,
                      float* f) {
  CachedSelfAttentionBlock(x, m, row, pos, k_cache, v_cache, cap, c, heads, pre, w.self, h, qkv, ctx, o);
  const int64_t d = c / heads;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  const float* src = x;
  if (pre) {
    RowLayerNorm(x, w.cross_ln_g, w.cross_ln_b, h, m, c);
    src = h;
  }
  Linear(src, m, c, w.cross_in_w, w.cross_in_b, c, qkv);  // the queries only
#pragma omp parallel
  {
    std::vector<float> scores(static_cast<size_t>(mem_len));
#pragma omp for schedule(static)
    for (int64_t q = 0; q < m; ++q) {
      const int64_t blk = memory[q];
      AttendRow(qkv + q * c, cross_k + blk * mem_len * c, cross_v + blk * mem_len * c, c, mem_len,
                mem_pad ? mem_pad + blk * mem_len : nullptr, heads, d, scale, ctx + q * c, scores.data());
    }
  }
  Linear(ctx, m, c, w.cross_out_w, w.cross_out_b, c, o);
  AddInPlace(x, o, m * c);
  if (!pre) RowLayerNorm(x, w.cross_ln_g, w.cross_ln_b, x, m, c);
  FeedForwardBlock(x, m, c, ff, pre, w.ffn_ln_g, w.ffn_ln_b, w.fc1_w, w.fc1_b, w.fc2_w, w.fc2_b, act, h, f, o);
}

}  // namespace sf::host
