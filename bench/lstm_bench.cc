// The engine's half of bench/lstm_vs_pytorch.sh (PyTorch's is bench/pytorch_lstm_bench.py): a
// training step of the LSTM family on the CPU backend, timed.
//
//   lstm_bench layer [--input 256] [--hidden 256] [common options]
//     one LSTM layer's forward and backward over a packed batch (trainer/nn/lstm.h);
//   lstm_bench model [--vocab 8000] [--dim 256] [--layers 1] [--bidirectional] [common options]
//     fairseq's lstm model's forward, loss and backward (trainer/models/lstm_model.h); dim is
//     every size (fairseq's lstm_wiseman_iwslt_de_en at 256), dropout 0.1, label smoothing 0.1.
//   common: [--batch 64] [--min-len 10] [--max-len 30] [--precision fp32|bf16] [--steps 10]
//           [--warmup 2] [--seed 1]
//
// Lengths: min + (i * 7919 + seed) % span for sequences / sources, min + (i * 104729 + seed) %
// span for targets (the peer computes the same). Prints `tokens_per_s=<N> step_ms=<median>
// tokens=<per step>` (target tokens for the model).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "common/command_line.h"
#include "trainer/kernels/cpu/cpu_backend.h"
#include "trainer/models/lstm_model.h"
#include "trainer/nn/lstm.h"

