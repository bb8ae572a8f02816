// The recurrent layers and fairseq's lstm model against PyTorch, on every backend, in mixed
// precision:
// - the whole model (trainer/models/lstm_model.h) against fairseq's LSTMModel and its loss
//   (tests/trainer/reference/lstm_model_reference.py): loss, logits, every gradient;
// - the LSTM layer (trainer/nn/lstm.h) against nn.LSTM on the same packed batch, and the
//   two-layer bidirectional stack (lstm_stack.h) against nn.LSTM(num_layers=2, bidirectional);
// - fairseq's LSTM encoder (lstm_encoder.h) against its steps in PyTorch (embedding,
//   pack_padded_sequence, nn.LSTM, pad_packed_sequence, combine_bidir), and its LSTM decoder
//   (lstm_decoder.h) against its loop written with nn.LSTMCell and torch ops
//   (tests/trainer/reference/lstm_encoder_reference.py, lstm_decoder_reference.py);
// fp32 engine vs float64 torch: outputs, input gradients, every parameter gradient, the initial
// states' gradients. Each also on the guarded device path (CPU kernels on memory the host may not
// touch) bit for bit, on a GPU within 1e-5 where one is present, and with bf16 GEMM operands
// within bf16 rounding of fp32. Their backward against finite differences is in layers_test.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "tests/support/testing.h"
#include "tests/trainer/test_backends.h"
#include "trainer/core/safetensors.h"
#include "trainer/kernels/cpu/cpu_backend.h"
#include "trainer/models/lstm_model.h"
#include "trainer/nn/lstm.h"
#include "trainer/nn/lstm_decoder.h"
#include "trainer/nn/lstm_encoder.h"
#include "trainer/nn/lstm_stack.h"

