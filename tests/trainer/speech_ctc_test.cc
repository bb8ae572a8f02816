// The speech recogniser (trainer/models/speech_ctc.h): every parameter's gradient against f64
// central finite differences with dropout on; logits, loss and every gradient against an
// independent PyTorch model reading the same weights (speech_ctc_reference.py); mixed
// precision within bf16's rounding; the guarded device path equal to the CPU; bad batches
// refused by name; the metadata round trip.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "tests/support/testing.h"
#include "tests/trainer/test_backends.h"
#include "trainer/core/safetensors.h"
#include "trainer/kernels/cpu/cpu_backend.h"
#include "trainer/kernels/cpu/ctc_host.h"
#include "trainer/kernels/cpu/reference.h"
#include "trainer/models/speech_ctc.h"
#include "trainer/optim/loss_scaler.h"
#include "trainer/optim/optimizer.h"
#include "trainer/run/train_step.h"

namespace sf {
namespace {

SpeechCtcConfig TinyConfig() {
  SpeechCtcConfig c;
  c.mels = 11;  // -> 5 -> 2 features after the two convolutions
  c.conv_channels = 3;
  c.d_model = 8;
  c.heads = 2;
  c.layers = 2;
  c.ffn_dim = 12;
  c.vocab = 6;
  c.dropout = 0.1f;
  c.max_positions = 64;
  return c;
}

// Three utterances padded to 19 frames (-> 4 encoder frames): 17 frames (-> 3), 13 (-> 2) and 15
// (-> 3, but its three labels with a repeat need 4: infeasible, so zero_infinity makes it 0).
struct TinyBatch {
  int64_t batch = 3, max_frames = 19, max_target = 3, mels = 11;
  std::vector<float> features;
  std::vector<int32_t> frames = {17, 13, 15};
  std::vector<int32_t> targets = {1, 2, 0, 3, 0, 0, 4, 4, 5};
  std::vector<int32_t> target_lengths = {2, 1, 3};
  explicit TinyBatch(uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> n(0.0f, 1.0f);
    features.assign(batch * max_frames * mels, 0.0f);
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t t = 0; t < frames[b]; ++t) {
        for (int64_t m = 0; m < mels; ++m) features[(b * max_frames + t) * mels + m] = n(rng);
      }
    }
  }
  SpeechBatchView View() const {
    return SpeechBatchView{features.data(), frames.data(), targets.data(), target_lengths.data(), batch, max_frames,
                       max_target};
  }
};

// The tiny model with a two-layer attention decoder (joint CTC/attention).
SpeechCtcConfig TinyJointConfig() {
  SpeechCtcConfig c = TinyConfig();
  c.decoder_layers = 2;
  c.ctc_weight = 0.4f;
  c.label_smoothing = 0.1f;
  return c;
}

// Every parameter's gradient (six entries each) against f64 central differences of the loss,
// with dropout on (the same masks in every forward: they depend on the seed, not the call).
void CheckFiniteDifferences(const SpeechCtcConfig& config) {
  ReferenceBackend<double> ref;
  SpeechCtcModel<double> model(config, &ref, DType::kF64);
  model.InitParameters(3);
  model.context().training = true;
  model.context().seed = 11;
  const TinyBatch tb(5);
  // The loss in double from the model's logits (the backend's per-utterance CTC losses are
  // fp32; its cross-entropy sums in double).
  auto loss = [&] {
    auto s = model.Forward(tb.View());
    EXPECT_TRUE(s.ok()) << s.status().message();
    CtcWorkspace w;
    double sum = 0;
    for (int64_t b = 0; b < tb.batch; ++b) {
      sum += CtcLossOneUtterance(model.logits(), tb.targets.data() + b * tb.max_target, model.lengths()[b],
                                 tb.target_lengths[b], model.frames(), tb.batch, b, model.config().vocab, 0, true,
                                 1.0f, static_cast<double*>(nullptr), w);
    }
    if (!config.has_decoder()) return sum;
    return config.ctc_weight * sum + (1.0 - config.ctc_weight) * (s.ok() ? s->attention_loss : 0.0);
  };
  auto stats = model.Forward(tb.View());
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  EXPECT_EQ(stats->infeasible, 1);
  EXPECT_EQ(stats->target_tokens, 6);
  EXPECT_EQ(model.frames(), 4);
  EXPECT_EQ(model.lengths(), (std::vector<int32_t>{3, 2, 3}));
  model.Backward(1.0f);
  ParamStore<double>& store = model.params();
  std::mt19937 rng(1);
  double worst = 0;
  for (size_t id = 0; id < store.params().size(); ++id) {
    const ParamInfo& p = store.params()[id];
    double* v = store.value(static_cast<int>(id));
    const double* g = store.grad(static_cast<int>(id));
    std::uniform_int_distribution<int64_t> pick(0, p.numel - 1);
    for (int k = 0; k < std::min<int64_t>(6, p.numel); ++k) {
      const int64_t i = p.numel <= 6 ? k : pick(rng);
      const double x = v[i], h = 1e-6;
      v[i] = x + h;
      model.WeightsUpdated();
      const double lp = loss();
      v[i] = x - h;
      model.WeightsUpdated();
      const double lm = loss();
      v[i] = x;
      model.WeightsUpdated();
      const double numeric = (lp - lm) / (2 * h);
      const double err = std::fabs(numeric - g[i]) / std::max(1.0, std::fabs(numeric));
      worst = std::max(worst, err);
      EXPECT_LT(err, 1e-6) << p.name << "[" << i << "] analytic " << g[i] << " numeric " << numeric;
    }
  }
  std::printf("worst relative error %.3e over %zu parameters\n", worst, store.params().size());
}

