// The whole model and the training step: against an independent PyTorch implementation,
// mixed precision, aggregation frequency, learning a task, loss scaling, memory planning,
// weights I/O and the model registry.
#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <new>
#include <random>
#include <span>
#include <sstream>
#include <vector>

#include "trainer/core/safetensors.h"
#include "trainer/kernels/cpu/cpu_backend.h"
#include "trainer/models/fconv.h"
#include "trainer/models/lstm_model.h"
#include "trainer/models/transformer_lm.h"
#include "trainer/models/weights_io.h"
#include "trainer/nn/output_loss.h"
#include "trainer/run/train_step.h"
#include "tests/support/testing.h"

// Counts C++ heap allocations, to prove a steady-state step allocates nothing. The replacement
// operators pair malloc with free; GCC can't see that through inlining and warns wrongly.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
static std::atomic<int64_t> g_news{0};
void* operator new(size_t n) {
  g_news.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }

#include "tests/trainer/seq2seq_batches.h"
#include "tests/trainer/single_thread.h"
#include "tests/trainer/train_tail.h"

namespace sf {
namespace {

safetensors::TensorView I32View(const std::string& name, std::vector<int64_t> shape,
                                 const std::vector<int32_t>& v) {
  return {name, safetensors::DType::kI32, std::move(shape),
          std::as_bytes(std::span<const int32_t>(v))};
}

// Runs our model on one batch, writes weights + batch + our results, and has the PyTorch
// reference recompute and compare everything (the model's metadata tells it the architecture).
template <typename Model>
void CompareModelWithPyTorch(Model& model, int64_t vocab, const char* reference = "transformer_reference.py") {
  model.InitParameters(11);
  // Non-trivial layer-norm gains/biases so their gradients are exercised.
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-0.2f, 0.2f);
  for (const ParamInfo& p : model.params().params())
    if (p.shape.size() == 1)
      for (int64_t i = 0; i < p.numel; ++i) model.params().values()[p.offset + i] += u(rng);
  model.WeightsUpdated();
  HostBatch hb = RandomBatch(3, 7, 6, vocab, 5);
  model.ZeroGrads();
  auto stats = model.Forward(hb.view());
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  const int64_t nt = hb.batch * hb.tgt_len;
  const int64_t V = model.shape().tgt_vocab;
  std::vector<float> logits(model.logits(), model.logits() + nt * V);
  model.Backward(1.0f);
  std::vector<float> loss = {static_cast<float>(stats->loss)};

  testing::TempDir dir;
  const std::string path = dir.path() + "/case.safetensors";
  ParamStore<float>& store = model.params();
  std::vector<safetensors::TensorView> views;
  for (size_t i = 0; i < store.params().size(); ++i) {
    const ParamInfo& p = store.params()[i];
    views.push_back(safetensors::F32View(
        p.name, p.shape, {store.value(static_cast<int>(i)), static_cast<size_t>(p.numel)}));
    views.push_back(safetensors::F32View(
        "ours.grad." + p.name, p.shape,
        {store.grad(static_cast<int>(i)), static_cast<size_t>(p.numel)}));
  }
  views.push_back(safetensors::F32View("ours.logits", {nt, V}, logits));
  views.push_back(safetensors::F32View("ours.loss", {1}, loss));
  views.push_back(I32View("batch.src", {hb.batch, hb.src_len}, hb.src));
  views.push_back(I32View("batch.tgt_in", {hb.batch, hb.tgt_len}, hb.tin));
  views.push_back(I32View("batch.tgt_out", {hb.batch, hb.tgt_len}, hb.tout));
  ASSERT_TRUE(safetensors::WriteFile(path, views, model.Metadata()).ok());

