// Internal to sf_engine_cuda: what the .cu files of CudaBackend share. Nothing outside
// trainer/kernels/cuda/ includes it; the public face is cuda_backend.h (MakeCudaBackend).
//
// CudaBackend is one class whose ops are defined next to their kernels, one file per op family:
//   cuda_backend.cu        construction and teardown, device memory (CachingAllocator over
//                          cudaMalloc, host copies through pinned staging), the multi-tensor
//                          passes of multi_tensor.cu, MakeCudaBackend / CudaDeviceCount
//   cuda_gemm.cu           Gemm and GemmBiasAct (cuBLASLt epilogues) through cuBLASLt, with its
//                          cache of plans per shape
//   cuda_elementwise.cu    cast, add, bias + dropout + residual, bias + activation, column sums,
//                          embedding lookup and its gradient
//   cuda_layernorm.cu      layer normalisation and the residual tail fused with it, both ways
//   cuda_attention.cu      head split / merge and the masked softmax with dropout
//   cuda_fused_attention.cu  fused attention (flash-attention tiling, WMMA): forward; its
//                          backward in cuda_fused_attention_backward.cu, the tiles' building
//                          blocks in cuda_attention_tiles.cuh
//   cuda_cross_entropy.cu  label-smoothed cross-entropy: per-row loss, totals and gradient
//   cuda_beam_scores.cu    beam search's top-k log-probabilities of each row
//   cuda_ctc.cu            the CTC loss: log-softmax, forward-backward per utterance, gradient
//   cuda_conv.cu           2-D convolution: im2col, cuBLASLt GEMMs, col2im
//
// The helpers here: SF_CUDA_CHECK / SF_CUBLAS_CHECK abort with the call site on any error (a
// kernel op has no way to report one); kThreads and Blocks(n) are the 1-D launch geometry of one
// thread per element; BlockSum is a block-wide sum that every thread of the block must reach;
// StoreAs writes element i of an output whose dtype code DTypeCode gives (0 f32, 1 bf16, 2 f16),
// StoreAs4 four of them at once;
// KeepScale is inverted dropout's 1 / (1 - p).
#pragma once

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "trainer/kernels/backend.h"

#define SF_CUDA_CHECK(expr)                                                          \
  do {                                                                               \
    cudaError_t e_ = (expr);                                                         \
    if (e_ != cudaSuccess) {                                                         \
      std::fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, \
                   __LINE__);                                                        \
      std::abort();                                                                  \
    }                                                                                \
  } while (0)

#define SF_CUBLAS_CHECK(expr)                                                            \
  do {                                                                                   \
    cublasStatus_t s_ = (expr);                                                          \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                   \
      std::fprintf(stderr, "cuBLASLt error %d at %s:%d\n", static_cast<int>(s_), __FILE__, \
                   __LINE__);                                                            \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)

