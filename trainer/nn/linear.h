// Dense projections y = x W^T with W stored [out, in] (PyTorch's nn.Linear layout).
//
// Forward:  y[N, out]   = x[N, in] . W^T
// Backward: dx[N, in]   = dy[N, out] . W          (written, or added when dx_beta = 1)
//           dW[out, in] += dy^T . x               (fp32 accumulation across micro-batches)
// Bias terms are not applied here: the caller fuses them into the next elementwise kernel
// (bias+activation, bias+dropout+residual, head split) and gets their gradient from it.
// Operands x and dy are passed in the context's compute dtype (see Context::AsCompute).
#pragma once

#include "trainer/nn/context.h"

namespace sf {

// A weight matrix (or a block of rows of one): fp32 master value, its compute-dtype mirror and
// its gradient; `in` is the row length.
template <typename T>
struct WeightView {
  const void* compute = nullptr;  // [out, in] in ctx.compute()
  T* grad = nullptr;              // [out, in]
  int64_t out = 0, in = 0;
};

template <typename T>
void LinearForward(Context<T>& ctx, const WeightView<T>& w, const void* x_compute, int64_t rows,
                   T* y) {
  const DType dt = ctx.compute();
  ctx.backend().Gemm(1, rows, w.out, w.in, GemmOperand{x_compute, dt, false, w.in, 0},
                     GemmOperand{w.compute, dt, true, w.in, 0, true}, y, w.out, 0, 1.0f, 0.0f);
}

// dx may be null (input needs no gradient).
template <typename T>
void LinearBackward(Context<T>& ctx, const WeightView<T>& w, const void* x_compute,
                    const void* dy_compute, int64_t rows, T* dx, float dx_beta) {
  const DType dt = ctx.compute();
  // dW[out, in] += dy^T[out, N] . x[N, in]
  ctx.backend().Gemm(1, w.out, w.in, rows, GemmOperand{dy_compute, dt, true, w.out, 0},
                     GemmOperand{x_compute, dt, false, w.in, 0}, w.grad, w.in, 0, 1.0f, 1.0f);
  if (dx) {
    ctx.backend().Gemm(1, rows, w.in, w.out, GemmOperand{dy_compute, dt, false, w.out, 0},
                       GemmOperand{w.compute, dt, false, w.in, 0, true}, dx, w.in, 0, 1.0f,
                       dx_beta);
  }
}

}  // namespace sf