TEST(SpeechCtcModel, GradientsMatchFiniteDifferencesWithDropout) { CheckFiniteDifferences(TinyConfig()); }

TEST(SpeechCtcModel, JointModelGradientsMatchFiniteDifferencesWithDropout) {
  for (bool pre : {true, false}) {
    SpeechCtcConfig c = TinyJointConfig();
    c.normalize_before = pre;
    SCOPED_TRACE(pre ? "pre-norm" : "post-norm");
    CheckFiniteDifferences(c);
  }
}

// The decoder's loss is the attention branch's: the CTC-only model's weights give the same CTC
// loss inside the joint model, and ctc_weight mixes the two.
TEST(SpeechCtcModel, JointLossMixesTheBranchesByCtcWeight) {
  const TinyBatch tb(5);
  CpuBackend cpu1, cpu2;
  SpeechCtcModel<float> ctc(TinyConfig(), &cpu1, DType::kF32), joint(TinyJointConfig(), &cpu2, DType::kF32);
  ctc.InitParameters(9);
  joint.InitParameters(9);
  ctc.context().training = joint.context().training = false;
  // The decoder's parameters follow the CTC model's, which the joint model gets.
  for (size_t i = 0; i < ctc.params().params().size(); ++i) {
    const ParamInfo& p = ctc.params().params()[i];
    ASSERT_EQ(p.name, joint.params().params()[i].name);
    std::memcpy(joint.params().value(static_cast<int>(i)), ctc.params().value(static_cast<int>(i)),
                static_cast<size_t>(p.numel) * sizeof(float));
  }
  joint.WeightsUpdated();
  auto a = ctc.Forward(tb.View());
  auto b = joint.Forward(tb.View());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->ctc_loss, b->ctc_loss);
  EXPECT_EQ(a->attention_loss, 0.0);
  EXPECT_GT(b->attention_nll, 0.0);
  EXPECT_NE(b->attention_loss, b->attention_nll);  // label smoothing
  const double w = TinyJointConfig().ctc_weight;
  EXPECT_NEAR(b->loss, w * b->ctc_loss + (1 - w) * b->attention_loss, 1e-9 * b->loss);
  // <sos> + the longest transcript (3 labels): 4 decoder positions.
  EXPECT_EQ(joint.target_positions(), 4);
}

