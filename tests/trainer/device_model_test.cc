// The whole model on a device backend against the CPU engine: logits, loss and every gradient
// of one micro-batch (fp32), 200 bf16 steps of a copy task, checkpoints moving between the
// device and the CPU, and beam search on the device against the host search. Runs on "guarded" (the CPU kernels behind the device-resident path, so it
// must agree exactly) everywhere, and on "cuda" where a GPU is visible (skipped otherwise).
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "tests/trainer/guarded_backend.h"
#include "tests/trainer/seq2seq_batches.h"
#include "tests/trainer/train_tail.h"
#include "trainer/kernels/cpu/cpu_backend.h"
#include "trainer/decoding/translator.h"
#include "trainer/optim/loss_scaler.h"
#include "trainer/optim/optimizer.h"
#include "trainer/run/model_setup.h"
#include "trainer/run/train_step.h"
#if defined(SF_TEST_CUDA)
#include "trainer/kernels/cuda/cuda_backend.h"
#endif

namespace sf {
namespace {

class DeviceModelTest : public ::testing::TestWithParam<std::string> {
 protected:
  std::unique_ptr<Backend<float>> MakeDevice() {
    if (GetParam() == "guarded") return std::make_unique<testing::GuardedBackend>();
#if defined(SF_TEST_CUDA)
    return MakeCudaBackend();
#else
    return nullptr;
#endif
  }
  void SetUp() override {
    device_ = MakeDevice();
    if (!device_) GTEST_SKIP() << "no usable GPU (or built without the CUDA backend)";
    // The guarded arena is re-protected around every op; with one thread that costs no TLB
    // shootdowns across cores (7 s instead of 36 s for the 200 steps here).
    threads_ = omp_get_max_threads();
    if (GetParam() == "guarded") omp_set_num_threads(1);
  }
  void TearDown() override { omp_set_num_threads(threads_); }
  // Exact on "guarded"; on a GPU, fp32 GEMMs and reductions in another order.
  double Tolerance(double gpu) const { return GetParam() == "guarded" ? 0.0 : gpu; }

  std::unique_ptr<Backend<float>> device_;
  CpuBackend cpu_;
  int threads_ = 1;
};

// Every dropout (activation dropout included) and an untied output projection: the same masks
// and the projection's own gradient on the device.
TEST_P(DeviceModelTest, LogitsLossAndEveryGradientMatchTheCpuEngineInFp32) {
  TransformerConfig c = SmallConfig();
  c.dropout = 0.1f;
  c.attention_dropout = 0.1f;
  c.activation_dropout = 0.1f;
  c.share_decoder_input_output_embed = false;
  c.normalize_before = true;
  Transformer<float> on_cpu(c, &cpu_, DType::kF32), on_dev(c, device_.get(), DType::kF32);
  on_cpu.InitParameters(3);
  on_dev.InitParameters(3);
  on_cpu.context().seed = on_dev.context().seed = 5;
  const HostBatch hb = RandomBatch(5, 9, 7, c.tgt_vocab, 77);
  auto a = on_cpu.Forward(hb.view());
  auto b = on_dev.Forward(hb.view());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->tokens, b->tokens);
  EXPECT_NEAR(b->loss, a->loss, Tolerance(1e-4) * a->loss);
  EXPECT_NEAR(b->nll, a->nll, Tolerance(1e-4) * a->nll);
  const size_t nl = static_cast<size_t>(hb.batch * hb.tgt_len * c.tgt_vocab);
  std::vector<float> logits(nl);
  on_dev.logits_tensor().CopyToHost(logits.data());
  const double logit_err = MaxRel(logits.data(), on_cpu.logits(), static_cast<int64_t>(nl));
  EXPECT_LE(logit_err, Tolerance(1e-4));
  on_cpu.Backward(1.0f);
  on_dev.Backward(1.0f);
  ParamStore<float>& sc = on_cpu.params();
  ParamStore<float>& sd = on_dev.params();
  std::vector<float> grads(static_cast<size_t>(sd.total_numel()));
  sd.CopyGradsToHost(grads.data());
  double worst = 0;
  std::string worst_name;
  for (size_t i = 0; i < sc.params().size(); ++i) {
    const ParamInfo& p = sc.params()[i];
    const double e = MaxRel(grads.data() + p.offset, sc.grad(static_cast<int>(i)), p.numel);
    if (e >= worst) {
      worst = e;
      worst_name = p.name;
    }
  }
  std::printf("%s vs cpu, fp32: logits %.3g, worst gradient %.3g (%s)\n", GetParam().c_str(),
              logit_err, worst, worst_name.c_str());
  EXPECT_LE(worst, Tolerance(1e-4)) << "worst tensor: " << worst_name;
}

// The copy task: the target is the source.
HostBatch CopyBatch(int64_t B, int64_t T, int64_t V, std::mt19937& rng) {
  std::uniform_int_distribution<int32_t> tok(4, static_cast<int32_t>(V) - 1);
  HostBatch h{std::vector<int32_t>(B * T), std::vector<int32_t>(B * (T + 1)),
              std::vector<int32_t>(B * (T + 1)), B, T, T + 1};
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) h.src[b * T + t] = tok(rng);
    for (int64_t t = 0; t <= T; ++t) {
      h.tout[b * (T + 1) + t] = t == T ? kEos : h.src[b * T + t];
      h.tin[b * (T + 1) + t] = t == 0 ? kEos : h.src[b * T + t - 1];
    }
  }
  return h;
}

