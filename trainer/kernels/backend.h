// The kernel interface every layer calls. One interface, several backends:
//   ReferenceBackend<T> (kernels/cpu/reference.h): plain scalar loops, T = float or double; the
//                        definition of each op's semantics and the f64 backend of the gradient
//                        tests.
//   CpuBackend          (kernels/cpu/cpu_backend.h): T = float; oneDNN GEMMs (fp32, bf16 with
//                        fp32 accumulation) and fused, vectorised OpenMP kernels.
//   CudaBackend         (kernels/cuda/cuda_backend.h, SF_CUDA=ON): T = float; cuBLASLt + .cu.
//
// Conventions: all buffers are dense row-major and live on the backend's device. Shapes use
// B = batch, T/Tq/Tk = time, C = d_model, H = heads, D = head dim (C = H*D), V = vocabulary.
// Parameter-gradient outputs (dbias, dgamma, dbeta, dtable) ACCUMULATE (+=); every other output
// is overwritten unless the op says otherwise. Outputs never alias inputs unless an op allows it.
// Token ids are int32; padding masks are uint8 (1 = padding).
//
// Thread safety: a backend instance is used by one training loop at a time (it owns scratch
// buffers); kernels parallelise internally. Errors: shapes are the caller's contract (checked
// by assertions in debug builds); kernels do not fail.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "trainer/core/allocator.h"
#include "trainer/core/dtype.h"
#include "trainer/core/philox.h"
#include "trainer/optim/update_rules.h"