namespace sf::cuda {

constexpr int kThreads = 256;

inline int Blocks(int64_t n) { return static_cast<int>((n + kThreads - 1) / kThreads); }

inline float KeepScale(float p) { return static_cast<float>(1.0 / (1.0 - static_cast<double>(p))); }

// Block-wide sum (blockDim.x a multiple of 32, at most 1024).
__device__ inline float BlockSum(float v) {
  __shared__ float warp_sums[32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  const int warps = blockDim.x >> 5;
  float t = lane < warps ? warp_sums[lane] : 0.0f;
  if (warp == 0)
    for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
  __shared__ float total;
  if (threadIdx.x == 0) total = t;
  __syncthreads();
  return total;
}

// Element i of an output of dtype code 0 (float), 1 (bf16) or 2 (f16).
__device__ inline void StoreAs(void* out, int dtype, int64_t i, float v) {
  if (dtype == 1) static_cast<__nv_bfloat16*>(out)[i] = __float2bfloat16_rn(v);
  else if (dtype == 2) static_cast<__half*>(out)[i] = __float2half_rn(v);
  else static_cast<float*>(out)[i] = v;
}

// Elements i .. i+3 of such an output in one store: i a multiple of 4 and `out` 16-byte aligned.
__device__ inline void StoreAs4(void* out, int dtype, int64_t i, float a, float b, float c,
                                float d) {
  if (dtype == 1 || dtype == 2) {
    uint2 u;
    if (dtype == 1) {
      const __nv_bfloat162 lo = __floats2bfloat162_rn(a, b), hi = __floats2bfloat162_rn(c, d);
      u.x = *reinterpret_cast<const uint32_t*>(&lo);
      u.y = *reinterpret_cast<const uint32_t*>(&hi);
    } else {
      const __half2 lo = __floats2half2_rn(a, b), hi = __floats2half2_rn(c, d);
      u.x = *reinterpret_cast<const uint32_t*>(&lo);
      u.y = *reinterpret_cast<const uint32_t*>(&hi);
    }
    *reinterpret_cast<uint2*>(static_cast<uint16_t*>(out) + i) = u;
  } else {
    *reinterpret_cast<float4*>(static_cast<float*>(out) + i) = make_float4(a, b, c, d);
  }
}

inline int DTypeCode(DType t) { return t == DType::kBF16 ? 1 : t == DType::kF16 ? 2 : 0; }

// The cuBLASLt objects of one GEMM shape, built (with its heuristic algorithm) on first use.
struct GemmKey {
  int64_t batch, m, n, k, lda, ldb, ldc, sa, sb, sc;
  int dtype, ta, tb;
  // The alignment (bytes, a power of two up to 256) every matrix of each operand is known to
  // have: cuBLASLt's heuristic assumes 256 unless told, and an algorithm chosen for aligned
  // pointers may refuse or fault on less aligned ones (per-head attention slices, odd strides).
  uint32_t align_a, align_b, align_c;
  // GemmBiasAct's: the output's dtype code (DTypeCode) and cuBLASLt's epilogue (0: none).
  int out_dtype = 0;
  int epilogue = 0;
  uint32_t align_bias = 0;  // the bias vector's alignment (the heuristic depends on it)
  bool operator<(const GemmKey& o) const {
    return std::tie(batch, m, n, k, lda, ldb, ldc, sa, sb, sc, dtype, ta, tb, align_a, align_b,
                    align_c, out_dtype, epilogue, align_bias) <
           std::tie(o.batch, o.m, o.n, o.k, o.lda, o.ldb, o.ldc, o.sa, o.sb, o.sc, o.dtype, o.ta,
                    o.tb, o.align_a, o.align_b, o.align_c, o.out_dtype, o.epilogue, o.align_bias);
  }
};

// op is null when cuBLASLt has no algorithm for a GemmBiasAct form (the caller falls back).
struct GemmPlan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulAlgo_t algo;
};

class CudaMemory;  // cuda_backend.cu: the MemoryResource under the CachingAllocator

// Backend<float> on one GPU, with the contract of cuda_backend.h. Each group of members below is
// defined in the file its comment names.
class CudaBackend final : public Backend<float> {
 public:
  // cuda_backend.cu
  explicit CudaBackend(int ordinal);
  ~CudaBackend() override;
  const char* name() const override { return "cuda"; }
  Device device() const override { return Device::kCuda; }
  std::string description() const override;
  void Synchronize() override;
  int Mark() override;
  double SecondsBetween(int a, int b) override;
  void ClearMarks() override { marks_used_ = 0; }
  CachingAllocator& allocator() const override { return *allocator_; }
  void* AllocateDevice(size_t bytes) override;
  void FreeDevice(void* p) override { allocator_->Free(p); }
  void CopyToDevice(void* dst, const void* src, size_t bytes) override;
  void CopyToHost(void* dst, const void* src, size_t bytes) override;
  VectorStats SumSquares(const float* x, int64_t n) override;
  void Scale(float* x, int64_t n, float factor) override;
  void ApplyOptimizerUpdate(const OptimizerUpdate& u) override;

