// The output projection and its cross-entropy in one pass over blocks of rows (issue 48 item 4).
//
// ProjectWithLossGradient computes, for the rows of a training micro-batch,
//   logits[rows, V] = y[rows, C] . W^T        (W [V, C], a weight in the compute dtype)
//   the label-smoothed loss, the plain NLL, the token count, each row's log-sum-exp (lse), and
//   the loss gradient dlogits[rows, V] (unscaled, in dlogits_dtype)
// with exactly the arithmetic of one Backend::Gemm over every row followed by one
// Backend::CrossEntropyForwardBackward: the rows are independent, so a block of them at a time
// gives each row the same products and the same loss pass. What changes is where the fp32
// logits live. Whole, they are rows x V x 4 bytes (131 MB for 4,096 tokens and 8,000 words; four
// times that for a 32,000-word vocabulary), held until the loss pass has read them. By blocks
// they fill a buffer of about kLogitBlockBytes, and the model's peak memory loses the rest. The
// block is sized for the GEMM, not for a cache: on a Zen 5 (docs/performance-cpu.md) the loss
// pass was no faster reading a 2 MiB block from the caches (it is bound by its exp), and the
// logits GEMM ran at 0.97 of the reference rate over 64-row blocks, 1.09 over 256-row blocks and
// 1.12 over all 4,096 rows; 8 MiB (256 rows at 8,000 words) keeps nearly all of the memory saving.
//
// Rows per block (LogitBlockRows): `requested` when > 0 (tests, the bench's comparison);
// otherwise, on a backend whose memory the host reads (the CPU), as many rows as fit
// kLogitBlockBytes, a multiple of 16 and at least 16; on a device (a GPU) every row in one block,
// since one large GEMM suits it best and its memory is not a cache the block would stay in.
//
// With a bias [V] (T; the LSTM's and ConvS2S's untied output layers) the logits are y W^T + bias
// (the GEMM's epilogue), and `dbias` (planned [V] and zeroed here) receives the column sums of
// the loss gradient while it is still fp32 in the block, before it is rounded: the bias's
// gradient, unscaled like dlogits (the caller's Backward multiplies by the loss scale). The
// block then takes the loss gradient in place and one cast into dlogits, all in the caches.
//
// The block's logits are left in `logits` (resized to [block rows, V]): after the call it holds
// the last block's rows only, unless every row fitted one block. The loss statistics are the sums
// of the blocks' (double; the per-block order is the kernel's, as for one call).
#pragma once

#include <algorithm>
#include <cstdint>

#include "trainer/nn/context.h"

namespace sf {

inline constexpr int64_t kLogitBlockBytes = int64_t{8} << 20;

template <typename T>
int64_t LogitBlockRows(const Backend<T>& backend, int64_t rows, int64_t vocab, int64_t requested) {
  if (requested > 0) return std::min(rows, requested);
  if (!backend.host_accessible()) return rows;
  const int64_t fit = kLogitBlockBytes / (vocab * static_cast<int64_t>(sizeof(T)));
  return std::min(rows, std::max<int64_t>(16, fit / 16 * 16));
}

template <typename T>
CrossEntropyStats ProjectWithLossGradient(Context<T>& ctx, const void* y_compute,
                                          const void* w_compute, int64_t rows, int64_t C,
                                          int64_t V, const int32_t* targets, float label_smoothing,
                                          int32_t pad, int64_t requested_block_rows,
                                          Tensor& logits, T* lse, void* dlogits,
                                          DType dlogits_dtype, const T* bias = nullptr,
                                          Tensor* dbias = nullptr) {
  Backend<T>& be = ctx.backend();
  const DType cdt = ctx.compute();
  const int64_t block = LogitBlockRows(be, rows, V, requested_block_rows);
  ctx.Plan(logits, {block, V}, DTypeOf<T>::value);
  const char* y = static_cast<const char*>(y_compute);
  char* dl = static_cast<char*>(dlogits);
  const int64_t ysize = DTypeSize(cdt), dsize = DTypeSize(dlogits_dtype);
  if (bias) {
    ctx.Plan(*dbias, {V}, DTypeOf<T>::value);
    dbias->ZeroFill();
  }
  CrossEntropyStats total;
  for (int64_t r0 = 0; r0 < rows; r0 += block) {
    const int64_t n = std::min(block, rows - r0);
    const GemmOperand a{y + r0 * C * ysize, cdt, false, C, 0};
    const GemmOperand w{w_compute, cdt, true, C, 0, true};
    T* z = logits.data<T>();
    CrossEntropyStats s;
    if (!bias) {
      be.Gemm(1, n, V, C, a, w, z, V, 0, 1.0f, 0.0f);
      s = be.CrossEntropyForwardBackward(z, targets + r0, lse + r0, dl + r0 * V * dsize,
                                         dlogits_dtype, n, V, label_smoothing, pad, 1.0f);
    } else {
      be.GemmBiasAct(n, V, C, a, w, bias, GemmActivation::kNone, z, DTypeOf<T>::value);
      s = be.CrossEntropyForwardBackward(z, targets + r0, lse + r0, z, DTypeOf<T>::value, n, V,
                                         label_smoothing, pad, 1.0f);
      be.ColumnSum(z, dbias->data<T>(), n, V);
      be.Cast(z, dl + r0 * V * dsize, dlogits_dtype, n * V);
    }
    total.loss += s.loss;
    total.nll += s.nll;
    total.tokens += s.tokens;
  }
  return total;
}

}  // namespace sf