namespace sf {

// kTanh: the LSTM decoder's attention output (fairseq's AttentionLayer); the feed-forward
// blocks take ReLU or GELU.
enum class Activation : uint8_t { kRelu, kGelu, kTanh };

// What Backend::GemmBiasAct applies to a GEMM's result before storing it.
enum class GemmActivation : uint8_t { kNone, kRelu, kGelu };

// One GEMM operand. op(X) is the logical matrix; when `transposed` the stored matrix is op(X)^T.
// Element (i, p) of a logical r x c matrix is data[i*ld + p] (not transposed) or data[p*ld + i]
// (transposed). Batched GEMMs advance by batch_stride elements per batch entry.
struct GemmOperand {
  const void* data = nullptr;
  DType dtype = DType::kF32;
  bool transposed = false;
  int64_t ld = 0;
  int64_t batch_stride = 0;
  // A weight: its contents do not change until the next Backend::WeightsChanged(). Backends may
  // keep a re-laid-out (pre-packed) copy of it, keyed by its address and layout.
  bool constant = false;
};

// The shape of a 2-D convolution (Backend::Conv2dForward): n images of cin channels, h x w;
// cout filters of kh x kw; strides sh, sw; zero padding ph, pw on each side. `compute`: the
// products' operands — kF32, or kBF16 (mixed precision: x, w and dy rounded to bf16 for the
// products, sums and every result in fp32, as the GEMMs' bf16 mode); a backend whose hardware
// has no bf16 products may compute a kBF16 convolution in fp32 (the CPU without AVX512_BF16,
// the CUDA backend today).
struct Conv2dShape {
  int64_t n = 0, cin = 0, h = 0, w = 0, cout = 0, kh = 0, kw = 0, sh = 1, sw = 1, ph = 0, pw = 0;
  DType compute = DType::kF32;
  int64_t oh() const { return (h + 2 * ph - kh) / sh + 1; }
  int64_t ow() const { return (w + 2 * pw - kw) / sw + 1; }
};

// Scaled dot-product attention over heads read and written in place (Backend::AttentionForward,
// AttentionBackward). Per batch entry b and head h, with D = head_dim, row t of Q_bh is
// q[(b*tq + t)*ldq + h*D + 0..D), of K_bh k[(b*tk + t)*ldk + h*D + ...], of V_bh likewise with
// ldv, and row t of O_bh is out[(b*tq + t)*ldo + h*D + ...]: the [B, T, H*D] layout projection
// GEMMs write and read, so q, k and v may be column blocks of one [B*T, 3*H*D] buffer and no head
// permutation is ever materialised.
//   S = scale * Q_bh K_bh^T, key k masked when key_padding[b*tk + k] or (causal) k > q;
//   P = softmax over the unmasked keys (a row whose keys are all masked: P = 0, O = 0);
//   P' = dropout(P): element (q, k) dropped by the mask of (key, ((b*H + h)*tq + q)*tk + k),
//        the elements SoftmaxForward drops for [B, H, Tq, Tk] scores;
//   O_bh = P' V_bh.
struct AttentionArgs {
  int64_t batch = 0, heads = 0, tq = 0, tk = 0, head_dim = 0;
  int64_t ldq = 0, ldk = 0, ldv = 0, ldo = 0;  // row strides, in elements
  const uint8_t* key_padding = nullptr;        // [batch, tk], 1 = padding; may be null
  bool causal = false;
  float scale = 1.0f;
  float dropout = 0.0f;  // attention dropout rate (0: none)
  DropoutKey key;
  DType dtype = DType::kF32;  // of q, k, v, out and dout: T, or kBF16 / kF16 when T = float
};

// Where Backend::AttentionBackward writes: dq, dk, dv in q's, k's and v's layouts (row strides
// ldq, ldk, ldv; they may be column blocks of one [B*T, 3*H*D] buffer), of dtype `dtype` (T, or
// kBF16 / kF16 when T = float: the in-projection's GEMM operand, so nothing else reads them),
// overwritten. dbias (may be null) [3 * H*D]: += the column sums of dq | dk | dv, taken before
// any rounding (the in-projection bias's gradient).
template <typename T>
struct AttentionGrads {
  void* dq = nullptr;
  void* dk = nullptr;
  void* dv = nullptr;
  DType dtype = DTypeOf<T>::value;
  T* dbias = nullptr;
};

struct CrossEntropyStats {
  double loss = 0;     // label-smoothed loss, summed over non-padding tokens
  double nll = 0;      // plain negative log-likelihood, summed over non-padding tokens
  int64_t tokens = 0;  // non-padding targets
};

// Σ x² (in double) of a vector and whether any element is inf or NaN.
struct VectorStats {
  double sum_squares = 0;
  bool non_finite = false;
};

// Elements [begin, end) of the flat parameter buffers that belong to one parameter (or one piece
// of it), and whether weight decay applies to them. The fused optimizer update walks a table of
// these; pieces are at most kParamChunkElements long so a GPU can give each its own block.
struct ParamChunk {
  int64_t begin = 0;
  int64_t end = 0;
  int32_t decay = 0;
  int32_t unused = 0;
};
inline constexpr int64_t kParamChunkElements = 1 << 16;

// One fused optimizer step over every parameter: for each chunk and each element i in it,
// the rule's element function (optim/update_rules.h) updates values[i] from grads[i] *
// grad_factor (the product rounded to fp32, as a separate Scale pass would have stored it; grads
// are left as they are) and the state buffers state[k][i] (exp_avg / exp_avg_sq, or
// momentum_buffer; null when the rule has none); then, when mirror is not null, mirror[i] =
// the updated values[i] as mirror_dtype (kBF16 / kF16, round to nearest even: the GEMMs' weight
// copy, ParamStore's mirror). All pointers, the chunk table included, are on the backend's device.
struct OptimizerUpdate {
  UpdateRule rule = UpdateRule::kAdamW;
  UpdateScalars scalars;
  float* values = nullptr;
  const float* grads = nullptr;
  float grad_factor = 1.0f;
  float* state[2] = {nullptr, nullptr};
  void* mirror = nullptr;
  DType mirror_dtype = DType::kBF16;
  const ParamChunk* chunks = nullptr;
  int64_t num_chunks = 0;
};

// The host implementations of the multi-tensor ops (the defaults of Backend below; OpenMP).
VectorStats SumSquaresOnHost(const float* x, int64_t n);
VectorStats SumSquaresOnHost(const double* x, int64_t n);
void ApplyOptimizerUpdateOnHost(const OptimizerUpdate& u);

// Beam search's scoring of one decoding step (Backend::BeamScores below), on host memory.
struct BeamScoresArgs {
  int64_t rows = 0, vocab = 0;
  int64_t k = 0;                       // continuations kept per row
  int32_t banned[2] = {-1, -1};        // tokens never generated (<pad>, <bos>); -1: none
  int32_t eos = 2;
};
void BeamScoresOnHost(const float* logits, const float* base, const BeamScoresArgs& args,
                      float* top_scores, int32_t* top_tokens, float* eos_scores);
void BeamScoresOnHost(const double* logits, const float* base, const BeamScoresArgs& args,
                      float* top_scores, int32_t* top_tokens, float* eos_scores);

template <typename T>
class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  virtual Device device() const = 0;
  // What the backend runs on, for reports ("cpu", "NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB)").
  virtual std::string description() const { return name(); }
  // Waits until every op issued so far has finished (a no-op where ops finish as they return).
  virtual void Synchronize() {}

