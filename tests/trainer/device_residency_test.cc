// The device-resident training path (what a GPU run does: parameters, gradients, activations,
// optimizer state and the staged batch all in the backend's memory; the host reads back only
// the loss and the gradient's sum of squares) checked without a GPU: GuardedBackend computes with
// the CPU kernels on memory the host may not touch (guarded_backend.h). A run on it must equal a
// plain CPU run bit for bit, allocate nothing in steady state, and its checkpoints must resume
// on the CPU and the other way round.
#include <gtest/gtest.h>

#include <csignal>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "tests/trainer/guarded_backend.h"
#include "tests/trainer/seq2seq_batches.h"
#include "trainer/kernels/cpu/cpu_backend.h"
#include "trainer/decoding/translator.h"
#include "trainer/optim/loss_scaler.h"
#include "trainer/optim/optimizer.h"
#include "trainer/run/model_setup.h"
#include "trainer/run/train_step.h"

namespace sf {
namespace {

using testing::GuardedBackend;

TEST(GuardedBackendTest, TheHostCannotReadDeviceMemory) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        GuardedBackend be;
        Tensor t = Tensor::Zeros({16}, DType::kF32, be.allocator());
        volatile float x = t.data<float>()[3];  // a device pointer dereferenced on the host
        (void)x;
        std::exit(0);
      },
      ::testing::KilledBySignal(SIGSEGV), "");
}

TEST(GuardedBackendTest, AnOpGivenAHostPointerAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        GuardedBackend be;
        Tensor y = Tensor::Zeros({8}, DType::kF32, be.allocator());
        std::vector<float> host(8, 1.0f);
        be.Add(host.data(), y.data<float>(), 8);
      },
      "Add was given a host pointer");
}

TEST(GuardedBackendTest, CopiesRoundTripAndOpsSeeTheData) {
  GuardedBackend be;
  std::vector<float> in = {1, 2, 3, 4}, out(4);
  Tensor x({4}, DType::kF32, be.allocator()), y = Tensor::Zeros({4}, DType::kF32, be.allocator());
  x.CopyFromHost(in.data());
  be.Add(x.data<float>(), y.data<float>(), 4);
  be.Scale(y.data<float>(), 4, 2.0f);
  y.CopyToHost(out.data());
  EXPECT_EQ(out, (std::vector<float>{2, 4, 6, 8}));
  const VectorStats s = be.SumSquares(y.data<float>(), 4);
  EXPECT_EQ(s.sum_squares, 4.0 + 16 + 36 + 64);
  EXPECT_FALSE(s.non_finite);
}

struct TrainingRun {
  std::unique_ptr<Backend<float>> backend;
  std::unique_ptr<Transformer<float>> model;
  std::unique_ptr<TrainStep> step;
};

OptimizerOptions Options(const std::string& type) {
  OptimizerOptions o;
  o.type = type;
  o.weight_decay = 0.01;
  if (type == "sgd") o.nesterov = true;
  if (type == "radam") o.radam_rho_threshold = 5;
  return o;
}

TrainingRun MakeRun(std::unique_ptr<Backend<float>> backend, DType compute, const std::string& optimizer,
            double clip_norm) {
  TrainingRun r;
  r.backend = std::move(backend);
  TransformerConfig c = SmallConfig();
  c.dropout = 0.1f;
  c.attention_dropout = 0.1f;
  r.model = std::make_unique<Transformer<float>>(c, r.backend.get(), compute);
  r.model->InitParameters(7);
  r.model->context().seed = 11;
  LossScalerOptions lo;
  lo.type = "dynamic";
  lo.init_scale = 1024;
  r.step = std::make_unique<TrainStep>(r.model.get(), std::move(MakeOptimizer(Options(optimizer))).value(),
                                       std::move(LossScaler::Make(lo)).value(), clip_norm);
  return r;
}

std::vector<HostBatch> Batches(int step) {
  return {RandomBatch(4, 7, 6, 47, 100 + 2 * step), RandomBatch(3, 5, 8, 47, 101 + 2 * step)};
}

