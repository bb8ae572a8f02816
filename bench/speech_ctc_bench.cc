// The engine's half of bench/speech_vs_pytorch.sh (PyTorch's is bench/pytorch_speech_bench.py):
// the speech recogniser's training step (trainer/models/speech_ctc.h: forward, CTC loss,
// backward) on the CPU backend, timed.
//
//   speech_ctc_bench [--batch 16] [--min-frames 300] [--max-frames 400] [--mels 80]
//                    [--conv-channels 64] [--dim 256] [--heads 4] [--layers 6] [--ffn 1024]
//                    [--vocab 40] [--chars-per-second 15] [--precision fp32|bf16] [--steps 10]
//                    [--warmup 2] [--seed 1]
//
// Utterance i has min + (i * 7919 + seed) % span frames (10 ms each) and
// frames * chars_per_second / 100 labels, label k of utterance i being 1 + (i * 31 + k * 17) %
// (vocab - 1) (the peer computes the same); features are seeded normal values. Dropout 0.1,
// pre-norm. Prints `frames_per_s=<N> step_ms=<median> frames=<per step>` (input frames).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "common/command_line.h"
#include "trainer/kernels/cpu/cpu_backend.h"
#include "trainer/models/speech_ctc.h"

int main(int argc, char** argv) {
  int64_t batch = 16, min_frames = 300, max_frames = 400, steps = 10, warmup = 2, seed = 1;
  double chars_per_second = 15;
  std::string precision = "fp32";
  sf::SpeechCtcConfig c;
  c.vocab = 40;
  CLI::App app("A training step of the engine's speech recogniser (conv subsampling, Transformer encoder, CTC), timed.",
               "speech_ctc_bench");
  sf::cmdline::UseDefaults(app);
  app.add_option("--batch", batch, "utterances per batch")->check(sf::cmdline::AtLeast(1));
  app.add_option("--min-frames", min_frames, "shortest utterance, 10 ms frames")->check(sf::cmdline::AtLeast(7));
  app.add_option("--max-frames", max_frames, "longest utterance")->check(sf::cmdline::AtLeast(7));
  app.add_option("--mels", c.mels, "features per frame")->check(sf::cmdline::AtLeast(7));
  app.add_option("--conv-channels", c.conv_channels, "channels of the subsampling convolutions")
      ->check(sf::cmdline::AtLeast(1));
  app.add_option("--dim", c.d_model, "d_model")->check(sf::cmdline::AtLeast(2));
  app.add_option("--heads", c.heads, "attention heads")->check(sf::cmdline::AtLeast(1));
  app.add_option("--layers", c.layers, "encoder layers")->check(sf::cmdline::AtLeast(1));
  app.add_option("--ffn", c.ffn_dim, "feed-forward width")->check(sf::cmdline::AtLeast(1));
  app.add_option("--vocab", c.vocab, "output symbols, blank included")->check(sf::cmdline::AtLeast(2));
  app.add_option("--chars-per-second", chars_per_second, "labels per second of audio");
  app.add_option("--precision", precision, "the GEMMs' operands")->check(CLI::IsMember({"fp32", "bf16"}));
  app.add_option("--steps", steps, "timed steps")->check(sf::cmdline::AtLeast(1));
  app.add_option("--warmup", warmup, "untimed steps first")->check(sf::cmdline::AtLeast(0));
  app.add_option("--seed", seed, "of the lengths and values");
  if (auto exit_code = sf::cmdline::Parse(app, argc, argv)) return *exit_code;
  if (max_frames < min_frames) {
    std::fprintf(stderr, "--max-frames %lld is below --min-frames %lld\n", static_cast<long long>(max_frames),
                 static_cast<long long>(min_frames));
    return 2;
  }
  if (sf::Status st = c.Validate(); !st.ok()) {
    std::fprintf(stderr, "%s\n", st.message().c_str());
    return 2;
  }
  std::vector<int32_t> frames(batch), target_lengths(batch);
  int64_t longest = 0, max_target = 1, total_frames = 0;
  for (int64_t i = 0; i < batch; ++i) {
    frames[i] = static_cast<int32_t>(min_frames + (i * 7919 + seed) % (max_frames - min_frames + 1));
    target_lengths[i] = static_cast<int32_t>(frames[i] * chars_per_second / 100.0);
    longest = std::max<int64_t>(longest, frames[i]);
    max_target = std::max<int64_t>(max_target, target_lengths[i]);
    total_frames += frames[i];
  }
  std::vector<int32_t> targets(batch * max_target, 0);
  for (int64_t i = 0; i < batch; ++i) {
    for (int64_t k = 0; k < target_lengths[i]; ++k) {
      targets[i * max_target + k] = static_cast<int32_t>(1 + (i * 31 + k * 17) % (c.vocab - 1));
    }
  }
  std::vector<float> features(batch * longest * c.mels, 0.0f);
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t i = 0; i < batch; ++i) {
    for (int64_t t = 0; t < frames[i]; ++t) {
      for (int64_t m = 0; m < c.mels; ++m) features[(i * longest + t) * c.mels + m] = normal(rng);
    }
  }
  sf::CpuBackend backend;
  sf::SpeechCtcModel<float> model(c, &backend, precision == "bf16" ? sf::DType::kBF16 : sf::DType::kF32);
  model.InitParameters(static_cast<uint64_t>(seed));
  model.context().training = true;
  const sf::SpeechBatchView b{features.data(), frames.data(), targets.data(), target_lengths.data(), batch, longest,
                          max_target};
  std::vector<double> ms;
  for (int64_t s = 0; s < warmup + steps; ++s) {
    model.context().micro_batch = static_cast<uint64_t>(s);
    const auto start = std::chrono::steady_clock::now();
    auto stats = model.Forward(b);
    if (!stats.ok()) {
      std::fprintf(stderr, "%s\n", stats.status().message().c_str());
      return 1;
    }
    model.Backward(1.0f);
    const double elapsed = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (s >= warmup) ms.push_back(elapsed);
  }
  std::sort(ms.begin(), ms.end());
  const double median = ms[ms.size() / 2];
  std::printf("frames_per_s=%.0f step_ms=%.3f frames=%lld\n", total_frames / (median / 1000.0), median,
              static_cast<long long>(total_frames));
  return 0;
}
