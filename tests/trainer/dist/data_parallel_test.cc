// Data-parallel exactness, run as W real ranks under mpirun (see CMakeLists.txt): W ranks
// training on shards of fixed global batches, their gradients summed by GradReducer through
// the MPI communicator, must end with the weights of one rank training on the whole global
// batches (computed in-process on every rank as the reference), within fp32 rounding; and the
// ranks' weights must be bit-identical to each other.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

#include "trainer/dist/mpi_communicator.h"
#include "trainer/kernels/cpu/cpu_backend.h"
#include "trainer/optim/optimizer.h"
#include "trainer/run/train_step.h"

namespace sf {
namespace {

dist::Communicator* g_comm = nullptr;
constexpr int32_t kPad = 1, kEos = 2;

struct HostBatch {
  std::vector<int32_t> src, tin, tout;
  int64_t batch = 0, src_len = 0, tgt_len = 0;
  Seq2SeqBatch view() const { return {src.data(), tin.data(), tout.data(), batch, src_len, tgt_len}; }
};

// A global batch of B rows (random tokens, ragged lengths) and the rows of one rank of W
// (row j goes to rank j % W, as the batch iterator shards).
HostBatch GlobalBatch(int64_t B, int64_t Ts, int64_t Tt, int64_t V, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> tok(4, static_cast<int32_t>(V) - 1);
  HostBatch h{std::vector<int32_t>(B * Ts, kPad), std::vector<int32_t>(B * Tt, kPad),
              std::vector<int32_t>(B * Tt, kPad), B, Ts, Tt};
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < Ts - b % 3; ++t) h.src[b * Ts + t] = tok(rng);
    const int64_t len = Tt - (b * 7) % 4;
    for (int64_t t = 0; t < len; ++t) {
      h.tout[b * Tt + t] = t == len - 1 ? kEos : tok(rng);
      h.tin[b * Tt + t] = t == 0 ? kEos : h.tout[b * Tt + t - 1];
    }
  }
  return h;
}

HostBatch Shard(const HostBatch& g, int rank, int world) {
  HostBatch s;
  s.src_len = g.src_len;
  s.tgt_len = g.tgt_len;
  for (int64_t j = rank; j < g.batch; j += world) {
    s.src.insert(s.src.end(), g.src.begin() + j * g.src_len, g.src.begin() + (j + 1) * g.src_len);
    s.tin.insert(s.tin.end(), g.tin.begin() + j * g.tgt_len, g.tin.begin() + (j + 1) * g.tgt_len);
    s.tout.insert(s.tout.end(), g.tout.begin() + j * g.tgt_len, g.tout.begin() + (j + 1) * g.tgt_len);
    s.batch++;
  }
  return s;
}

TransformerConfig Config() {
  TransformerConfig c;
  c.d_model = 32;
  c.heads = 4;
  c.ffn_dim = 64;
  c.encoder_layers = 2;
  c.decoder_layers = 2;
  c.dropout = 0;
  c.attention_dropout = 0;
  c.src_vocab = 61;
  c.tgt_vocab = 53;
  c.pad_id = kPad;
  c.max_positions = 64;
  c.label_smoothing = 0.1f;
  return c;
}

std::unique_ptr<Optimizer> RAdam() {
  OptimizerOptions o;
  o.type = "radam";
  o.beta1 = 0.9;
  o.beta2 = 0.98;
  o.weight_decay = 0.01;
  return std::move(MakeOptimizer(o)).value();
}

LossScaler NoScaling() {
  LossScalerOptions o;
  o.type = "none";
  return std::move(LossScaler::Make(o)).value();
}

struct Setting {
  DType compute;
  int aggregation;
  DType wire;
  const char* name;
};

// Worst relative difference over tensors: max |a-b| / max |b| per tensor.
double WorstRelative(Transformer<float>& a, Transformer<float>& b, std::string* where) {
  double worst = 0;
  for (size_t i = 0; i < a.params().params().size(); ++i) {
    const ParamInfo& p = a.params().params()[i];
    const float* x = a.params().value(static_cast<int>(i));
    const float* y = b.params().value(static_cast<int>(i));
    double diff = 0, mag = 0;
    for (int64_t k = 0; k < p.numel; ++k) {
      diff = std::max(diff, static_cast<double>(std::fabs(x[k] - y[k])));
      mag = std::max(mag, static_cast<double>(std::fabs(y[k])));
    }
    const double rel = diff / std::max(mag, 1e-12);
    if (rel > worst) {
      worst = rel;
      *where = p.name;
    }
  }
  return worst;
}

class DataParallel : public ::testing::TestWithParam<Setting> {};