namespace sf {
namespace {

constexpr int64_t kIn = 24, kHidden = 32;
// Sequences of lengths 6, 5, 5, 3 and 1, packed as PyTorch does.
const std::vector<int64_t> kBatchSizes = {5, 4, 4, 3, 3, 1};
constexpr int64_t kRows = 20, kBatch = 5;

std::vector<float> Random(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

struct Result {
  std::vector<float> y, dx, dh0, dc0;
  std::vector<std::vector<float>> grads;  // per parameter, in declaration order
  std::vector<std::string> names;
  std::vector<std::vector<float>> values;
  std::vector<std::vector<int64_t>> shapes;
};

// Parameters uniform in [-scale, scale] from `seed`, written to the backend's memory and mirrored
// in `compute`.
void FillParams(ParamStore<float>& store, Backend<float>& backend, DType compute, uint32_t seed, float scale) {
  float* host = store.host_values();
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  for (int64_t i = 0; i < store.total_numel(); ++i) host[i] = u(rng);
  store.PushValues();
  store.RefreshMirror(backend, compute);
}

// A host vector copied into a tensor of the backend's memory.
Tensor Stage(Backend<float>& backend, const std::vector<float>& h) {
  Tensor t({static_cast<int64_t>(h.size())}, DType::kF32, backend.allocator());
  t.CopyFromHost(h.data());
  return t;
}

// One forward and backward of the layer on `backend` with GEMM operands in `compute`.
Result RunLayer(Backend<float>& backend, DType compute, bool initial) {
  Context<float> ctx(&backend, compute);
  ParamStore<float> store;
  Lstm<float> lstm(store, "", "l0", kIn, kHidden);
  store.Finalize(backend.allocator());
  FillParams(store, backend, compute, 5, 0.3f);
  auto stage = [&](const std::vector<float>& h) { return Stage(backend, h); };
  Tensor x = stage(Random(kRows * kIn, 1)), dy = stage(Random(kRows * kHidden, 2));
  Tensor h0 = stage(Random(kBatch * kHidden, 3, 0.5f)), c0 = stage(Random(kBatch * kHidden, 4, 2.0f));
  Tensor dx({kRows * kIn}, DType::kF32, backend.allocator());
  const float* y = lstm.Forward(ctx, x.data<float>(), kBatchSizes, initial ? h0.data<float>() : nullptr,
                                initial ? c0.data<float>() : nullptr);
  lstm.Backward(ctx, dy.data<float>(), dx.data<float>(), 0.0f);
  auto get = [&](const float* p, int64_t n) {
    std::vector<float> h(n);
    backend.CopyToHost(h.data(), p, n * sizeof(float));
    return h;
  };
  Result r;
  r.y = get(y, kRows * kHidden);
  r.dx = get(dx.data<float>(), kRows * kIn);
  r.dh0 = get(lstm.dh0(), kBatch * kHidden);
  r.dc0 = get(lstm.dc0(), kBatch * kHidden);
  for (size_t i = 0; i < store.params().size(); ++i) {
    const ParamInfo& p = store.params()[i];
    r.names.push_back(p.name);
    r.shapes.push_back(p.shape);
    r.grads.push_back(get(store.grad(static_cast<int>(i)), p.numel));
    r.values.push_back(get(store.value(static_cast<int>(i)), p.numel));
  }
  return r;
}

double MaxRel(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 1e-30;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::fabs(static_cast<double>(a[i]) - b[i]));
    den = std::max(den, std::fabs(static_cast<double>(b[i])));
  }
  return num / den;
}

// Every parameter's value and ("ours.grad.<name>") gradient, as the reference scripts read them.
void AddParams(std::vector<safetensors::TensorView>& views, ParamStore<float>& store) {
  for (size_t i = 0; i < store.params().size(); ++i) {
    const ParamInfo& p = store.params()[i];
    views.push_back(safetensors::F32View(p.name, p.shape, {store.value(static_cast<int>(i)), static_cast<size_t>(p.numel)}));
    views.push_back(safetensors::F32View("ours.grad." + p.name, p.shape,
                                         {store.grad(static_cast<int>(i)), static_cast<size_t>(p.numel)}));
  }
}

// Writes the case and has tests/trainer/reference/<script> recompute and compare it; the script's
// report must name `must_name`. Fails (not skips) when python3 or torch is missing: the
// comparison is required in CI.
void CompareWithPyTorch(const std::string& script, const std::vector<safetensors::TensorView>& views,
                        const std::string& must_name) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/case.safetensors";
  ASSERT_TRUE(safetensors::WriteFile(path, views, {}).ok());
  int status = 0;
  const std::string out = testing::RunShellCommand(
      "/usr/bin/python3 " + testing::SourceDir() + "/tests/trainer/reference/" + script + " " + path, &status);
  std::printf("%s", out.c_str());
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("worst:"), std::string::npos) << out;
  EXPECT_NE(out.find(must_name), std::string::npos) << out;
}

TEST(LstmLayer, MatchesPyTorchsLstmOnAPackedBatchWithAndWithoutAnInitialState) {
  for (bool initial : {false, true}) {
    CpuBackend backend;
    Result r = RunLayer(backend, DType::kF32, initial);
    const std::vector<float> x = Random(kRows * kIn, 1), dy = Random(kRows * kHidden, 2);
    const std::vector<float> h0 = Random(kBatch * kHidden, 3, 0.5f), c0 = Random(kBatch * kHidden, 4, 2.0f);
    std::vector<int32_t> sizes(kBatchSizes.begin(), kBatchSizes.end());
    std::vector<safetensors::TensorView> views;
    for (size_t i = 0; i < r.names.size(); ++i) {
      views.push_back(safetensors::F32View(r.names[i], r.shapes[i], r.values[i]));
      views.push_back(safetensors::F32View("ours.grad." + r.names[i], r.shapes[i], r.grads[i]));
    }
    views.push_back(safetensors::F32View("input.x", {kRows, kIn}, x));
    views.push_back(safetensors::F32View("input.dy", {kRows, kHidden}, dy));
    views.push_back({"input.batch_sizes", safetensors::DType::kI32, {static_cast<int64_t>(sizes.size())},
                     std::as_bytes(std::span<const int32_t>(sizes))});
    if (initial) {
      views.push_back(safetensors::F32View("input.h0", {kBatch, kHidden}, h0));
      views.push_back(safetensors::F32View("input.c0", {kBatch, kHidden}, c0));
      views.push_back(safetensors::F32View("ours.dh0", {kBatch, kHidden}, r.dh0));
      views.push_back(safetensors::F32View("ours.dc0", {kBatch, kHidden}, r.dc0));
    }
    views.push_back(safetensors::F32View("ours.y", {kRows, kHidden}, r.y));
    views.push_back(safetensors::F32View("ours.dx", {kRows, kIn}, r.dx));
    std::printf("initial state %d:\n", initial);
    CompareWithPyTorch("lstm_reference.py", views, initial ? "dc0" : "weight_hh_l0");
  }
}

