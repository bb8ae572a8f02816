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

// y[N, out] = act(x . W^T + bias) stored as y_dtype (T, or the compute dtype: the next GEMM's
// operand), bias and activation applied in the GEMM's epilogue (Backend::GemmBiasAct). bias
// may be null.
template <typename T>
void LinearBiasActForward(Context<T>& ctx, const WeightView<T>& w, const void* x_compute,
                          int64_t rows, const T* bias, GemmActivation act, void* y, DType y_dtype) {
  const DType dt = ctx.compute();
  ctx.backend().GemmBiasAct(rows, w.out, w.in, GemmOperand{x_compute, dt, false, w.in, 0},
                            GemmOperand{w.compute, dt, true, w.in, 0, true}, bias, act, y, y_dtype);
}

// dW[out, in] += dy^T[out, N] . x[N, in]  (fp32 accumulation across micro-batches).
template <typename T>
void LinearWeightGrad(Context<T>& ctx, const WeightView<T>& w, const void* x_compute,
                      const void* dy_compute, int64_t rows) {
  const DType dt = ctx.compute();
  ctx.backend().Gemm(1, w.out, w.in, rows, GemmOperand{dy_compute, dt, true, w.out, 0},
                     GemmOperand{x_compute, dt, false, w.in, 0}, w.grad, w.in, 0, 1.0f, 1.0f);
}

// dx[N, in] = dy . W, stored as dx_dtype (T, or the compute dtype when dx is the operand of the
// next GEMM or of fused attention).
template <typename T>
void LinearInputGradTo(Context<T>& ctx, const WeightView<T>& w, const void* dy_compute,
                       int64_t rows, void* dx, DType dx_dtype) {
  const DType dt = ctx.compute();
  ctx.backend().GemmBiasAct(rows, w.in, w.out, GemmOperand{dy_compute, dt, false, w.out, 0},
                            GemmOperand{w.compute, dt, false, w.in, 0, true}, nullptr,
                            GemmActivation::kNone, dx, dx_dtype);
}

// dx may be null (input needs no gradient).
template <typename T>
void LinearBackward(Context<T>& ctx, const WeightView<T>& w, const void* x_compute,
                    const void* dy_compute, int64_t rows, T* dx, float dx_beta) {
  const DType dt = ctx.compute();
  LinearWeightGrad(ctx, w, x_compute, dy_compute, rows);
  if (dx) {
    ctx.backend().Gemm(1, rows, w.in, w.out, GemmOperand{dy_compute, dt, false, w.out, 0},
                       GemmOperand{w.compute, dt, false, w.in, 0, true}, dx, w.in, 0, 1.0f,
                       dx_beta);
  }
}

}  // namespace sf