TEST(SpeechCtcModel, MatchesAnIndependentPyTorchModel) {
  for (int variant = 0; variant < 4; ++variant) {
    const bool pre = variant % 2 == 0, joint = variant >= 2;
    SpeechCtcConfig c = joint ? TinyJointConfig() : TinyConfig();
    c.normalize_before = pre;
    CpuBackend cpu;
    SpeechCtcModel<float> model(c, &cpu, DType::kF32);
    model.InitParameters(7);
    model.context().training = false;  // no dropout: PyTorch's masks would differ
    const TinyBatch tb(9);
    auto stats = model.Forward(tb.View());
    ASSERT_TRUE(stats.ok()) << stats.status().message();
    const int64_t rows = tb.batch * model.frames();
    std::vector<float> logits(rows * c.vocab);
    cpu.CopyToHost(logits.data(), model.logits(), logits.size() * sizeof(float));
    // Frames past an utterance's length are padding, which the loss never reads: compared as 0
    // (the reference zeroes them too).
    for (int64_t b = 0; b < tb.batch; ++b) {
      for (int64_t t = model.lengths()[b]; t < model.frames(); ++t) {
        std::fill_n(logits.begin() + (b * model.frames() + t) * c.vocab, c.vocab, 0.0f);
      }
    }
    model.Backward(1.0f);
    std::vector<safetensors::TensorView> views;
    ParamStore<float>& store = model.params();
    for (size_t i = 0; i < store.params().size(); ++i) {
      const ParamInfo& p = store.params()[i];
      views.push_back(safetensors::F32View(p.name, p.shape, {store.value(static_cast<int>(i)), static_cast<size_t>(p.numel)}));
      views.push_back(safetensors::F32View("ours.grad." + p.name, p.shape,
                                           {store.grad(static_cast<int>(i)), static_cast<size_t>(p.numel)}));
    }
    const std::vector<float> loss = {static_cast<float>(stats->loss)};
    const std::vector<int32_t> placeholder = {0};
    views.push_back(safetensors::F32View("batch.features", {tb.batch, tb.max_frames, tb.mels}, tb.features));
    views.push_back({"batch.frames", safetensors::DType::kI32, {tb.batch}, std::as_bytes(std::span(tb.frames))});
    views.push_back({"batch.targets", safetensors::DType::kI32, {tb.batch, tb.max_target}, std::as_bytes(std::span(tb.targets))});
    views.push_back({"batch.target_lengths", safetensors::DType::kI32, {tb.batch},
                     std::as_bytes(std::span(tb.target_lengths))});
    for (const char* name : {"batch.src", "batch.tgt_in", "batch.tgt_out"}) {
      views.push_back({name, safetensors::DType::kI32, {1, 1}, std::as_bytes(std::span(placeholder))});
    }
    views.push_back(safetensors::F32View("ours.loss", {1}, loss));
    views.push_back(safetensors::F32View("ours.logits", {tb.batch, model.frames(), c.vocab}, logits));
    testing::TempDir dir;
    const std::string path = dir.path() + "/case.safetensors";
    ASSERT_TRUE(safetensors::WriteFile(path, views, SpeechCtcMetadata(c)).ok());
    int status = 0;
    const std::string out = testing::RunShellCommand("/usr/bin/python3 " + testing::SourceDir() +
                                                         "/tests/trainer/reference/speech_ctc_reference.py " + path,
                                                     &status);
    std::printf("normalize_before %d, decoder_layers %d:\n%s", pre, static_cast<int>(c.decoder_layers), out.c_str());
    EXPECT_EQ(status, 0) << out;
    EXPECT_NE(out.find("grad.encoder.embed.conv.0.weight"), std::string::npos) << out;
    if (joint) {
      EXPECT_NE(out.find("grad.decoder.layers.1.encoder_attn.in_proj_weight"), std::string::npos) << out;
    }
  }
}

TEST(SpeechCtcModel, Bf16StaysWithinItsRoundingOfFp32) {
  const TinyBatch tb(4);
  for (const SpeechCtcConfig& config : {TinyConfig(), TinyJointConfig()}) {
  std::vector<double> losses;
  for (DType compute : {DType::kF32, DType::kBF16}) {
    CpuBackend cpu;
    SpeechCtcModel<float> model(config, &cpu, compute);
    model.InitParameters(2);
    model.context().training = false;
    auto s = model.Forward(tb.View());
    ASSERT_TRUE(s.ok());
    losses.push_back(s->loss);
  }
  EXPECT_NE(losses[0], losses[1]) << "bf16 GEMM operands must change something";
  EXPECT_NEAR(losses[1], losses[0], 2e-2 * std::fabs(losses[0]));
  }
}