// fairseq's encoder LSTM: two layers, both directions, over a batch given in no particular order
// (packed by PackLengths), against nn.LSTM(num_layers=2, bidirectional=True).
TEST(LstmStack, TwoBidirectionalLayersMatchPyTorchsLstm) {
  constexpr int64_t in = 12, hid = 16;
  const std::vector<int64_t> lengths = {3, 7, 1, 7, 4};
  auto layout = PackLengths(lengths);
  ASSERT_TRUE(layout.ok());
  const int64_t n = layout->rows();
  CpuBackend backend;
  Context<float> ctx(&backend, DType::kF32);
  ParamStore<float> store;
  LstmStack<float> stack(store, "", in, hid, 2, true);
  store.Finalize(backend.allocator());
  std::mt19937 rng(8);
  std::uniform_real_distribution<float> u(-0.4f, 0.4f);
  for (int64_t i = 0; i < store.total_numel(); ++i) store.values()[i] = u(rng);
  const std::vector<float> x = Random(n * in, 9), dy = Random(n * 2 * hid, 10);
  std::vector<float> dy_f(n * hid), dy_b(n * hid), dx(n * in);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t j = 0; j < hid; ++j) {
      dy_f[r * hid + j] = dy[r * 2 * hid + j];
      dy_b[r * hid + j] = dy[r * 2 * hid + hid + j];
    }
  }
  const std::vector<const float*> top = stack.Forward(ctx, x.data(), in, *layout);
  ASSERT_EQ(top.size(), 2u);
  std::vector<float> y(n * 2 * hid);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t j = 0; j < hid; ++j) {
      y[r * 2 * hid + j] = top[0][r * hid + j];
      y[r * 2 * hid + hid + j] = top[1][r * hid + j];
    }
  }
  stack.Backward(ctx, {dy_f.data(), dy_b.data()}, dx.data(), 0.0f);

  std::vector<int32_t> sizes(layout->batch_sizes.begin(), layout->batch_sizes.end());
  std::vector<safetensors::TensorView> views;
  std::vector<std::vector<float>> keep;
  AddParams(views, store);
  views.push_back(safetensors::F32View("input.x", {n, in}, x));
  views.push_back(safetensors::F32View("input.dy", {n, 2 * hid}, dy));
  views.push_back({"input.batch_sizes", safetensors::DType::kI32, {static_cast<int64_t>(sizes.size())},
                   std::as_bytes(std::span<const int32_t>(sizes))});
  views.push_back(safetensors::F32View("ours.y", {n, 2 * hid}, y));
  views.push_back(safetensors::F32View("ours.dx", {n, in}, dx));
  CompareWithPyTorch("lstm_reference.py", views, "weight_hh_l1_reverse");
}

