#include "trainer/kernels/cpu/cpu_backend.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include "trainer/core/cpu_features.h"
#include "trainer/kernels/cpu/attention_kernels.h"
#include "trainer/kernels/cpu/conv_onednn.h"
#include "trainer/kernels/cpu/cpu_parallel.h"
#include "trainer/kernels/cpu/ctc_host.h"
#include "trainer/kernels/cpu/gemm_tn.h"
#include "trainer/kernels/cpu/gemm_onednn.h"
#include "trainer/kernels/cpu/hot_kernels.h"
#include "trainer/kernels/cpu/vector_math.h"

#define SF_KERNEL_NS portable
#include "trainer/kernels/cpu/hot_kernels_impl.h"
#undef SF_KERNEL_NS

namespace sf {
namespace {

using cpu_internal::ColumnSumImpl;
using cpu_internal::DropoutFactors;
using cpu_internal::kChunk;
using cpu_internal::kMinParallelWork;
using cpu_internal::kUseAvx512;
using cpu_internal::ParallelRows;
using cpu_internal::ThreadScratch;
using vmath::FastExp;

}  // namespace

CpuBackend::CpuBackend() : gemm_(std::make_unique<OneDnnGemm>()), conv_(std::make_unique<OneDnnConv>()) {
  cpu::EnableAmx();
}
CpuBackend::~CpuBackend() = default;

int64_t CpuBackend::gemm_primitives_created() const { return gemm_->primitives_created(); }
int64_t CpuBackend::gemm_packed_copies() const { return gemm_->packed_copies(); }

namespace {
// The weight gradients' form, dW (+)= dy^T x in bf16 with the tokens as rows of both operands:
// on the packed vdpbf16ps kernel (gemm_tn.h) where the CPU has AVX512_BF16 and no AMX tiles; on
// oneDNN where it has AMX (its AMX kernels ran these shapes as fast as ours on the AMX host of
// 2026-12-02, docs/performance-cpu.md). SF_GEMM_TN=onednn, =avx512bf16 or =amx picks one, for A/B
// measurements (amx only where the CPU has the tiles).
enum class TnKernel { kOneDnn, kAvx512Bf16, kAmx };
TnKernel OwnTnKernel() {
  static const TnKernel kernel = [] {
    const char* v = std::getenv("SF_GEMM_TN");
    const std::string choice = v ? v : "";
    const bool amx = cpu::HasAmxBf16() && cpu::EnableAmx();
    if (choice == "onednn") return TnKernel::kOneDnn;
    if (choice == "amx") return amx ? TnKernel::kAmx : TnKernel::kOneDnn;
    if (choice == "avx512bf16") return cpu::HasAvx512Bf16() ? TnKernel::kAvx512Bf16 : TnKernel::kOneDnn;
    if (!choice.empty()) {
      std::fprintf(stderr, "warning: SF_GEMM_TN=%s is none of onednn, avx512bf16, amx: using this CPU's default\n",
                   choice.c_str());
    }
    return cpu::HasAvx512Bf16() && !amx ? TnKernel::kAvx512Bf16 : TnKernel::kOneDnn;
  }();
  return kernel;
}
}  // namespace

void CpuBackend::Gemm(int64_t batch, int64_t m, int64_t n, int64_t k, const GemmOperand& a,
                      const GemmOperand& b, float* c, int64_t ldc, int64_t stride_c, float alpha,
                      float beta) {
  if (batch == 1 && a.dtype == DType::kBF16 && b.dtype == DType::kBF16 && a.transposed &&
      !b.transposed && alpha == 1.0f && (beta == 0.0f || beta == 1.0f)) {
    const auto* ap = static_cast<const uint16_t*>(a.data);
    const auto* bp = static_cast<const uint16_t*>(b.data);
    switch (OwnTnKernel()) {
      case TnKernel::kAmx:
        cpu_internal::amx::GemmTn(m, n, k, ap, a.ld, bp, b.ld, c, ldc, beta);
        return;
      case TnKernel::kAvx512Bf16:
        cpu_internal::avx512bf16::GemmTn(m, n, k, ap, a.ld, bp, b.ld, c, ldc, beta);
        return;
      case TnKernel::kOneDnn:
        break;
    }
  }
  gemm_->Run(batch, m, n, k, a, b, c, ldc, stride_c, alpha, beta);
}

void CpuBackend::GemmBiasAct(int64_t m, int64_t n, int64_t k, const GemmOperand& a,
                             const GemmOperand& b, const float* bias, GemmActivation act, void* c,
                             DType c_dtype) {
  // One oneDNN primitive with the bias and activation as post-ops; where oneDNN has none for
  // these types (f16 on most CPUs, bf16 before AVX-512), the composed default.
  if (!gemm_->RunBiasAct(m, n, k, a, b, bias, act, c, c_dtype))
    Backend<float>::GemmBiasAct(m, n, k, a, b, bias, act, c, c_dtype);
}

void CpuBackend::WeightsChanged() { gemm_->WeightsChanged(); }

// For bf16: AMX tile products where the CPU has them (and granted the tile state), else
// vdpbf16ps products where it has AVX512_BF16; otherwise fp32 tile products at the CPU's vector
// width.
namespace {
bool UseAmxAttention(DType dt) {
  static const bool amx = cpu::HasAmxBf16() && cpu::EnableAmx();
  return amx && dt == DType::kBF16;
}
bool UseBf16DotAttention(DType dt) {
  static const bool dot = kUseAvx512 && cpu::HasAvx512Bf16();
  return dot && dt == DType::kBF16;
}
}  // namespace

void CpuBackend::AttentionForward(const AttentionArgs& a, const void* q, const void* k,
                                  const void* v, void* out, float* lse) {
  if (UseAmxAttention(a.dtype)) amx::FusedAttentionForward(a, q, k, v, out, lse);
  else if (UseBf16DotAttention(a.dtype)) avx512_bf16::FusedAttentionForward(a, q, k, v, out, lse);
  else if (kUseAvx512) avx512::FusedAttentionForward(a, q, k, v, out, lse);
  else portable::FusedAttentionForward(a, q, k, v, out, lse);
}

void CpuBackend::AttentionBackward(const AttentionArgs& a, const void* q, const void* k,
                                   const void* v, const void* out, const void* dout,
                                   const float* lse, const AttentionGrads<float>& g) {
  if (UseAmxAttention(a.dtype)) amx::FusedAttentionBackward(a, q, k, v, out, dout, lse, g);
  else if (UseBf16DotAttention(a.dtype)) avx512_bf16::FusedAttentionBackward(a, q, k, v, out, dout, lse, g);
  else if (kUseAvx512) avx512::FusedAttentionBackward(a, q, k, v, out, dout, lse, g);
  else portable::FusedAttentionBackward(a, q, k, v, out, dout, lse, g);
}

void CpuBackend::Cast(const float* x, void* y, DType to, int64_t n) {
  switch (to) {
    case DType::kBF16: return CastF32ToBf16(x, static_cast<uint16_t*>(y), n);
    case DType::kF16: return CastF32ToF16(x, static_cast<uint16_t*>(y), n);
    default:
      if (x != y) std::memcpy(y, x, static_cast<size_t>(n) * sizeof(float));
  }
}

void CpuBackend::Add(const float* x, float* y, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > 32768)
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

// Softmax rows are processed in groups of about kChunk elements, so each group's dropout
// factors come from one call (short rows would otherwise each pay for a whole Philox batch).
static int64_t SoftmaxRowGroup(int64_t tk) { return std::max<int64_t>(1, kChunk / std::max<int64_t>(tk, 1)); }

void CpuBackend::SoftmaxForward(const float* scores, float* probs, void* dropped,
                                DType dropped_dtype, const uint8_t* key_padding, int64_t batch,
                                int64_t heads, int64_t tq, int64_t tk, float scale, bool causal,
                                float p, DropoutKey key) {
  const int64_t rows = batch * heads * tq;
  const int64_t group = SoftmaxRowGroup(tk), groups = (rows + group - 1) / group;
#pragma omp parallel if (rows * tk >= kMinParallelWork)
  {
    float* factor = dropped ? ThreadScratch(group * tk) : nullptr;
#pragma omp for schedule(static)
    for (int64_t gi = 0; gi < groups; ++gi) {
      const int64_t r0 = gi * group, r1 = std::min(rows, r0 + group);
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t b = r / (heads * tq), q = r % tq;
        const float* s = scores + r * tk;
        float* pr = probs + r * tk;
        const uint8_t* kp = key_padding ? key_padding + b * tk : nullptr;
        const int64_t kend = causal ? std::min(tk, q + 1) : tk;
        float mx = -std::numeric_limits<float>::infinity();
        for (int64_t k = 0; k < kend; ++k)
          if (!kp || !kp[k]) mx = std::max(mx, s[k] * scale);
        float sum = 0;
#pragma omp simd reduction(+ : sum)
        for (int64_t k = 0; k < tk; ++k) {
          const bool masked = k >= kend || (kp && kp[k]);
          const float e = masked ? 0.0f : FastExp(s[k] * scale - mx);
          pr[k] = e;
          sum += e;
        }
        const float inv = sum > 0 ? 1.0f / sum : 0.0f;
#pragma omp simd
        for (int64_t k = 0; k < tk; ++k) pr[k] *= inv;
      }
      if (dropped) {
        const int64_t n = (r1 - r0) * tk;
        DropoutFactors(key, r0 * tk, n, p, factor);
        const float* pr = probs + r0 * tk;
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) factor[i] *= pr[i];
        StoreFloats(factor, static_cast<char*>(dropped) + r0 * tk * DTypeSize(dropped_dtype),
                    dropped_dtype, n);
      }
    }
  }
}