TEST(SpeechCtcModel, RefusesBadBatchesByUtterance) {
  CpuBackend cpu;
  SpeechCtcModel<float> model(TinyConfig(), &cpu, DType::kF32);
  model.InitParameters(1);
  TinyBatch tb(1);
  tb.frames[1] = 6;  // fewer than the 7 frames the subsampling needs
  auto s = model.Forward(tb.View());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("utterance 1: 6 frames"), std::string::npos) << s.status().message();
  TinyBatch tb2(1);
  tb2.targets[0] = 0;  // blank as a label
  s = model.Forward(tb2.View());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("utterance 0 label 0: 0 is blank"), std::string::npos) << s.status().message();
}

TEST(SpeechCtcModel, MetadataRoundTrips) {
  SpeechCtcConfig c = TinyConfig();
  c.activation = Activation::kGelu;
  c.zero_infinity = false;
  auto back = SpeechCtcConfigFromMetadata(SpeechCtcMetadata(c));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(SpeechCtcMetadata(*back), SpeechCtcMetadata(c));
  auto m = SpeechCtcMetadata(c);
  m["heads"] = "3";
  auto bad = SpeechCtcConfigFromMetadata(m);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("heads: 3 does not divide d_model 8"), std::string::npos) << bad.status().message();
  // A CTC-only model's metadata has no decoder keys; a joint model's round-trips them.
  EXPECT_EQ(SpeechCtcMetadata(c).count("decoder_layers"), 0u);
  SpeechCtcConfig j = TinyJointConfig();
  j.ctc_weight = 0.3f;
  auto jb = SpeechCtcConfigFromMetadata(SpeechCtcMetadata(j));
  ASSERT_TRUE(jb.ok()) << jb.status().message();
  EXPECT_EQ(jb->decoder_layers, 2);
  EXPECT_EQ(jb->ctc_weight, 0.3f);
  EXPECT_EQ(jb->label_smoothing, 0.1f);
  auto jm = SpeechCtcMetadata(j);
  jm["ctc_weight"] = "1.5";
  auto jbad = SpeechCtcConfigFromMetadata(jm);
  ASSERT_FALSE(jbad.ok());
  EXPECT_NE(jbad.status().message().find("ctc_weight: must be in [0, 1]"), std::string::npos)
      << jbad.status().message();
  SpeechCtcConfig no_decoder = TinyConfig();
  no_decoder.ctc_weight = 0.5f;
  EXPECT_NE(no_decoder.Validate().message().find("set decoder_layers"), std::string::npos);
}

// Utterances [first, first + count) of a batch as a batch of their own (padded to their own
// longest frames).
struct SubBatch {
  int64_t batch = 0, max_frames = 0, max_target = 0;
  std::vector<float> features;
  std::vector<int32_t> frames, targets, target_lengths;
  SubBatch(const TinyBatch& b, int64_t first, int64_t count) : batch(count), max_target(b.max_target) {
    for (int64_t i = first; i < first + count; ++i) max_frames = std::max<int64_t>(max_frames, b.frames[i]);
    features.assign(count * max_frames * b.mels, 0.0f);
    for (int64_t i = 0; i < count; ++i) {
      const int64_t u = first + i;
      frames.push_back(b.frames[u]);
      target_lengths.push_back(b.target_lengths[u]);
      targets.insert(targets.end(), b.targets.begin() + u * b.max_target, b.targets.begin() + (u + 1) * b.max_target);
      std::copy_n(b.features.begin() + u * b.max_frames * b.mels, b.frames[u] * b.mels,
                  features.begin() + i * max_frames * b.mels);
    }
  }
  SpeechBatchView View() const {
    return SpeechBatchView{features.data(), frames.data(), targets.data(), target_lengths.data(), batch, max_frames,
                           max_target};
  }
};