// fairseq's LSTM decoder (two layers, input feeding, attention over a padded source, given
// initial states) against the same loop written with torch.nn.LSTMCell and torch ops.
TEST(LstmDecoder, MatchesFairseqsDecoderLoopInPyTorch) {
  constexpr int64_t steps = 6, batch = 4, src = 7, embed = 10, hid = 12, units = 16;
  constexpr int layers = 2;
  CpuBackend backend;
  Context<float> ctx(&backend, DType::kF32);
  ParamStore<float> store;
  LstmDecoder<float> dec(store, "", embed, hid, layers, units);
  store.Finalize(backend.allocator());
  std::mt19937 rng(12);
  std::uniform_real_distribution<float> u(-0.4f, 0.4f);
  for (int64_t i = 0; i < store.total_numel(); ++i) store.values()[i] = u(rng);
  const std::vector<float> x = Random(steps * batch * embed, 13), enc = Random(src * batch * units, 14);
  const std::vector<float> dy = Random(steps * batch * hid, 15);
  std::vector<std::vector<float>> h0, c0;
  for (int i = 0; i < layers; ++i) {
    h0.push_back(Random(batch * hid, 16 + i, 0.5f));
    c0.push_back(Random(batch * hid, 18 + i, 1.5f));
  }
  std::vector<uint8_t> padding(batch * src, 0);
  for (int64_t s = 4; s < src; ++s) padding[2 * src + s] = 1;  // sentence 2 has 4 source positions
  padding[3 * src + 6] = 1;
  const float* y = dec.Forward(ctx, x.data(), steps, batch, enc.data(), src, padding.data(),
                               {h0[0].data(), h0[1].data()}, {c0[0].data(), c0[1].data()});
  std::vector<float> ys(y, y + steps * batch * hid), dx(x.size()), denc(enc.size(), 0.0f);
  dec.Backward(ctx, dy.data(), dx.data(), denc.data());

  std::vector<int32_t> pad32(padding.begin(), padding.end());
  std::vector<std::vector<float>> keep;
  std::vector<safetensors::TensorView> views;
  AddParams(views, store);
  for (int i = 0; i < layers; ++i) {
    keep.emplace_back(dec.dh0(i), dec.dh0(i) + batch * hid);
    keep.emplace_back(dec.dc0(i), dec.dc0(i) + batch * hid);
  }
  for (int i = 0; i < layers; ++i) {
    const std::string n = std::to_string(i);
    views.push_back(safetensors::F32View("input.h0." + n, {batch, hid}, h0[i]));
    views.push_back(safetensors::F32View("input.c0." + n, {batch, hid}, c0[i]));
    views.push_back(safetensors::F32View("ours.dh0." + n, {batch, hid}, keep[2 * i]));
    views.push_back(safetensors::F32View("ours.dc0." + n, {batch, hid}, keep[2 * i + 1]));
  }
  views.push_back(safetensors::F32View("input.x", {steps, batch, embed}, x));
  views.push_back(safetensors::F32View("input.enc", {src, batch, units}, enc));
  views.push_back(safetensors::F32View("input.dy", {steps, batch, hid}, dy));
  views.push_back({"input.padding", safetensors::DType::kI32, {batch, src}, std::as_bytes(std::span<const int32_t>(pad32))});
  views.push_back(safetensors::F32View("ours.y", {steps, batch, hid}, ys));
  views.push_back(safetensors::F32View("ours.dx", {steps, batch, embed}, dx));
  views.push_back(safetensors::F32View("ours.denc", {src, batch, units}, denc));
  CompareWithPyTorch("lstm_decoder_reference.py", views, "attention.output_proj.weight");
}