  int status = 0;
  const std::string script =
      testing::SourceDir() + "/tests/trainer/reference/" + reference;
  const std::string out = testing::RunShellCommand("/usr/bin/python3 " + script + " " + path, &status);
  std::printf("%s", out.c_str());
  // Fails (not skips) when python3 or torch is missing: the comparison is required in CI.
  EXPECT_EQ(status, 0) << "PyTorch reference failed or mismatched:\n" << out;
  EXPECT_NE(out.find("worst:"), std::string::npos) << out;
}

void CompareWithPyTorch(const TransformerConfig& config) {
  CpuBackend backend;
  Transformer<float> model(config, &backend, DType::kF32);
  CompareModelWithPyTorch(model, std::min(config.src_vocab, config.tgt_vocab));
}

// The decoder-only language model against the same reference without encoder and encoder
// attention: a causal mask there, so a model that looked ahead would not match.
TEST(PyTorchReference, TransformerLmPostNormTiedAndPreNormUntiedMatchInFp32) {
  for (bool pre : {false, true}) {
    TransformerLmConfig c;
    c.d_model = 16;
    c.heads = 4;
    c.layers = 2;
    c.ffn_dim = 24;
    c.vocab = 23;
    c.max_positions = 32;
    c.normalize_before = pre;
    c.activation = pre ? Activation::kGelu : Activation::kRelu;
    c.share_input_output_embed = !pre;
    c.label_smoothing = 0.1f;
    c.dropout = 0.0f;
    CpuBackend backend;
    TransformerLm<float> model(c, &backend, DType::kF32);
    model.context().training = false;
    CompareModelWithPyTorch(model, c.vocab);
  }
}

// fairseq's fconv against its own PyTorch implementation (tests/trainer/reference/
// fconv_reference.py: torch.conv_tbc, weight norm by torch's formula, fairseq's masking and
// scaling): an untied model with projections and an even encoder kernel, and a tied one.
TEST(PyTorchReference, FConvUntiedAndTiedMatchInFp32) {
  for (bool tied : {false, true}) {
    FConvConfig c;
    c.encoder_embed = 12;
    c.decoder_embed = 12;
    c.decoder_out_embed = tied ? 12 : 10;
    c.encoder_convs = tied ? std::vector<ConvSpec>{{16, 3}, {16, 3}, {16, 3}}
                           : std::vector<ConvSpec>{{16, 3}, {24, 2}, {24, 5}};
    c.decoder_convs = tied ? std::vector<ConvSpec>{{16, 3}, {16, 3}} : std::vector<ConvSpec>{{16, 2}, {24, 3}};
    c.share_input_output_embed = tied;
    c.src_vocab = 23;
    c.tgt_vocab = 23;
    c.max_positions = 32;
    c.label_smoothing = 0.1f;
    c.dropout = 0.0f;
    CpuBackend backend;
    FConvModel<float> model(c, &backend, DType::kF32);
    model.context().training = false;
    CompareModelWithPyTorch(model, 23, "fconv_reference.py");
  }
}

TEST(PyTorchReference, PostNormSeparateEmbeddingsMatchesInFp32) {
  CompareWithPyTorch(SmallConfig());
}

// share_decoder_input_output_embed: false — the logits come from
// decoder.output_projection.weight, which gets its own gradient.
TEST(PyTorchReference, PostNormUntiedOutputProjectionMatchesInFp32) {
  TransformerConfig c = SmallConfig();
  c.share_decoder_input_output_embed = false;
  CompareWithPyTorch(c);
}

TEST(PyTorchReference, PreNormSharedEmbeddingsGeluMatchesInFp32) {
  TransformerConfig c = SmallConfig();
  c.normalize_before = true;
  c.share_embeddings = true;
  c.tgt_vocab = c.src_vocab;
  c.activation = Activation::kGelu;
  CompareWithPyTorch(c);
}

// ||a - b||_2 / ||b||_2
double L2Rel(const float* a, const float* b, int64_t n) {
  double num = 0, den = 1e-60;
  for (int64_t i = 0; i < n; ++i) {
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(num / den);
}


// Mixed precision keeps only compute-dtype copies of many activations and passes their fp32
// values through shared scratch; comparing every gradient with fp32 checks that wiring, in
// post-norm (ReLU) without dropout and in pre-norm (GELU) with every dropout, activation
// dropout included (the same masks in both runs).
void ExpectLowPrecisionCloseToFp32(const TransformerConfig& c) {
  const char* variant = c.normalize_before ? "pre-norm, GELU, dropout" : "post-norm, ReLU";
  CpuBackend backend;
  Transformer<float> ref(c, &backend, DType::kF32);
  ref.InitParameters(4);
  HostBatch hb = RandomBatch(4, 9, 8, 47, 6);
  ref.ZeroGrads();
  auto rs = ref.Forward(hb.view());
  ASSERT_TRUE(rs.ok());
  const int64_t nl = 4 * 8 * 47;
  std::vector<float> ref_logits(ref.logits(), ref.logits() + nl);
  ref.Backward(1.0f);
  for (DType dt : {DType::kBF16, DType::kF16}) {
    Transformer<float> low(c, &backend, dt);
    low.InitParameters(4);
    low.ZeroGrads();
    auto ls = low.Forward(hb.view());
    ASSERT_TRUE(ls.ok());
    const double logit_err = MaxRel(low.logits(), ref_logits.data(), nl);
    EXPECT_LT(logit_err, dt == DType::kBF16 ? 0.02 : 0.003) << DTypeName(dt) << " " << variant;
    // f16 gradients need loss scaling (small gradients are subnormal in f16): scale by 1024.
    const float scale = dt == DType::kF16 ? 1024.0f : 1.0f;
    low.Backward(scale);
    for (int64_t i = 0; i < low.params().total_numel(); ++i) low.params().grads()[i] /= scale;
    EXPECT_NEAR(ls->loss, rs->loss, 0.01 * rs->loss) << DTypeName(dt) << " " << variant;
    std::printf("%s %s: logits max rel err %.3e, loss %.6f vs fp32 %.6f\n", DTypeName(dt),
                variant, logit_err, ls->loss, rs->loss);
    // Every parameter gradient within a norm-wise relative error (bf16 keeps 8 mantissa bits,
    // f16 11; the error grows with depth through the backward).
    // Mostly ReLU masks flipping where pre-activations are near 0, so not 8x apart.
    const double tol = dt == DType::kBF16 ? 0.1 : 0.03;
    double worst = 0;
    std::string worst_name;
    for (size_t i = 0; i < ref.params().params().size(); ++i) {
      const ParamInfo& p = ref.params().params()[i];
      const double e = L2Rel(low.params().grad(static_cast<int>(i)),
                             ref.params().grad(static_cast<int>(i)), p.numel);
      if (e > worst) worst = e, worst_name = p.name;
      EXPECT_LT(e, tol) << DTypeName(dt) << " " << variant << " " << p.name;
    }
    std::printf("%s %s: worst gradient L2 rel err %.3e (%s)\n", DTypeName(dt), variant, worst,
                worst_name.c_str());
  }
}

TEST(MixedPrecision, Bf16AndFp16ForwardBackwardCloseToFp32) {
  ExpectLowPrecisionCloseToFp32(SmallConfig());
  TransformerConfig c = SmallConfig();
  c.normalize_before = true;
  c.dropout = 0.1f;
  c.attention_dropout = 0.1f;
  c.activation_dropout = 0.1f;
  c.activation = Activation::kGelu;
  ExpectLowPrecisionCloseToFp32(c);
}

// bf16 training computes the logits and the loss a block of rows at a time
// (trainer/nn/output_loss.h); the rows are independent, so blocks of 5 rows (the last one short)
// must give the loss, the NLL, the token count and every gradient of one block of all rows.
TEST(MixedPrecision, Bf16LossByBlocksOfRowsEqualsOneBlock) {
  CpuBackend backend;
  EXPECT_EQ(LogitBlockRows(backend, 4096, 8000, 0), 256);  // 8 MiB of fp32 logits per block
  EXPECT_EQ(LogitBlockRows(backend, 40, 8000, 0), 40);
  EXPECT_EQ(LogitBlockRows(backend, 4096, 1 << 20, 0), 16);
  EXPECT_EQ(LogitBlockRows(backend, 4096, 8000, 5), 5);
  TransformerConfig post = SmallConfig();
  TransformerConfig pre = SmallConfig();
  pre.normalize_before = true;
  pre.share_decoder_input_output_embed = false;
  pre.label_smoothing = 0.1f;
  pre.dropout = 0.1f;
  for (const TransformerConfig& c : {post, pre}) {
    const HostBatch hb = RandomBatch(4, 9, 8, c.tgt_vocab, 21);
    const int64_t nt = 4 * 8, V = c.tgt_vocab;
    Transformer<float> whole(c, &backend, DType::kBF16), blocked(c, &backend, DType::kBF16);
    whole.set_logit_block_rows(nt);
    blocked.set_logit_block_rows(5);
    for (Transformer<float>* m : {&whole, &blocked}) {
      m->InitParameters(6);
      m->context().seed = 8;
      m->ZeroGrads();
    }
    auto a = whole.Forward(hb.view());
    auto b = blocked.Forward(hb.view());
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->tokens, b->tokens);
    EXPECT_NEAR(b->loss, a->loss, 1e-6 * a->loss);
    EXPECT_NEAR(b->nll, a->nll, 1e-6 * a->nll);
    // The blocked model keeps its last block: rows 30 and 31.
    EXPECT_LT(MaxRel(blocked.logits(), whole.logits() + 30 * V, 2 * V), 1e-6);
    whole.Backward(1.0f);
    blocked.Backward(1.0f);
    for (size_t i = 0; i < whole.params().params().size(); ++i) {
      const ParamInfo& p = whole.params().params()[i];
      EXPECT_LT(L2Rel(blocked.params().grad(static_cast<int>(i)),
                      whole.params().grad(static_cast<int>(i)), p.numel),
                1e-5)
          << p.name << (c.normalize_before ? " (pre-norm)" : " (post-norm)");
    }
  }
}

// The output layer with a bias (the LSTM's and ConvS2S's untied fc_out): blocks of 5 rows give
// the loss, the bf16 loss gradient and the bias's gradient (summed before rounding) of the
// unfused ops — the GEMM with the bias, the loss, its gradient in fp32, its column sums, one cast.
TEST(OutputLoss, BlocksWithABiasEqualTheUnfusedOps) {
  CpuBackend be;
  Context<float> ctx(&be, DType::kBF16);
  const int64_t rows = 23, C = 16, V = 41;
  std::mt19937 rng(4);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> y(rows * C), w(V * C), bias(V);
  for (std::vector<float>* v : {&y, &w, &bias})
    for (float& x : *v) x = u(rng);
  std::vector<int32_t> targets(rows);
  for (int64_t r = 0; r < rows; ++r) targets[r] = r % 7 == 3 ? kPad : static_cast<int32_t>(4 + (r * 5) % (V - 4));
  std::vector<uint16_t> yc(rows * C), wc(V * C);
  be.Cast(y.data(), yc.data(), DType::kBF16, rows * C);
  be.Cast(w.data(), wc.data(), DType::kBF16, V * C);
  // Unfused.
  std::vector<float> logits(rows * V), lse_ref(rows), dbias_ref(V, 0.0f);
  be.GemmBiasAct(rows, V, C, GemmOperand{yc.data(), DType::kBF16, false, C, 0},
                 GemmOperand{wc.data(), DType::kBF16, true, C, 0, true}, bias.data(), GemmActivation::kNone,
                 logits.data(), DType::kF32);
  const CrossEntropyStats ref = be.CrossEntropyForward(logits.data(), targets.data(), lse_ref.data(), rows, V, 0.1f, kPad);
  be.CrossEntropyBackward(logits.data(), lse_ref.data(), targets.data(), logits.data(), DType::kF32, rows, V, 0.1f,
                          kPad, 1.0f);
  be.ColumnSum(logits.data(), dbias_ref.data(), rows, V);
  std::vector<uint16_t> dref(rows * V), dl(rows * V);
  be.Cast(logits.data(), dref.data(), DType::kBF16, rows * V);
  // By blocks of 5 rows.
  Tensor block, dbias;
  std::vector<float> lse(rows);
  const CrossEntropyStats got = ProjectWithLossGradient(ctx, yc.data(), wc.data(), rows, C, V, targets.data(), 0.1f,
                                                        kPad, 5, block, lse.data(), dl.data(), DType::kBF16,
                                                        bias.data(), &dbias);
  EXPECT_EQ(block.numel(), 5 * V);
  EXPECT_EQ(got.tokens, ref.tokens);
  EXPECT_NEAR(got.loss, ref.loss, 1e-9 * ref.loss);
  EXPECT_NEAR(got.nll, ref.nll, 1e-9 * ref.nll);
  EXPECT_LT(MaxRel(lse.data(), lse_ref.data(), rows), 1e-7);
  EXPECT_LT(MaxRel(dbias.data<float>(), dbias_ref.data(), V), 1e-6);
  int64_t differ = 0;
  for (int64_t i = 0; i < rows * V; ++i) differ += dl[i] != dref[i];
  EXPECT_EQ(differ, 0) << "bf16 gradient elements that differ from the unfused ops'";
}

// bf16 training of every family with a loss layer of its own takes the fused path (the loss
// gradient with the loss, by blocks, grad_scale applied as the output GEMMs' alpha, an output
// bias's gradient summed before rounding): the loss and every gradient, scaled by 4 and unscaled,
// against fp32's.
template <typename Model, typename Config>
void ExpectBf16TrainingCloseToFp32(const Config& c, int64_t vocab, const std::string& what) {
  SCOPED_TRACE(what);
  CpuBackend backend;
  Model ref(c, &backend, DType::kF32), low(c, &backend, DType::kBF16);
  const HostBatch hb = RandomBatch(4, 9, 9, vocab, 12);
  const float scale = 4.0f;
  CrossEntropyStats stats[2];
  int k = 0;
  for (Model* m : {&ref, &low}) {
    m->InitParameters(7);
    m->ZeroGrads();
    auto s = m->Forward(hb.view());
    ASSERT_TRUE(s.ok()) << s.status().message();
    stats[k++] = *s;
    m->Backward(scale);
    for (int64_t i = 0; i < m->params().total_numel(); ++i) m->params().grads()[i] /= scale;
  }
  EXPECT_EQ(stats[1].tokens, stats[0].tokens);
  EXPECT_NEAR(stats[1].loss, stats[0].loss, 0.01 * stats[0].loss);
  for (size_t i = 0; i < ref.params().params().size(); ++i) {
    const ParamInfo& p = ref.params().params()[i];
    EXPECT_LT(L2Rel(low.params().grad(static_cast<int>(i)), ref.params().grad(static_cast<int>(i)), p.numel), 0.1)
        << p.name;
  }
}

TEST(MixedPrecision, LmFConvAndLstmBf16ForwardBackwardCloseToFp32) {
  TransformerLmConfig lm;
  lm.d_model = 32;
  lm.heads = 4;
  lm.layers = 2;
  lm.ffn_dim = 48;
  lm.vocab = 37;
  lm.max_positions = 32;
  lm.normalize_before = true;
  lm.activation = Activation::kGelu;
  lm.share_input_output_embed = false;
  lm.dropout = 0.0f;
  ExpectBf16TrainingCloseToFp32<TransformerLm<float>>(lm, lm.vocab, "transformer_lm");
  for (bool tied : {false, true}) {
    FConvConfig c;
    c.encoder_embed = 16;
    c.decoder_embed = 16;
    c.decoder_out_embed = tied ? 16 : 12;  // untied: fc3 is its own weight-normalised Linear
    c.encoder_convs = {{16, 3}, {24, 3}};
    c.decoder_convs = {{16, 3}, {24, 3}};
    c.share_input_output_embed = tied;
    c.src_vocab = 37;
    c.tgt_vocab = 37;
    c.max_positions = 32;
    c.dropout = 0.0f;
    ExpectBf16TrainingCloseToFp32<FConvModel<float>>(c, 37, tied ? "fconv tied" : "fconv untied");
  }
  LstmConfig c;
  c.src_vocab = 37;
  c.tgt_vocab = 37;
  c.encoder_embed = c.encoder_hidden = 16;
  c.decoder_embed = c.decoder_hidden = c.decoder_out_embed = 16;
  c.encoder_dropout_in = c.encoder_dropout_out = c.decoder_dropout_in = c.decoder_dropout_out = 0.0f;
  c.max_positions = 32;
  ExpectBf16TrainingCloseToFp32<LstmModel<float>>(c, 37, "lstm (fc_out with a bias)");
}

std::unique_ptr<Optimizer> Adam(double lr_unused = 0) {
  OptimizerOptions o;
  o.type = "adamw";
  o.beta1 = 0.9;
  o.beta2 = 0.98;
  o.weight_decay = 0.01;
  auto r = MakeOptimizer(o);
  EXPECT_TRUE(r.ok());
  return std::move(r).value();
}

LossScaler Scaler(const std::string& type, double init = 128) {
  LossScalerOptions o;
  o.type = type;
  o.init_scale = init;
  auto r = LossScaler::Make(o);
  EXPECT_TRUE(r.ok());
  return std::move(r).value();
}

// Runs 5 steps of N=4 micro-batches of B and of N=1 batch of 4B from the same initial weights;
// returns the worst relative weight difference (max |a-b| / max |b| per tensor).
double AggregationWorstDiff(const std::string& optimizer, std::string* worst_name) {
  const TransformerConfig c = SmallConfig();
  CpuBackend b1, b2;
  Transformer<float> big(c, &b1, DType::kF32), small(c, &b2, DType::kF32);
  big.InitParameters(9);
  small.InitParameters(9);
  OptimizerOptions oo;
  oo.type = optimizer;
  oo.beta1 = 0.9;
  oo.beta2 = 0.98;
  oo.momentum = 0.9;
  oo.weight_decay = 0.01;
  TrainStep step_big(&big, std::move(MakeOptimizer(oo)).value(), Scaler("none"), 1.0);
  TrainStep step_small(&small, std::move(MakeOptimizer(oo)).value(), Scaler("none"), 1.0);
  const int64_t B = 4, Ts = 7, Tt = 6;
  for (int s = 0; s < 5; ++s) {
    HostBatch whole = RandomBatch(4 * B, Ts, Tt, 47, 100 + s);
    std::vector<HostBatch> parts(4);
    std::vector<Seq2SeqBatch> views;
    for (int m = 0; m < 4; ++m) {
      HostBatch& p = parts[m];
      p.batch = B, p.src_len = Ts, p.tgt_len = Tt;
      p.src.assign(whole.src.begin() + m * B * Ts, whole.src.begin() + (m + 1) * B * Ts);
      p.tin.assign(whole.tin.begin() + m * B * Tt, whole.tin.begin() + (m + 1) * B * Tt);
      p.tout.assign(whole.tout.begin() + m * B * Tt, whole.tout.begin() + (m + 1) * B * Tt);
      views.push_back(p.view());
    }
    Seq2SeqBatch wv = whole.view();
    auto rb = step_big.Run({&wv, 1}, optimizer == "sgd" ? 0.1f : 1e-3f);
    auto rs = step_small.Run(views, optimizer == "sgd" ? 0.1f : 1e-3f);
    EXPECT_TRUE(rb.ok() && rs.ok());
    EXPECT_EQ(rb->tokens, rs->tokens);
    EXPECT_NEAR(rb->loss, rs->loss, 1e-5 * rb->loss);
  }
  double worst = 0;
  for (size_t i = 0; i < big.params().params().size(); ++i) {
    const ParamInfo& p = big.params().params()[i];
    const float* a = small.params().value(static_cast<int>(i));
    const float* b = big.params().value(static_cast<int>(i));
    int64_t n = p.numel;
    double e = MaxRel(a, b, n);
    if (p.name.ends_with("in_proj_bias")) {
      // The key bias (elements C..2C) adds q.b_k to every score of a row, which softmax cancels:
      // its gradient is exactly zero, and what rounding leaves there Adam scales to full-size
      // steps. Compare the query and value parts only.
      const int64_t C = n / 3;
      e = std::max(MaxRel(a, b, C), MaxRel(a + 2 * C, b + 2 * C, C));
    }
    if (e > worst) worst = e, *worst_name = p.name;
  }
  return worst;
}

TEST(Aggregation, FourMicroBatchesEqualOneBatchFourTimesLarger) {
  SingleThread single;
  for (const char* opt : {"sgd", "adamw", "radam"}) {
    std::string name;
    const double worst = AggregationWorstDiff(opt, &name);
    std::printf("aggregation %s: worst weight rel err after 5 steps %.3e (%s)\n", opt, worst,
                name.c_str());
    EXPECT_LT(worst, 1e-5) << opt << " " << name;
  }
}

// The reversal task: source = random symbols, target = the same reversed, then EOS.
HostBatch ReversalBatch(int64_t B, int64_t len, std::mt19937& rng) {
  std::uniform_int_distribution<int32_t> sym(4, 13);
  std::uniform_int_distribution<int64_t> ln(len - 2, len);
  HostBatch h{std::vector<int32_t>(B * len, kPad), std::vector<int32_t>(B * (len + 1), kPad),
              std::vector<int32_t>(B * (len + 1), kPad), B, len, len + 1};
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = ln(rng);
    for (int64_t t = 0; t < n; ++t) h.src[b * len + t] = sym(rng);
    for (int64_t t = 0; t <= n; ++t) {
      const int32_t out = t < n ? h.src[b * len + (n - 1 - t)] : kEos;
      h.tout[b * (len + 1) + t] = out;
      h.tin[b * (len + 1) + t] = t == 0 ? kEos : h.tout[b * (len + 1) + t - 1];
    }
  }
  return h;
}