StepReport Train(TrainingRun& r, int step) {
  std::vector<HostBatch> hb = Batches(step);
  std::vector<Seq2SeqBatch> mb;
  for (auto& b : hb) mb.push_back(b.view());
  auto rep = r.step->Run(mb, 1e-3f);
  EXPECT_TRUE(rep.ok()) << rep.status().ToString();
  return *rep;
}

std::vector<float> Weights(Transformer<float>& m) {
  ParamStore<float>& s = m.params();
  s.PullValues();
  return std::vector<float>(s.host_values(), s.host_values() + s.total_numel());
}

void ExpectSameState(TrainStep& a, TrainStep& b) {
  std::vector<NamedBuffer> sa = a.optimizer().State(), sb = b.optimizer().State();
  ASSERT_EQ(sa.size(), sb.size());
  for (size_t i = 0; i < sa.size(); ++i) {
    EXPECT_EQ(sa[i].name, sb[i].name);
    EXPECT_TRUE(sa[i].data == sb[i].data) << sa[i].name;
  }
}

using Case = std::tuple<std::string, std::string>;  // precision, optimizer

class DeviceResidentTraining : public ::testing::TestWithParam<Case> {};

TEST_P(DeviceResidentTraining, EqualsTheCpuRunBitForBit) {
  const auto& [precision, optimizer] = GetParam();
  const DType compute = precision == "bf16" ? DType::kBF16 : DType::kF32;
  TrainingRun cpu = MakeRun(std::make_unique<CpuBackend>(), compute, optimizer, 0.5);
  TrainingRun dev = MakeRun(std::make_unique<GuardedBackend>(), compute, optimizer, 0.5);
  ASSERT_FALSE(dev.backend->host_accessible());
  ASSERT_EQ(Weights(*cpu.model), Weights(*dev.model));
  for (int s = 0; s < 6; ++s) {
    const StepReport a = Train(cpu, s), b = Train(dev, s);
    EXPECT_EQ(a.loss, b.loss) << "step " << s;
    EXPECT_EQ(a.nll, b.nll) << "step " << s;
    EXPECT_EQ(a.tokens, b.tokens);
    EXPECT_EQ(a.skipped, b.skipped);
    EXPECT_EQ(a.loss_scale, b.loss_scale);
    // The norm is summed in another order on the device path (one pass over the flat buffer).
    EXPECT_NEAR(a.grad_norm, b.grad_norm, 1e-5 * a.grad_norm) << "step " << s;
  }
  const std::vector<float> wa = Weights(*cpu.model), wb = Weights(*dev.model);
  size_t differ = 0;
  for (size_t i = 0; i < wa.size(); ++i) differ += std::memcmp(&wa[i], &wb[i], 4) != 0;
  // Clipping is active (clip 0.5): its factor comes from the norm, whose last bits may differ,
  // so allow rounding-level differences but no more.
  double worst = 0;
  for (size_t i = 0; i < wa.size(); ++i)
    worst = std::max(worst, static_cast<double>(std::fabs(wa[i] - wb[i])));
  EXPECT_LT(worst, 1e-5) << differ << " of " << wa.size() << " weights differ";
  EXPECT_GT(static_cast<GuardedBackend&>(*dev.backend).ops(), 0);
}

TEST_P(DeviceResidentTraining, WithoutClippingEveryBitIsTheSame) {
  const auto& [precision, optimizer] = GetParam();
  const DType compute = precision == "bf16" ? DType::kBF16 : DType::kF32;
  TrainingRun cpu = MakeRun(std::make_unique<CpuBackend>(), compute, optimizer, 0);
  TrainingRun dev = MakeRun(std::make_unique<GuardedBackend>(), compute, optimizer, 0);
  for (int s = 0; s < 4; ++s) {
    const StepReport a = Train(cpu, s), b = Train(dev, s);
    EXPECT_EQ(a.loss, b.loss) << "step " << s;
  }
  EXPECT_EQ(Weights(*cpu.model), Weights(*dev.model));
  ExpectSameState(*cpu.step, *dev.step);
}

