// CudaBackend::BeamScores: for each row of logits, the k best next-token scores of a beam
// (log-probability plus the beam's base score, banned tokens left out) and the end-of-sequence
// score, ranked and tie-broken exactly as BeamScoresOnHost does.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "trainer/kernels/cuda/cuda_internal.cuh"

namespace sf::cuda {
namespace {

// Backend::BeamScores: one block of kThreads per row. lse as BeamScoresOnHost computes it (max,
// then Σ exp in double, tree-reduced in a fixed order), then k rounds of a block-wide arg-max,
// each over the candidates that rank after the previous round's pick (score descending, token
// ascending), so ties resolve as on the host.
__global__ void BeamScoresKernel(const float* logits, const float* base, int64_t vocab, int64_t k,
                                 int32_t ban0, int32_t ban1, int32_t eos, float* top_scores,
                                 int32_t* top_tokens, float* eos_scores) {
  __shared__ double dred[kThreads];
  __shared__ float fred[kThreads];
  __shared__ int32_t tred[kThreads];
  const int64_t r = blockIdx.x;
  const int tid = threadIdx.x;
  const float* z = logits + r * vocab;
  const float neg_inf = -INFINITY;
  float mx = neg_inf;
  for (int64_t v = tid; v < vocab; v += kThreads) mx = fmaxf(mx, z[v]);
  fred[tid] = mx;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (tid < s) fred[tid] = fmaxf(fred[tid], fred[tid + s]);
    __syncthreads();
  }
  mx = fred[0];
  double sum = 0;
  for (int64_t v = tid; v < vocab; v += kThreads) sum += exp(static_cast<double>(z[v] - mx));
  dred[tid] = sum;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (tid < s) dred[tid] += dred[tid + s];
    __syncthreads();
  }
  const float lse = mx + static_cast<float>(log(dred[0]));
  const float b = base[r];
  float prev_score = INFINITY;
  int32_t prev_token = -1;
  for (int64_t i = 0; i < k; ++i) {
    __syncthreads();  // the previous round's readers of fred/tred are done
    float best = neg_inf;
    int32_t best_token = -1;
    if (prev_token >= 0 || i == 0) {
      for (int64_t v = tid; v < vocab; v += kThreads) {
        if (v == ban0 || v == ban1) continue;
        const float sc = b + (z[v] - lse);
        if (!(sc > neg_inf)) continue;  // -inf, and NaN (as BeamScoresOnHost)
        const int32_t tv = static_cast<int32_t>(v);
        if (!(sc < prev_score || (sc == prev_score && tv > prev_token))) continue;
        if (best_token < 0 || sc > best || (sc == best && tv < best_token)) {
          best = sc;
          best_token = tv;
        }
      }
    }
    fred[tid] = best;
    tred[tid] = best_token;
    __syncthreads();
    for (int s = kThreads / 2; s > 0; s >>= 1) {
      if (tid < s) {
        const float os = fred[tid + s];
        const int32_t ot = tred[tid + s];
        if (ot >= 0 && (tred[tid] < 0 || os > fred[tid] || (os == fred[tid] && ot < tred[tid]))) {
          fred[tid] = os;
          tred[tid] = ot;
        }
      }
      __syncthreads();
    }
    prev_score = fred[0];
    prev_token = tred[0];
    if (tid == 0) {
      top_scores[r * k + i] = prev_token >= 0 ? prev_score : neg_inf;
      top_tokens[r * k + i] = prev_token;
    }
  }
  if (tid == 0) eos_scores[r] = b + (z[eos] - lse);
}

}  // namespace

void CudaBackend::BeamScores(const float* logits, const float* base, const BeamScoresArgs& args,
                             float* top_scores, int32_t* top_tokens, float* eos_scores) {
  if (args.rows > 0)
    BeamScoresKernel<<<static_cast<unsigned>(args.rows), kThreads, 0, stream_>>>(
        logits, base, args.vocab, args.k, args.banned[0], args.banned[1], args.eos, top_scores,
        top_tokens, eos_scores);
}

}  // namespace sf::cuda