TransformerConfig ReversalConfig() {
  TransformerConfig c;
  c.d_model = 64;
  c.heads = 4;
  c.ffn_dim = 128;
  c.encoder_layers = 2;
  c.decoder_layers = 2;
  c.dropout = 0.0f;
  c.attention_dropout = 0.0f;
  c.src_vocab = c.tgt_vocab = 14;
  c.share_embeddings = true;
  c.pad_id = kPad;
  c.max_positions = 32;
  c.label_smoothing = 0.1f;
  return c;
}

double TokenAccuracy(Transformer<float>& model, const HostBatch& hb) {
  model.context().training = false;
  auto s = model.Forward(hb.view());
  model.context().training = true;
  if (!s.ok()) return 0;
  const int64_t V = model.config().tgt_vocab;
  int64_t right = 0, total = 0;
  for (int64_t r = 0; r < hb.batch * hb.tgt_len; ++r) {
    if (hb.tout[r] == kPad) continue;
    const float* z = model.logits() + r * V;
    right += std::max_element(z, z + V) - z == hb.tout[r];
    ++total;
  }
  return static_cast<double>(right) / total;
}

// Trains `steps` steps on the reversal task; returns the mean loss per token of the last 10.
double TrainReversal(DType dt, const std::string& scaling, int steps, Transformer<float>** out_model,
                     CpuBackend* backend, std::unique_ptr<Transformer<float>>* holder,
                     uint32_t seed = 21) {
  *holder = std::make_unique<Transformer<float>>(ReversalConfig(), backend, dt);
  Transformer<float>& model = **holder;
  model.InitParameters(seed);
  // Dynamic scaling starts at 2^12 here: at fairseq's 128 the smallest gradients of this
  // small-loss task are subnormal in f16 for the 200 steps before the first growth.
  TrainStep step(&model, Adam(), Scaler(scaling, 4096), 1.0);
  std::mt19937 rng(8 + (seed - 21));
  const double tail = TrainTailLossPerToken(step, steps, 2e-3f, rng,
                                            [](std::mt19937& g) { return ReversalBatch(64, 8, g); });
  if (out_model) *out_model = &model;
  std::printf("%s: %lld skipped steps, final loss scale %g\n", DTypeName(dt),
              static_cast<long long>(step.loss_scaler().skipped_steps()), step.loss_scaler().scale());
  return tail;
}