void CpuBackend::SoftmaxBackward(const float* d_dropped, const float* probs, void* dscores,
                                 DType dscores_dtype, int64_t batch, int64_t heads, int64_t tq,
                                 int64_t tk, float scale, float p, DropoutKey key) {
  const bool f32 = dscores_dtype == DType::kF32;
  const int64_t rows = batch * heads * tq;
  const int64_t group = SoftmaxRowGroup(tk), groups = (rows + group - 1) / group;
#pragma omp parallel if (rows * tk >= kMinParallelWork)
  {
    float* factor = ThreadScratch(group * tk);
#pragma omp for schedule(static)
    for (int64_t gi = 0; gi < groups; ++gi) {
      const int64_t r0 = gi * group, r1 = std::min(rows, r0 + group);
      DropoutFactors(key, r0 * tk, (r1 - r0) * tk, p, factor);
      // Low-precision output: each row's result overwrites its own factors, then the group is
      // stored at once.
      for (int64_t r = r0; r < r1; ++r) {
        float* f = factor + (r - r0) * tk;
        const float* dd = d_dropped + r * tk;
        const float* pr = probs + r * tk;
        float* ds = f32 ? static_cast<float*>(dscores) + r * tk : f;
        float dot = 0;
#pragma omp simd reduction(+ : dot)
        for (int64_t k = 0; k < tk; ++k) dot += pr[k] * dd[k] * f[k];
#pragma omp simd
        for (int64_t k = 0; k < tk; ++k) ds[k] = scale * pr[k] * (dd[k] * f[k] - dot);
      }
      if (!f32)
        StoreFloats(factor, static_cast<char*>(dscores) + r0 * tk * DTypeSize(dscores_dtype),
                    dscores_dtype, (r1 - r0) * tk);
    }
  }
}