TEST_P(DataParallel, RanksOnShardsEqualOneRankOnTheGlobalBatch) {
  const Setting s = GetParam();
  const int world = g_comm->world_size(), rank = g_comm->rank();
  const int steps = 5;
  const int64_t rows = 8;  // per micro-batch, globally (divisible by 2 and 4)
  CpuBackend backend;
  Transformer<float> dist_model(Config(), &backend, s.compute), ref_model(Config(), &backend, s.compute);
  dist_model.InitParameters(7);
  ref_model.InitParameters(7);
  TrainStep dist_step(&dist_model, RAdam(), NoScaling(), 1.0);
  TrainStep ref_step(&ref_model, RAdam(), NoScaling(), 1.0);
  std::vector<int64_t> offsets;
  for (const ParamInfo& p : dist_model.params().params()) offsets.push_back(p.offset);
  dist::GradReducerOptions ro;
  ro.bucket_bytes = 16 << 10;  // small buckets: many of them, launched during backward
  ro.wire = s.wire;
  dist::GradReducer reducer(g_comm, dist_model.params().grads(), dist_model.params().total_numel(), offsets, ro);
  dist_step.set_grad_reducer(&reducer);
  ASSERT_GT(reducer.bucket_count(), 4);

  for (int step = 0; step < steps; ++step) {
    std::vector<HostBatch> global, mine;
    for (int m = 0; m < s.aggregation; ++m) {
      global.push_back(GlobalBatch(rows, 9 + m, 8 + step % 3, 53, static_cast<uint32_t>(100 * step + m)));
      mine.push_back(Shard(global.back(), rank, world));
    }
    std::vector<Seq2SeqBatch> gv, mv;
    for (auto& b : global) gv.push_back(b.view());
    for (auto& b : mine) mv.push_back(b.view());
    auto dr = dist_step.Run(mv, 1e-3f);
    ASSERT_TRUE(dr.ok()) << dr.status().ToString();
    auto rr = ref_step.Run(gv, 1e-3f);
    ASSERT_TRUE(rr.ok()) << rr.status().ToString();
    // The step's counts are global: the same token count and (nearly) the same loss.
    EXPECT_EQ(dr->tokens, rr->tokens);
    EXPECT_NEAR(dr->loss, rr->loss, 1e-3 * std::fabs(rr->loss));
    // Every bucket went out from inside backward (GradsFinal), none waited for Finish.
    EXPECT_EQ(dr->sync.buckets, reducer.bucket_count());
    EXPECT_EQ(reducer.early_buckets(), reducer.bucket_count());
  }
  std::string where;
  const double worst = WorstRelative(dist_model, ref_model, &where);
  // Ranks must hold identical weights: compare with rank 0's, bit for bit.
  const ParamStore<float>& st = dist_model.params();
  std::vector<float> zero(st.total_numel());
  std::memcpy(zero.data(), const_cast<ParamStore<float>&>(st).values(), zero.size() * 4);
  ASSERT_TRUE(g_comm->Broadcast(zero.data(), static_cast<int64_t>(zero.size() * 4), 0).ok());
  EXPECT_EQ(0, std::memcmp(zero.data(), const_cast<ParamStore<float>&>(st).values(), zero.size() * 4))
      << "rank " << rank << " diverged from rank 0";
  if (rank == 0) {
    std::printf("%s W=%d: worst relative weight difference vs 1 rank after %d steps: %.3g (%s)\n", s.name, world,
                steps, worst, where.c_str());
  }
  const double tol = s.wire != DType::kF32 ? 1e-2 : 1e-5;  // measured: ~3e-7 and ~3e-3
  EXPECT_LT(worst, tol) << where;
}

INSTANTIATE_TEST_SUITE_P(
    Settings, DataParallel,
    ::testing::Values(Setting{DType::kF32, 1, DType::kF32, "fp32"}, Setting{DType::kF32, 2, DType::kF32, "fp32_agg2"},
                      Setting{DType::kBF16, 1, DType::kF32, "bf16"}, Setting{DType::kBF16, 2, DType::kF32, "bf16_agg2"},
                      Setting{DType::kF32, 2, DType::kBF16, "fp32_agg2_bf16_wire"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(DataParallelOverflow, OneRanksOverflowSkipsTheStepOnEveryRank) {
  const int rank = g_comm->rank();
  CpuBackend backend;
  Transformer<float> model(Config(), &backend, DType::kF32);
  model.InitParameters(3);
  TrainStep step(&model, RAdam(), NoScaling(), 1.0);
  std::vector<int64_t> offsets;
  for (const ParamInfo& p : model.params().params()) offsets.push_back(p.offset);
  dist::GradReducer reducer(g_comm, model.params().grads(), model.params().total_numel(), offsets, {});
  step.set_grad_reducer(&reducer);
  int calls = 0;
  // After the sum every rank holds the same gradients; poison only the last rank's copy.
  step.set_grads_hook([&](std::span<float> g) {
    if (++calls == 2 && rank == g_comm->world_size() - 1) g[g.size() / 3] = NAN;
  });
  for (int i = 0; i < 3; ++i) {
    HostBatch b = Shard(GlobalBatch(8, 7, 6, 53, static_cast<uint32_t>(i)), rank, g_comm->world_size());
    Seq2SeqBatch v = b.view();
    auto r = step.Run({&v, 1}, 1e-3f);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->skipped, i == 1) << "step " << i << " on rank " << rank;
  }
  EXPECT_EQ(step.optimizer().step_count(), 2);
}

}  // namespace
}  // namespace sf

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  omp_set_num_threads(1);
  auto comm = sf::dist::MpiFromWorld(std::chrono::seconds(120));
  if (!comm.ok()) {
    std::fprintf(stderr, "MPI: %s\n", comm.status().message().c_str());
    return 1;
  }
  sf::g_comm = comm->get();
  // Only rank 0 prints GoogleTest's report; every rank's failures still fail the run.
  if (sf::g_comm->rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int rc = RUN_ALL_TESTS();
  int32_t worst = rc;
  (void)sf::g_comm->Allreduce(&worst, 1, sf::DType::kI32, sf::dist::ReduceOp::kMax);
  return worst;
}