// fairseq's LSTM encoder (embeddings, two bidirectional layers over right-padded sentences in no
// particular length order, outputs and combined final states) against fairseq's steps in PyTorch.
TEST(LstmEncoder, MatchesFairseqsEncoderInPyTorch) {
  constexpr int64_t batch = 4, src = 6, vocab = 20, embed = 10, hid = 12, D = 2 * hid;
  constexpr int32_t pad = 1;
  CpuBackend backend;
  Context<float> ctx(&backend, DType::kF32);
  ParamStore<float> store;
  LstmEncoder<float> enc(store, "", vocab, embed, hid, 2, true, 0.0f, 0.0f, pad);
  store.Finalize(backend.allocator());
  FillParams(store, backend, DType::kF32, 17, 0.4f);
  const std::vector<int32_t> tokens = {5, 6, 7, 2, 1, 1,      //
                                       8, 9, 10, 11, 12, 2,   //
                                       13, 2, 1, 1, 1, 1,     //
                                       14, 15, 16, 17, 2, 1};
  std::vector<float> w = Random(src * batch * D, 18);
  for (int64_t s = 0; s < src; ++s) {
    for (int64_t b = 0; b < batch; ++b) {
      if (tokens[b * src + s] == pad) std::fill_n(w.begin() + (s * batch + b) * D, D, 0.0f);
    }
  }
  std::vector<std::vector<float>> wh, wc;
  for (int l = 0; l < 2; ++l) {
    wh.push_back(Random(batch * D, 19 + l));
    wc.push_back(Random(batch * D, 21 + l));
  }
  ASSERT_TRUE(enc.Forward(ctx, tokens.data(), batch, src).ok());
  std::vector<float> out(enc.outputs(), enc.outputs() + src * batch * D);
  std::vector<std::vector<float>> fh, fc;
  for (int l = 0; l < 2; ++l) {
    fh.emplace_back(enc.final_h(l), enc.final_h(l) + batch * D);
    fc.emplace_back(enc.final_c(l), enc.final_c(l) + batch * D);
  }
  enc.Backward(ctx, w.data(), {wh[0].data(), wh[1].data()}, {wc[0].data(), wc[1].data()});

  const std::vector<int32_t> pad_value = {pad};
  std::vector<safetensors::TensorView> views;
  AddParams(views, store);
  views.push_back({"input.src", safetensors::DType::kI32, {batch, src}, std::as_bytes(std::span<const int32_t>(tokens))});
  views.push_back({"input.pad", safetensors::DType::kI32, {1}, std::as_bytes(std::span<const int32_t>(pad_value))});
  views.push_back(safetensors::F32View("input.w", {src, batch, D}, w));
  views.push_back(safetensors::F32View("ours.out", {src, batch, D}, out));
  for (int l = 0; l < 2; ++l) {
    const std::string n = std::to_string(l);
    views.push_back(safetensors::F32View("input.wh." + n, {batch, D}, wh[l]));
    views.push_back(safetensors::F32View("input.wc." + n, {batch, D}, wc[l]));
    views.push_back(safetensors::F32View("ours.final_h." + n, {batch, D}, fh[l]));
    views.push_back(safetensors::F32View("ours.final_c." + n, {batch, D}, fc[l]));
  }
  CompareWithPyTorch("lstm_encoder_reference.py", views, "final_c.1");
}

