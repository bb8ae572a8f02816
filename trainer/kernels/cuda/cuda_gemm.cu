// CudaBackend::Gemm and GemmBiasAct through cuBLASLt: one plan (operation, layouts, epilogue and
// the heuristic's algorithm) per GEMM shape and form, built on first use and cached (bounded) in
// gemm_plans_.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "trainer/kernels/cuda/cuda_internal.cuh"

namespace sf::cuda {
namespace {

// The largest power of two up to 256 dividing the address and, in bytes, every leading
// dimension and batch stride: the alignment of every row start of every batch entry.
uint32_t Alignment(const void* p, int64_t elem_bytes, int64_t ld, int64_t stride) {
  uint64_t bits = reinterpret_cast<uintptr_t>(p) | 256u;
  bits |= static_cast<uint64_t>(ld * elem_bytes);
  if (stride != 0) bits |= static_cast<uint64_t>(stride * elem_bytes);
  return static_cast<uint32_t>(bits & (~bits + 1));  // lowest set bit
}

cudaDataType_t CudaType(DType t) {
  return t == DType::kBF16 ? CUDA_R_16BF : t == DType::kF16 ? CUDA_R_16F : CUDA_R_32F;
}

}  // namespace

// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: cuBLASLt's first operand is
// our B, its second our A, and a row-major stored matrix is the column-major transpose.
void CudaBackend::Gemm(int64_t batch, int64_t m, int64_t n, int64_t k, const GemmOperand& a,
                       const GemmOperand& b, float* c, int64_t ldc, int64_t stride_c, float alpha,
                       float beta) {
  const int64_t in_bytes = DTypeSize(a.dtype);
  const int64_t sa = batch > 1 ? a.batch_stride : 0, sb = batch > 1 ? b.batch_stride : 0;
  const int64_t sc = batch > 1 ? stride_c : 0;
  const GemmKey key{batch, m, n, k, a.ld, b.ld, ldc, sa, sb, sc, static_cast<int>(a.dtype),
                    a.transposed ? 1 : 0, b.transposed ? 1 : 0,
                    Alignment(a.data, in_bytes, a.ld, sa), Alignment(b.data, in_bytes, b.ld, sb),
                    Alignment(c, sizeof(float), ldc, sc)};
  const GemmPlan& plan = FindPlan(key, a.dtype, false);
  SF_CUBLAS_CHECK(cublasLtMatmul(lt_, plan.op, &alpha, b.data, plan.la, a.data, plan.lb, &beta,
                                 c, plan.lc, c, plan.lc, &plan.algo, workspace_, kWorkspace,
                                 stream_));
}

const GemmPlan& CudaBackend::FindPlan(const GemmKey& key, DType dtype, bool optional,
                                      const void* bias) {
  auto it = gemm_plans_.find(key);
  if (it == gemm_plans_.end()) {
    // Beam search meets a new shape at each decoding length and batch size: keep the cache
    // bounded (a training step uses a few dozen shapes, re-planned after a clear).
    if (gemm_plans_.size() >= kMaxGemmPlans) DropGemmPlans();
    it = gemm_plans_.emplace(key, PlanGemm(key, dtype, optional, bias)).first;
  }
  return it->second;
}

// The bias and the activation in cuBLASLt's epilogue, the result written once in c's dtype: for
// a bf16 / f16 output of same-dtype operands with no bias (the backward's input gradients, ReLU
// without bias), and for every fp32 output (cuBLASLt's bias vector has the output's dtype, so a
// low-precision output with an fp32 bias goes through an fp32 result and one cast). GELU (the
// epilogue's is the tanh approximation, ours the exact erf) and what cuBLASLt has no algorithm
// for take Backend's composition.
void CudaBackend::GemmBiasAct(int64_t m, int64_t n, int64_t k, const GemmOperand& a,
                              const GemmOperand& b, const float* bias, GemmActivation act, void* c,
                              DType c_dtype) {
  const bool low_out = c_dtype != DType::kF32;
  if (act == GemmActivation::kGelu || (low_out && c_dtype != a.dtype) || a.dtype != b.dtype) {
    Backend<float>::GemmBiasAct(m, n, k, a, b, bias, act, c, c_dtype);
    return;
  }
  // A low-precision output with a bias: the fp32 result with the bias (and ReLU), then a cast.
  float* result = static_cast<float*>(c);
  if (low_out && bias) result = static_cast<float*>(allocator().Allocate(static_cast<size_t>(m * n) * sizeof(float)));
  const DType out_dtype = result == c ? c_dtype : DType::kF32;
  const int64_t in_bytes = DTypeSize(a.dtype);
  const cublasLtEpilogue_t epilogue =
      act == GemmActivation::kRelu ? (bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU)
                                   : (bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT);
  GemmKey key{1, m, n, k, a.ld, b.ld, n, 0, 0, 0, static_cast<int>(a.dtype), a.transposed ? 1 : 0,
              b.transposed ? 1 : 0, Alignment(a.data, in_bytes, a.ld, 0),
              Alignment(b.data, in_bytes, b.ld, 0),
              Alignment(result, DTypeSize(out_dtype), n, 0)};
  key.out_dtype = DTypeCode(out_dtype);
  key.epilogue = static_cast<int>(epilogue);
  key.align_bias = bias ? Alignment(bias, sizeof(float), 0, 0) : 0;
  const GemmPlan& plan = FindPlan(key, a.dtype, true, bias);
  if (plan.op == nullptr) {
    if (result != c) allocator().Free(result);
    Backend<float>::GemmBiasAct(m, n, k, a, b, bias, act, c, c_dtype);
    return;
  }
  if (bias)
    SF_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                   sizeof(bias)));
  const float alpha = 1.0f, beta = 0.0f;
  SF_CUBLAS_CHECK(cublasLtMatmul(lt_, plan.op, &alpha, b.data, plan.la, a.data, plan.lb, &beta,
                                 result, plan.lc, result, plan.lc, &plan.algo, workspace_,
                                 kWorkspace, stream_));
  if (result != c) {
    Cast(result, c, c_dtype, m * n);
    allocator().Free(result);
  }
}

