// OneDnnGemm: batched, strided C = alpha*op(A)*op(B) + beta*C on oneDNN matmul, with one cached
// primitive per distinct (shape, strides, dtypes, alpha, beta, epilogue). Internal to CpuBackend.
// The epilogue (RunBiasAct) adds a bias row, applies ReLU or GELU and stores C as fp32, bf16 or
// f16 inside the GEMM's own output loop (oneDNN post-ops), so no separate pass reads C back.
// Transposition is expressed through the memory descriptors' strides (no copies). Not
// thread-safe (one per CpuBackend).
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "trainer/kernels/backend.h"

namespace sf {

class OneDnnGemm {
 public:
  OneDnnGemm();
  ~OneDnnGemm();
  // Pre-packing of constant operands; SF_GEMM_PREPACK=0 in the environment turns it off (for
  // A/B measurements).
  static bool PrepackEnabled();
  OneDnnGemm(const OneDnnGemm&) = delete;
  OneDnnGemm& operator=(const OneDnnGemm&) = delete;
  void Run(int64_t batch, int64_t m, int64_t n, int64_t k, const GemmOperand& a,
           const GemmOperand& b, float* c, int64_t ldc, int64_t stride_c, float alpha,
           float beta);
  // C[m, n] (dense, row stride n, dtype c_dtype) = act(op(A) op(B) + bias) in one primitive.
  // False when oneDNN has none for these types on this CPU (nothing was written; the caller
  // composes it from Run and elementwise kernels).
  bool RunBiasAct(int64_t m, int64_t n, int64_t k, const GemmOperand& a, const GemmOperand& b,
                  const float* bias, GemmActivation act, void* c, DType c_dtype);
  int64_t primitives_created() const { return created_; }
  // Packed copies of constant operands are stale: re-pack on next use.
  void WeightsChanged() { ++weights_version_; }
  int64_t packs_done() const { return packs_; }
  // Packed copies of constant operands held (at most one per operand and layout).
  int64_t packed_copies() const;

 private:
  // What happens to C after the products (RunBiasAct; Run uses the default: fp32, no bias).
  struct Epilogue {
    bool bias = false;
    GemmActivation act = GemmActivation::kNone;
    DType c_dtype = DType::kF32;
  };
  struct Key {
    int64_t v[19];
    bool operator==(const Key& o) const;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const;
  };
  struct Entry {
    dnnl::matmul prim;
    dnnl::memory::desc a, b, c;
    dnnl::memory am, bm, cm, biasm;  // reused: only their data handles change per call
    bool packed = false;      // B is a constant operand in oneDNN's preferred layout
    dnnl::memory::desc b_packed;
    size_t scratch_bytes = 0;
    bool ok = false;
  };
  Entry& Get(int64_t batch, int64_t m, int64_t n, int64_t k, const GemmOperand& a,
             const GemmOperand& b, int64_t ldc, int64_t stride_c, float alpha, float beta,
             DType dt, const Epilogue& epilogue);
  void Execute(Entry& e, const void* a, const void* b, void* c, const float* bias);

  // A constant operand reordered into a primitive's preferred weights layout. One copy per
  // (operand, source layout, packed layout): primitives for other batch sizes m of the same
  // GEMM share it when their weights layout is the same (it is in practice: it depends on k, n
  // and the ISA, not on m), so variable batch shapes do not multiply the packed weights (they
  // did: one copy of every weight per distinct m).
  struct Packed {
    dnnl::memory::desc src_desc, packed_desc;
    void* buffer = nullptr;
    dnnl::memory src, dst;
    dnnl::reorder reorder;
    int64_t version = -1;
  };
  const void* PackedB(Entry& e, const void* data);

  dnnl::engine engine_;
  dnnl::stream stream_;
  std::unordered_map<Key, Entry, KeyHash> cache_;
  std::vector<float> widen_a_, widen_b_;  // f16 / bf16 fallback scratch
  // One scratchpad shared by all primitives (user scratchpad mode), grown to the largest any
  // primitive asks for, so executions never allocate it themselves.
  void* scratch_ = nullptr;
  size_t scratch_size_ = 0;
  dnnl::memory scratch_mem_;
  int64_t created_ = 0;
  int64_t packs_ = 0;
  int64_t weights_version_ = 0;
  std::unordered_map<const void*, std::vector<Packed>> packed_;  // by operand address
};

}  // namespace sf