// fairseq's lstm model, whole (a bidirectional 2-layer encoder, the decoder's states through the
// encoder projections, additional_fc, fc_out; and a unidirectional variant sharing the output
// projection with the decoder's embedding): logits, the label-smoothed loss and every gradient
// against the same model and fairseq's loss in PyTorch.
TEST(LstmModel, MatchesFairseqsLstmModelInPyTorch) {
  // Case 2: GNMT's residual connections from layer 2 of three, both sides, bidirectional.
  // Case 3: GNMT's encoder: the first of three layers both ways, the others one way, residual
  // connections from layer 3, the decoder as wide as the encoder (no projections).
  for (int which : {0, 1, 2, 3}) {
    const bool shared = which == 1, residual = which >= 2, gnmt = which == 3;
    LstmConfig c;
    c.src_vocab = 30;
    c.tgt_vocab = 25;
    c.encoder_embed = 12;
    c.encoder_hidden = 10;
    c.encoder_layers = 2;
    c.encoder_bidirectional = !shared;
    c.decoder_embed = 14;
    c.decoder_hidden = shared ? 10 : 16;
    c.decoder_out_embed = shared ? 14 : 18;
    c.decoder_layers = 2;
    c.share_decoder_input_output_embed = shared;
    if (residual) {
      c.encoder_layers = c.decoder_layers = 3;
      c.residual_from = 2;
    }
    if (gnmt) {
      c.encoder_bidirectional_layers = 1;
      c.residual_from = 3;
      c.decoder_hidden = c.encoder_hidden;
    }
    ASSERT_TRUE(c.Validate().ok());
    CpuBackend backend;
    LstmModel<float> model(c, &backend, DType::kF32);
    model.context().training = false;  // no dropout: PyTorch's masks would differ
    FillParams(model.params(), backend, DType::kF32, 31, 0.3f);
    const std::vector<int32_t> src = {5, 6, 7, 8, 2, 1, 9, 2, 1, 1, 1, 1, 10, 11, 12, 13, 14, 2};
    const std::vector<int32_t> tin = {2, 5, 6, 7, 8, 2, 9, 1, 1, 1, 2, 10, 11, 12, 13};
    const std::vector<int32_t> tout = {5, 6, 7, 8, 2, 9, 2, 1, 1, 1, 10, 11, 12, 13, 2};
    Seq2SeqBatch b{src.data(), tin.data(), tout.data(), 3, 6, 5};
    auto stats = model.Forward(b);
    ASSERT_TRUE(stats.ok()) << stats.status().message();
    const int64_t rows = b.batch * b.tgt_len;
    std::vector<float> logits(model.logits(), model.logits() + rows * c.tgt_vocab);
    model.Backward(1.0f);
    const std::vector<float> loss = {static_cast<float>(stats->loss)}, eps = {c.label_smoothing};
    const std::vector<int32_t> pad = {c.pad_id}, residual_from = {c.residual_from};
    std::vector<safetensors::TensorView> views;
    AddParams(views, model.params());
    if (residual) {
      views.push_back({"input.residual_from", safetensors::DType::kI32, {1},
                       std::as_bytes(std::span<const int32_t>(residual_from))});
    }
    views.push_back({"batch.src", safetensors::DType::kI32, {3, 6}, std::as_bytes(std::span<const int32_t>(src))});
    views.push_back({"batch.tgt_in", safetensors::DType::kI32, {3, 5}, std::as_bytes(std::span<const int32_t>(tin))});
    views.push_back({"batch.tgt_out", safetensors::DType::kI32, {3, 5}, std::as_bytes(std::span<const int32_t>(tout))});
    views.push_back({"input.pad", safetensors::DType::kI32, {1}, std::as_bytes(std::span<const int32_t>(pad))});
    views.push_back(safetensors::F32View("input.eps", {1}, eps));
    views.push_back(safetensors::F32View("ours.loss", {1}, loss));
    views.push_back(safetensors::F32View("ours.logits", {rows, c.tgt_vocab}, logits));
    std::printf("shared %d residual %d gnmt %d:\n", shared, residual, gnmt);
    if (gnmt) {  // layer 2 reads both directions of layer 1 and runs one way
      EXPECT_EQ(model.params().params()[model.params().Find("encoder.lstm.weight_ih_l1")].shape[1], 2 * c.encoder_hidden);
      EXPECT_LT(model.params().Find("encoder.lstm.weight_ih_l1_reverse"), 0);
      EXPECT_LT(model.params().Find("decoder.encoder_hidden_proj.weight"), 0);
    }
    CompareWithPyTorch("lstm_model_reference.py", views,
                       gnmt       ? "encoder.lstm.weight_hh_l0_reverse"
                       : residual ? "encoder.lstm.weight_hh_l2_reverse"
                       : shared   ? "decoder.additional_fc.bias"
                                  : "decoder.encoder_cell_proj.bias");
  }
}

class LstmBackends : public ::testing::TestWithParam<std::string> {
 protected:
  // The backend the parameter names (null, with why, when there is none here) and how far its
  // results may be from the CPU's: the guarded path runs the CPU kernels (0); a GPU's GEMMs and
  // transcendental functions round differently.
  std::unique_ptr<Backend<float>> Make(double* tolerance, std::string* why) {
    *tolerance = GetParam() == "guarded" ? 0 : 1e-5;
    return testing::MakeTestBackend(GetParam(), why);
  }
};

TEST_P(LstmBackends, EqualsTheCpuLayer) {
  double tolerance = 0;
  std::string why;
  std::unique_ptr<Backend<float>> backend = Make(&tolerance, &why);
  if (!backend) GTEST_SKIP() << why;
  CpuBackend cpu;
  const Result want = RunLayer(cpu, DType::kF32, true);
  const Result got = RunLayer(*backend, DType::kF32, true);
  EXPECT_LE(MaxRel(got.y, want.y), tolerance);
  EXPECT_LE(MaxRel(got.dx, want.dx), tolerance);
  EXPECT_LE(MaxRel(got.dh0, want.dh0), tolerance);
  EXPECT_LE(MaxRel(got.dc0, want.dc0), tolerance);
  for (size_t i = 0; i < want.grads.size(); ++i) EXPECT_LE(MaxRel(got.grads[i], want.grads[i]), tolerance) << want.names[i];
}

