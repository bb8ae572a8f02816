#include "trainer/kernels/profiling_backend.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace sf {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The families of the report. GEMMs with batch == 1 are "GEMM" (and listed per shape); batched
// GEMMs are attention's per-head products.
constexpr const char* kGemm = "GEMM (dense projections)";
constexpr const char* kBatchedGemm = "attention: batched per-head GEMMs";
constexpr const char* kFusedAttention = "attention: fused (blockwise softmax, in place)";
constexpr const char* kSoftmax = "attention: softmax (+ dropout)";
constexpr const char* kHeads = "attention: head split/merge (reorders)";
constexpr const char* kLayerNorm = "layer norm";
constexpr const char* kResidualNorm = "residual + dropout + layer norm (fused)";
constexpr const char* kBiasAct = "bias + activation";
constexpr const char* kDropoutResidual = "bias + dropout + residual";
constexpr const char* kColumnSum = "bias gradients (column sums)";
constexpr const char* kCast = "casts to the compute dtype";
constexpr const char* kAdd = "residual gradient adds";
constexpr const char* kCrossEntropy = "cross-entropy (log-softmax + loss + gradient)";
constexpr const char* kEmbedding = "embedding";
constexpr const char* kOptimizer = "optimizer kernels (norm, scale, update)";
constexpr const char* kCopies = "host <-> device copies";
constexpr const char* kRecurrent = "LSTM cell";
constexpr const char* kGlu = "GLU";
constexpr const char* kConv = "convolution";
constexpr const char* kCtc = "CTC loss";
constexpr const char* kWeightNorm = "weight normalisation";
constexpr const char* kRowScale = "row-group scaling";
constexpr const char* kBeam = "beam scores";


}  // namespace

// Times one op: synchronises around it on a device backend, records on destruction.
class ProfilingBackend::Timer {
 public:
  Timer(ProfilingBackend& p, const char* family) : p_(p), family_(family) {
    if (p_.sync_each_op_) p_.inner_->Synchronize();
    t0_ = Now();
  }
  ~Timer() {
    if (p_.sync_each_op_) p_.inner_->Synchronize();
    p_.Record(family_, Now() - t0_);
  }
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

 private:
  ProfilingBackend& p_;
  const char* family_;
  double t0_ = 0;
};

ProfilingBackend::ProfilingBackend(std::unique_ptr<Backend<float>> inner)
    : inner_(std::move(inner)), sync_each_op_(!inner_->host_accessible()) {}
ProfilingBackend::~ProfilingBackend() = default;

void ProfilingBackend::Record(const char* family, double seconds) {
  ProfileRow& row = families_[family];
  row.name = family;
  ++row.calls;
  row.seconds += seconds;
  if (!phase_.empty()) phase_op_seconds_ += seconds;
}

void ProfilingBackend::RecordGemm(const std::string& shape, double seconds, double flops) {
  ProfileRow& row = gemms_[shape];
  row.name = shape;
  ++row.calls;
  row.seconds += seconds;
  row.flops += flops;
}

void ProfilingBackend::SetPhase(const std::string& phase) {
  const double now = Now();
  if (!phase_.empty()) outside_[phase_] += (now - phase_start_) - phase_op_seconds_;
  phase_ = phase;
  phase_start_ = now;
  phase_op_seconds_ = 0;
}

void ProfilingBackend::Reset() {
  families_.clear();
  gemms_.clear();
  outside_.clear();
  phase_.clear();
  phase_op_seconds_ = 0;
}

ProfileReport ProfilingBackend::Report(int steps, double step_seconds_total) const {
  ProfileReport r;
  const double per = 1.0 / std::max(1, steps);
  r.step_seconds = step_seconds_total * per;
  auto scaled = [per](ProfileRow row) {
    row.seconds *= per;
    row.flops *= per;
    row.calls = static_cast<int64_t>(static_cast<double>(row.calls) * per + 0.5);
    return row;
  };
  double accounted = 0;
  for (const auto& [name, row] : families_) {
    r.families.push_back(scaled(row));
    accounted += row.seconds * per;
  }
  for (const auto& [phase, seconds] : outside_) {
    ProfileRow row;
    row.name = "outside kernels: " + phase;
    row.seconds = seconds * per;
    r.families.push_back(row);
    accounted += row.seconds;
  }
  // Whatever the phases did not cover (the driver's own work between phases).
  if (r.step_seconds > accounted + 1e-9) {
    ProfileRow row;
    row.name = "outside kernels: between phases";
    row.seconds = r.step_seconds - accounted;
    r.families.push_back(row);
  }
  for (const auto& [name, row] : gemms_) r.gemm_shapes.push_back(scaled(row));
  auto by_time = [](const ProfileRow& a, const ProfileRow& b) { return a.seconds > b.seconds; };
  std::sort(r.families.begin(), r.families.end(), by_time);
  std::sort(r.gemm_shapes.begin(), r.gemm_shapes.end(), by_time);
  return r;
}