TEST(Learning, TinyModelLearnsSequenceReversal) {
  SingleThread single;
  CpuBackend backend;
  std::unique_ptr<Transformer<float>> holder;
  Transformer<float>* model = nullptr;
  const double loss = TrainReversal(DType::kF32, "none", 400, &model, &backend, &holder);
  std::mt19937 rng(999);
  HostBatch test = ReversalBatch(128, 8, rng);
  const double acc = TokenAccuracy(*model, test);
  std::printf("reversal: loss/token %.4f, held-out token accuracy %.4f\n", loss, acc);
  EXPECT_GT(acc, 0.99);
}

// The mean over four seeds (initialisation and data): one run's loss after 200 steps moves by
// several percent between seeds in every precision (measured: fp16 -1.8%..+6.6% of its fp32
// twin), so a single seed says more about that seed than about the precision.
TEST(MixedPrecision, LossAfter200StepsWithinTwoPercentOfFp32) {
  SingleThread single;
  CpuBackend backend;
  double l32 = 0, lbf = 0, lfp = 0;
  for (uint32_t seed = 21; seed < 25; ++seed) {
    std::unique_ptr<Transformer<float>> h32, h16, hb16;
    l32 += TrainReversal(DType::kF32, "none", 200, nullptr, &backend, &h32, seed) / 4;
    lbf += TrainReversal(DType::kBF16, "none", 200, nullptr, &backend, &hb16, seed) / 4;
    lfp += TrainReversal(DType::kF16, "dynamic", 200, nullptr, &backend, &h16, seed) / 4;
  }
  std::printf("loss/token after 200 steps, mean of 4 seeds: fp32 %.4f bf16 %.4f fp16 %.4f\n", l32,
              lbf, lfp);
  EXPECT_NEAR(lbf, l32, 0.02 * l32);
  EXPECT_NEAR(lfp, l32, 0.02 * l32);
}

