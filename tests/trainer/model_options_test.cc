// Two Transformer options a fairseq user expects, through the whole model and the paths that
// carry a model around (registry, weights files, checkpoints):
//   activation_dropout: dropout between the feed-forward's activation and fc2, in training only,
//     with masks that are a pure function of (seed, micro-batch);
//   share_decoder_input_output_embed: false gives the decoder its own output projection
//     "decoder.output_projection.weight" [V, C], with its own gradient, saved and loaded by name.
// The finite-difference checks of both are in layers_test.cc, the PyTorch comparison of the
// untied model in model_test.cc.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/testing.h"
#include "tests/trainer/seq2seq_batches.h"
#include "tests/trainer/single_thread.h"
#include "trainer/core/safetensors.h"
#include "trainer/kernels/cpu/cpu_backend.h"
#include "trainer/models/fconv.h"
#include "trainer/models/transformer_lm.h"
#include "trainer/models/weights_io.h"
#include "trainer/optim/loss_scaler.h"
#include "trainer/optim/optimizer.h"
#include "trainer/run/model_setup.h"
#include "trainer/run/train_step.h"

namespace sf {
namespace {

constexpr const char* kOutputProjection = "decoder.output_projection.weight";

TransformerConfig Untied() {
  TransformerConfig c = SmallConfig();
  c.share_decoder_input_output_embed = false;
  return c;
}


bool SameBits(const float* a, const float* b, int64_t n) {
  return std::memcmp(a, b, static_cast<size_t>(n) * sizeof(float)) == 0;
}

// Loss and every gradient of one training micro-batch.
struct StepResult {
  double loss = 0;
  std::vector<float> grads;
};

StepResult TrainingStep(Transformer<float>& model, const HostBatch& hb, uint64_t micro_batch) {
  model.context().training = true;
  model.context().seed = 5;
  model.context().micro_batch = micro_batch;
  model.ZeroGrads();
  auto s = model.Forward(hb.view());
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  model.Backward(1.0f);
  ParamStore<float>& p = model.params();
  return {s.ok() ? s->loss : 0.0, std::vector<float>(p.grads(), p.grads() + p.total_numel())};
}

std::vector<float> EvalLogits(Transformer<float>& model, const HostBatch& hb) {
  model.context().training = false;
  auto s = model.Forward(hb.view());
  model.context().training = true;
  EXPECT_TRUE(s.ok());
  const int64_t n = hb.batch * hb.tgt_len * model.config().tgt_vocab;
  return std::vector<float>(model.logits(), model.logits() + n);
}

// ||a - b||_2 / ||b||_2 over every gradient.
double L2Rel(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 1e-60;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(num / den);
}

// In fp32 and bf16 (where the dropped activation is cast for fc2): training differs from p = 0,
// repeats bit for bit for the same micro-batch (what resuming relies on) and changes with the
// micro-batch; evaluation equals p = 0 exactly. bf16 applies the same masks as fp32, so its
// loss and gradients stay close to fp32's.
TEST(ActivationDropout, TrainingOnlyDeterministicPerMicroBatch) {
  SingleThread single;
  for (Activation act : {Activation::kRelu, Activation::kGelu}) {
    StepResult fp32;
    for (DType dt : {DType::kF32, DType::kBF16}) {
      SCOPED_TRACE(std::string(DTypeName(dt)) + (act == Activation::kRelu ? " relu" : " gelu"));
      CpuBackend backend;
      TransformerConfig c = SmallConfig();
      c.dropout = 0.1f;
      c.activation = act;
      TransformerConfig with = c;
      with.activation_dropout = 0.3f;
      Transformer<float> off(c, &backend, dt), on(with, &backend, dt);
      off.InitParameters(3);
      on.InitParameters(3);
      ASSERT_EQ(on.params().total_numel(), off.params().total_numel());
      const HostBatch hb = RandomBatch(4, 9, 8, 47, 6);
      const StepResult a = TrainingStep(off, hb, 1), b = TrainingStep(on, hb, 1);
      EXPECT_NE(a.loss, b.loss) << "activation_dropout changed nothing in training";
      const StepResult again = TrainingStep(on, hb, 1), next = TrainingStep(on, hb, 2);
      EXPECT_EQ(again.loss, b.loss);
      EXPECT_EQ(again.grads, b.grads) << "masks must be a function of (seed, micro-batch)";
      EXPECT_NE(next.loss, b.loss);
      EXPECT_EQ(EvalLogits(on, hb), EvalLogits(off, hb)) << "dropout must be off in evaluation";
      if (dt == DType::kF32) {
        fp32 = b;
      } else {
        const double err = L2Rel(b.grads, fp32.grads);
        std::printf("%s %s, activation dropout: loss %.6f vs fp32 %.6f, gradient L2 rel err %.3e\n",
                    DTypeName(dt), act == Activation::kRelu ? "relu" : "gelu", b.loss, fp32.loss,
                    err);
        EXPECT_NEAR(b.loss, fp32.loss, 0.01 * fp32.loss);
        // GELU is smooth; ReLU's derivative flips where a pre-activation is near 0 and bf16
        // rounding moves it across (one such hidden unit shifts every gradient below it), as
        // without activation dropout (model_test's MixedPrecision). A wrong mask is O(1).
        EXPECT_LT(err, act == Activation::kGelu ? 0.02 : 0.25);
      }
    }
  }
}

TEST(UntiedOutputProjection, AddsOneVocabByDModelMatrixInitialisedLikeFairseq) {
  CpuBackend backend;
  Transformer<float> tied(SmallConfig(), &backend, DType::kF32),
      untied(Untied(), &backend, DType::kF32);
  tied.InitParameters(4);
  untied.InitParameters(4);
  const TransformerConfig& c = untied.config();
  const int64_t V = c.tgt_vocab, C = c.d_model;
  EXPECT_EQ(untied.params().total_numel() - tied.params().total_numel(), V * C);
  EXPECT_EQ(tied.params().Find(kOutputProjection), -1);
  const int id = untied.params().Find(kOutputProjection);
  ASSERT_GE(id, 0);
  const ParamInfo& info = untied.params().params()[id];
  EXPECT_EQ(info.shape, (std::vector<int64_t>{V, C}));
  EXPECT_EQ(id + 1, static_cast<int>(untied.params().params().size())) << "stored last";
  EXPECT_EQ(untied.Parameters().back().name, kOutputProjection);
  // Drawn after everything else: the other parameters are the tied model's, bit for bit.
  EXPECT_TRUE(
      SameBits(untied.params().values(), tied.params().values(), tied.params().total_numel()));
  // fairseq: normal(0, C^-1/2), every row (no padding row).
  const float* w = untied.params().value(id);
  double sum = 0, squares = 0;
  for (int64_t i = 0; i < V * C; ++i) sum += w[i], squares += static_cast<double>(w[i]) * w[i];
  const double mean = sum / static_cast<double>(V * C);
  const double sd = std::sqrt(squares / static_cast<double>(V * C) - mean * mean);
  EXPECT_NEAR(sd, 1.0 / std::sqrt(static_cast<double>(C)), 0.1 / std::sqrt(static_cast<double>(C)));
  EXPECT_NEAR(mean, 0.0, 0.02);
  double pad_row = 0;
  for (int64_t j = 0; j < C; ++j) pad_row += std::fabs(w[kPad * C + j]);
  EXPECT_GT(pad_row, 0.0);
}

// Tied, the decoder table's gradient gets the logits' contribution on every row; untied, that
// goes to the output projection and the table only gets its lookups: rows of tokens absent from
// tgt_in stay zero. The logits are computed from the output projection.
TEST(UntiedOutputProjection, HasItsOwnGradientAndDrivesTheLogits) {
  SingleThread single;
  CpuBackend backend;
  Transformer<float> tied(SmallConfig(), &backend, DType::kF32),
      untied(Untied(), &backend, DType::kF32);
  tied.InitParameters(4);
  untied.InitParameters(4);
  const int64_t V = untied.config().tgt_vocab, C = untied.config().d_model;
  const HostBatch hb = RandomBatch(3, 7, 6, 47, 9);
  EXPECT_NE(EvalLogits(untied, hb), EvalLogits(tied, hb)) << "the logits ignore the projection";
  const StepResult t = TrainingStep(tied, hb, 0), u = TrainingStep(untied, hb, 0);
  ParamStore<float>& store = untied.params();
  const int table = store.Find("decoder.embed_tokens.weight"), out = store.Find(kOutputProjection);
  ASSERT_GE(table, 0);
  ASSERT_GE(out, 0);
  const float* g_table = u.grads.data() + store.params()[table].offset;
  const float* g_out = u.grads.data() + store.params()[out].offset;
  const float* g_tied_table = t.grads.data() + tied.params().params()[table].offset;
  std::vector<bool> looked_up(static_cast<size_t>(V), false);
  for (int32_t tok : hb.tin) looked_up[tok] = true;
  int64_t absent_rows = 0;
  for (int64_t v = 0; v < V; ++v) {
    double table_row = 0, out_row = 0, tied_row = 0;
    for (int64_t j = 0; j < C; ++j) {
      table_row += std::fabs(g_table[v * C + j]);
      out_row += std::fabs(g_out[v * C + j]);
      tied_row += std::fabs(g_tied_table[v * C + j]);
    }
    EXPECT_GT(out_row, 0.0) << "output projection row " << v;
    if (v != kPad) {
      EXPECT_GT(tied_row, 0.0) << "tied table row " << v;
    }
    if (!looked_up[v]) {
      ++absent_rows;
      EXPECT_EQ(table_row, 0.0) << "decoder table row " << v << " is never looked up";
    }
  }
  EXPECT_GT(absent_rows, 0);
  // Zeroing the output projection makes every logit 0; the decoder table does not enter them.
  store.PullValues();
  std::fill(store.host_value(out), store.host_value(out) + V * C, 0.0f);
  store.PushValues();
  untied.WeightsUpdated();
  for (float z : EvalLogits(untied, hb)) ASSERT_EQ(z, 0.0f);
}

TEST(UntiedOutputProjection, WeightsFilesRoundTripAndOlderTiedFilesStillLoad) {
  CpuBackend backend;
  testing::TempDir dir;
  Transformer<float> a(Untied(), &backend, DType::kF32), b(Untied(), &backend, DType::kF32);
  a.InitParameters(1);
  b.InitParameters(2);
  const std::string path = dir.path() + "/untied.safetensors";
  ASSERT_TRUE(SaveWeights(a, path).ok());
  ASSERT_TRUE(LoadWeights(b, path).ok());
  EXPECT_TRUE(SameBits(a.params().values(), b.params().values(), a.params().total_numel()));
  auto file = safetensors::SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->metadata().at("share_decoder_input_output_embed"), "false");
  const safetensors::TensorInfo* t = file->Find(kOutputProjection);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->shape, (std::vector<int64_t>{47, 32}));
  auto described = ConfigFromMetadata(file->metadata());
  ASSERT_TRUE(described.ok());
  EXPECT_FALSE(described->share_decoder_input_output_embed);