INSTANTIATE_TEST_SUITE_P(
    PrecisionsAndOptimizers, DeviceResidentTraining,
    ::testing::Values(Case{"fp32", "adamw"}, Case{"bf16", "adamw"}, Case{"bf16", "radam"},
                      Case{"fp32", "sgd"}),
    [](const ::testing::TestParamInfo<Case>& info) {
      return std::get<0>(info.param) + "_" + std::get<1>(info.param);
    });

TEST(DeviceResidentTrainingTest, ASteadyStateStepAllocatesNoDeviceMemory) {
  TrainingRun dev = MakeRun(std::make_unique<GuardedBackend>(), DType::kBF16, "adamw", 1.0);
  for (int s = 0; s < 2; ++s) Train(dev, s);
  const AllocatorStats before = dev.backend->allocator().stats();
  for (int s = 2; s < 5; ++s) Train(dev, s);
  const AllocatorStats after = dev.backend->allocator().stats();
  EXPECT_EQ(before.system_allocations, after.system_allocations);
  EXPECT_GT(after.peak_bytes_in_use, 0);
}

TEST(DeviceResidentTrainingTest, CheckpointsResumeOnTheOtherDevice) {
  for (bool device_first : {true, false}) {
    SCOPED_TRACE(device_first ? "device -> cpu" : "cpu -> device");
    auto make = [](bool guarded) {
      return MakeRun(guarded ? std::unique_ptr<Backend<float>>(std::make_unique<GuardedBackend>())
                             : std::make_unique<CpuBackend>(),
                     DType::kBF16, "adamw", 0);
    };
    TrainingRun writer = make(device_first);
    for (int s = 0; s < 3; ++s) Train(writer, s);
    CheckpointContents ck;
    SnapshotTraining(*writer.model, *writer.step, &ck);
    TrainingRun reader = make(!device_first);
    ASSERT_TRUE(RestoreTraining(ck, "test", *reader.model, *reader.step).ok());
    reader.model->context().micro_batch = writer.model->context().micro_batch;
    EXPECT_EQ(Weights(*writer.model), Weights(*reader.model));
    ExpectSameState(*writer.step, *reader.step);
    for (int s = 3; s < 5; ++s) {
      const StepReport a = Train(writer, s), b = Train(reader, s);
      EXPECT_EQ(a.loss, b.loss) << "step " << s;
    }
    EXPECT_EQ(Weights(*writer.model), Weights(*reader.model));
  }
}

// Validation translation of a model trained on the device searches there (DeviceDecoder) and
// finds what the host search finds on the CPU run's identical weights.
TEST(DeviceResidentTrainingTest, TranslatesOnTheDeviceWhereItTrained) {
  TrainingRun cpu = MakeRun(std::make_unique<CpuBackend>(), DType::kF32, "adamw", 0);
  TrainingRun dev = MakeRun(std::make_unique<GuardedBackend>(), DType::kF32, "adamw", 0);
  for (int s = 0; s < 2; ++s) {
    Train(cpu, s);
    Train(dev, s);
  }
  const std::vector<std::vector<int32_t>> sources = {{5, 6, 7, 8}, {9, 10, 11}, {12}};
  BeamOptions o;
  o.beam = 3;
  o.max_len_b = 6;
  auto* guarded = static_cast<GuardedBackend*>(dev.backend.get());
  const int64_t ops_before = guarded->ops();
  auto a = Translator(cpu.model.get()).Translate(sources, o);
  auto b = Translator(dev.model.get()).Translate(sources, o);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_GT(guarded->ops(), ops_before + 100) << "the search did not run on the device";
  for (size_t i = 0; i < sources.size(); ++i) {
    EXPECT_EQ((*a)[i].tokens, (*b)[i].tokens);
    EXPECT_NEAR((*a)[i].score, (*b)[i].score, 1e-5 * std::max(1.0f, std::fabs((*a)[i].score)));
  }
}

}  // namespace
}  // namespace sf