TEST(MixedPrecision, Fp16DynamicScalingSkipsInjectedOverflowAndCarriesOn) {
  CpuBackend backend;
  Transformer<float> model(ReversalConfig(), &backend, DType::kF16);
  model.InitParameters(2);
  TrainStep step(&model, Adam(), Scaler("dynamic", 1024), 1.0);
  int calls = 0;
  step.set_grads_hook([&](std::span<float> grads) {
    if (++calls == 3) grads[grads.size() / 2] = INFINITY;  // an fp16 overflow
  });
  std::mt19937 rng(1);
  std::vector<float> before;
  for (int s = 0; s < 5; ++s) {
    HostBatch hb = ReversalBatch(16, 8, rng);
    Seq2SeqBatch v = hb.view();
    if (s == 2) before.assign(model.params().values(), model.params().values() + model.params().total_numel());
    auto r = step.Run({&v, 1}, 1e-3f);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    if (s == 2) {
      EXPECT_TRUE(r->skipped);
      EXPECT_EQ(r->loss_scale, 1024.0f);
      EXPECT_EQ(step.loss_scaler().scale(), 512.0f);
      EXPECT_EQ(0, std::memcmp(before.data(), model.params().values(), before.size() * 4));
    } else {
      EXPECT_FALSE(r->skipped) << s;
      EXPECT_TRUE(std::isfinite(r->loss));
    }
  }
  EXPECT_EQ(step.loss_scaler().skipped_steps(), 1);
  EXPECT_EQ(step.optimizer().step_count(), 4);
}