  // Device time, for per-phase profiles: Mark() notes how far the op stream has got (a CUDA
  // event on a GPU; the host clock on backends whose ops finish as they return) and returns the
  // mark's number; SecondsBetween(a, b) waits for mark b and returns the device time from mark a
  // to mark b; ClearMarks() forgets every mark (numbers start again at 0).
  virtual int Mark() {
    host_marks_.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count());
    return static_cast<int>(host_marks_.size()) - 1;
  }
  virtual double SecondsBetween(int a, int b) { return host_marks_.at(b) - host_marks_.at(a); }
  virtual void ClearMarks() { host_marks_.clear(); }

  // The caching allocator of the backend's device: every buffer an op reads or writes (the
  // model's parameters, activations and scratch; the optimizer's state) is a block of it.
  virtual CachingAllocator& allocator() const { return CachingAllocator::Cpu(); }
  // False when the host must not touch the backend's memory (a GPU): then all data goes in and
  // out through the copies below or Tensor::CopyFromHost / CopyToHost.
  bool host_accessible() const { return allocator().host_accessible(); }

  // Memory on the backend's device, for callers that stage data in and out (tests, the data
  // loader). CPU backends use the host heap. Allocation failure throws std::bad_alloc.
  // CopyToDevice returns once `src` may be reused; the copy is ordered before every later op (a
  // GPU backend stages it through pinned memory and does not wait for it). CopyToHost returns
  // when the data is on the host (it waits for the ops before it).
  virtual void* AllocateDevice(size_t bytes) {
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p) throw std::bad_alloc();
    return p;
  }
  virtual void FreeDevice(void* p) { std::free(p); }
  virtual void CopyToDevice(void* dst, const void* src, size_t bytes) {
    std::memcpy(dst, src, bytes);
  }
  virtual void CopyToHost(void* dst, const void* src, size_t bytes) {
    std::memcpy(dst, src, bytes);
  }

  // For each b < batch: C_b (m x n, row stride ldc, batch stride stride_c)
  //   = alpha * op(A_b) (m x k) * op(B_b) (k x n) + beta * C_b.
  // A and B have the same dtype: T, or (T = float only) kBF16 / kF16, in which case products are
  // accumulated in fp32. beta = 0 ignores C's old contents (NaN included).
  virtual void Gemm(int64_t batch, int64_t m, int64_t n, int64_t k, const GemmOperand& a,
                    const GemmOperand& b, T* c, int64_t ldc, int64_t stride_c, float alpha,
                    float beta) = 0;

  // C[m, n] = act(op(A) op(B) + bias), accumulated in T and rounded once into c (dense, row
  // stride n) of dtype c_dtype: T, or kBF16 / kF16 when T = float (a mixed-precision layer writes
  // the next GEMM's operand directly). bias [n] (T) may be null; GELU is the exact erf form. The
  // default runs Gemm, then the elementwise ops below; backends fuse the bias and activation into
  // the GEMM's epilogue.
  virtual void GemmBiasAct(int64_t m, int64_t n, int64_t k, const GemmOperand& a,
                           const GemmOperand& b, const T* bias, GemmActivation act, void* c,
                           DType c_dtype);

  // Multi-tensor passes over the flat gradient / parameter buffers (one launch each on a GPU).
  // SumSquares returns its result on the host (it waits for the ops before it).
  virtual VectorStats SumSquares(const T* x, int64_t n) { return SumSquaresOnHost(x, n); }
  // x[i] *= factor.
  virtual void Scale(T* x, int64_t n, float factor) {
    for (int64_t i = 0; i < n; ++i) x[i] *= static_cast<T>(factor);
  }
  // The fused optimizer update described at OptimizerUpdate (T = float backends only).
  virtual void ApplyOptimizerUpdate(const OptimizerUpdate& u) { ApplyOptimizerUpdateOnHost(u); }

  // Beam search's scoring of one decoding step. For each row r of logits [rows, vocab]:
  //   lse_r = max_v z_rv + log Σ_v exp(z_rv - max) (the sum in double), lp_rv = z_rv - lse_r,
  //   score_rv = base[r] + lp_rv.
  // top_tokens / top_scores [rows, k] get the row's k best tokens by score (descending; equal
  // scores: the lower token first), leaving out the banned tokens and scores of -inf or NaN (so a row
  // whose base is -inf has none); unfilled places get token -1 and score -inf. eos_scores[r] =
  // score_r,eos. All pointers are on the backend's device; the host definition is
  // BeamScoresOnHost, which a device backend must match up to the rounding of lse.
  virtual void BeamScores(const T* logits, const float* base, const BeamScoresArgs& args,
                          float* top_scores, int32_t* top_tokens, float* eos_scores) {
    BeamScoresOnHost(logits, base, args, top_scores, top_tokens, eos_scores);
  }

  // Every GemmOperand marked `constant` may have changed (call after an optimizer step or a
  // weight load): backends drop or refresh their pre-packed copies.
  virtual void WeightsChanged() {}

  // y[i] = x[i] converted to `to` (T, or kBF16 / kF16 when T = float), round to nearest even.
  virtual void Cast(const T* x, void* y, DType to, int64_t n) = 0;
  // y[i] += x[i].
  virtual void Add(const T* x, T* y, int64_t n) = 0;

  // out[r,c] = residual[r,c] + dropout(x[r,c] + bias[c]), with the mask of (key, index r*cols+c)
  // (see philox.h). bias and residual may be null (treated as 0); out may alias x or residual.
  virtual void BiasDropoutResidualForward(const T* x, const T* bias, const T* residual, T* out,
                                          int64_t rows, int64_t cols, float p,
                                          DropoutKey key) = 0;
  // Gradient w.r.t. x of the op above: dx = mask * dout / (1-p); dbias (may be null) += sum over
  // rows of dx. The residual's gradient is dout itself. dx may alias dout.
  virtual void BiasDropoutResidualBackward(const T* dout, T* dx, T* dbias, int64_t rows,
                                           int64_t cols, float p, DropoutKey key) = 0;

  // pre[r,c] = x[r,c] + bias[c]; out = act(pre), stored as out_dtype (T, or kBF16 / kF16 when
  // T = float: mixed precision writes the next GEMM's operand directly). GELU is the exact erf
  // form. pre, and out when it is T, may alias x.
  virtual void BiasActivationForward(const T* x, const T* bias, T* pre, void* out,
                                     DType out_dtype, int64_t rows, int64_t cols,
                                     Activation act) = 0;
  // dpre = dout * act'(pre); dbias += sum over rows of dpre. dpre may alias dout.
  // `saved` is pre, or for ReLU either pre or out (act'(pre) = [saved > 0] for both), of dtype
  // saved_dtype: T, or (T = float) kBF16 / kF16 — mixed precision passes the compute-dtype
  // copy it already keeps for the next GEMM instead of an fp32 pre.
  virtual void BiasActivationBackward(const T* dout, const void* saved, DType saved_dtype,
                                      T* dpre, T* dbias, int64_t rows, int64_t cols,
                                      Activation act) = 0;

  // Per row: mean, rstd = 1/sqrt(var + eps) (biased variance), y = (x-mean)*rstd*gamma + beta.
  virtual void LayerNormForward(const T* x, const T* gamma, const T* beta, T* y, T* mean,
                                T* rstd, int64_t rows, int64_t cols, float eps) = 0;
  // dx (= or += when accumulate_dx), dgamma += sum_r dy*xhat, dbeta += sum_r dy.
  virtual void LayerNormBackward(const T* dy, const T* x, const T* gamma, const T* mean,
                                 const T* rstd, T* dx, T* dgamma, T* dbeta, int64_t rows,
                                 int64_t cols, bool accumulate_dx) = 0;

  // A residual block's tail in one pass: h = residual + dropout(x + bias) (the mask of
  // BiasDropoutResidualForward), then y = LN(h) as LayerNormForward (mean, rstd saved), and, when
  // y_low is not null, y once more as low_dtype (kBF16 / kF16: the next GEMM's operand). x null:
  // h is the input as given (a plain layer norm; bias, residual, p unused). bias may be null; h
  // may alias x or residual; y may alias residual (each row's residual is read before its y is
  // written), nothing else.
  virtual void ResidualLayerNormForward(const T* x, const T* bias, const T* residual, float p,
                                        DropoutKey key, T* h, const T* gamma, const T* beta, T* y,
                                        void* y_low, DType low_dtype, T* mean, T* rstd,
                                        int64_t rows, int64_t cols, float eps);
  // Its backward where h feeds both the residual path and the branch (post-norm): dh = dL/dh
  // through the layer norm (overwritten: what the residual carries), dgamma and dbeta += as
  // LayerNormBackward; the branch's gradient mask * dh / (1-p) stored in d_branch as branch_dtype
  // (T, or kBF16 / kF16: the branch's GEMM operand), and dbias (may be null) += its column sums,
  // taken before rounding.
  virtual void ResidualLayerNormBackward(const T* dy, const T* h, const T* gamma, const T* mean,
                                         const T* rstd, T* dh, void* d_branch, DType branch_dtype,
                                         T* dbias, T* dgamma, T* dbeta, float p, DropoutKey key,
                                         int64_t rows, int64_t cols);
  // BiasActivationBackward with dout of dtype dout_dtype and dpre stored as dpre_dtype (each T,
  // or kBF16 / kF16 when T = float: the GEMMs on both sides read and write the compute dtype);
  // products in T, dbias sums them before rounding. dpre may alias dout when the dtypes match.
  // The default handles dout in T only (backends override it for the low dtypes).
  virtual void BiasActivationBackwardTo(const void* dout, DType dout_dtype, const void* saved,
                                        DType saved_dtype, void* dpre, DType dpre_dtype, T* dbias,
                                        int64_t rows, int64_t cols, Activation act);

  // scores, probs: [B, H, Tq, Tk]. probs = softmax_k(scale*scores) where key k is masked out
  // (probability 0) when key_padding[b,k] (key_padding [B,Tk], may be null) or, when causal,
  // k > q. dropped = dropout(probs) with attention dropout p (index = flat element index),
  // stored as dropped_dtype (T, or kBF16 / kF16 when T = float); dropped may be null when p == 0
  // (nothing is written then).
  virtual void SoftmaxForward(const T* scores, T* probs, void* dropped, DType dropped_dtype,
                              const uint8_t* key_padding, int64_t batch, int64_t heads,
                              int64_t tq, int64_t tk, float scale, bool causal, float p,
                              DropoutKey key) = 0;
  // d_dropped -> dprobs = mask*d_dropped/(1-p) -> dscores = scale * probs*(dprobs - <probs,dprobs>),
  // stored as dscores_dtype (T, or kBF16 / kF16 when T = float).
  virtual void SoftmaxBackward(const T* d_dropped, const T* probs, void* dscores,
                               DType dscores_dtype, int64_t batch, int64_t heads, int64_t tq,
                               int64_t tk, float scale, float p, DropoutKey key) = 0;

  // Fused attention (AttentionArgs above) with the softmax computed blockwise and never stored:
  // true when the backend has it (the layers fall back to the per-head GEMMs and SoftmaxForward
  // otherwise; the defaults below abort).
  virtual bool has_fused_attention() const { return false; }
  // out gets O; lse [batch, heads, tq] (fp32, the backend's memory) gets log Σ_k exp(S_qk) over
  // the unmasked keys (-inf for a row without any), from which the backward recomputes P.
  virtual void AttentionForward(const AttentionArgs& a, const void* q, const void* k,
                                const void* v, void* out, float* lse);
  // From dout (out's layout and dtype) and the forward's out and lse: the gradients of
  // sum(O * dout) with respect to q, k and v (dropout through the same mask), written as `g`
  // says (AttentionGrads above).
  virtual void AttentionBackward(const AttentionArgs& a, const void* q, const void* k,
                                 const void* v, const void* out, const void* dout,
                                 const float* lse, const AttentionGrads<T>& g);

  // out[r,:] = scale * table[tokens[r],:] + pos_table[pos_ids[r],:] (the position term is left
  // out when pos_ids is null).
  virtual void EmbeddingForward(const int32_t* tokens, const T* table, const T* pos_table,
                                const int32_t* pos_ids, T* out, int64_t rows, int64_t cols,
                                float scale) = 0;
  // dtable[tokens[r],:] += scale * dout[r,:] for every r whose token != pad (pad < 0: none).
  virtual void EmbeddingBackward(const int32_t* tokens, const T* dout, T* dtable, int64_t rows,
                                 int64_t cols, float scale, int32_t pad) = 0;

  // x: [B, T, P, H, D] (P stacked projections, e.g. q,k,v) plus bias [P, H, D] (may be null)
  // -> out: [P, B, H, T, D], stored as out_dtype (T, or kBF16 / kF16 when T = float).
  virtual void SplitHeads(const T* x, const T* bias, void* out, DType out_dtype, int64_t batch,
                          int64_t time, int64_t parts, int64_t heads, int64_t head_dim) = 0;
  // The inverse permutation: in [P, B, H, T, D] -> x [B, T, P, H, D], stored as x_dtype.
  virtual void MergeHeads(const T* in, void* x, DType x_dtype, int64_t batch, int64_t time,
                          int64_t parts, int64_t heads, int64_t head_dim) = 0;
  // sum[c] += sum over rows of x[r, c].
  virtual void ColumnSum(const T* x, T* sum, int64_t rows, int64_t cols) = 0;

  // One step of an LSTM (PyTorch's nn.LSTMCell, gates in its order i, f, g, o) for `rows`
  // sequences of hidden size H, after the caller's GEMMs have summed x·W_ih^T + h_prev·W_hh^T
  // into gates [rows, 4H]:
  //   z = gates[r] + bias (4H; bias may be null), i = σ(z_i), f = σ(z_f), g = tanh(z_g),
  //   o = σ(z_o), c[r] = f ⊙ c_prev[r] + i ⊙ g, h[r] = o ⊙ tanh(c[r]).
  // gates is overwritten with the activations (i, f, g, o) the backward reads; c_prev may be
  // null (zeros). c and h are [rows, H].
  virtual void LstmCellForward(T* gates, const T* bias, const T* c_prev, T* c, T* h, int64_t rows,
                               int64_t hidden) = 0;
  // The step's gradients, from the activations the forward left in `gates`, c_prev (null:
  // zeros) and c: with dct = dc + dh ⊙ o ⊙ (1 - tanh²(c)) (dc may be null: zeros),
  //   dz = (dct ⊙ g ⊙ i(1-i), dct ⊙ c_prev ⊙ f(1-f), dct ⊙ i ⊙ (1-g²), dh ⊙ tanh(c) ⊙ o(1-o)),
  //   dc_prev = dct ⊙ f (may be null: not wanted), dbias (may be null) += Σ_rows dz.
  // dgates [rows, 4H] gets dz (the gradient of the GEMMs' sum) and may alias gates; dc_prev may
  // alias dc (a recurrence carries one buffer from step to step).
  virtual void LstmCellBackward(const T* gates, const T* c_prev, const T* c, const T* dh,
                                const T* dc, T* dgates, T* dc_prev, T* dbias, int64_t rows,
                                int64_t hidden) = 0;

  // The gated linear unit over the last dimension (PyTorch's F.glu(x, dim=-1); ConvS2S): x is
  // [rows, 2*cols] = [a | b], y[r, c] = a[r, c] * σ(b[r, c]) into y [rows, cols].
  virtual void GluForward(const T* x, T* y, int64_t rows, int64_t cols) = 0;
  // dx [rows, 2*cols] = [dy ⊙ σ(b) | dy ⊙ a ⊙ σ(b)(1 − σ(b))]. dx may alias x.
  virtual void GluBackward(const T* x, const T* dy, T* dx, int64_t rows, int64_t cols) = 0;

  // x [groups, rows_per_group, cols]: every row of group g scaled by factors[g] (factors [groups],
  // fp32, in the backend's memory): a per-sentence scale (ConvS2S's attention).
  virtual void ScaleRowGroups(T* x, const float* factors, int64_t groups, int64_t rows_per_group,
                              int64_t cols) = 0;

  // Weight normalisation (PyTorch's weight_norm, Salimans & Kingma 2016) of `n` vectors of `d`
  // elements each: vector i is row i of v [n, d], or (columns) column i of v [d, n].
  //   norms[i] = ||v_i||, w_i = g[i] * v_i / norms[i]   (w has v's layout).
  virtual void WeightNormForward(const T* v, const T* g, T* w, T* norms, int64_t n, int64_t d,
                                 bool columns) = 0;
  // Its gradient from dw (v's layout): with s_i = <dw_i, v_i>,
  //   dg[i] += s_i / norms[i],  dv_i += (g[i] / norms[i]) (dw_i − (s_i / norms[i]²) v_i).
  virtual void WeightNormBackward(const T* dw, const T* v, const T* g, const T* norms, T* dv,
                                  T* dg, int64_t n, int64_t d, bool columns) = 0;

  // 2-D convolution over NCHW images, PyTorch's F.conv2d(x, w, bias, stride, padding) (no
  // dilation, one group; cross-correlation): x [n, cin, h, w], w [cout, cin, kh, kw], bias [cout]
  // (may be null), y [n, cout, oh, ow] (Conv2dShape). T throughout; the products' operands in
  // Conv2dShape::compute.
  virtual void Conv2dForward(const T* x, const T* w, const T* bias, T* y, const Conv2dShape& s) = 0;
  // From dy [n, cout, oh, ow]: dx (may be null: not wanted) is overwritten; dw and dbias (may be
  // null) accumulate.
  virtual void Conv2dBackward(const T* x, const T* w, const T* dy, T* dx, T* dw, T* dbias,
                              const Conv2dShape& s) = 0;

  // Connectionist temporal classification (Graves et al. 2006) fused with log-softmax: PyTorch's
  // F.ctc_loss(log_softmax(logits), targets, input_lengths, target_lengths, blank,
  // reduction='none', zero_infinity) and its gradient with respect to the logits.
  //   logits [batch, frames, classes] (batch-major, as the encoder's rows: row b*frames + t;
  //   PyTorch's log_probs is its transpose, (T, N, C)); input_lengths [batch] in
  //   [1, frames]; targets [batch, max_target] right-padded labels in [0, classes), never blank;
  //   target_lengths [batch] in [0, max_target]; all in the backend's memory.
  //   losses [batch] (fp32, backend memory): −log p(targets_b | the first input_lengths[b]
  //   frames), p summed over every alignment (blanks between and around labels, repeats
  //   collapsed; a repeated label needs a blank between). None fits (too few frames for the
  //   labels and their repeats): +inf, or 0 with zero_infinity.
  //   dlogits (null: loss only): grad_scale × d losses[b] / d logits = softmax − the posterior of
  //   each class over the alignments; rows t >= input_lengths[b] zero; an infinite loss's rows
  //   NaN (as PyTorch's), or zero with zero_infinity. dlogits may alias logits.
  virtual void CtcLoss(const T* logits, const int32_t* input_lengths, const int32_t* targets,
                       const int32_t* target_lengths, int64_t frames, int64_t batch,
                       int64_t classes, int64_t max_target, int32_t blank, bool zero_infinity,
                       float grad_scale, float* losses, T* dlogits) = 0;

  // Label-smoothed cross-entropy fused with log-softmax (fairseq's label_smoothed_nll_loss):
  //   lse_r = log sum_v exp(z_rv); -log p_rv = lse_r - z_rv; eps_i = eps/(V-1)
  //   loss_r = (1 - eps - eps_i) * (lse_r - z_r,t) + eps_i * sum_v (lse_r - z_rv)
  // summed over rows whose target != pad. Writes lse [rows] for the backward.
  virtual CrossEntropyStats CrossEntropyForward(const T* logits, const int32_t* targets, T* lse,
                                                int64_t rows, int64_t vocab, float eps,
                                                int32_t pad) = 0;
  // dz_rv = grad_scale * (p_rv - eps_i - (1-eps-eps_i)*[v == t_r]), p from logits and lse
  // (since the coefficients of p sum to 1); zero rows for padding targets. dlogits has dtype
  // dlogits_dtype (T, or kBF16/kF16 when T = float) and may alias logits when it is T.
  virtual void CrossEntropyBackward(const T* logits, const T* lse, const int32_t* targets,
                                    void* dlogits, DType dlogits_dtype, int64_t rows,
                                    int64_t vocab, float eps, int32_t pad, float grad_scale) = 0;
  // Both of the above in one call (training, when the gradient's scale is known with the loss):
  // the same results as CrossEntropyForward then CrossEntropyBackward, which is what this
  // default does; backends override it to compute each row's gradient while the row is hot.
  virtual CrossEntropyStats CrossEntropyForwardBackward(const T* logits, const int32_t* targets,
                                                        T* lse, void* dlogits, DType dlogits_dtype,
                                                        int64_t rows, int64_t vocab, float eps,
                                                        int32_t pad, float grad_scale) {
    const CrossEntropyStats s = CrossEntropyForward(logits, targets, lse, rows, vocab, eps, pad);
    CrossEntropyBackward(logits, lse, targets, dlogits, dlogits_dtype, rows, vocab, eps, pad,
                         grad_scale);
    return s;
  }
 private:
  std::vector<double> host_marks_;  // Mark()'s host clock readings
};

