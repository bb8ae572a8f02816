// The CPU's fused attention builds side by side (trainer/kernels/cpu/attention_kernels.h): each
// build this CPU runs — AVX2, AVX-512 (fp32 tile products), and for bf16 AVX512-BF16 (vdpbf16ps)
// and AMX — on the same inputs, forward and backward, for a few shapes (translation batches of
// 32 tokens and long sequences). Prints ms per call and the attention GFLOP/s of each.
//
//   build/bench/attention_bench [--threads N] [--reps N] [--dropout P]
#include <omp.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "common/command_line.h"
#include "trainer/core/cpu_features.h"
#include "trainer/core/dtype.h"
#include "trainer/kernels/cpu/attention_kernels.h"

namespace {

using Forward = decltype(&sf::portable::FusedAttentionForward);
using Backward = decltype(&sf::portable::FusedAttentionBackward);

struct Build {
  const char* name;
  Forward forward;
  Backward backward;
  bool runs;
};

double Seconds(const std::function<void()>& fn, int reps) {
  fn();  // warm: scratch grown, pages touched
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, reps = 10;
  std::string only_build;
  int64_t only_t = 0;
  float dropout = 0.1f;
  CLI::App app("The fused attention builds of this CPU, side by side.", "attention_bench");
  sf::cmdline::UseDefaults(app);
  app.add_option("--threads", threads, "OpenMP threads")->check(sf::cmdline::AtLeast(1));
  app.add_option("--reps", reps, "timed calls per figure")->check(sf::cmdline::AtLeast(1));
  app.add_option("--build", only_build, "run only this build (e.g. avx512-bf16dot), for profiling");
  app.add_option("--seq", only_t, "run only the shapes of this sequence length (32, 256, 1024)");
  app.add_option("--dropout", dropout, "attention dropout (0 for none)")->check(CLI::Range(0.0f, 0.9f));
  if (auto rc = sf::cmdline::Parse(app, argc, argv)) return *rc;
  omp_set_num_threads(threads);
  const bool avx512 = sf::cpu::HasAvx512();
  const std::vector<Build> builds = {
      {"avx2-fp32", sf::portable::FusedAttentionForward, sf::portable::FusedAttentionBackward,
       true},
      {"avx512-fp32", sf::avx512::FusedAttentionForward, sf::avx512::FusedAttentionBackward,
       avx512},
      {"avx512-bf16dot", sf::avx512_bf16::FusedAttentionForward,
       sf::avx512_bf16::FusedAttentionBackward, avx512 && sf::cpu::HasAvx512Bf16()},
      {"amx", sf::amx::FusedAttentionForward, sf::amx::FusedAttentionBackward,
       sf::cpu::HasAmxBf16() && sf::cpu::EnableAmx()},
  };
  struct ShapeCase {
    int64_t batch, heads, t, d;
    bool causal;
  };
  const ShapeCase shapes[] = {
      {128, 8, 32, 64, false}, {16, 8, 256, 64, false}, {4, 8, 1024, 64, true}};
  std::printf("threads %d, reps %d, bf16 inputs, dropout %g\n", threads, reps, dropout);
  std::printf("%-26s %-16s %10s %10s %12s\n", "shape (B H T D)", "build", "fwd ms", "bwd ms",
              "fwd+bwd GF/s");
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const ShapeCase& sc : shapes) {
    if (only_t != 0 && sc.t != only_t) continue;
    const int64_t rows = sc.batch * sc.t, width = sc.heads * sc.d;
    std::vector<uint16_t> q(rows * width), k(rows * width), v(rows * width), dout(rows * width),
        out(rows * width);
    for (auto* x : {&q, &k, &v, &dout})
      for (uint16_t& e : *x) e = sf::FloatToBf16(normal(rng));
    std::vector<float> lse(sc.batch * sc.heads * sc.t);
    std::vector<uint16_t> dq(rows * width), dk(rows * width), dv(rows * width);
    sf::AttentionArgs a;
    a.batch = sc.batch, a.heads = sc.heads, a.tq = sc.t, a.tk = sc.t, a.head_dim = sc.d;
    a.ldq = a.ldk = a.ldv = a.ldo = width;
    a.causal = sc.causal;
    a.scale = 1.0f / std::sqrt(static_cast<float>(sc.d));
    a.dropout = dropout;
    a.dtype = sf::DType::kBF16;
    sf::AttentionGrads<float> g;
    g.dq = dq.data(), g.dk = dk.data(), g.dv = dv.data(), g.dtype = sf::DType::kBF16;
    // Two products forward (S, O), four backward (S again, dP, dV, dK, dQ: five), 2 flops each.
    const double causal = sc.causal ? 0.5 : 1.0;
    const double flops = 2.0 * sc.batch * sc.heads * sc.t * sc.t * sc.d * (2 + 5) * causal;
    char label[64];
    std::snprintf(label, sizeof label, "%ld %ld %ld %ld%s", static_cast<long>(sc.batch),
                  static_cast<long>(sc.heads), static_cast<long>(sc.t), static_cast<long>(sc.d),
                  sc.causal ? " causal" : "");
    for (const Build& b : builds) {
      if (!b.runs || (!only_build.empty() && only_build != b.name)) continue;
      const double f = Seconds(
          [&] { b.forward(a, q.data(), k.data(), v.data(), out.data(), lse.data()); }, reps);
      const double w = Seconds(
          [&] {
            b.backward(a, q.data(), k.data(), v.data(), out.data(), dout.data(), lse.data(), g);
          },
          reps);
      std::printf("%-26s %-16s %10.3f %10.3f %12.1f\n", label, b.name, f * 1e3, w * 1e3,
                  flops / (f + w) / 1e9);
    }
  }
  return 0;
}