TEST(Memory, SteadyStateStepAllocatesNoBuffers) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    CpuBackend backend;
    TransformerConfig c = SmallConfig();
    c.dropout = 0.1f;
    c.attention_dropout = 0.1f;
    Transformer<float> model(c, &backend, dt);
    model.InitParameters(1);
    TrainStep step(&model, Adam(), Scaler("none"), 1.0);
    HostBatch hb = RandomBatch(4, 9, 8, 47, 6);
    Seq2SeqBatch v = hb.view();
    for (int i = 0; i < 2; ++i) ASSERT_TRUE(step.Run({&v, 1}, 1e-3f).ok());
    const AllocatorStats before = CachingAllocator::Cpu().stats();
    std::vector<int64_t> news;
    for (int i = 0; i < 3; ++i) {
      const int64_t n0 = g_news.load();
      ASSERT_TRUE(step.Run({&v, 1}, 1e-3f).ok());
      news.push_back(g_news.load() - n0);
    }
    const AllocatorStats after = CachingAllocator::Cpu().stats();
    // Every engine buffer (activations, gradients, scratch) was planned by the first steps.
    EXPECT_EQ(after.system_allocations, before.system_allocations) << DTypeName(dt);
    EXPECT_EQ(after.cache_hits, before.cache_hits) << DTypeName(dt);
    EXPECT_EQ(after.peak_bytes_in_use, before.peak_bytes_in_use) << DTypeName(dt);
    // What remains on the C++ heap is oneDNN's per-execution argument map (a few small nodes
    // per primitive execution, freed at once): constant per step, never growing.
    EXPECT_EQ(news[1], news[0]);
    EXPECT_EQ(news[2], news[0]);
    std::printf("%s: %lld small C++ heap allocations per step (oneDNN execution contexts)\n",
                DTypeName(dt), static_cast<long long>(news[0]));
  }
}