double TrainCopyTask(Backend<float>* backend, int steps) {
  TransformerConfig c = SmallConfig();
  c.src_vocab = c.tgt_vocab = 24;
  c.dropout = 0.1f;
  Transformer<float> model(c, backend, DType::kBF16);
  model.InitParameters(21);
  model.context().seed = 9;
  OptimizerOptions o;
  o.type = "adamw";
  o.beta2 = 0.98;
  LossScalerOptions lo;
  TrainStep step(&model, std::move(MakeOptimizer(o)).value(), std::move(LossScaler::Make(lo)).value(),
                 1.0);
  std::mt19937 rng(8);
  return TrainTailLossPerToken(step, steps, 2e-3f, rng,
                               [&](std::mt19937& g) { return CopyBatch(32, 8, c.src_vocab, g); });
}

TEST_P(DeviceModelTest, Bf16CopyTaskReachesTheCpuLossWithinTwoPercentIn200Steps) {
  const double on_cpu = TrainCopyTask(&cpu_, 200);
  const double on_dev = TrainCopyTask(device_.get(), 200);
  std::printf("copy task, bf16, loss/token after 200 steps: cpu %.4f, %s %.4f\n", on_cpu,
              GetParam().c_str(), on_dev);
  EXPECT_LT(on_cpu, 0.75 * std::log(24.0)) << "the task was not learnt at all";
  EXPECT_NEAR(on_dev, on_cpu, 0.02 * on_cpu);
}

TEST_P(DeviceModelTest, CheckpointsResumeAcrossDevices) {
  TransformerConfig c = SmallConfig();
  auto make = [&](Backend<float>* be) {
    auto m = std::make_unique<Transformer<float>>(c, be, DType::kF32);
    m->InitParameters(4);
    return m;
  };
  auto step_for = [](Transformer<float>* m) {
    OptimizerOptions o;
    o.type = "radam";
    return std::make_unique<TrainStep>(m, std::move(MakeOptimizer(o)).value(),
                                       std::move(LossScaler::Make({})).value(), 0.0);
  };
  for (bool device_writes : {true, false}) {
    SCOPED_TRACE(device_writes ? "device -> cpu" : "cpu -> device");
    Backend<float>* wb = device_writes ? device_.get() : static_cast<Backend<float>*>(&cpu_);
    Backend<float>* rb = device_writes ? static_cast<Backend<float>*>(&cpu_) : device_.get();
    auto writer = make(wb), reader = make(rb);
    auto ws = step_for(writer.get()), rs = step_for(reader.get());
    for (int s = 0; s < 3; ++s) {
      HostBatch hb = RandomBatch(4, 6, 5, c.tgt_vocab, 300 + s);
      Seq2SeqBatch v = hb.view();
      ASSERT_TRUE(ws->Run({&v, 1}, 1e-3f).ok());
    }
    CheckpointContents ck;
    SnapshotTraining(*writer, *ws, &ck);
    ASSERT_TRUE(RestoreTraining(ck, "test", *reader, *rs).ok());
    EXPECT_EQ(rs->optimizer().step_count(), 3);
    for (int s = 3; s < 5; ++s) {
      HostBatch hb = RandomBatch(4, 6, 5, c.tgt_vocab, 300 + s);
      Seq2SeqBatch v = hb.view();
      auto a = ws->Run({&v, 1}, 1e-3f);
      auto b = rs->Run({&v, 1}, 1e-3f);
      ASSERT_TRUE(a.ok() && b.ok());
      EXPECT_NEAR(b->loss, a->loss, Tolerance(1e-4) * a->loss) << "step " << s;
    }
  }
}