void CpuBackend::EmbeddingForward(const int32_t* tokens, const float* table,
                                  const float* pos_table, const int32_t* pos_ids, float* out,
                                  int64_t rows, int64_t cols, float scale) {
  ParallelRows(rows, cols, [&](int64_t r) {
    const float* e = table + int64_t{tokens[r]} * cols;
    float* o = out + r * cols;
    if (pos_ids) {
      const float* pos = pos_table + int64_t{pos_ids[r]} * cols;
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c) o[c] = scale * e[c] + pos[c];
    } else {
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c) o[c] = scale * e[c];
    }
  });
}

void CpuBackend::EmbeddingBackward(const int32_t* tokens, const float* dout, float* dtable,
                                   int64_t rows, int64_t cols, float scale, int32_t pad) {
  // Threads own disjoint column ranges, so rows scattering to the same token never race.
#pragma omp parallel if (rows * cols >= kMinParallelWork)
  {
    const int nt = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t c0 = cols * t / nt, c1 = cols * (t + 1) / nt;
    for (int64_t r = 0; r < rows; ++r) {
      if (tokens[r] == pad) continue;
      float* e = dtable + int64_t{tokens[r]} * cols;
      const float* d = dout + r * cols;
#pragma omp simd
      for (int64_t c = c0; c < c1; ++c) e[c] += scale * d[c];
    }
  }
}

