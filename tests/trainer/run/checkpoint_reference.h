// A checkpoint's weights given to an independent PyTorch model (tests/trainer/reference/*.py):
// what the command-line tests of each family use to prove that a checkpoint written by
// `sf-trainer train` holds fairseq's names and computes what the engine computes.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/subprocess.h"
#include "tests/support/testing.h"
#include "tests/trainer/seq2seq_batches.h"
#include "trainer/core/safetensors.h"
#include "trainer/kernels/cpu/cpu_backend.h"
#include "trainer/models/model_spec.h"
#include "trainer/run/checkpoint.h"
#include "trainer/run/model_setup.h"

namespace sf::testing {

// Loads `checkpoint` on the CPU, runs one random batch (3 sentences, source 7, target 6 tokens,
// padded) forward and backward without dropout, writes the checkpoint's tensors under their
// file names, the engine's logits (`logits` reads them from the model), loss and gradients, the
// batch and the weights' __metadata__ to `case_path`, and runs `script` on it: the PyTorch model
// must reproduce everything within 1e-4, and its report must name `expected_line`.
inline void ExpectReferenceReproducesCheckpoint(const std::string& checkpoint, const std::string& script,
                                                const std::string& case_path,
                                                const std::function<const float*(Seq2SeqModel<float>&)>& logits,
                                                const std::string& expected_line) {
  auto ck = ReadCheckpoint(checkpoint);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  auto spec = ModelSpecFromMetadata(ck->model_metadata);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  CpuBackend backend;
  std::unique_ptr<Seq2SeqModel<float>> model = MakeModel(*spec, &backend, DType::kF32);
  ASSERT_TRUE(LoadModelWeights(*ck, checkpoint, *model).ok());
  model->context().training = false;
  const int64_t V = model->shape().tgt_vocab;
  HostBatch hb = RandomBatch(3, 7, 6, std::min(V, model->shape().src_vocab), 9);
  model->ZeroGrads();
  auto stats = model->Forward(hb.view());
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  const int64_t nt = hb.batch * hb.tgt_len;
  const float* l = logits(*model);
  ASSERT_NE(l, nullptr);
  std::vector<float> ours(l, l + nt * V);
  model->Backward(1.0f);
  const std::vector<float> loss = {static_cast<float>(stats->loss)};
  std::vector<std::vector<float>> grads;
  std::vector<safetensors::TensorView> views;
  ParamStore<float>& store = model->params();
  for (const NamedBuffer& b : ck->model) {
    const int id = store.Find(b.name);
    ASSERT_GE(id, 0) << b.name;
    views.push_back(safetensors::F32View(b.name, b.shape, b.AsF32()));
    grads.emplace_back(store.grad(id), store.grad(id) + b.AsF32().size());
  }
  for (size_t i = 0; i < ck->model.size(); ++i) {
    views.push_back(safetensors::F32View("ours.grad." + ck->model[i].name, ck->model[i].shape, grads[i]));
  }
  auto i32 = [](const std::string& name, std::vector<int64_t> shape, const std::vector<int32_t>& v) {
    return safetensors::TensorView{name, safetensors::DType::kI32, std::move(shape),
                                   std::as_bytes(std::span<const int32_t>(v))};
  };
  views.push_back(safetensors::F32View("ours.logits", {nt, V}, ours));
  views.push_back(safetensors::F32View("ours.loss", {1}, loss));
  views.push_back(i32("batch.src", {hb.batch, hb.src_len}, hb.src));
  views.push_back(i32("batch.tgt_in", {hb.batch, hb.tgt_len}, hb.tin));
  views.push_back(i32("batch.tgt_out", {hb.batch, hb.tgt_len}, hb.tout));
  ASSERT_TRUE(safetensors::WriteFile(case_path, views, ck->model_metadata).ok());
  CommandOptions o;
  o.timeout = std::chrono::minutes(2);
  auto r = RunCommand({"/usr/bin/python3", SourceDir() + "/tests/trainer/reference/" + script, case_path,
                       "--tolerance", "1e-4"},
                      o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::printf("%s", r->output.c_str());
  EXPECT_EQ(r->exit_code, 0) << r->output;
  EXPECT_NE(r->output.find(expected_line), std::string::npos) << r->output;
}

}  // namespace sf::testing
