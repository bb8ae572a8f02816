#include "trainer/kernels/backend.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "trainer/kernels/cpu/cpu_backend.h"

namespace sf {
namespace {

// Blocks of a fixed size, summed in parallel and then in block order: the result depends on n
// alone, not on the thread count or the order threads finish (an OpenMP reduction combines
// its partial sums in whatever order the threads end, which differs run to run).
template <typename T>
VectorStats SumSquaresImpl(const T* x, int64_t n) {
  constexpr int64_t kBlock = int64_t{1} << 16;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  thread_local std::vector<double> partial;  // reused: the step loop allocates nothing
  partial.assign(static_cast<size_t>(blocks), 0.0);
  double* sums = partial.data();
#pragma omp parallel for schedule(static) if (blocks > 1)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t end = std::min(n, (b + 1) * kBlock);
    double acc = 0;
    for (int64_t i = b * kBlock; i < end; ++i) {
      const double v = static_cast<double>(x[i]);
      acc += v * v;
    }
    sums[b] = acc;
  }
  double acc = 0;
  for (int64_t b = 0; b < blocks; ++b) acc += sums[b];
  // The square of a non-finite element is non-finite and stays so through the sum; the square
  // of the largest finite float fits a double.
  return VectorStats{acc, !std::isfinite(acc)};
}

template <typename Fn>
void ForEachChunk(const OptimizerUpdate& u, Fn&& fn) {
#pragma omp parallel for schedule(dynamic, 1) if (u.num_chunks > 1)
  for (int64_t c = 0; c < u.num_chunks; ++c) {
    const ParamChunk chunk = u.chunks[c];
    fn(chunk.begin, chunk.end, chunk.decay != 0);
  }
}

template <typename T>
void BeamScoresImpl(const T* logits, const float* base, const BeamScoresArgs& a, float* top_scores,
                    int32_t* top_tokens, float* eos_scores) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  struct Cand {
    float score;
    int32_t token;
  };
  // Heap order: the worst kept candidate on top (lower score, or equal score and higher token).
  auto better = [](const Cand& x, const Cand& y) {
    return x.score > y.score || (x.score == y.score && x.token < y.token);
  };
#pragma omp parallel for schedule(static) if (a.rows > 1)
  for (int64_t r = 0; r < a.rows; ++r) {
    const T* z = logits + r * a.vocab;
    float mx = kNegInf;
    for (int64_t v = 0; v < a.vocab; ++v) mx = std::max(mx, static_cast<float>(z[v]));
    double sum = 0;
    for (int64_t v = 0; v < a.vocab; ++v) sum += std::exp(static_cast<double>(static_cast<float>(z[v]) - mx));
    const float lse = mx + static_cast<float>(std::log(sum));
    const float b = base[r];
    std::vector<Cand> top;
    top.reserve(static_cast<size_t>(a.k));
    for (int64_t v = 0; v < a.vocab && a.k > 0; ++v) {
      if (v == a.banned[0] || v == a.banned[1]) continue;
      const float lp = static_cast<float>(z[v]) - lse;
      const Cand c{b + lp, static_cast<int32_t>(v)};
      if (!(c.score > kNegInf)) continue;  // -inf (a banned or impossible token) and NaN
      if (static_cast<int64_t>(top.size()) < a.k) {
        top.push_back(c);
        std::push_heap(top.begin(), top.end(), better);
      } else if (better(c, top.front())) {
        std::pop_heap(top.begin(), top.end(), better);
        top.back() = c;
        std::push_heap(top.begin(), top.end(), better);
      }
    }
    std::sort(top.begin(), top.end(), better);
    for (int64_t i = 0; i < a.k; ++i) {
      const bool have = i < static_cast<int64_t>(top.size());
      top_scores[r * a.k + i] = have ? top[i].score : kNegInf;
      top_tokens[r * a.k + i] = have ? top[i].token : -1;
    }
    eos_scores[r] = b + (static_cast<float>(z[a.eos]) - lse);
  }
}

}  // namespace

void BeamScoresOnHost(const float* logits, const float* base, const BeamScoresArgs& args,
                      float* top_scores, int32_t* top_tokens, float* eos_scores) {
  BeamScoresImpl(logits, base, args, top_scores, top_tokens, eos_scores);
}
void BeamScoresOnHost(const double* logits, const float* base, const BeamScoresArgs& args,
                      float* top_scores, int32_t* top_tokens, float* eos_scores) {
  BeamScoresImpl(logits, base, args, top_scores, top_tokens, eos_scores);
}

VectorStats SumSquaresOnHost(const float* x, int64_t n) { return SumSquaresImpl(x, n); }
VectorStats SumSquaresOnHost(const double* x, int64_t n) { return SumSquaresImpl(x, n); }

// Compiled with -ffp-contract=off (trainer/CMakeLists.txt): the element functions place their
// own fused multiply-adds.
void ApplyOptimizerUpdateOnHost(const OptimizerUpdate& u) {
  const UpdateScalars& s = u.scalars;
  float* __restrict p = u.values;
  const float* __restrict g = u.grads;
  float* __restrict m = u.state[0];
  float* __restrict v = u.state[1];
  const float gf = u.grad_factor;  // x * 1.0f is x: no separate unscaled loop needed
  // The chunk's mirror, while its values are in cache.
  auto mirror = [&](int64_t b, int64_t e) {
    if (u.mirror)
      StoreFloats(p + b, static_cast<char*>(u.mirror) + b * DTypeSize(u.mirror_dtype),
                  u.mirror_dtype, e - b);
  };
  switch (u.rule) {
    case UpdateRule::kAdamW:
      ForEachChunk(u, [&](int64_t b, int64_t e, bool decay) {
#pragma omp simd
        for (int64_t i = b; i < e; ++i) AdamWElement(s, decay, p[i], g[i] * gf, m[i], v[i]);
        mirror(b, e);
      });
      break;
    case UpdateRule::kRAdam:
      ForEachChunk(u, [&](int64_t b, int64_t e, bool decay) {
        if (s.flag) {
#pragma omp simd
          for (int64_t i = b; i < e; ++i) RAdamStep<true>(s, decay, p[i], g[i] * gf, m[i], v[i]);
        } else {
#pragma omp simd
          for (int64_t i = b; i < e; ++i) RAdamStep<false>(s, decay, p[i], g[i] * gf, m[i], v[i]);
        }
        mirror(b, e);
      });
      break;
    case UpdateRule::kSgd:
      ForEachChunk(u, [&](int64_t b, int64_t e, bool decay) {
        float unused = 0;
        for (int64_t i = b; i < e; ++i) SgdElement(s, decay, p[i], g[i] * gf, m ? m[i] : unused);
        mirror(b, e);
      });
      break;
  }
}

std::unique_ptr<Backend<float>> MakeBackend(Device device) {
  if (device == Device::kCpu) return std::make_unique<CpuBackend>();
  return nullptr;  // the CUDA backend is created through MakeCudaBackend() (cuda_backend.h)
}

}  // namespace sf
