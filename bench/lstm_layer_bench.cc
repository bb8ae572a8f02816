// One LSTM layer's training step (forward and backward over a packed batch) on the CPU
// backend, timed: the engine's half of bench/lstm_layer.sh (PyTorch's nn.LSTM is the other).
//
//   lstm_layer_bench [--batch 64] [--min-len 10] [--max-len 30] [--input 256] [--hidden 256]
//                    [--precision fp32|bf16] [--steps 20] [--warmup 3] [--seed 1]
//
// Sequence lengths are drawn uniformly in [min-len, max-len] from the seed (the peer script
// draws the same ones), sorted longest first and packed as PyTorch packs them. Prints one line:
// `tokens_per_s=<N> step_ms=<median> tokens=<per step>`.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "common/command_line.h"
#include "trainer/kernels/cpu/cpu_backend.h"
#include "trainer/nn/lstm.h"

int main(int argc, char** argv) {
  int64_t batch = 64, min_len = 10, max_len = 30, input = 256, hidden = 256, steps = 20, warmup = 3, seed = 1;
  std::string precision = "fp32";
  CLI::App app("One LSTM layer's forward and backward over a packed batch, timed.", "lstm_layer_bench");
  sf::cmdline::UseDefaults(app);
  app.add_option("--batch", batch, "sequences per batch")->check(sf::cmdline::AtLeast(1));
  app.add_option("--min-len", min_len, "shortest sequence")->check(sf::cmdline::AtLeast(1));
  app.add_option("--max-len", max_len, "longest sequence")->check(sf::cmdline::AtLeast(1));
  app.add_option("--input", input, "input size")->check(sf::cmdline::AtLeast(1));
  app.add_option("--hidden", hidden, "hidden size")->check(sf::cmdline::AtLeast(1));
  app.add_option("--precision", precision, "the GEMMs' operands")->check(CLI::IsMember({"fp32", "bf16"}));
  app.add_option("--steps", steps, "timed steps")->check(sf::cmdline::AtLeast(1));
  app.add_option("--warmup", warmup, "untimed steps first")->check(sf::cmdline::AtLeast(0));
  app.add_option("--seed", seed, "of the lengths and values");
  if (auto exit_code = sf::cmdline::Parse(app, argc, argv)) return *exit_code;
  if (max_len < min_len) {
    std::fprintf(stderr, "--max-len %lld is below --min-len %lld\n", static_cast<long long>(max_len),
                 static_cast<long long>(min_len));
    return 2;
  }
  // The same lengths as the peer script computes: min + (i * 7919 + seed) % span.
  std::vector<int64_t> lengths(batch);
  const int64_t span = max_len - min_len + 1;
  for (int64_t i = 0; i < batch; ++i) lengths[i] = min_len + (i * 7919 + seed) % span;
  std::sort(lengths.rbegin(), lengths.rend());
  std::vector<int64_t> batch_sizes;
  for (int64_t t = 0; t < lengths[0]; ++t) {
    int64_t n = 0;
    while (n < batch && lengths[n] > t) ++n;
    batch_sizes.push_back(n);
  }
  int64_t tokens = 0;
  for (int64_t n : batch_sizes) tokens += n;

  sf::CpuBackend backend;
  const sf::DType compute = precision == "bf16" ? sf::DType::kBF16 : sf::DType::kF32;
  sf::Context<float> ctx(&backend, compute);
  sf::ParamStore<float> store;
  sf::Lstm<float> lstm(store, "", "l0", input, hidden);
  store.Finalize(backend.allocator());
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::uniform_real_distribution<float> u(-0.1f, 0.1f);
  for (int64_t i = 0; i < store.total_numel(); ++i) store.values()[i] = u(rng);
  store.RefreshMirror(backend, compute);
  std::vector<float> x(tokens * input), dy(tokens * hidden), dx(tokens * input);
  for (float& v : x) v = u(rng);
  for (float& v : dy) v = u(rng);

  std::vector<double> ms;
  for (int64_t s = 0; s < warmup + steps; ++s) {
    const auto start = std::chrono::steady_clock::now();
    lstm.Forward(ctx, x.data(), batch_sizes);
    lstm.Backward(ctx, dy.data(), dx.data(), 0.0f);
    const double elapsed = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (s >= warmup) ms.push_back(elapsed);
  }
  std::sort(ms.begin(), ms.end());
  const double median = ms[ms.size() / 2];
  std::printf("tokens_per_s=%.0f step_ms=%.3f tokens=%lld\n", tokens / (median / 1000.0), median,
              static_cast<long long>(tokens));
  return 0;
}