  // cuda_gemm.cu
  void Gemm(int64_t batch, int64_t m, int64_t n, int64_t k, const GemmOperand& a,
            const GemmOperand& b, float* c, int64_t ldc, int64_t stride_c, float alpha,
            float beta) override;
  void GemmBiasAct(int64_t m, int64_t n, int64_t k, const GemmOperand& a, const GemmOperand& b,
                   const float* bias, GemmActivation act, void* c, DType c_dtype) override;
  void DropGemmPlans();
  // `optional`: a missing algorithm gives a plan with a null op instead of aborting.
  // `bias`: the epilogue's bias vector, set before the heuristic looks (its alignment matters).
  GemmPlan PlanGemm(const GemmKey& key, DType dtype, bool optional = false,
                    const void* bias = nullptr);
  const GemmPlan& FindPlan(const GemmKey& key, DType dtype, bool optional,
                           const void* bias = nullptr);

  // cuda_elementwise.cu
  void Cast(const float* x, void* y, DType to, int64_t n) override;
  void Add(const float* x, float* y, int64_t n) override;
  void BiasDropoutResidualForward(const float* x, const float* bias, const float* residual,
                                  float* out, int64_t rows, int64_t cols, float p,
                                  DropoutKey key) override;
  void BiasDropoutResidualBackward(const float* dout, float* dx, float* dbias, int64_t rows,
                                   int64_t cols, float p, DropoutKey key) override;
  void BiasActivationForward(const float* x, const float* bias, float* pre, void* out,
                             DType out_dtype, int64_t rows, int64_t cols, Activation act) override;
  void BiasActivationBackward(const float* dout, const void* saved, DType saved_dtype, float* dpre,
                              float* dbias, int64_t rows, int64_t cols, Activation act) override;
  void BiasActivationBackwardTo(const void* dout, DType dout_dtype, const void* saved,
                                DType saved_dtype, void* dpre, DType dpre_dtype, float* dbias,
                                int64_t rows, int64_t cols, Activation act) override;
  void EmbeddingForward(const int32_t* tokens, const float* table, const float* pos_table,
                        const int32_t* pos_ids, float* out, int64_t rows, int64_t cols,
                        float scale) override;
  void EmbeddingBackward(const int32_t* tokens, const float* dout, float* dtable, int64_t rows,
                         int64_t cols, float scale, int32_t pad) override;
  void ColumnSum(const float* x, float* sum, int64_t rows, int64_t cols) override;
  void GluForward(const float* x, float* y, int64_t rows, int64_t cols) override;
  void GluBackward(const float* x, const float* dy, float* dx, int64_t rows, int64_t cols) override;
  void ScaleRowGroups(float* x, const float* factors, int64_t groups, int64_t rows_per_group,
                      int64_t cols) override;
  void WeightNormForward(const float* v, const float* g, float* w, float* norms, int64_t n, int64_t d,
                         bool columns) override;
  void WeightNormBackward(const float* dw, const float* v, const float* g, const float* norms, float* dv,
                          float* dg, int64_t n, int64_t d, bool columns) override;
  void LstmCellForward(float* gates, const float* bias, const float* c_prev, float* c, float* h,
                       int64_t rows, int64_t hidden) override;
  void LstmCellBackward(const float* gates, const float* c_prev, const float* c, const float* dh,
                        const float* dc, float* dgates, float* dc_prev, float* dbias, int64_t rows,
                        int64_t hidden) override;

  // cuda_layernorm.cu
  void LayerNormForward(const float* x, const float* gamma, const float* beta, float* y,
                        float* mean, float* rstd, int64_t rows, int64_t cols, float eps) override;
  void LayerNormBackward(const float* dy, const float* x, const float* gamma, const float* mean,
                         const float* rstd, float* dx, float* dgamma, float* dbeta, int64_t rows,
                         int64_t cols, bool accumulate_dx) override;
  void ResidualLayerNormForward(const float* x, const float* bias, const float* residual, float p,
                                DropoutKey key, float* h, const float* gamma, const float* beta,
                                float* y, void* y_low, DType low_dtype, float* mean, float* rstd,
                                int64_t rows, int64_t cols, float eps) override;
  void ResidualLayerNormBackward(const float* dy, const float* h, const float* gamma,
                                 const float* mean, const float* rstd, float* dh, void* d_branch,
                                 DType branch_dtype, float* dbias, float* dgamma, float* dbeta,
                                 float p, DropoutKey key, int64_t rows, int64_t cols) override;

