// GuardedBackend: the CPU backend computing on memory the host may not touch, so that the
// device-resident training path (what a GPU run does) is exercised and checked on a machine
// without a GPU.
//
// Its memory is one mmap'ed arena that is PROT_NONE except while one of the backend's ops, or a
// copy in or out, runs. So:
//   - host code that reads or writes a device buffer outside an op dies with SIGSEGV, as a
//     dereferenced device pointer does on a GPU machine;
//   - an op given a host pointer (a buffer the training loop forgot to stage) aborts with the
//     op's name, since every pointer argument must lie in the arena.
// Otherwise it computes exactly what CpuBackend computes (it forwards every op to one), and the
// multi-tensor ops run their host defaults (Backend::SumSquares, Scale, ApplyOptimizerUpdate,
// BeamScores), the same code the device path uses; so a guarded run must equal a plain CPU run.
//
// Test-only. Thread safety: one training loop, like any backend.
#pragma once

#include <sys/mman.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "trainer/core/allocator.h"
#include "trainer/kernels/backend.h"
#include "trainer/kernels/cpu/cpu_backend.h"

namespace sf::testing {

// Bump-allocated, access-guarded memory (blocks are never returned: the CachingAllocator on top
// reuses them).
class GuardedArena final : public MemoryResource {
 public:
  explicit GuardedArena(size_t reserve = size_t{4} << 30) : reserve_(reserve) {
    void* p = mmap(nullptr, reserve_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) std::abort();
    base_ = static_cast<char*>(p);
  }
  ~GuardedArena() override { munmap(base_, reserve_); }

  void* Allocate(size_t bytes) override {
    std::lock_guard<std::mutex> lock(mu_);
    const size_t size = (bytes + 4095) / 4096 * 4096;
    if (used_ + size > reserve_) return nullptr;
    char* p = base_ + used_;
    used_ += size;
    if (open_ > 0) mprotect(p, size, PROT_READ | PROT_WRITE);
    return p;
  }
  void Free(void*) override {}
  void Zero(void* ptr, size_t bytes) override {
    Window w(*this);
    std::memset(ptr, 0, bytes);
  }
  void CopyFromHost(void* dst, const void* src, size_t bytes) override {
    Window w(*this);
    std::memcpy(dst, src, bytes);
  }
  void CopyToHost(void* dst, const void* src, size_t bytes) override {
    Window w(*this);
    std::memcpy(dst, src, bytes);
  }
  bool host_accessible() const override { return false; }

  bool Contains(const void* p) const {
    const char* c = static_cast<const char*>(p);
    return c >= base_ && c < base_ + used_;
  }

  // While a Window lives, the arena is readable and writable (nested windows are fine).
  class Window {
   public:
    explicit Window(GuardedArena& a) : a_(a) {
      if (a_.open_++ == 0 && a_.used_ > 0) mprotect(a_.base_, a_.used_, PROT_READ | PROT_WRITE);
    }
    ~Window() {
      if (--a_.open_ == 0 && a_.used_ > 0) mprotect(a_.base_, a_.used_, PROT_NONE);
    }
    Window(const Window&) = delete;
    Window& operator=(const Window&) = delete;

   private:
    GuardedArena& a_;
  };

 private:
  size_t reserve_;
  char* base_ = nullptr;
  size_t used_ = 0;
  int open_ = 0;
  std::mutex mu_;
};

class GuardedBackend final : public Backend<float> {
 public:
  GuardedBackend() = default;
  const char* name() const override { return "guarded"; }
  Device device() const override { return Device::kCpu; }
  CachingAllocator& allocator() const override { return allocator_; }
  GuardedArena& arena() { return arena_; }

  void* AllocateDevice(size_t bytes) override { return allocator_.Allocate(bytes); }
  void FreeDevice(void* p) override { allocator_.Free(p); }
  void CopyToDevice(void* dst, const void* src, size_t bytes) override {
    Check("CopyToDevice", dst);
    if (arena_.Contains(src)) Fail("CopyToDevice", "a device source");
    arena_.CopyFromHost(dst, src, bytes);
  }
  void CopyToHost(void* dst, const void* src, size_t bytes) override {
    Check("CopyToHost", src);
    if (arena_.Contains(dst)) Fail("CopyToHost", "a device destination");
    arena_.CopyToHost(dst, src, bytes);
  }