// Two bidirectional layers with dropout (training) on `backend`: outputs, dx and every gradient,
// back on the host in one vector.
std::vector<float> RunStack(Backend<float>& backend) {
  auto layout = PackLengths({3, 7, 1, 7, 4});
  const int64_t n = layout->rows(), in = 12, hid = 16;
  Context<float> ctx(&backend, DType::kF32);
  ctx.seed = 3;
  ParamStore<float> store;
  LstmStack<float> stack(store, "", in, hid, 2, true, 0.25f);
  store.Finalize(backend.allocator());
  FillParams(store, backend, DType::kF32, 8, 0.4f);
  auto stage = [&](const std::vector<float>& h) { return Stage(backend, h); };
  Tensor x = stage(Random(n * in, 9)), dyf = stage(Random(n * hid, 10)), dyb = stage(Random(n * hid, 11));
  Tensor dx({n * in}, DType::kF32, backend.allocator());
  auto top = stack.Forward(ctx, x.data<float>(), in, *layout);
  std::vector<float> all(2 * n * hid + n * in + store.total_numel());
  backend.CopyToHost(all.data(), top[0], n * hid * sizeof(float));
  backend.CopyToHost(all.data() + n * hid, top[1], n * hid * sizeof(float));
  stack.Backward(ctx, {dyf.data<float>(), dyb.data<float>()}, dx.data<float>(), 0.0f);
  backend.CopyToHost(all.data() + 2 * n * hid, dx.data<float>(), n * in * sizeof(float));
  store.CopyGradsToHost(all.data() + 2 * n * hid + n * in);
  return all;
}

TEST_P(LstmBackends, TheBidirectionalStackWithDropoutEqualsTheCpuStack) {
  double tolerance = 0;
  std::string why;
  std::unique_ptr<Backend<float>> backend = Make(&tolerance, &why);
  if (!backend) GTEST_SKIP() << why;
  CpuBackend cpu;
  EXPECT_LE(MaxRel(RunStack(*backend), RunStack(cpu)), tolerance);
}

// The decoder (two layers, attention over a padded source, dropout, initial states) on
// `backend` with GEMM operands in `compute`: outputs, dx, d_enc and every gradient on the host.
std::vector<float> RunDecoder(Backend<float>& backend, DType compute) {
  constexpr int64_t steps = 5, batch = 3, src = 6, embed = 8, hid = 12, units = 10;
  Context<float> ctx(&backend, compute);
  ctx.seed = 9;
  ParamStore<float> store;
  LstmDecoder<float> dec(store, "", embed, hid, 2, units, 0.2f, 50);
  store.Finalize(backend.allocator());
  FillParams(store, backend, compute, 12, 0.4f);
  auto stage = [&](const std::vector<float>& h) { return Stage(backend, h); };
  std::vector<uint8_t> padding(batch * src, 0);
  padding[1 * src + 5] = padding[1 * src + 4] = 1;
  Tensor pad({batch * src}, DType::kU8, backend.allocator());
  pad.CopyFromHost(padding.data());
  Tensor x = stage(Random(steps * batch * embed, 13)), enc = stage(Random(src * batch * units, 14));
  Tensor dy = stage(Random(steps * batch * hid, 15)), h0 = stage(Random(batch * hid, 16)), c0 = stage(Random(batch * hid, 17));
  Tensor dx({steps * batch * embed}, DType::kF32, backend.allocator());
  Tensor denc = stage(std::vector<float>(src * batch * units, 0.0f));
  const float* y = dec.Forward(ctx, x.data<float>(), steps, batch, enc.data<float>(), src, pad.data<uint8_t>(),
                               {h0.data<float>(), h0.data<float>()}, {c0.data<float>(), c0.data<float>()});
  std::vector<float> all(steps * batch * (hid + embed) + src * batch * units + store.total_numel());
  backend.CopyToHost(all.data(), y, steps * batch * hid * sizeof(float));
  dec.Backward(ctx, dy.data<float>(), dx.data<float>(), denc.data<float>());
  float* at = all.data() + steps * batch * hid;
  backend.CopyToHost(at, dx.data<float>(), steps * batch * embed * sizeof(float));
  at += steps * batch * embed;
  backend.CopyToHost(at, denc.data<float>(), src * batch * units * sizeof(float));
  store.CopyGradsToHost(at + src * batch * units);
  return all;
}