// TrainStep (train_step.h) trains the recogniser like any model: two micro-batches of one and
// two utterances (each padded to its own length) update the weights as one batch of all three
// does, over three SGD steps with dynamic loss scaling; the step normalises by the labels. (SGD:
// Adam would scale the rounding left on gradients that are exactly zero, such as the attention's
// key bias, to full-size steps; model_test.cc's aggregation test says the same.)
TEST(SpeechCtcModel, TrainStepAggregatesMicroBatchesAsOneBatch) {
  for (const SpeechCtcConfig& config : {TinyConfig(), TinyJointConfig()}) {
  SCOPED_TRACE(config.has_decoder() ? "joint" : "ctc");
  SpeechCtcConfig c = config;
  c.dropout = 0.0f;  // the masks of a micro-batch differ from the whole batch's rows
  CpuBackend b1, b2;
  SpeechCtcModel<float> big(c, &b1, DType::kF32), small(c, &b2, DType::kF32);
  big.InitParameters(4);
  small.InitParameters(4);
  auto make_step = [](SpeechCtcModel<float>* m) {
    OptimizerOptions oo;
    oo.type = "sgd";
    LossScalerOptions lo;
    lo.type = "dynamic";
    lo.init_scale = 256;
    return std::make_unique<TrainStep>(m, std::move(MakeOptimizer(oo)).value(),
                                       std::move(LossScaler::Make(lo)).value(), 1.0);
  };
  auto step_big = make_step(&big), step_small = make_step(&small);
  const TinyBatch whole(12);
  const SubBatch first(whole, 0, 1), rest(whole, 1, 2);
  auto forward = [](SpeechCtcModel<float>& m, const SpeechBatchView& v) -> Result<CrossEntropyStats> {
    SF_ASSIGN_OR_RETURN(CtcStats s, m.Forward(v));
    return CrossEntropyStats{s.loss, s.loss, s.target_tokens};
  };
  for (int s = 0; s < 3; ++s) {
    auto rb = step_big->Run(1, [&](size_t) { return forward(big, whole.View()); }, 0.1f);
    auto rs = step_small->Run(2, [&](size_t i) { return forward(small, i == 0 ? first.View() : rest.View()); }, 0.1f);
    ASSERT_TRUE(rb.ok() && rs.ok());
    EXPECT_EQ(rb->tokens, 6);
    EXPECT_EQ(rs->tokens, 6);
    EXPECT_FALSE(rb->skipped);
    EXPECT_NEAR(rb->loss, rs->loss, 1e-5 * rb->loss);
  }
  double worst = 0, scale = 1e-30;
  for (int64_t i = 0; i < big.params().total_numel(); ++i) {
    worst = std::max(worst, std::fabs(static_cast<double>(small.params().values()[i]) - big.params().values()[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(big.params().values()[i])));
  }
  std::printf("worst weight difference %.3e (of max %.3e)\n", worst, scale);
  EXPECT_LT(worst / scale, 1e-5);
  // Token batches are refused for a model that does not read them.
  Seq2SeqBatch tokens;
  auto refused = step_big->Run({&tokens, 1}, 0.1f);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  }
}

class SpeechCtcBackends : public ::testing::TestWithParam<std::string> {};

// One training step's loss, logits and gradients on `backend` (dropout on).
std::vector<float> RunStep(Backend<float>& backend, const SpeechCtcConfig& config) {
  SpeechCtcModel<float> model(config, &backend, DType::kF32);
  model.InitParameters(6);
  model.context().training = true;
  model.context().seed = 3;
  const TinyBatch tb(8);
  auto s = model.Forward(tb.View());
  EXPECT_TRUE(s.ok());
  std::vector<float> out(tb.batch * model.frames() * model.config().vocab + 1);
  out[0] = static_cast<float>(s->loss);
  backend.CopyToHost(out.data() + 1, model.logits(), (out.size() - 1) * sizeof(float));
  model.Backward(1.0f);
  std::vector<float> grads(model.params().total_numel());
  model.params().CopyGradsToHost(grads.data());
  out.insert(out.end(), grads.begin(), grads.end());
  return out;
}

TEST_P(SpeechCtcBackends, TrainingStepEqualsTheCpu) {
  std::string why;
  std::unique_ptr<Backend<float>> backend = testing::MakeTestBackend(GetParam(), &why);
  if (!backend) GTEST_SKIP() << why;
  for (const SpeechCtcConfig& config : {TinyConfig(), TinyJointConfig()}) {
  CpuBackend cpu;
  const std::vector<float> want = RunStep(cpu, config), got = RunStep(*backend, config);
  ASSERT_EQ(got.size(), want.size());
  double worst = 0, scale = 1e-30;
  for (size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
  }
  EXPECT_LE(worst / scale, GetParam() == "guarded" ? 0.0 : 1e-4) << (config.has_decoder() ? "joint" : "ctc");
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, SpeechCtcBackends, ::testing::Values("guarded", "cuda"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace sf