  void Gemm(int64_t batch, int64_t m, int64_t n, int64_t k, const GemmOperand& a,
            const GemmOperand& b, float* c, int64_t ldc, int64_t stride_c, float alpha,
            float beta) override {
    Check("Gemm", a.data, b.data, c);
    Run([&] { inner_.Gemm(batch, m, n, k, a, b, c, ldc, stride_c, alpha, beta); });
  }
  void GemmBiasAct(int64_t m, int64_t n, int64_t k, const GemmOperand& a, const GemmOperand& b,
                   const float* bias, GemmActivation act, void* c, DType c_dtype) override {
    Check("GemmBiasAct", a.data, b.data, bias, c);
    Run([&] { inner_.GemmBiasAct(m, n, k, a, b, bias, act, c, c_dtype); });
  }
  bool has_fused_attention() const override { return inner_.has_fused_attention(); }
  void AttentionForward(const AttentionArgs& a, const void* q, const void* k, const void* v,
                        void* out, float* lse) override {
    Check("AttentionForward", q, k, v, out, lse, a.key_padding);
    Run([&] { inner_.AttentionForward(a, q, k, v, out, lse); });
  }
  void AttentionBackward(const AttentionArgs& a, const void* q, const void* k, const void* v,
                         const void* out, const void* dout, const float* lse,
                         const AttentionGrads<float>& g) override {
    Check("AttentionBackward", q, k, v, out, dout, lse, g.dq, g.dk, g.dv, g.dbias, a.key_padding);
    Run([&] { inner_.AttentionBackward(a, q, k, v, out, dout, lse, g); });
  }
  void ResidualLayerNormForward(const float* x, const float* bias, const float* residual,
                                float p, DropoutKey key, float* h, const float* gamma,
                                const float* beta, float* y, void* y_low, DType low_dtype,
                                float* mean, float* rstd, int64_t rows, int64_t cols,
                                float eps) override {
    Check("ResidualLayerNormForward", x, bias, residual, h, gamma, beta, y, y_low, mean, rstd);
    Run([&] {
      inner_.ResidualLayerNormForward(x, bias, residual, p, key, h, gamma, beta, y, y_low,
                                      low_dtype, mean, rstd, rows, cols, eps);
    });
  }
  void ResidualLayerNormBackward(const float* dy, const float* h, const float* gamma,
                                 const float* mean, const float* rstd, float* dh, void* d_branch,
                                 DType branch_dtype, float* dbias, float* dgamma, float* dbeta,
                                 float p, DropoutKey key, int64_t rows, int64_t cols) override {
    Check("ResidualLayerNormBackward", dy, h, gamma, mean, rstd, dh, d_branch, dbias, dgamma, dbeta);
    Run([&] {
      inner_.ResidualLayerNormBackward(dy, h, gamma, mean, rstd, dh, d_branch, branch_dtype, dbias,
                                       dgamma, dbeta, p, key, rows, cols);
    });
  }
  void BiasActivationBackwardTo(const void* dout, DType dout_dtype, const void* saved,
                                DType saved_dtype, void* dpre, DType dpre_dtype, float* dbias,
                                int64_t rows, int64_t cols, Activation act) override {
    Check("BiasActivationBackwardTo", dout, saved, dpre, dbias);
    Run([&] {
      inner_.BiasActivationBackwardTo(dout, dout_dtype, saved, saved_dtype, dpre, dpre_dtype, dbias,
                                      rows, cols, act);
    });
  }
  void WeightsChanged() override { inner_.WeightsChanged(); }
  void Cast(const float* x, void* y, DType to, int64_t n) override {
    Check("Cast", x, y);
    Run([&] { inner_.Cast(x, y, to, n); });
  }
  void Add(const float* x, float* y, int64_t n) override {
    Check("Add", x, y);
    Run([&] { inner_.Add(x, y, n); });
  }
  void BiasDropoutResidualForward(const float* x, const float* bias, const float* residual,
                                  float* out, int64_t rows, int64_t cols, float p,
                                  DropoutKey key) override {
    Check("BiasDropoutResidualForward", x, bias, residual, out);
    Run([&] { inner_.BiasDropoutResidualForward(x, bias, residual, out, rows, cols, p, key); });
  }
  void BiasDropoutResidualBackward(const float* dout, float* dx, float* dbias, int64_t rows,
                                   int64_t cols, float p, DropoutKey key) override {
    Check("BiasDropoutResidualBackward", dout, dx, dbias);
    Run([&] { inner_.BiasDropoutResidualBackward(dout, dx, dbias, rows, cols, p, key); });
  }
  void BiasActivationForward(const float* x, const float* bias, float* pre, void* out,
                             DType out_dtype, int64_t rows, int64_t cols,
                             Activation act) override {
    Check("BiasActivationForward", x, bias, pre, out);
    Run([&] { inner_.BiasActivationForward(x, bias, pre, out, out_dtype, rows, cols, act); });
  }
  void BiasActivationBackward(const float* dout, const void* saved, DType saved_dtype,
                              float* dpre, float* dbias, int64_t rows, int64_t cols,
                              Activation act) override {
    Check("BiasActivationBackward", dout, saved, dpre, dbias);
    Run([&] {
      inner_.BiasActivationBackward(dout, saved, saved_dtype, dpre, dbias, rows, cols, act);
    });
  }
  void LayerNormForward(const float* x, const float* gamma, const float* beta, float* y,
                        float* mean, float* rstd, int64_t rows, int64_t cols,
                        float eps) override {
    Check("LayerNormForward", x, gamma, beta, y, mean, rstd);
    Run([&] { inner_.LayerNormForward(x, gamma, beta, y, mean, rstd, rows, cols, eps); });
  }
  void LayerNormBackward(const float* dy, const float* x, const float* gamma, const float* mean,
                         const float* rstd, float* dx, float* dgamma, float* dbeta, int64_t rows,
                         int64_t cols, bool accumulate_dx) override {
    Check("LayerNormBackward", dy, x, gamma, mean, rstd, dx, dgamma, dbeta);
    Run([&] {
      inner_.LayerNormBackward(dy, x, gamma, mean, rstd, dx, dgamma, dbeta, rows, cols,
                               accumulate_dx);
    });
  }
  void SoftmaxForward(const float* scores, float* probs, void* dropped, DType dropped_dtype,
                      const uint8_t* key_padding, int64_t batch, int64_t heads, int64_t tq,
                      int64_t tk, float scale, bool causal, float p, DropoutKey key) override {
    Check("SoftmaxForward", scores, probs, dropped, key_padding);
    Run([&] {
      inner_.SoftmaxForward(scores, probs, dropped, dropped_dtype, key_padding, batch, heads, tq,
                            tk, scale, causal, p, key);
    });
  }
  void SoftmaxBackward(const float* d_dropped, const float* probs, void* dscores,
                       DType dscores_dtype, int64_t batch, int64_t heads, int64_t tq, int64_t tk,
                       float scale, float p, DropoutKey key) override {
    Check("SoftmaxBackward", d_dropped, probs, dscores);
    Run([&] {
      inner_.SoftmaxBackward(d_dropped, probs, dscores, dscores_dtype, batch, heads, tq, tk,
                             scale, p, key);
    });
  }
  void EmbeddingForward(const int32_t* tokens, const float* table, const float* pos_table,
                        const int32_t* pos_ids, float* out, int64_t rows, int64_t cols,
                        float scale) override {
    Check("EmbeddingForward", tokens, table, pos_table, pos_ids, out);
    Run([&] { inner_.EmbeddingForward(tokens, table, pos_table, pos_ids, out, rows, cols, scale); });
  }
  void EmbeddingBackward(const int32_t* tokens, const float* dout, float* dtable, int64_t rows,
                         int64_t cols, float scale, int32_t pad) override {
    Check("EmbeddingBackward", tokens, dout, dtable);
    Run([&] { inner_.EmbeddingBackward(tokens, dout, dtable, rows, cols, scale, pad); });
  }
  void SplitHeads(const float* x, const float* bias, void* out, DType out_dtype, int64_t batch,
                  int64_t time, int64_t parts, int64_t heads, int64_t head_dim) override {
    Check("SplitHeads", x, bias, out);
    Run([&] { inner_.SplitHeads(x, bias, out, out_dtype, batch, time, parts, heads, head_dim); });
  }
  void MergeHeads(const float* in, void* x, DType x_dtype, int64_t batch, int64_t time,
                  int64_t parts, int64_t heads, int64_t head_dim) override {
    Check("MergeHeads", in, x);
    Run([&] { inner_.MergeHeads(in, x, x_dtype, batch, time, parts, heads, head_dim); });
  }
  void ColumnSum(const float* x, float* sum, int64_t rows, int64_t cols) override {
    Check("ColumnSum", x, sum);
    Run([&] { inner_.ColumnSum(x, sum, rows, cols); });
  }
  void LstmCellForward(float* gates, const float* bias, const float* c_prev, float* c, float* h,
                       int64_t rows, int64_t hidden) override {
    Check("LstmCellForward", gates, bias, c_prev, c, h);
    Run([&] { inner_.LstmCellForward(gates, bias, c_prev, c, h, rows, hidden); });
  }
  void LstmCellBackward(const float* gates, const float* c_prev, const float* c, const float* dh,
                        const float* dc, float* dgates, float* dc_prev, float* dbias, int64_t rows,
                        int64_t hidden) override {
    Check("LstmCellBackward", gates, c_prev, c, dh, dc, dgates, dc_prev, dbias);
    Run([&] { inner_.LstmCellBackward(gates, c_prev, c, dh, dc, dgates, dc_prev, dbias, rows, hidden); });
  }
  void GluForward(const float* x, float* y, int64_t rows, int64_t cols) override {
    Check("GluForward", x, y);
    Run([&] { inner_.GluForward(x, y, rows, cols); });
  }
  void GluBackward(const float* x, const float* dy, float* dx, int64_t rows, int64_t cols) override {
    Check("GluBackward", x, dy, dx);
    Run([&] { inner_.GluBackward(x, dy, dx, rows, cols); });
  }
  void Conv2dForward(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s) override {
    Check("Conv2dForward", x, w, bias, y);
    Run([&] { inner_.Conv2dForward(x, w, bias, y, s); });
  }
  void Conv2dBackward(const float* x, const float* w, const float* dy, float* dx, float* dw, float* dbias,
                      const Conv2dShape& s) override {
    Check("Conv2dBackward", x, w, dy, dx, dw, dbias);
    Run([&] { inner_.Conv2dBackward(x, w, dy, dx, dw, dbias, s); });
  }
  void CtcLoss(const float* logits, const int32_t* input_lengths, const int32_t* targets,
               const int32_t* target_lengths, int64_t frames, int64_t batch, int64_t classes,
               int64_t max_target, int32_t blank, bool zero_infinity, float grad_scale,
               float* losses, float* dlogits) override {
    Check("CtcLoss", logits, input_lengths, targets, target_lengths, losses, dlogits);
    Run([&] {
      inner_.CtcLoss(logits, input_lengths, targets, target_lengths, frames, batch, classes, max_target, blank,
                     zero_infinity, grad_scale, losses, dlogits);
    });
  }
  void ScaleRowGroups(float* x, const float* factors, int64_t groups, int64_t rows_per_group,
                      int64_t cols) override {
    Check("ScaleRowGroups", x, factors);
    Run([&] { inner_.ScaleRowGroups(x, factors, groups, rows_per_group, cols); });
  }
  void WeightNormForward(const float* v, const float* g, float* w, float* norms, int64_t n, int64_t d,
                         bool columns) override {
    Check("WeightNormForward", v, g, w, norms);
    Run([&] { inner_.WeightNormForward(v, g, w, norms, n, d, columns); });
  }
  void WeightNormBackward(const float* dw, const float* v, const float* g, const float* norms, float* dv,
                          float* dg, int64_t n, int64_t d, bool columns) override {
    Check("WeightNormBackward", dw, v, g, norms, dv, dg);
    Run([&] { inner_.WeightNormBackward(dw, v, g, norms, dv, dg, n, d, columns); });
  }
  CrossEntropyStats CrossEntropyForward(const float* logits, const int32_t* targets, float* lse,
                                        int64_t rows, int64_t vocab, float eps,
                                        int32_t pad) override {
    Check("CrossEntropyForward", logits, targets, lse);
    CrossEntropyStats s;
    Run([&] { s = inner_.CrossEntropyForward(logits, targets, lse, rows, vocab, eps, pad); });
    return s;
  }
  void CrossEntropyBackward(const float* logits, const float* lse, const int32_t* targets,
                            void* dlogits, DType dlogits_dtype, int64_t rows, int64_t vocab,
                            float eps, int32_t pad, float grad_scale) override {
    Check("CrossEntropyBackward", logits, lse, targets, dlogits);
    Run([&] {
      inner_.CrossEntropyBackward(logits, lse, targets, dlogits, dlogits_dtype, rows, vocab, eps,
                                  pad, grad_scale);
    });
  }
  CrossEntropyStats CrossEntropyForwardBackward(const float* logits, const int32_t* targets,
                                                float* lse, void* dlogits, DType dlogits_dtype,
                                                int64_t rows, int64_t vocab, float eps,
                                                int32_t pad, float grad_scale) override {
    Check("CrossEntropyForwardBackward", logits, targets, lse, dlogits);
    CrossEntropyStats s;
    Run([&] {
      s = inner_.CrossEntropyForwardBackward(logits, targets, lse, dlogits, dlogits_dtype, rows,
                                             vocab, eps, pad, grad_scale);
    });
    return s;
  }
  VectorStats SumSquares(const float* x, int64_t n) override {
    Check("SumSquares", x);
    VectorStats s;
    Run([&] { s = Backend<float>::SumSquares(x, n); });
    return s;
  }
  void Scale(float* x, int64_t n, float factor) override {
    Check("Scale", x);
    Run([&] { Backend<float>::Scale(x, n, factor); });
  }
  void ApplyOptimizerUpdate(const OptimizerUpdate& u) override {
    Check("ApplyOptimizerUpdate", u.values, u.grads, u.state[0], u.state[1], u.chunks);
    Run([&] { Backend<float>::ApplyOptimizerUpdate(u); });
  }
  void BeamScores(const float* logits, const float* base, const BeamScoresArgs& args,
                  float* top_scores, int32_t* top_tokens, float* eos_scores) override {
    Check("BeamScores", logits, base, top_scores, top_tokens, eos_scores);
    Run([&] { Backend<float>::BeamScores(logits, base, args, top_scores, top_tokens, eos_scores); });
  }

  // Number of ops run so far.
  int64_t ops() const { return ops_; }

 private:
  [[noreturn]] static void Fail(const char* op, const char* what) {
    std::fprintf(stderr, "GuardedBackend: %s was given %s\n", op, what);
    std::abort();
  }
  template <typename... P>
  void Check(const char* op, const P*... ptrs) {
    auto one = [&](const void* p) {
      if (p != nullptr && !arena_.Contains(p)) Fail(op, "a host pointer");
    };
    (one(static_cast<const void*>(ptrs)), ...);
  }
  template <typename Fn>
  void Run(Fn&& fn) {
    ++ops_;
    GuardedArena::Window w(arena_);
    fn();
  }

  mutable GuardedArena arena_;
  mutable CachingAllocator allocator_{&arena_};
  CpuBackend inner_;
  int64_t ops_ = 0;
};

}  // namespace sf::testing
