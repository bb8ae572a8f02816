// The weight-gradient GEMM in bf16, internal to CpuBackend: one contract, two builds.
//
//   C[m, n] = beta * C + A^T B,   A stored [k, m] (row stride lda), B stored [k, n] (row stride
//   ldb), both bf16; C fp32 with row stride ldc; beta 0 or 1.
//
// That is dW[out, in] (+)= dy^T x with the tokens as the reduction: both operands arrive with the
// tokens as rows. oneDNN 2.6 takes this form (A as a transposed view) at 0.8-0.87 of its rate on
// plain operands on a Zen 5 and 0.6-0.87 on AMX hosts (docs/performance-cpu.md): it re-lays the
// transposed A inside every call. Here both operands are packed once per block of tokens into
// token pairs ("words": two bf16 of consecutive tokens, the layout both bf16 dot-product units
// multiply), in blocks that stay in L2:
//   avx512bf16 (gemm_avx512_bf16.cc, vdpbf16ps): A's panels hold (a[2p][i], a[2p+1][i]) per
//     column i, broadcast 32 bits at a time; B's hold (b[2p][j], b[2p+1][j]) for 32 columns, two
//     vectors; a 14 x 32 register tile.
//   amx (gemm_amx_bf16.cc, AMX tiles): A's tiles are 16 rows of C by 16 token pairs (the packing
//     transposes the row-pair interleave, 16 x 16 words through registers), B's tiles 16 token
//     pairs by 16 columns; 2 x 2 tiles of C stay in tile registers over a block of tokens.
//
// Numerics (both): every product of two bf16 values is exact in fp32 and summed in fp32 (bf16
// denormals flush to zero, as in oneDNN's bf16 kernels); the order of the sums depends only on k
// (pairs in order within fixed blocks of tokens, blocks in order), never on the thread count, so
// results are the same on every run and for any team size.
//
// Threads: the calling OpenMP team's size; columns (or rows, when m > n) split between them.
// Call avx512bf16::GemmTn only where cpu::HasAvx512Bf16(), amx::GemmTn only where
// cpu::HasAmxBf16() and cpu::EnableAmx() succeeded.
#pragma once

#include <cstdint>

namespace sf::cpu_internal {
namespace avx512bf16 {
void GemmTn(int64_t m, int64_t n, int64_t k, const uint16_t* a, int64_t lda, const uint16_t* b,
            int64_t ldb, float* c, int64_t ldc, float beta);
}  // namespace avx512bf16
namespace amx {
void GemmTn(int64_t m, int64_t n, int64_t k, const uint16_t* a, int64_t lda, const uint16_t* b,
            int64_t ldb, float* c, int64_t ldc, float beta);
}  // namespace amx
}  // namespace sf::cpu_internal