  // A tied file as written before the option existed: no metadata key, no projection tensor.
  Transformer<float> tied(SmallConfig(), &backend, DType::kF32),
      tied2(SmallConfig(), &backend, DType::kF32);
  tied.InitParameters(3);
  std::map<std::string, std::string> old_meta = ConfigMetadata(tied.config());
  old_meta.erase("share_decoder_input_output_embed");
  std::vector<safetensors::TensorView> views;
  for (size_t i = 0; i < tied.params().params().size(); ++i) {
    const ParamInfo& p = tied.params().params()[i];
    views.push_back(safetensors::F32View(
        p.name, p.shape, {tied.params().value(static_cast<int>(i)), static_cast<size_t>(p.numel)}));
  }
  const std::string old_path = dir.path() + "/old_tied.safetensors";
  ASSERT_TRUE(safetensors::WriteFile(old_path, views, old_meta).ok());
  auto old_config = ConfigFromMetadata(old_meta);
  ASSERT_TRUE(old_config.ok());
  EXPECT_TRUE(old_config->share_decoder_input_output_embed);
  ASSERT_TRUE(LoadWeights(tied2, old_path).ok());
  EXPECT_TRUE(
      SameBits(tied.params().values(), tied2.params().values(), tied.params().total_numel()));
  // Either way round, a file of the other kind is refused by name.
  Status s = LoadWeights(b, old_path);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(
                "share_decoder_input_output_embed is true in the weights, false in this model"),
            std::string::npos)
      << s.ToString();
  s = LoadWeights(tied2, path);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("share_decoder_input_output_embed"), std::string::npos)
      << s.ToString();
}