TEST_P(LstmBackends, TheDecoderEqualsTheCpuDecoder) {
  double tolerance = 0;
  std::string why;
  std::unique_ptr<Backend<float>> backend = Make(&tolerance, &why);
  if (!backend) GTEST_SKIP() << why;
  CpuBackend cpu;
  EXPECT_LE(MaxRel(RunDecoder(*backend, DType::kF32), RunDecoder(cpu, DType::kF32)), tolerance);
}

TEST(LstmDecoder, Bf16GemmOperandsStayWithinBf16RoundingOfFp32) {
  CpuBackend backend;
  const std::vector<float> fp32 = RunDecoder(backend, DType::kF32), bf16 = RunDecoder(backend, DType::kBF16);
  EXPECT_LT(MaxRel(bf16, fp32), 3e-2);
  EXPECT_GT(MaxRel(bf16, fp32), 0) << "bf16 operands must change something";
}

// The encoder (two bidirectional layers, all three dropouts, final states) on `backend`: outputs,
// final states and every gradient on the host.
std::vector<float> RunEncoder(Backend<float>& backend) {
  constexpr int64_t batch = 3, src = 5, vocab = 12, embed = 8, hid = 6, D = 2 * hid;
  Context<float> ctx(&backend, DType::kF32);
  ctx.seed = 4;
  ParamStore<float> store;
  LstmEncoder<float> enc(store, "encoder.", vocab, embed, hid, 2, true, 0.2f, 0.3f, 1, 70);
  store.Finalize(backend.allocator());
  FillParams(store, backend, DType::kF32, 23, 0.4f);
  const std::vector<int32_t> tokens = {4, 5, 2, 1, 1, 6, 7, 8, 9, 2, 10, 2, 1, 1, 1};
  EXPECT_TRUE(enc.Forward(ctx, tokens.data(), batch, src).ok());
  std::vector<float> all((src + 4) * batch * D + store.total_numel());
  backend.CopyToHost(all.data(), enc.outputs(), src * batch * D * sizeof(float));
  float* at = all.data() + src * batch * D;
  for (int l = 0; l < 2; ++l) {
    backend.CopyToHost(at, enc.final_h(l), batch * D * sizeof(float));
    backend.CopyToHost(at + batch * D, enc.final_c(l), batch * D * sizeof(float));
    at += 2 * batch * D;
  }
  Tensor w = Stage(backend, Random(src * batch * D, 24)), wh = Stage(backend, Random(batch * D, 25));
  enc.Backward(ctx, w.data<float>(), {wh.data<float>(), nullptr}, {nullptr, wh.data<float>()});
  store.CopyGradsToHost(at);
  return all;
}

TEST_P(LstmBackends, TheEncoderEqualsTheCpuEncoder) {
  double tolerance = 0;
  std::string why;
  std::unique_ptr<Backend<float>> backend = Make(&tolerance, &why);
  if (!backend) GTEST_SKIP() << why;
  CpuBackend cpu;
  EXPECT_LE(MaxRel(RunEncoder(*backend), RunEncoder(cpu)), tolerance);
}

INSTANTIATE_TEST_SUITE_P(Backends, LstmBackends, ::testing::Values("guarded", "cuda"),
                         [](const auto& info) { return info.param; });

// Mixed precision: the GEMMs read bf16 copies of x, h and dG; the cell, c and every gradient stay
// fp32. The results are fp32's within what bf16's 8-bit mantissa allows over 6 steps.
TEST(LstmLayer, Bf16GemmOperandsStayWithinBf16RoundingOfFp32) {
  CpuBackend backend;
  const Result fp32 = RunLayer(backend, DType::kF32, true);
  const Result bf16 = RunLayer(backend, DType::kBF16, true);
  EXPECT_LT(MaxRel(bf16.y, fp32.y), 2e-2);
  EXPECT_LT(MaxRel(bf16.dx, fp32.dx), 3e-2);
  for (size_t i = 0; i < fp32.grads.size(); ++i) EXPECT_LT(MaxRel(bf16.grads[i], fp32.grads[i]), 3e-2) << fp32.names[i];
  EXPECT_GT(MaxRel(bf16.y, fp32.y), 0) << "bf16 operands must change something";
}

}  // namespace
}  // namespace sf