std::string ProfilingBackend::Format(const ProfileReport& r, double gemm_reference_gflops) {
  std::string s;
  char line[256];
  const double step = std::max(r.step_seconds, 1e-12);
  std::snprintf(line, sizeof(line), "profile: one step = %.1f ms (mean of the timed steps)\n",
                r.step_seconds * 1e3);
  s += line;
  std::snprintf(line, sizeof(line), "  %-52s %7s %10s %7s\n", "op family", "calls", "ms/step", "share");
  s += line;
  for (const ProfileRow& row : r.families) {
    std::snprintf(line, sizeof(line), "  %-52s %7lld %10.2f %6.1f%%\n", row.name.c_str(),
                  static_cast<long long>(row.calls), row.seconds * 1e3, 100.0 * row.seconds / step);
    s += line;
  }
  std::snprintf(line, sizeof(line), "  %-52s %7s %10s %7s %9s %8s\n", "GEMM shape (m x n x k)", "calls",
                "ms/step", "share", "GFLOP/s", "of ref");
  s += line;
  for (const ProfileRow& row : r.gemm_shapes) {
    const double gflops = row.seconds > 0 ? row.flops / row.seconds / 1e9 : 0;
    char frac[32] = "";
    if (gemm_reference_gflops > 0) std::snprintf(frac, sizeof(frac), "%.2f", gflops / gemm_reference_gflops);
    std::snprintf(line, sizeof(line), "  %-52s %7lld %10.2f %6.1f%% %9.1f %8s\n", row.name.c_str(),
                  static_cast<long long>(row.calls), row.seconds * 1e3, 100.0 * row.seconds / step,
                  gflops, frac);
    s += line;
  }
  return s;
}

void ProfilingBackend::CopyToDevice(void* dst, const void* src, size_t bytes) {
  Timer t(*this, kCopies);
  inner_->CopyToDevice(dst, src, bytes);
}
void ProfilingBackend::CopyToHost(void* dst, const void* src, size_t bytes) {
  Timer t(*this, kCopies);
  inner_->CopyToHost(dst, src, bytes);
}

template <typename F>
void ProfilingBackend::TimeGemm(int64_t batch, int64_t m, int64_t n, int64_t k,
                                const GemmOperand& a, const GemmOperand& b, float beta,
                                const char* epilogue, F&& run) {
  if (sync_each_op_) inner_->Synchronize();
  const double t0 = Now();
  run();
  if (sync_each_op_) inner_->Synchronize();
  const double seconds = Now() - t0;
  Record(batch > 1 ? kBatchedGemm : kGemm, seconds);
  // "4096x2048x512 A.B^T(w) bf16 +=": the logical shape, which stored operand is transposed, a
  // weight (pre-packable) B, the operand dtype, whether C is accumulated into, the epilogue.
  std::string shape = std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
  if (batch > 1) shape = std::to_string(batch) + " x " + shape;
  shape += std::string(" ") + (a.transposed ? "A^T" : "A") + "." + (b.transposed ? "B^T" : "B");
  if (b.constant) shape += "(w)";
  shape += std::string(" ") + DTypeName(a.dtype);
  if (beta != 0.0f) shape += " +=";
  shape += epilogue;
  RecordGemm(shape, seconds, 2.0 * static_cast<double>(batch) * m * n * k);
}

void ProfilingBackend::Gemm(int64_t batch, int64_t m, int64_t n, int64_t k, const GemmOperand& a,
                            const GemmOperand& b, float* c, int64_t ldc, int64_t stride_c,
                            float alpha, float beta) {
  TimeGemm(batch, m, n, k, a, b, beta, "",
           [&] { inner_->Gemm(batch, m, n, k, a, b, c, ldc, stride_c, alpha, beta); });
}