TEST(UntiedOutputProjection, CheckpointsCarryTheProjectionAndTheOptions) {
  CpuBackend backend;
  TransformerConfig c = Untied();
  c.activation_dropout = 0.2f;
  Transformer<float> a(c, &backend, DType::kF32), b(c, &backend, DType::kF32);
  a.InitParameters(1);
  b.InitParameters(2);
  OptimizerOptions oo;
  oo.type = "adamw";
  TrainStep step(&a, std::move(MakeOptimizer(oo)).value(),
                 std::move(LossScaler::Make(LossScalerOptions{})).value(), 1.0);
  CheckpointContents ck;
  SnapshotTraining(a, step, &ck);
  bool found = false;
  for (const NamedBuffer& nb : ck.model) found |= nb.name == kOutputProjection;
  EXPECT_TRUE(found);
  ASSERT_TRUE(LoadModelWeights(ck, "ck", b).ok());
  EXPECT_TRUE(SameBits(a.params().values(), b.params().values(), a.params().total_numel()));
  Transformer<float> tied(SmallConfig(), &backend, DType::kF32);
  EXPECT_FALSE(LoadModelWeights(ck, "ck", tied).ok());

  // trainer_state.json's model: both options round-trip; a state written before they existed
  // reads as tied with no activation dropout.
  ModelSpec spec = ModelSpec::Of("transformer", c);
  auto back = ModelSpecFromValue(spec.ToValue());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->family(), "transformer");
  EXPECT_FALSE(back->config<TransformerConfig>().share_decoder_input_output_embed);
  EXPECT_FLOAT_EQ(back->config<TransformerConfig>().activation_dropout, 0.2f);
  spec = ModelSpec::Of("transformer", SmallConfig());
  Value::Map m = spec.ToValue().as_map();
  m.erase("arch");  // written before there were other families
  m.erase("share_decoder_input_output_embed");
  m.erase("activation_dropout");
  auto from_old = ModelSpecFromValue(Value(m));
  ASSERT_TRUE(from_old.ok()) << from_old.status().ToString();
  EXPECT_EQ(from_old->family(), "transformer");
  EXPECT_TRUE(from_old->config<TransformerConfig>().share_decoder_input_output_embed);
  EXPECT_EQ(from_old->config<TransformerConfig>().activation_dropout, 0.0f);
}