namespace {

struct Common {
  int64_t batch = 64, min_len = 10, max_len = 30, steps = 10, warmup = 2, seed = 1;
  std::string precision = "fp32";
  int64_t Length(int64_t i, int64_t prime) const { return min_len + (i * prime + seed) % (max_len - min_len + 1); }
  sf::DType compute() const { return precision == "bf16" ? sf::DType::kBF16 : sf::DType::kF32; }
};

// Median milliseconds of `step` over the timed steps.
double MedianStepMs(const Common& c, const std::function<bool()>& step) {
  std::vector<double> ms;
  for (int64_t s = 0; s < c.warmup + c.steps; ++s) {
    const auto start = std::chrono::steady_clock::now();
    if (!step()) return -1;
    const double elapsed = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (s >= c.warmup) ms.push_back(elapsed);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

int Report(double median, int64_t tokens) {
  if (median < 0) return 1;
  std::printf("tokens_per_s=%.0f step_ms=%.3f tokens=%lld\n", tokens / (median / 1000.0), median,
              static_cast<long long>(tokens));
  return 0;
}

int Layer(const Common& c, int64_t input, int64_t hidden) {
  std::vector<int64_t> lengths(c.batch);
  for (int64_t i = 0; i < c.batch; ++i) lengths[i] = c.Length(i, 7919);
  auto layout = sf::PackLengths(lengths);
  if (!layout.ok()) return 2;
  const int64_t tokens = layout->rows();
  sf::CpuBackend backend;
  sf::Context<float> ctx(&backend, c.compute());
  sf::ParamStore<float> store;
  sf::Lstm<float> lstm(store, "", "l0", input, hidden);
  store.Finalize(backend.allocator());
  std::mt19937 rng(static_cast<uint32_t>(c.seed));
  std::uniform_real_distribution<float> u(-0.1f, 0.1f);
  for (int64_t i = 0; i < store.total_numel(); ++i) store.values()[i] = u(rng);
  store.RefreshMirror(backend, c.compute());
  std::vector<float> x(tokens * input), dy(tokens * hidden), dx(tokens * input);
  for (float& v : x) v = u(rng);
  for (float& v : dy) v = u(rng);
  return Report(MedianStepMs(c,
                             [&] {
                               lstm.Forward(ctx, x.data(), layout->batch_sizes);
                               lstm.Backward(ctx, dy.data(), dx.data(), 0.0f);
                               return true;
                             }),
                tokens);
}

int Model(const Common& c, int64_t vocab, int64_t dim, int layers, bool bidirectional) {
  sf::LstmConfig config;
  config.src_vocab = config.tgt_vocab = vocab;
  config.encoder_embed = config.encoder_hidden = config.decoder_embed = config.decoder_hidden =
      config.decoder_out_embed = dim;
  config.encoder_layers = config.decoder_layers = layers;
  config.encoder_bidirectional = bidirectional;
  if (auto st = config.Validate(); !st.ok()) {
    std::fprintf(stderr, "%s\n", st.message().c_str());
    return 2;
  }
  // Right-padded sentence pairs: EOS (2) ends each, pad is 1, words from 4.
  const int64_t L = c.max_len;
  std::mt19937 rng(static_cast<uint32_t>(c.seed));
  std::uniform_int_distribution<int32_t> word(4, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> src(c.batch * L, 1), tin(c.batch * L, 1), tout(c.batch * L, 1);
  int64_t tokens = 0;
  for (int64_t i = 0; i < c.batch; ++i) {
    const int64_t ls = c.Length(i, 7919), lt = c.Length(i, 104729);
    for (int64_t t = 0; t + 1 < ls; ++t) src[i * L + t] = word(rng);
    src[i * L + ls - 1] = 2;
    tin[i * L] = 2;
    for (int64_t t = 0; t + 1 < lt; ++t) tout[i * L + t] = tin[i * L + t + 1] = word(rng);
    tout[i * L + lt - 1] = 2;
    tokens += lt;
  }
  const sf::Seq2SeqBatch batch{src.data(), tin.data(), tout.data(), c.batch, L, L};
  sf::CpuBackend backend;
  sf::LstmModel<float> model(config, &backend, c.compute());
  std::uniform_real_distribution<float> u(-0.1f, 0.1f);
  for (int64_t i = 0; i < model.params().total_numel(); ++i) model.params().values()[i] = u(rng);
  model.WeightsUpdated();
  return Report(MedianStepMs(c,
                             [&] {
                               auto stats = model.Forward(batch);
                               if (!stats.ok()) {
                                 std::fprintf(stderr, "%s\n", stats.status().message().c_str());
                                 return false;
                               }
                               model.Backward(1.0f);
                               return true;
                             }),
                tokens);
}

}  // namespace

int main(int argc, char** argv) {
  Common c;
  int64_t input = 256, hidden = 256, vocab = 8000, dim = 256;
  int layers = 1;
  bool bidirectional = false;
  CLI::App app("A training step of the engine's LSTM family, timed.", "lstm_bench");
  sf::cmdline::UseDefaults(app);
  app.require_subcommand(1);
  CLI::App* layer = app.add_subcommand("layer", "one LSTM layer's forward and backward over a packed batch");
  CLI::App* model = app.add_subcommand("model", "fairseq's lstm model's training step");
  for (CLI::App* sub : {layer, model}) {
    sub->add_option("--batch", c.batch, "sequences per batch")->check(sf::cmdline::AtLeast(1));
    sub->add_option("--min-len", c.min_len, "shortest sequence")->check(sf::cmdline::AtLeast(2));
    sub->add_option("--max-len", c.max_len, "longest sequence")->check(sf::cmdline::AtLeast(2));
    sub->add_option("--precision", c.precision, "the GEMMs' operands")->check(CLI::IsMember({"fp32", "bf16"}));
    sub->add_option("--steps", c.steps, "timed steps")->check(sf::cmdline::AtLeast(1));
    sub->add_option("--warmup", c.warmup, "untimed steps first")->check(sf::cmdline::AtLeast(0));
    sub->add_option("--seed", c.seed, "of the lengths and values");
  }
  layer->add_option("--input", input, "input size")->check(sf::cmdline::AtLeast(1));
  layer->add_option("--hidden", hidden, "hidden size")->check(sf::cmdline::AtLeast(1));
  model->add_option("--vocab", vocab, "source and target vocabulary")->check(sf::cmdline::AtLeast(8));
  model->add_option("--dim", dim, "embedding, hidden and output sizes")->check(sf::cmdline::AtLeast(1));
  model->add_option("--layers", layers, "encoder and decoder layers")->check(sf::cmdline::AtLeast(1));
  model->add_flag("--bidirectional", bidirectional, "a bidirectional encoder");
  if (auto exit_code = sf::cmdline::Parse(app, argc, argv)) return *exit_code;
  if (c.max_len < c.min_len) {
    std::fprintf(stderr, "--max-len %lld is below --min-len %lld\n", static_cast<long long>(c.max_len),
                 static_cast<long long>(c.min_len));
    return 2;
  }
  return layer->parsed() ? Layer(c, input, hidden) : Model(c, vocab, dim, layers, bidirectional);
}