void ProfilingBackend::GemmBiasAct(int64_t m, int64_t n, int64_t k, const GemmOperand& a,
                                   const GemmOperand& b, const float* bias, GemmActivation act,
                                   void* c, DType c_dtype) {
  std::string epilogue = bias ? " +bias" : "";
  if (act == GemmActivation::kRelu) epilogue += " relu";
  if (act == GemmActivation::kGelu) epilogue += " gelu";
  epilogue += std::string(" ->") + DTypeName(c_dtype);
  TimeGemm(1, m, n, k, a, b, 0.0f, epilogue.c_str(),
           [&] { inner_->GemmBiasAct(m, n, k, a, b, bias, act, c, c_dtype); });
}

void ProfilingBackend::AttentionForward(const AttentionArgs& a, const void* q, const void* k,
                                        const void* v, void* out, float* lse) {
  Timer t(*this, kFusedAttention);
  inner_->AttentionForward(a, q, k, v, out, lse);
}
void ProfilingBackend::AttentionBackward(const AttentionArgs& a, const void* q, const void* k,
                                         const void* v, const void* out, const void* dout,
                                         const float* lse, const AttentionGrads<float>& g) {
  Timer t(*this, kFusedAttention);
  inner_->AttentionBackward(a, q, k, v, out, dout, lse, g);
}