TEST(Memory, GemmHeapAllocationsComeFromOneDnnOnly) {
  CpuBackend backend;
  std::vector<float> a(64 * 64, 1), b(64 * 64, 1), c(64 * 64);
  auto gemm = [&] {
    backend.Gemm(1, 64, 64, 64, GemmOperand{a.data(), DType::kF32, false, 64, 0},
                 GemmOperand{b.data(), DType::kF32, false, 64, 0}, c.data(), 64, 0, 1, 0);
  };
  gemm();
  const int64_t n0 = g_news.load();
  gemm();
  const int64_t per_gemm = g_news.load() - n0;
  std::vector<float> x(1 << 16, 1.0f), y(1 << 16);
  const int64_t n1 = g_news.load();
  backend.BiasDropoutResidualForward(x.data(), nullptr, x.data(), y.data(), 256, 256, 0.1f, {1, 2});
  backend.LayerNormForward(x.data(), x.data(), x.data(), y.data(), x.data() + 1000, x.data() + 2000, 4, 256, 1e-5f);
  EXPECT_EQ(g_news.load(), n1) << "elementwise kernels must not allocate";
  std::printf("C++ heap allocations per oneDNN matmul execution: %lld\n", static_cast<long long>(per_gemm));
  EXPECT_LE(per_gemm, 8);
}