template <typename T>
void Backend<T>::GemmBiasAct(int64_t m, int64_t n, int64_t k, const GemmOperand& a,
                             const GemmOperand& b, const T* bias, GemmActivation act, void* c,
                             DType c_dtype) {
  const bool in_place = c_dtype == DTypeOf<T>::value;
  T* out = in_place ? static_cast<T*>(c)
                    : static_cast<T*>(allocator().Allocate(static_cast<size_t>(m * n) * sizeof(T)));
  Gemm(1, m, n, k, a, b, out, n, 0, 1.0f, 0.0f);
  if (act != GemmActivation::kNone) {
    BiasActivationForward(out, bias, out, c, c_dtype, m, n,
                          act == GemmActivation::kRelu ? Activation::kRelu : Activation::kGelu);
  } else {
    if (bias) BiasDropoutResidualForward(out, bias, nullptr, out, m, n, 0.0f, DropoutKey{});
    if (!in_place) Cast(out, c, c_dtype, m * n);
  }
  if (!in_place) allocator().Free(out);
}

template <typename T>
void Backend<T>::ResidualLayerNormForward(const T* x, const T* bias, const T* residual, float p,
                                          DropoutKey key, T* h, const T* gamma, const T* beta,
                                          T* y, void* y_low, DType low_dtype, T* mean, T* rstd,
                                          int64_t rows, int64_t cols, float eps) {
  if (x) BiasDropoutResidualForward(x, bias, residual, h, rows, cols, p, key);
  LayerNormForward(h, gamma, beta, y, mean, rstd, rows, cols, eps);
  if (y_low) Cast(y, y_low, low_dtype, rows * cols);
}

