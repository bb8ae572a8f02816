// The weight-gradient GEMM, dW[out, in] += dy^T x in bf16 with the tokens as rows of both
// operands, in one process: oneDNN's matmul (A as a transposed view, C += through a sum
// post-op), the packed vdpbf16ps kernel and, on a CPU with AMX, the packed AMX kernel
// (trainer/kernels/cpu/gemm_tn.h). The shapes are transformer_base's projections at --tokens
// tokens per step. Prints GFLOP/s of each (best of --reps, alternating) and their ratios to
// oneDNN; the results of the packed kernels are checked against each other.
//
//   build/bench/gemm_tn_bench [--threads N] [--reps N] [--tokens N] [--vocab N]
#include <omp.h>

#include <algorithm>
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
#include "trainer/kernels/cpu/gemm_tn.h"
#include "trainer/kernels/cpu/gemm_onednn.h"

namespace {

double Seconds(const std::function<void()>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, reps = 10;
  int64_t tokens = 4096, vocab = 8000;
  CLI::App app("The weight-gradient GEMM: oneDNN and the packed bf16 kernels.", "gemm_tn_bench");
  app.add_option("--threads", threads, "OpenMP threads")->check(sf::cmdline::AtLeast(1));
  app.add_option("--reps", reps, "timed calls per figure")->check(sf::cmdline::AtLeast(1));
  app.add_option("--tokens", tokens, "tokens per step (the reduction)")
      ->check(sf::cmdline::AtLeast(2));
  app.add_option("--vocab", vocab, "output vocabulary")->check(sf::cmdline::AtLeast(1));
  if (auto rc = sf::cmdline::Parse(app, argc, argv)) return *rc;
  if (!sf::cpu::HasAvx512Bf16()) {
    std::printf("this CPU has no AVX512_BF16: the packed kernel does not run here\n");
    return 0;
  }
  omp_set_num_threads(threads);
  const bool amx = sf::cpu::HasAmxBf16() && sf::cpu::EnableAmx();
  struct Shape {
    const char* name;
    int64_t out, in;
  };
  const Shape shapes[] = {{"qkv", 1536, 512},
                          {"attention out", 512, 512},
                          {"ffn in", 2048, 512},
                          {"ffn out", 512, 2048},
                          {"vocabulary", vocab, 512}};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  sf::OneDnnGemm onednn;
  std::printf("%d threads, %lld tokens; GFLOP/s, best of %d\n", threads,
              static_cast<long long>(tokens), reps);
  std::printf("%-14s %6s %6s  %8s %8s %8s  %s\n", "shape", "out", "in", "oneDNN", "packed",
              amx ? "AMX" : "", amx ? "ratios" : "ratio");
  for (const Shape& s : shapes) {
    const int64_t m = s.out, n = s.in, k = tokens;
    std::vector<uint16_t> dy(static_cast<size_t>(k * m)), x(static_cast<size_t>(k * n));
    for (auto& v : dy) v = sf::FloatToBf16(u(rng));
    for (auto& v : x) v = sf::FloatToBf16(u(rng));
    std::vector<float> c1(static_cast<size_t>(m * n), 0.0f), c2 = c1, c3 = c1;
    const sf::GemmOperand a{dy.data(), sf::DType::kBF16, true, m, 0};
    const sf::GemmOperand b{x.data(), sf::DType::kBF16, false, n, 0};
    auto run_onednn = [&] { onednn.Run(1, m, n, k, a, b, c1.data(), n, 0, 1.0f, 1.0f); };
    auto run_packed = [&] {
      sf::cpu_internal::avx512bf16::GemmTn(m, n, k, dy.data(), m, x.data(), n, c2.data(), n, 1.0f);
    };
    auto run_amx = [&] {
      sf::cpu_internal::amx::GemmTn(m, n, k, dy.data(), m, x.data(), n, c3.data(), n, 1.0f);
    };
    run_onednn();
    run_packed();
    if (amx) run_amx();
    double t1 = 1e30, t2 = 1e30, t3 = 1e30;
    for (int r = 0; r < reps; ++r) {
      t1 = std::min(t1, Seconds(run_onednn));
      t2 = std::min(t2, Seconds(run_packed));
      if (amx) t3 = std::min(t3, Seconds(run_amx));
    }
    const double gflop = 2.0 * static_cast<double>(m * n * k) / 1e9;
    if (!amx) {
      std::printf("%-14s %6lld %6lld  %8.0f %8.0f  %.3f\n", s.name, static_cast<long long>(m),
                  static_cast<long long>(n), gflop / t1, gflop / t2, t1 / t2);
      continue;
    }
    // Both packed kernels sum the same exact products in fp32 (orders differ): C after the same
    // number of calls agrees to fp32 rounding.
    double worst = 0, scale = 1e-30;
    for (size_t i = 0; i < c2.size(); ++i) {
      worst = std::max(worst, static_cast<double>(std::fabs(c2[i] - c3[i])));
      scale = std::max(scale, static_cast<double>(std::fabs(c2[i])));
    }
    std::printf("%-14s %6lld %6lld  %8.0f %8.0f %8.0f  %.3f %.3f%s\n", s.name,
                static_cast<long long>(m), static_cast<long long>(n), gflop / t1, gflop / t2,
                gflop / t3, t1 / t2, t1 / t3, worst / scale < 1e-4 ? "" : "  (results differ!)");
  }
  return 0;
}