TEST(WeightsIo, RoundTripThroughSafetensors) {
  CpuBackend backend;
  TransformerConfig c = SmallConfig();
  Transformer<float> a(c, &backend, DType::kF32), b(c, &backend, DType::kF32);
  a.InitParameters(1);
  b.InitParameters(2);
  testing::TempDir dir;
  const std::string path = dir.path() + "/w.safetensors";
  ASSERT_TRUE(SaveWeights(a, path).ok());
  ASSERT_TRUE(LoadWeights(b, path).ok());
  EXPECT_EQ(0, std::memcmp(a.params().values(), b.params().values(), a.params().total_numel() * 4));
  auto file = safetensors::SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->metadata().at("d_model"), "32");
  const safetensors::TensorInfo* t = file->Find("decoder.layers.1.encoder_attn.in_proj_weight");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->shape, (std::vector<int64_t>{96, 32}));
  // A model of another shape refuses the file: its metadata names the setting that differs...
  TransformerConfig other = c;
  other.ffn_dim = 40;
  Transformer<float> d(other, &backend, DType::kF32);
  Status s = LoadWeights(d, path);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("ffn_dim is 48 in the weights, 40 in this model"), std::string::npos) << s.ToString();
  // ...and a file without metadata (written before it was stored) is refused by shape, naming
  // the tensor.
  std::vector<safetensors::TensorView> views;
  for (size_t i = 0; i < a.params().params().size(); ++i) {
    const ParamInfo& p = a.params().params()[i];
    views.push_back(safetensors::F32View(p.name, p.shape,
                                         {a.params().value(static_cast<int>(i)), static_cast<size_t>(p.numel)}));
  }
  const std::string bare = dir.path() + "/bare.safetensors";
  ASSERT_TRUE(safetensors::WriteFile(bare, views).ok());
  ASSERT_TRUE(LoadWeights(b, bare).ok());
  s = LoadWeights(d, bare);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("fc1"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace sf