VectorStats ProfilingBackend::SumSquares(const float* x, int64_t n) {
  Timer t(*this, kOptimizer);
  return inner_->SumSquares(x, n);
}
void ProfilingBackend::Scale(float* x, int64_t n, float factor) {
  Timer t(*this, kOptimizer);
  inner_->Scale(x, n, factor);
}
void ProfilingBackend::ApplyOptimizerUpdate(const OptimizerUpdate& u) {
  Timer t(*this, kOptimizer);
  inner_->ApplyOptimizerUpdate(u);
}
void ProfilingBackend::BeamScores(const float* logits, const float* base,
                                  const BeamScoresArgs& args, float* top_scores,
                                  int32_t* top_tokens, float* eos_scores) {
  Timer t(*this, kBeam);
  inner_->BeamScores(logits, base, args, top_scores, top_tokens, eos_scores);
}
void ProfilingBackend::WeightsChanged() { inner_->WeightsChanged(); }
void ProfilingBackend::Cast(const float* x, void* y, DType to, int64_t n) {
  Timer t(*this, kCast);
  inner_->Cast(x, y, to, n);
}
void ProfilingBackend::Add(const float* x, float* y, int64_t n) {
  Timer t(*this, kAdd);
  inner_->Add(x, y, n);
}
void ProfilingBackend::BiasDropoutResidualForward(const float* x, const float* bias,
                                                  const float* residual, float* out, int64_t rows,
                                                  int64_t cols, float p, DropoutKey key) {
  Timer t(*this, kDropoutResidual);
  inner_->BiasDropoutResidualForward(x, bias, residual, out, rows, cols, p, key);
}
void ProfilingBackend::BiasDropoutResidualBackward(const float* dout, float* dx, float* dbias,
                                                   int64_t rows, int64_t cols, float p,
                                                   DropoutKey key) {
  Timer t(*this, kDropoutResidual);
  inner_->BiasDropoutResidualBackward(dout, dx, dbias, rows, cols, p, key);
}
void ProfilingBackend::BiasActivationForward(const float* x, const float* bias, float* pre,
                                             void* out, DType out_dtype, int64_t rows,
                                             int64_t cols, Activation act) {
  Timer t(*this, kBiasAct);
  inner_->BiasActivationForward(x, bias, pre, out, out_dtype, rows, cols, act);
}
void ProfilingBackend::BiasActivationBackward(const float* dout, const void* saved,
                                              DType saved_dtype, float* dpre, float* dbias,
                                              int64_t rows, int64_t cols, Activation act) {
  Timer t(*this, kBiasAct);
  inner_->BiasActivationBackward(dout, saved, saved_dtype, dpre, dbias, rows, cols, act);
}
void ProfilingBackend::ResidualLayerNormForward(const float* x, const float* bias,
                                                const float* residual, float p, DropoutKey key,
                                                float* h, const float* gamma, const float* beta,
                                                float* y, void* y_low, DType low_dtype,
                                                float* mean, float* rstd, int64_t rows,
                                                int64_t cols, float eps) {
  Timer t(*this, x ? kResidualNorm : kLayerNorm);
  inner_->ResidualLayerNormForward(x, bias, residual, p, key, h, gamma, beta, y, y_low, low_dtype,
                                   mean, rstd, rows, cols, eps);
}
void ProfilingBackend::ResidualLayerNormBackward(const float* dy, const float* h,
                                                 const float* gamma, const float* mean,
                                                 const float* rstd, float* dh, void* d_branch,
                                                 DType branch_dtype, float* dbias, float* dgamma,
                                                 float* dbeta, float p, DropoutKey key,
                                                 int64_t rows, int64_t cols) {
  Timer t(*this, kResidualNorm);
  inner_->ResidualLayerNormBackward(dy, h, gamma, mean, rstd, dh, d_branch, branch_dtype, dbias,
                                    dgamma, dbeta, p, key, rows, cols);
}
void ProfilingBackend::BiasActivationBackwardTo(const void* dout, DType dout_dtype,
                                                const void* saved, DType saved_dtype, void* dpre,
                                                DType dpre_dtype, float* dbias, int64_t rows,
                                                int64_t cols, Activation act) {
  Timer t(*this, kBiasAct);
  inner_->BiasActivationBackwardTo(dout, dout_dtype, saved, saved_dtype, dpre, dpre_dtype, dbias,
                                   rows, cols, act);
}
void ProfilingBackend::LayerNormForward(const float* x, const float* gamma, const float* beta,
                                        float* y, float* mean, float* rstd, int64_t rows,
                                        int64_t cols, float eps) {
  Timer t(*this, kLayerNorm);
  inner_->LayerNormForward(x, gamma, beta, y, mean, rstd, rows, cols, eps);
}
void ProfilingBackend::LayerNormBackward(const float* dy, const float* x, const float* gamma,
                                         const float* mean, const float* rstd, float* dx,
                                         float* dgamma, float* dbeta, int64_t rows, int64_t cols,
                                         bool accumulate_dx) {
  Timer t(*this, kLayerNorm);
  inner_->LayerNormBackward(dy, x, gamma, mean, rstd, dx, dgamma, dbeta, rows, cols,
                            accumulate_dx);
}
void ProfilingBackend::SoftmaxForward(const float* scores, float* probs, void* dropped,
                                      DType dropped_dtype, const uint8_t* key_padding,
                                      int64_t batch, int64_t heads, int64_t tq, int64_t tk,
                                      float scale, bool causal, float p, DropoutKey key) {
  Timer t(*this, kSoftmax);
  inner_->SoftmaxForward(scores, probs, dropped, dropped_dtype, key_padding, batch, heads, tq, tk,
                         scale, causal, p, key);
}
void ProfilingBackend::SoftmaxBackward(const float* d_dropped, const float* probs, void* dscores,
                                       DType dscores_dtype, int64_t batch, int64_t heads,
                                       int64_t tq, int64_t tk, float scale, float p,
                                       DropoutKey key) {
  Timer t(*this, kSoftmax);
  inner_->SoftmaxBackward(d_dropped, probs, dscores, dscores_dtype, batch, heads, tq, tk, scale, p,
                          key);
}
void ProfilingBackend::EmbeddingForward(const int32_t* tokens, const float* table,
                                        const float* pos_table, const int32_t* pos_ids,
                                        float* out, int64_t rows, int64_t cols, float scale) {
  Timer t(*this, kEmbedding);
  inner_->EmbeddingForward(tokens, table, pos_table, pos_ids, out, rows, cols, scale);
}
void ProfilingBackend::EmbeddingBackward(const int32_t* tokens, const float* dout, float* dtable,
                                         int64_t rows, int64_t cols, float scale, int32_t pad) {
  Timer t(*this, kEmbedding);
  inner_->EmbeddingBackward(tokens, dout, dtable, rows, cols, scale, pad);
}
void ProfilingBackend::SplitHeads(const float* x, const float* bias, void* out, DType out_dtype,
                                  int64_t batch, int64_t time, int64_t parts, int64_t heads,
                                  int64_t head_dim) {
  Timer t(*this, kHeads);
  inner_->SplitHeads(x, bias, out, out_dtype, batch, time, parts, heads, head_dim);
}
void ProfilingBackend::MergeHeads(const float* in, void* x, DType x_dtype, int64_t batch,
                                  int64_t time, int64_t parts, int64_t heads, int64_t head_dim) {
  Timer t(*this, kHeads);
  inner_->MergeHeads(in, x, x_dtype, batch, time, parts, heads, head_dim);
}
void ProfilingBackend::ColumnSum(const float* x, float* sum, int64_t rows, int64_t cols) {
  Timer t(*this, kColumnSum);
  inner_->ColumnSum(x, sum, rows, cols);
}
void ProfilingBackend::LstmCellForward(float* gates, const float* bias, const float* c_prev,
                                       float* c, float* h, int64_t rows, int64_t hidden) {
  Timer t(*this, kRecurrent);
  inner_->LstmCellForward(gates, bias, c_prev, c, h, rows, hidden);
}
void ProfilingBackend::LstmCellBackward(const float* gates, const float* c_prev, const float* c,
                                        const float* dh, const float* dc, float* dgates,
                                        float* dc_prev, float* dbias, int64_t rows,
                                        int64_t hidden) {
  Timer t(*this, kRecurrent);
  inner_->LstmCellBackward(gates, c_prev, c, dh, dc, dgates, dc_prev, dbias, rows, hidden);
}
void ProfilingBackend::GluForward(const float* x, float* y, int64_t rows, int64_t cols) {
  Timer t(*this, kGlu);
  inner_->GluForward(x, y, rows, cols);
}
void ProfilingBackend::GluBackward(const float* x, const float* dy, float* dx, int64_t rows,
                                   int64_t cols) {
  Timer t(*this, kGlu);
  inner_->GluBackward(x, dy, dx, rows, cols);
}
void ProfilingBackend::ScaleRowGroups(float* x, const float* factors, int64_t groups,
                                      int64_t rows_per_group, int64_t cols) {
  Timer t(*this, kRowScale);
  inner_->ScaleRowGroups(x, factors, groups, rows_per_group, cols);
}
void ProfilingBackend::WeightNormForward(const float* v, const float* g, float* w, float* norms,
                                         int64_t n, int64_t d, bool columns) {
  Timer t(*this, kWeightNorm);
  inner_->WeightNormForward(v, g, w, norms, n, d, columns);
}
void ProfilingBackend::WeightNormBackward(const float* dw, const float* v, const float* g,
                                          const float* norms, float* dv, float* dg, int64_t n,
                                          int64_t d, bool columns) {
  Timer t(*this, kWeightNorm);
  inner_->WeightNormBackward(dw, v, g, norms, dv, dg, n, d, columns);
}
void ProfilingBackend::Conv2dForward(const float* x, const float* w, const float* bias, float* y,
                                     const Conv2dShape& s) {
  Timer t(*this, kConv);
  inner_->Conv2dForward(x, w, bias, y, s);
}
void ProfilingBackend::Conv2dBackward(const float* x, const float* w, const float* dy, float* dx,
                                      float* dw, float* dbias, const Conv2dShape& s) {
  Timer t(*this, kConv);
  inner_->Conv2dBackward(x, w, dy, dx, dw, dbias, s);
}
void ProfilingBackend::CtcLoss(const float* logits, const int32_t* input_lengths,
                               const int32_t* targets, const int32_t* target_lengths,
                               int64_t frames, int64_t batch, int64_t classes, int64_t max_target,
                               int32_t blank, bool zero_infinity, float grad_scale, float* losses,
                               float* dlogits) {
  Timer t(*this, kCtc);
  inner_->CtcLoss(logits, input_lengths, targets, target_lengths, frames, batch, classes,
                  max_target, blank, zero_infinity, grad_scale, losses, dlogits);
}
CrossEntropyStats ProfilingBackend::CrossEntropyForward(const float* logits,
                                                        const int32_t* targets, float* lse,
                                                        int64_t rows, int64_t vocab, float eps,
                                                        int32_t pad) {
  Timer t(*this, kCrossEntropy);
  return inner_->CrossEntropyForward(logits, targets, lse, rows, vocab, eps, pad);
}
void ProfilingBackend::CrossEntropyBackward(const float* logits, const float* lse,
                                            const int32_t* targets, void* dlogits,
                                            DType dlogits_dtype, int64_t rows, int64_t vocab,
                                            float eps, int32_t pad, float grad_scale) {
  Timer t(*this, kCrossEntropy);
  inner_->CrossEntropyBackward(logits, lse, targets, dlogits, dlogits_dtype, rows, vocab, eps, pad,
                               grad_scale);
}
CrossEntropyStats ProfilingBackend::CrossEntropyForwardBackward(
    const float* logits, const int32_t* targets, float* lse, void* dlogits, DType dlogits_dtype,
    int64_t rows, int64_t vocab, float eps, int32_t pad, float grad_scale) {
  Timer t(*this, kCrossEntropy);
  return inner_->CrossEntropyForwardBackward(logits, targets, lse, dlogits, dlogits_dtype, rows,
                                             vocab, eps, pad, grad_scale);
}

}  // namespace sf