template <typename T>
void Backend<T>::ResidualLayerNormBackward(const T* dy, const T* h, const T* gamma, const T* mean,
                                           const T* rstd, T* dh, void* d_branch,
                                           DType branch_dtype, T* dbias, T* dgamma, T* dbeta,
                                           float p, DropoutKey key, int64_t rows, int64_t cols) {
  LayerNormBackward(dy, h, gamma, mean, rstd, dh, dgamma, dbeta, rows, cols, false);
  if (branch_dtype == DTypeOf<T>::value) {
    BiasDropoutResidualBackward(dh, static_cast<T*>(d_branch), dbias, rows, cols, p, key);
    return;
  }
  T* tmp = static_cast<T*>(allocator().Allocate(static_cast<size_t>(rows * cols) * sizeof(T)));
  BiasDropoutResidualBackward(dh, tmp, dbias, rows, cols, p, key);
  Cast(tmp, d_branch, branch_dtype, rows * cols);
  allocator().Free(tmp);
}

template <typename T>
void Backend<T>::BiasActivationBackwardTo(const void* dout_v, DType dout_dtype, const void* saved,
                                          DType saved_dtype, void* dpre, DType dpre_dtype, T* dbias,
                                          int64_t rows, int64_t cols, Activation act) {
  if (dout_dtype != DTypeOf<T>::value) {
    std::fprintf(stderr, "fatal: backend %s: BiasActivationBackwardTo from %s needs an override\n",
                 name(), DTypeName(dout_dtype));
    std::abort();
  }
  const T* dout = static_cast<const T*>(dout_v);
  if (dpre_dtype == DTypeOf<T>::value) {
    BiasActivationBackward(dout, saved, saved_dtype, static_cast<T*>(dpre), dbias, rows, cols, act);
    return;
  }
  T* tmp = static_cast<T*>(allocator().Allocate(static_cast<size_t>(rows * cols) * sizeof(T)));
  BiasActivationBackward(dout, saved, saved_dtype, tmp, dbias, rows, cols, act);
  Cast(tmp, dpre, dpre_dtype, rows * cols);
  allocator().Free(tmp);
}

template <typename T>
void Backend<T>::AttentionForward(const AttentionArgs&, const void*, const void*, const void*,
                                  void*, float*) {
  std::fprintf(stderr, "fatal: backend %s has no fused attention (check has_fused_attention)\n",
               name());
  std::abort();
}

template <typename T>
void Backend<T>::AttentionBackward(const AttentionArgs&, const void*, const void*, const void*,
                                   const void*, const void*, const float*,
                                   const AttentionGrads<T>&) {
  std::fprintf(stderr, "fatal: backend %s has no fused attention (check has_fused_attention)\n",
               name());
  std::abort();
}

// The best backend for `device` with T = float (CpuBackend on kCpu; CudaBackend on kCuda, or
// nullptr when it is not compiled in or no GPU is present).
std::unique_ptr<Backend<float>> MakeBackend(Device device);

}  // namespace sf
