// CpuBackend: the fast CPU implementation of Backend<float>.
//
// GEMMs run through oneDNN matmul (gemm_onednn.cc): fp32, or bf16 x bf16 -> fp32 (AMX or
// AVX512_BF16 where the CPU has them, oneDNN picks at run time); f16 operands run natively when
// oneDNN has an f16 matmul for this CPU, otherwise they are widened to fp32 (exact) first.
// Primitives are created once per GEMM shape and cached; `constant` (weight) operands are
// reordered once per WeightsChanged() into oneDNN's blocked layout and reused (pre-packing). Elementwise kernels are fused,
// vectorised loops parallelised with OpenMP; exp is a vectorisable polynomial (rel. err < 4e-7).
//
// Thread safety: one instance per training loop (it owns the primitive cache and scratch).
// Construction checks the CPU (cpu_features.h) and requests AMX tile permission when present.
#pragma once

#include <memory>
#include <string>

#include "trainer/kernels/backend.h"

namespace sf {

class OneDnnGemm;
class OneDnnConv;

class CpuBackend final : public Backend<float> {
 public:
  CpuBackend();
  ~CpuBackend() override;
  CpuBackend(const CpuBackend&) = delete;
  CpuBackend& operator=(const CpuBackend&) = delete;

  const char* name() const override { return "cpu"; }
  Device device() const override { return Device::kCpu; }

  void Gemm(int64_t batch, int64_t m, int64_t n, int64_t k, const GemmOperand& a,
            const GemmOperand& b, float* c, int64_t ldc, int64_t stride_c, float alpha,
            float beta) override;
  void GemmBiasAct(int64_t m, int64_t n, int64_t k, const GemmOperand& a, const GemmOperand& b,
                   const float* bias, GemmActivation act, void* c, DType c_dtype) override;
  void WeightsChanged() override;
  void Cast(const float* x, void* y, DType to, int64_t n) override;
  void Add(const float* x, float* y, int64_t n) override;
  void BiasDropoutResidualForward(const float* x, const float* bias, const float* residual,
                                  float* out, int64_t rows, int64_t cols, float p,
                                  DropoutKey key) override;
  void BiasDropoutResidualBackward(const float* dout, float* dx, float* dbias, int64_t rows,
                                   int64_t cols, float p, DropoutKey key) override;
  void BiasActivationForward(const float* x, const float* bias, float* pre, void* out,
                             DType out_dtype, int64_t rows, int64_t cols,
                             Activation act) override;
  void BiasActivationBackward(const float* dout, const void* saved, DType saved_dtype,
                              float* dpre, float* dbias, int64_t rows, int64_t cols,
                              Activation act) override;
  void ResidualLayerNormForward(const float* x, const float* bias, const float* residual,
                                float p, DropoutKey key, float* h, const float* gamma,
                                const float* beta, float* y, void* y_low, DType low_dtype,
                                float* mean, float* rstd, int64_t rows, int64_t cols,
                                float eps) override;
  void ResidualLayerNormBackward(const float* dy, const float* h, const float* gamma,
                                 const float* mean, const float* rstd, float* dh, void* d_branch,
                                 DType branch_dtype, float* dbias, float* dgamma, float* dbeta,
                                 float p, DropoutKey key, int64_t rows, int64_t cols) override;
  void BiasActivationBackwardTo(const void* dout, DType dout_dtype, const void* saved,
                                DType saved_dtype, void* dpre, DType dpre_dtype, float* dbias,
                                int64_t rows, int64_t cols, Activation act) override;
  void LayerNormForward(const float* x, const float* gamma, const float* beta, float* y,
                        float* mean, float* rstd, int64_t rows, int64_t cols,
                        float eps) override;
  void LayerNormBackward(const float* dy, const float* x, const float* gamma, const float* mean,
                         const float* rstd, float* dx, float* dgamma, float* dbeta, int64_t rows,
                         int64_t cols, bool accumulate_dx) override;
  void SoftmaxForward(const float* scores, float* probs, void* dropped, DType dropped_dtype,
                      const uint8_t* key_padding, int64_t batch, int64_t heads, int64_t tq,
                      int64_t tk, float scale, bool causal, float p, DropoutKey key) override;
  void SoftmaxBackward(const float* d_dropped, const float* probs, void* dscores,
                       DType dscores_dtype, int64_t batch, int64_t heads, int64_t tq, int64_t tk,
                       float scale, float p, DropoutKey key) override;
  bool has_fused_attention() const override { return true; }
  void AttentionForward(const AttentionArgs& a, const void* q, const void* k, const void* v,
                        void* out, float* lse) override;
  void AttentionBackward(const AttentionArgs& a, const void* q, const void* k, const void* v,
                         const void* out, const void* dout, const float* lse,
                         const AttentionGrads<float>& g) override;
  void EmbeddingForward(const int32_t* tokens, const float* table, const float* pos_table,
                        const int32_t* pos_ids, float* out, int64_t rows, int64_t cols,
                        float scale) override;
  void EmbeddingBackward(const int32_t* tokens, const float* dout, float* dtable, int64_t rows,
                         int64_t cols, float scale, int32_t pad) override;
  void SplitHeads(const float* x, const float* bias, void* out, DType out_dtype, int64_t batch,
                  int64_t time, int64_t parts, int64_t heads, int64_t head_dim) override;
  void MergeHeads(const float* in, void* x, DType x_dtype, int64_t batch, int64_t time,
                  int64_t parts, int64_t heads, int64_t head_dim) override;
  void ColumnSum(const float* x, float* sum, int64_t rows, int64_t cols) override;
  void LstmCellForward(float* gates, const float* bias, const float* c_prev, float* c, float* h,
                       int64_t rows, int64_t hidden) override;
  void LstmCellBackward(const float* gates, const float* c_prev, const float* c, const float* dh,
                        const float* dc, float* dgates, float* dc_prev, float* dbias, int64_t rows,
                        int64_t hidden) override;
  void GluForward(const float* x, float* y, int64_t rows, int64_t cols) override;
  void GluBackward(const float* x, const float* dy, float* dx, int64_t rows, int64_t cols) override;
  void ScaleRowGroups(float* x, const float* factors, int64_t groups, int64_t rows_per_group,
                      int64_t cols) override;
  void Conv2dForward(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s) override;
  void Conv2dBackward(const float* x, const float* w, const float* dy, float* dx, float* dw, float* dbias,
                      const Conv2dShape& s) override;
  void CtcLoss(const float* logits, const int32_t* input_lengths, const int32_t* targets,
               const int32_t* target_lengths, int64_t frames, int64_t batch, int64_t classes,
               int64_t max_target, int32_t blank, bool zero_infinity, float grad_scale,
               float* losses, float* dlogits) override;
  void WeightNormForward(const float* v, const float* g, float* w, float* norms, int64_t n, int64_t d,
                         bool columns) override;
  void WeightNormBackward(const float* dw, const float* v, const float* g, const float* norms, float* dv,
                          float* dg, int64_t n, int64_t d, bool columns) override;
  CrossEntropyStats CrossEntropyForward(const float* logits, const int32_t* targets, float* lse,
                                        int64_t rows, int64_t vocab, float eps,
                                        int32_t pad) override;
  void CrossEntropyBackward(const float* logits, const float* lse, const int32_t* targets,
                            void* dlogits, DType dlogits_dtype, int64_t rows, int64_t vocab,
                            float eps, int32_t pad, float grad_scale) override;
  CrossEntropyStats CrossEntropyForwardBackward(const float* logits, const int32_t* targets,
                                                float* lse, void* dlogits, DType dlogits_dtype,
                                                int64_t rows, int64_t vocab, float eps,
                                                int32_t pad, float grad_scale) override;