void CpuBackend::SplitHeads(const float* x, const float* bias, void* out, DType out_dtype,
                            int64_t batch, int64_t time, int64_t parts, int64_t heads,
                            int64_t head_dim) {
  const int64_t rows = batch * time;
  const int64_t esize = DTypeSize(out_dtype);
  ParallelRows(rows, parts * heads * head_dim, [&](int64_t r) {
    const int64_t b = r / time, t = r % time;
    float* tmp = ThreadScratch(head_dim);
    for (int64_t p = 0; p < parts; ++p)
      for (int64_t h = 0; h < heads; ++h) {
        const float* src = x + ((r * parts + p) * heads + h) * head_dim;
        const float* bi = bias ? bias + (p * heads + h) * head_dim : nullptr;
        char* dst = static_cast<char*>(out) +
                    (((p * batch + b) * heads + h) * time + t) * head_dim * esize;
        if (bi) {
          float* sum = out_dtype == DType::kF32 ? reinterpret_cast<float*>(dst) : tmp;
#pragma omp simd
          for (int64_t d = 0; d < head_dim; ++d) sum[d] = src[d] + bi[d];
          if (out_dtype != DType::kF32) StoreFloats(tmp, dst, out_dtype, head_dim);
        } else {
          StoreFloats(src, dst, out_dtype, head_dim);
        }
      }
  });
}

void CpuBackend::MergeHeads(const float* in, void* x, DType x_dtype, int64_t batch,
                            int64_t time, int64_t parts, int64_t heads, int64_t head_dim) {
  const int64_t rows = batch * time;
  const int64_t esize = DTypeSize(x_dtype);
  ParallelRows(rows, parts * heads * head_dim, [&](int64_t r) {
    const int64_t b = r / time, t = r % time;
    for (int64_t p = 0; p < parts; ++p)
      for (int64_t h = 0; h < heads; ++h)
        StoreFloats(in + (((p * batch + b) * heads + h) * time + t) * head_dim,
                    static_cast<char*>(x) + ((r * parts + p) * heads + h) * head_dim * esize,
                    x_dtype, head_dim);
  });
}

void CpuBackend::ColumnSum(const float* x, float* sum, int64_t rows, int64_t cols) {
  ColumnSumImpl(x, sum, rows, cols);
}

void CpuBackend::Conv2dForward(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s) {
  conv_->Forward(x, w, bias, y, s);
}

void CpuBackend::Conv2dBackward(const float* x, const float* w, const float* dy, float* dx, float* dw, float* dbias,
                                const Conv2dShape& s) {
  conv_->Backward(x, w, dy, dx, dw, dbias, s);
}

std::string CpuBackend::conv_implementation(const Conv2dShape& s) { return conv_->ForwardImplementation(s); }

bool CpuBackend::conv_runs_in_bf16(const Conv2dShape& s) { return conv_->RunsInBf16(s); }

void CpuBackend::CtcLoss(const float* logits, const int32_t* input_lengths, const int32_t* targets,
                         const int32_t* target_lengths, int64_t frames, int64_t batch, int64_t classes,
                         int64_t max_target, int32_t blank, bool zero_infinity, float grad_scale,
                         float* losses, float* dlogits) {
  // Utterances in parallel, each on one thread with its own workspace (ctc_host.h).
#pragma omp parallel if (batch > 1)
  {
    CtcWorkspace w;
#pragma omp for schedule(dynamic, 1)
    for (int64_t b = 0; b < batch; ++b) {
      losses[b] = static_cast<float>(CtcLossOneUtterance(logits, targets + b * max_target, input_lengths[b], target_lengths[b],
                                      frames, batch, b, classes, blank, zero_infinity, grad_scale, dlogits, w));
    }
  }
}