// Beam search on the device (DeviceDecoder: every op on the backend, only tokens and each row's
// best continuations crossing to the host) against the host search (Translator on a CPU model)
// with the same weights: the same hypotheses, scores equal up to GEMM rounding. Random models
// with EOS's output row shrunk, so hypotheses run a few tokens and beams disagree; pre- and
// post-norm, tied and separate embeddings, a tied and an untied output projection, greedy and
// beams, length penalty, several working batches per call (so finished sentences leave batches
// and caches are compacted).
TEST_P(DeviceModelTest, BeamSearchOnTheDeviceAgreesWithTheHostSearch) {
  auto make = [](const TransformerConfig& c, Backend<float>* be) {
    auto m = std::make_unique<Transformer<float>>(c, be, DType::kF32);
    m->InitParameters(7);
    ParamStore<float>& store = m->params();
    store.PullValues();
    const int id = store.Find(!c.share_decoder_input_output_embed ? "decoder.output_projection.weight"
                              : c.share_embeddings                ? "encoder.embed_tokens.weight"
                                                                  : "decoder.embed_tokens.weight");
    float* eos_row = store.host_value(id) + 2 * c.d_model;
    for (int64_t j = 0; j < c.d_model; ++j) eos_row[j] *= 0.35f;
    store.PushValues();
    m->WeightsUpdated();
    return m;
  };
  std::mt19937_64 rng(3);
  std::vector<std::vector<int32_t>> sources;
  for (int i = 0; i < 11; ++i) {
    std::vector<int32_t> s(rng() % 14);  // includes empty sources
    for (int32_t& t : s) t = static_cast<int32_t>(4 + rng() % 36);
    sources.push_back(std::move(s));
  }
  int64_t tokens = 0;
  for (bool pre : {true, false}) {
    for (auto [shared, tied] : {std::pair{true, true}, {false, true}, {false, false}}) {
      TransformerConfig c = SmallConfig();
      c.normalize_before = pre;
      c.share_embeddings = shared;
      c.share_decoder_input_output_embed = tied;
      c.dropout = 0.3f;  // must be off at inference
      c.src_vocab = 40;
      c.tgt_vocab = shared ? 40 : 37;
      auto on_cpu = make(c, &cpu_);
      auto on_dev = make(c, device_.get());
      Translator host(on_cpu.get()), dev(on_dev.get());
      for (int beam : {1, 3, 5}) {
        for (float lenpen : {1.0f, 0.6f}) {
          SCOPED_TRACE(std::string(pre ? "pre" : "post") + "-norm, " + (shared ? "shared" : "separate") +
                       " vocab, " + (tied ? "tied" : "untied") + " output, beam " +
                       std::to_string(beam) + ", lenpen " + std::to_string(lenpen));
          BeamOptions o;
          o.beam = beam;
          o.lenpen = lenpen;
          o.max_len_a = 1.2f;
          o.max_len_b = 5;
          o.max_sentences = 4;
          auto a = host.Translate(sources, o);
          auto b = dev.Translate(sources, o);
          ASSERT_TRUE(a.ok()) << a.status().ToString();
          ASSERT_TRUE(b.ok()) << b.status().ToString();
          for (size_t i = 0; i < sources.size(); ++i) {
            EXPECT_EQ((*b)[i].tokens, (*a)[i].tokens) << "sentence " << i;
            EXPECT_NEAR((*b)[i].score, (*a)[i].score, 1e-5 * std::max(1.0f, std::fabs((*a)[i].score)))
                << "sentence " << i;
            tokens += static_cast<int64_t>((*a)[i].tokens.size());
          }
        }
      }
    }
  }
  EXPECT_GT(tokens, 0) << "nothing to compare: every hypothesis is empty";
}

INSTANTIATE_TEST_SUITE_P(Devices, DeviceModelTest, ::testing::Values("guarded", "cuda"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace sf