  // Number of distinct GEMM primitives created so far (tests check the cache is used).
  int64_t gemm_primitives_created() const;
  int64_t gemm_packed_copies() const;  // pre-packed weight copies held (see gemm_onednn.h)
  // oneDNN's implementation of this convolution's forward, and whether its products run on bf16
  // (conv_onednn.h): for tests and benches.
  std::string conv_implementation(const Conv2dShape& s);
  bool conv_runs_in_bf16(const Conv2dShape& s);

 private:
  std::unique_ptr<OneDnnGemm> gemm_;
  std::unique_ptr<OneDnnConv> conv_;
};

// Vectorised conversions (cast.cc; AVX-512 variants in cast_avx512.cc, chosen at run time).
void CastF32ToBf16(const float* x, uint16_t* y, int64_t n);
void CastF32ToF16(const float* x, uint16_t* y, int64_t n);
void CastBf16ToF32(const uint16_t* x, float* y, int64_t n);
void CastF16ToF32(const uint16_t* x, float* y, int64_t n);
// y[0..n) = x converted to `to` (kF32, kBF16 or kF16) on the calling thread: for kernels that
// produce a row in fp32 and store it in the caller's dtype.
void StoreFloats(const float* x, void* y, DType to, int64_t n);
namespace avx512 {
void CastF32ToBf16(const float* x, uint16_t* y, int64_t n);
void CastF32ToBf16Serial(const float* x, uint16_t* y, int64_t n);
}

}  // namespace sf
