// The weight-gradient GEMM on AVX512_BF16 (vdpbf16ps), internal to CpuBackend.
//
//   C[m, n] = beta * C + A^T B,   A stored [k, m] (row stride lda), B stored [k, n] (row stride
//   ldb), both bf16; C fp32 with row stride ldc; beta 0 or 1.
//
// That is dW[out, in] (+)= dy^T x with the tokens as the reduction: both operands arrive with the
// tokens as rows. oneDNN 2.6 takes this form (A as a transposed view) at 0.8-0.87 of its rate on
// plain operands (docs/performance.md, Zen 5); here both operands are packed GotoBLAS-style into
// token pairs, the layout vdpbf16ps multiplies: A's panels hold (a[2p][i], a[2p+1][i]) per column
// i, broadcast 32 bits at a time; B's hold (b[2p][j], b[2p+1][j]) for 32 columns, two vectors.
// The packing is a row-pair interleave (no transpose), done in blocks that stay in L2.
//
// Numerics: every product of two bf16 values is exact in fp32 and summed in fp32 (vdpbf16ps
// flushes bf16 denormals to zero, as oneDNN's bf16 kernels do); the order of the sums depends
// only on k (pairs in order within blocks of kBlockK tokens, blocks in order), never on the
// thread count, so results are the same on every run.
//
// Threads: the calling OpenMP team's size; columns (or rows, when m > n) split between them.
// Call only where cpu::HasAvx512Bf16().
#pragma once

#include <cstdint>

namespace sf::cpu_internal::avx512bf16 {

void GemmTn(int64_t m, int64_t n, int64_t k, const uint16_t* a, int64_t lda, const uint16_t* b,
            int64_t ldb, float* c, int64_t ldc, float beta);

}  // namespace sf::cpu_internal::avx512bf16