  // cuda_attention.cu
  void SoftmaxForward(const float* scores, float* probs, void* dropped, DType dropped_dtype,
                      const uint8_t* key_padding, int64_t batch, int64_t heads, int64_t tq,
                      int64_t tk, float scale, bool causal, float p, DropoutKey key) override;
  void SoftmaxBackward(const float* d_dropped, const float* probs, void* dscores,
                       DType dscores_dtype, int64_t batch, int64_t heads, int64_t tq, int64_t tk,
                       float scale, float p, DropoutKey key) override;
  void SplitHeads(const float* x, const float* bias, void* out, DType out_dtype, int64_t batch,
                  int64_t time, int64_t parts, int64_t heads, int64_t head_dim) override;
  void MergeHeads(const float* in, void* x, DType x_dtype, int64_t batch, int64_t time,
                  int64_t parts, int64_t heads, int64_t head_dim) override;

  // cuda_fused_attention.cu (AttentionBackward: cuda_fused_attention_backward.cu)
  bool has_fused_attention() const override { return true; }
  void AttentionForward(const AttentionArgs& a, const void* q, const void* k, const void* v,
                        void* out, float* lse) override;
  void AttentionBackward(const AttentionArgs& a, const void* q, const void* k, const void* v,
                         const void* out, const void* dout, const float* lse,
                         const AttentionGrads<float>& g) override;

  // cuda_cross_entropy.cu
  CrossEntropyStats CrossEntropyForward(const float* logits, const int32_t* targets, float* lse,
                                        int64_t rows, int64_t vocab, float eps,
                                        int32_t pad) override;
  CrossEntropyStats CrossEntropyForwardBackward(const float* logits, const int32_t* targets,
                                                float* lse, void* dlogits, DType dlogits_dtype,
                                                int64_t rows, int64_t vocab, float eps, int32_t pad,
                                                float grad_scale) override;
  void CrossEntropyBackward(const float* logits, const float* lse, const int32_t* targets,
                            void* dlogits, DType dlogits_dtype, int64_t rows, int64_t vocab,
                            float eps, int32_t pad, float grad_scale) override;

  // cuda_conv.cu
  void Conv2dForward(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s) override;
  void Conv2dBackward(const float* x, const float* w, const float* dy, float* dx, float* dw, float* dbias,
                      const Conv2dShape& s) override;

  // cuda_ctc.cu
  void CtcLoss(const float* logits, const int32_t* input_lengths, const int32_t* targets,
               const int32_t* target_lengths, int64_t frames, int64_t batch, int64_t classes,
               int64_t max_target, int32_t blank, bool zero_infinity, float grad_scale,
               float* losses, float* dlogits) override;

  // cuda_beam_scores.cu
  void BeamScores(const float* logits, const float* base, const BeamScoresArgs& args,
                  float* top_scores, int32_t* top_tokens, float* eos_scores) override;

 private:
  // cuda_cross_entropy.cu
  CrossEntropyStats CrossEntropy(const float* logits, const int32_t* targets, float* lse,
                                 void* dlogits, DType dlogits_dtype, int64_t rows, int64_t vocab,
                                 float eps, int32_t pad, float grad_scale);

  struct Staging {
    void* host = nullptr;  // pinned
    size_t capacity = 0;
    cudaEvent_t done = nullptr;
    bool pending = false;
  };

  static constexpr size_t kWorkspace = 32u << 20;
  static constexpr size_t kMaxGemmPlans = 4096;
  int ordinal_;
  cudaStream_t stream_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  void* workspace_ = nullptr;
  std::unique_ptr<CudaMemory> memory_;
  std::unique_ptr<CachingAllocator> allocator_;
  std::map<GemmKey, GemmPlan> gemm_plans_;
  Staging staging_[2];
  int next_staging_ = 0;
  double* row_stats_ = nullptr;
  int64_t row_stats_rows_ = 0;
  double* ce_totals_ = nullptr;
  double* sum_scratch_ = nullptr;
  std::vector<cudaEvent_t> marks_;  // Mark()'s events, reused after ClearMarks()
  size_t marks_used_ = 0;
};

}  // namespace sf::cuda