void CudaBackend::DropGemmPlans() {
  for (auto& [key, plan] : gemm_plans_) {
    if (plan.op == nullptr) continue;  // a form cuBLASLt has no algorithm for
    cublasLtMatrixLayoutDestroy(plan.la);
    cublasLtMatrixLayoutDestroy(plan.lb);
    cublasLtMatrixLayoutDestroy(plan.lc);
    cublasLtMatmulDescDestroy(plan.op);
  }
  gemm_plans_.clear();
}

// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: cuBLASLt's first operand is
// our B, its second our A, and a row-major stored matrix is the column-major transpose.
// bf16/f16 operands run on tensor cores with fp32 accumulation (CUBLAS_COMPUTE_32F); fp32
// operands are computed in full fp32 (no TF32), so fp32 runs match the CPU closely.
GemmPlan CudaBackend::PlanGemm(const GemmKey& key, DType dtype, bool optional, const void* bias) {
  GemmPlan plan;
  const cudaDataType_t dt = CudaType(dtype);
  const bool ta = key.ta != 0, tb = key.tb != 0;
  SF_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t opa = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opb = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  SF_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof(opa)));
  SF_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof(opb)));
  // Stored column-major shapes: our B is (n x k) unless transposed (k x n); our A is (k x m)
  // unless transposed (m x k); C^T is n x m.
  SF_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.la, dt, tb ? key.k : key.n, tb ? key.n : key.k, key.ldb));
  SF_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.lb, dt, ta ? key.m : key.k, ta ? key.k : key.m, key.lda));
  const DType out = key.out_dtype == 1 ? DType::kBF16 : key.out_dtype == 2 ? DType::kF16 : DType::kF32;
  SF_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.lc, CudaType(out), key.n, key.m, key.ldc));
  if (key.epilogue != 0) {
    const auto epilogue = static_cast<cublasLtEpilogue_t>(key.epilogue);
    SF_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
  }
  if (bias)
    SF_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  if (key.batch > 1) {
    const int32_t count = static_cast<int32_t>(key.batch);
    for (auto [layout, stride] : {std::pair{plan.la, key.sb}, std::pair{plan.lb, key.sa},
                                  std::pair{plan.lc, key.sc}}) {
      SF_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
      SF_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
    }
  }
  cublasLtMatmulPreference_t pref;
  SF_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  SF_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &kWorkspace, sizeof(kWorkspace)));
  // cuBLASLt's A is our B and its B our A; C and D are our c.
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> aligns[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_b},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_a},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_c},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_c}};
  for (const auto& [attr, bytes] : aligns) {
    SF_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &bytes, sizeof(bytes)));
  }
  cublasLtMatmulHeuristicResult_t heuristic;
  int found = 0;
  const cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(lt_, plan.op, plan.la, plan.lb, plan.lc, plan.lc,
                                                           pref, 1, &heuristic, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if ((hs != CUBLAS_STATUS_SUCCESS || found == 0) && optional) {
    cublasLtMatrixLayoutDestroy(plan.la);
    cublasLtMatrixLayoutDestroy(plan.lb);
    cublasLtMatrixLayoutDestroy(plan.lc);
    cublasLtMatmulDescDestroy(plan.op);
    return GemmPlan{};
  }
  if (hs != CUBLAS_STATUS_SUCCESS || found == 0) {
    // What the caller asked for, so the bad call can be found (a kernel cannot fail otherwise).
    std::fprintf(stderr,
                 "cuBLASLt has no algorithm (status %d) for batch %lld of %lldx%lldx%lld, "
                 "transposed %d/%d, ld %lld/%lld/%lld, strides %lld/%lld/%lld, alignment %u/%u/%u\n",
                 static_cast<int>(hs), static_cast<long long>(key.batch), static_cast<long long>(key.m),
                 static_cast<long long>(key.n), static_cast<long long>(key.k), key.ta, key.tb,
                 static_cast<long long>(key.lda), static_cast<long long>(key.ldb), static_cast<long long>(key.ldc),
                 static_cast<long long>(key.sa), static_cast<long long>(key.sb), static_cast<long long>(key.sc),
                 key.align_a, key.align_b, key.align_c);
    std::abort();
  }
  plan.algo = heuristic.algo;
  return plan;
}

}  // namespace sf::cuda
