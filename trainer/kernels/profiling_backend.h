// ProfilingBackend: a Backend<float> that runs every op on another backend and times it, so a
// training step's time becomes a table (`sf-trainer bench --profile`) instead of a guess.
//
// What it promises:
// - Results are those of the wrapped backend, bit for bit: it only forwards (same arguments,
//   same order), and adds no synchronisation on a host backend.
// - Each op's wall time is taken around the call on the host. On a backend whose memory the host
//   cannot touch (a GPU) it synchronises before and after every op so the time is the op's own;
//   that serialises the device, so a GPU profile shows where time goes, not the unprofiled step
//   time (CUDA events per op are the GPU issue's).
// - Ops are grouped into families (OpFamily: GEMMs by shape, attention, softmax, layer norm,
//   bias + activation, dropout + residual, casts and reorders, cross-entropy, optimizer, ...).
//   GEMMs are also kept per distinct shape (m x n x k, batch, which operand is transposed, whether
//   B is a weight, dtype, accumulate or not) with their FLOP count, for the achieved GFLOP/s.
// - Phases: the driver says which part of the step runs (SetPhase: "forward", "backward",
//   "optimizer", ...); time in a phase that no op accounts for (host logic, data upload, the host
//   optimizer update, allocation) is reported as that phase's "outside kernels" row.
// - Reset() clears everything (after warm-up steps); Report(steps) divides by `steps`.
// Not thread-safe, like every backend: one training loop drives it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "trainer/kernels/backend.h"

namespace sf {

// One row of the profile: a family of ops or one GEMM shape.
struct ProfileRow {
  std::string name;
  int64_t calls = 0;
  double seconds = 0;
  double flops = 0;  // GEMMs only (2·batch·m·n·k per call); 0 otherwise
};

struct ProfileReport {
  double step_seconds = 0;            // the driver's measured step (what the rows add up to)
  std::vector<ProfileRow> families;   // by family, descending time; outside-kernel rows included
  std::vector<ProfileRow> gemm_shapes;  // every distinct GEMM, descending time
};

class ProfilingBackend final : public Backend<float> {
 public:
  explicit ProfilingBackend(std::unique_ptr<Backend<float>> inner);
  ~ProfilingBackend() override;
  ProfilingBackend(const ProfilingBackend&) = delete;
  ProfilingBackend& operator=(const ProfilingBackend&) = delete;

  Backend<float>& inner() { return *inner_; }

  // The part of the step that runs from now on (its outside-kernel time is measured from here
  // to the next SetPhase). An empty name stops attributing outside time (between steps).
  void SetPhase(const std::string& phase);
  void Reset();
  // Per step, over `steps` steps whose total wall time was step_seconds_total.
  ProfileReport Report(int steps, double step_seconds_total) const;
  // The report as an aligned text table (ms per step, share of the step, GFLOP/s of GEMMs and
  // their fraction of `gemm_reference_gflops` when > 0).
  static std::string Format(const ProfileReport& r, double gemm_reference_gflops);

  const char* name() const override { return inner_->name(); }
  Device device() const override { return inner_->device(); }
  std::string description() const override { return inner_->description(); }
  void Synchronize() override { inner_->Synchronize(); }
  int Mark() override { return inner_->Mark(); }
  double SecondsBetween(int a, int b) override { return inner_->SecondsBetween(a, b); }
  void ClearMarks() override { inner_->ClearMarks(); }
  CachingAllocator& allocator() const override { return inner_->allocator(); }
  void* AllocateDevice(size_t bytes) override { return inner_->AllocateDevice(bytes); }
  void FreeDevice(void* p) override { inner_->FreeDevice(p); }
  void CopyToDevice(void* dst, const void* src, size_t bytes) override;
  void CopyToHost(void* dst, const void* src, size_t bytes) override;

  void Gemm(int64_t batch, int64_t m, int64_t n, int64_t k, const GemmOperand& a,
            const GemmOperand& b, float* c, int64_t ldc, int64_t stride_c, float alpha,
            float beta) override;
  void GemmBiasAct(int64_t m, int64_t n, int64_t k, const GemmOperand& a, const GemmOperand& b,
                   const float* bias, GemmActivation act, void* c, DType c_dtype) override;
  bool has_fused_attention() const override { return inner_->has_fused_attention(); }
  void AttentionForward(const AttentionArgs& a, const void* q, const void* k, const void* v,
                        void* out, float* lse) override;
  void AttentionBackward(const AttentionArgs& a, const void* q, const void* k, const void* v,
                         const void* out, const void* dout, const float* lse,
                         const AttentionGrads<float>& g) override;
  VectorStats SumSquares(const float* x, int64_t n) override;
  void Scale(float* x, int64_t n, float factor) override;
  void ApplyOptimizerUpdate(const OptimizerUpdate& u) override;
  void BeamScores(const float* logits, const float* base, const BeamScoresArgs& args,
                  float* top_scores, int32_t* top_tokens, float* eos_scores) override;
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
  void WeightNormForward(const float* v, const float* g, float* w, float* norms, int64_t n,
                         int64_t d, bool columns) override;
  void WeightNormBackward(const float* dw, const float* v, const float* g, const float* norms,
                          float* dv, float* dg, int64_t n, int64_t d, bool columns) override;
  void Conv2dForward(const float* x, const float* w, const float* bias, float* y,
                     const Conv2dShape& s) override;
  void Conv2dBackward(const float* x, const float* w, const float* dy, float* dx, float* dw,
                      float* dbias, const Conv2dShape& s) override;
  void CtcLoss(const float* logits, const int32_t* input_lengths, const int32_t* targets,
               const int32_t* target_lengths, int64_t frames, int64_t batch, int64_t classes,
               int64_t max_target, int32_t blank, bool zero_infinity, float grad_scale,
               float* losses, float* dlogits) override;
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

 private:
  class Timer;
  void Record(const char* family, double seconds);
  void RecordGemm(const std::string& shape, double seconds, double flops);
  // Times one GEMM (sync on a device) and records it under its family and its shape.
  template <typename F>
  void TimeGemm(int64_t batch, int64_t m, int64_t n, int64_t k, const GemmOperand& a,
                const GemmOperand& b, float beta, const char* epilogue, F&& run);

  std::unique_ptr<Backend<float>> inner_;
  bool sync_each_op_;
  std::map<std::string, ProfileRow> families_;
  std::map<std::string, ProfileRow> gemms_;
  // Outside-kernel accounting: the current phase, when it began and the op time inside it.
  std::string phase_;
  double phase_start_ = 0, phase_op_seconds_ = 0;
  std::map<std::string, double> outside_;
};

}  // namespace sf