// The language model and fconv through trainer_state.json's "model" and the weights'
// __metadata__: every architecture field comes back, a model built from either describes itself
// the same way, and a malformed layer list is refused by name.
TEST(ModelSpecRoundTrip, TransformerLmAndFConvComeBackFromTheStateAndTheMetadata) {
  TransformerLmConfig lm_config;
  lm_config.d_model = 24;
  lm_config.heads = 3;
  lm_config.layers = 2;
  lm_config.ffn_dim = 40;
  lm_config.activation = Activation::kGelu;
  lm_config.normalize_before = true;
  lm_config.share_input_output_embed = true;
  lm_config.vocab = 57;
  lm_config.max_positions = 66;
  lm_config.label_smoothing = 0.05f;
  FConvConfig fc_config;
  fc_config.encoder_embed = 20;
  fc_config.decoder_embed = 18;
  fc_config.decoder_out_embed = 14;
  fc_config.encoder_convs = {{32, 3}, {48, 2}};
  fc_config.decoder_convs = {{32, 5}};
  fc_config.src_vocab = 61;
  fc_config.tgt_vocab = 59;
  fc_config.max_positions = 70;
  fc_config.label_smoothing = 0.1f;
  const ModelSpec lm = ModelSpec::Of("transformer_lm", lm_config);
  const ModelSpec fc = ModelSpec::Of("fconv", fc_config);
  for (const ModelSpec& spec : {lm, fc}) {
    SCOPED_TRACE(spec.family());
    ASSERT_TRUE(spec.Validate().ok()) << spec.Validate().message();
    auto from_value = ModelSpecFromValue(spec.ToValue());
    ASSERT_TRUE(from_value.ok()) << from_value.status().ToString();
    auto from_meta = ModelSpecFromMetadata(spec.metadata());
    ASSERT_TRUE(from_meta.ok()) << from_meta.status().ToString();
    EXPECT_EQ(from_value->family(), spec.family());
    EXPECT_EQ(from_value->metadata(), spec.metadata());
    EXPECT_EQ(from_meta->metadata(), spec.metadata());
    CpuBackend backend;
    auto model = MakeModel(*from_meta, &backend, DType::kF32);
    EXPECT_EQ(model->family(), spec.family());
    EXPECT_EQ(model->Metadata(), spec.metadata());
    EXPECT_TRUE(CheckMetadataFits(spec.metadata(), *model).ok());
  }
  EXPECT_EQ(fc.metadata().at("encoder_layers"), "32x3,48x2");
  auto meta = fc.metadata();
  meta["decoder_layers"] = "32x3,big";
  auto bad = ModelSpecFromMetadata(meta);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("__metadata__ decoder_layers"), std::string::npos) << bad.status().message();
  // An fconv checkpoint does not load into a language model, and the message says which is which.
  CpuBackend backend;
  auto lm_model = MakeModel(lm, &backend, DType::kF32);
  Status fits = CheckMetadataFits(fc.metadata(), *lm_model);
  ASSERT_FALSE(fits.ok());
  EXPECT_NE(fits.message().find("arch is fconv in the weights, transformer_lm in this model"), std::string::npos)
      << fits.message();
}

}  // namespace
}  // namespace sf