namespace {

// One row of the label-smoothed loss: writes lse[r]; adds the row's loss and nll to the sums
// and counts its token (unless the target is padding).
inline void CeRowLoss(const float* z, int32_t target, int64_t vocab, double eps, double eps_i,
                      int32_t pad, float* lse_out, double* loss, double* nll_sum,
                      int64_t* tokens) {
  float mx, sum, zsum;
  if (kUseAvx512) avx512::CeRowForward(z, vocab, &mx, &sum, &zsum);
  else portable::CeRowForward(z, vocab, &mx, &sum, &zsum);
  const double l = static_cast<double>(mx) + std::log(static_cast<double>(sum));
  *lse_out = static_cast<float>(l);
  if (target == pad) return;
  const double nll = l - z[target];
  *loss += (1.0 - eps - eps_i) * nll + eps_i * (static_cast<double>(vocab) * l - zsum);
  *nll_sum += nll;
  ++*tokens;
}

// One row of the loss gradient, stored as `dtype` at `out` (the row's first element); `row` is
// an fp32 scratch row (unused when dtype is fp32).
inline void CeRowGrad(const float* z, float lse, int32_t target, int32_t pad, float eps_i,
                      float on_target, float grad_scale, int64_t vocab, void* out, DType dtype,
                      float* row) {
  float* d = dtype == DType::kF32 ? static_cast<float*>(out) : row;
  if (target == pad) {
    std::fill(d, d + vocab, 0.0f);
  } else if (kUseAvx512) {
    avx512::CeRowBackward(z, lse, target, eps_i, on_target, grad_scale, vocab, d);
  } else {
    portable::CeRowBackward(z, lse, target, eps_i, on_target, grad_scale, vocab, d);
  }
  if (dtype != DType::kF32) StoreFloats(d, out, dtype, vocab);
}

}  // namespace

CrossEntropyStats CpuBackend::CrossEntropyForward(const float* logits, const int32_t* targets,
                                                  float* lse, int64_t rows, int64_t vocab,
                                                  float eps, int32_t pad) {
  const double eps_i = static_cast<double>(eps) / static_cast<double>(vocab - 1);
  double loss = 0, nll_sum = 0;
  int64_t tokens = 0;
#pragma omp parallel for schedule(static) reduction(+ : loss, nll_sum, tokens) \
    if (rows * vocab >= kMinParallelWork)
  for (int64_t r = 0; r < rows; ++r)
    CeRowLoss(logits + r * vocab, targets[r], vocab, eps, eps_i, pad, lse + r, &loss, &nll_sum,
              &tokens);
  return {loss, nll_sum, tokens};
}

void CpuBackend::CrossEntropyBackward(const float* logits, const float* lse,
                                      const int32_t* targets, void* dlogits, DType dlogits_dtype,
                                      int64_t rows, int64_t vocab, float eps, int32_t pad,
                                      float grad_scale) {
  const float eps_i = eps / static_cast<float>(vocab - 1);
  const float on_target = 1.0f - eps - eps_i;
  const int64_t esize = DTypeSize(dlogits_dtype);
#pragma omp parallel if (rows * vocab >= kMinParallelWork)
  {
    float* row = dlogits_dtype != DType::kF32 ? ThreadScratch(vocab) : nullptr;
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r)
      CeRowGrad(logits + r * vocab, lse[r], targets[r], pad, eps_i, on_target, grad_scale, vocab,
                static_cast<char*>(dlogits) + r * vocab * esize, dlogits_dtype, row);
  }
}

// Each row's gradient is computed right after its loss, while the row is still in cache: one
// pass over the [rows, vocab] logits from memory instead of two.
CrossEntropyStats CpuBackend::CrossEntropyForwardBackward(
    const float* logits, const int32_t* targets, float* lse, void* dlogits, DType dlogits_dtype,
    int64_t rows, int64_t vocab, float eps, int32_t pad, float grad_scale) {
  const double eps_d = eps, eps_i = eps_d / static_cast<double>(vocab - 1);
  const float eps_i_f = eps / static_cast<float>(vocab - 1);
  const float on_target = 1.0f - eps - eps_i_f;
  const int64_t esize = DTypeSize(dlogits_dtype);
  double loss = 0, nll_sum = 0;
  int64_t tokens = 0;
#pragma omp parallel reduction(+ : loss, nll_sum, tokens) if (rows * vocab >= kMinParallelWork)
  {
    float* row = dlogits_dtype != DType::kF32 ? ThreadScratch(vocab) : nullptr;
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const float* z = logits + r * vocab;
      CeRowLoss(z, targets[r], vocab, eps_d, eps_i, pad, lse + r, &loss, &nll_sum, &tokens);
      CeRowGrad(z, lse[r], targets[r], pad, eps_i_f, on_target, grad_scale, vocab,
                static_cast<char*>(dlogits) + r * vocab * esize, dlogits_dtype, row);
    }
  }
  return {loss, nll_sum, tokens};
}

}  // namespace sf
