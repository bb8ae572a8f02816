#include "trainer/run/training_run.h"

#include "common/log.h"
#include "trainer/core/splitmix64.h"
#include "trainer/optim/from_config.h"
#include "trainer/run/data_parallel.h"
#include "trainer/run/model_setup.h"
#include "trainer/run/speech_run.h"
#include "trainer/run/text_run.h"

namespace sf {

uint64_t RankDropoutSeed(uint64_t seed, int rank) {
  if (rank == 0) return seed;
  // The rank-th output of splitmix64 seeded with `seed`: far-apart Philox keys per rank.
  return SplitMix64{seed + 0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(rank)}.Next();
}

Result<RunStepParts> MakeRunStepParts(TrainableModel<float>& model, const config::ExperimentConfig& cfg,
                                      const config::OptimizationHp& hparams, const TrainingRunOptions& options, int64_t total_steps,
                                      int64_t aggregation) {
  RunStepParts parts;
  const OptimizerOptions oo = OptimizerOptionsFromHyperparameters(hparams.optimizer);
  SF_ASSIGN_OR_RETURN(auto optimizer, MakeOptimizer(oo));
  const LrScheduleOptions so = LrScheduleOptionsFromHyperparameters(hparams.lr, hparams.lr_schedule, total_steps);
  SF_ASSIGN_OR_RETURN(parts.schedule, MakeLrSchedule(so));
  SF_ASSIGN_OR_RETURN(LossScaler scaler, LossScaler::Make(LossScalerOptionsFromConfig(
                                             cfg.loss_scaling, options.world_size, aggregation)));
  parts.step = std::make_unique<TrainStep>(&model, std::move(optimizer), std::move(scaler),
                                           hparams.clip_norm);
  std::vector<ParamRef> params = model.Parameters();
  SF_RETURN_IF_ERROR(parts.step->optimizer().Prepare(params));
  if (options.comm && options.world_size > 1) {
    SF_RETURN_IF_ERROR(BroadcastWeights(*options.comm, model));
    dist::GradReducerOptions ro;
    ro.bucket_bytes = cfg.optimizations.bucket_size_mb << 20;
    ro.wire = ComputeDType(cfg.optimizations.allreduce_dtype);  // the precision's dtype
    parts.reducer = MakeGradReducer(*options.comm, model, ro);
    parts.step->set_grad_reducer(parts.reducer.get());
    log::Info("trainer", {{"event", "data_parallel"}, {"rank", std::to_string(options.rank)},
                          {"world_size", std::to_string(options.world_size)},
                          {"backend", options.comm->backend_name()},
                          {"buckets", std::to_string(parts.reducer->bucket_count())},
                          {"allreduce_dtype", DTypeName(ro.wire)}});
  }
  return parts;
}

namespace {

// A counter of trainer_state.json; `def` when a checkpoint written before it existed lacks it.
int64_t StateInt(const Value& state, const std::string& key, int64_t def) {
  const Value* x = state.Find(key);
  if (!x || !x->is_number()) return def;
  return x->is_int() ? x->as_int() : static_cast<int64_t>(x->as_double());
}

}  // namespace

Value::Map RunCountersState(const RunCounters& c, TrainableModel<float>& model, data::DataPosition pos) {
  return {{"steps", c.steps},
          {"skipped_steps", c.skipped},
          {"dropout_seed", static_cast<int64_t>(c.dropout_seed)},
          {"micro_batch", static_cast<int64_t>(model.context().micro_batch)},
          {"data_epoch", pos.epoch},
          {"data_batch", pos.batch}};
}

RunCounters RestoreRunCounters(const Value& state, uint64_t seed, int rank, TrainableModel<float>& model) {
  RunCounters c;
  c.steps = StateInt(state, "steps", 0);
  c.skipped = StateInt(state, "skipped_steps", 0);
  c.dropout_seed = static_cast<uint64_t>(StateInt(state, "dropout_seed", static_cast<int64_t>(seed)));
  model.context().seed = RankDropoutSeed(c.dropout_seed, rank);
  model.context().micro_batch = static_cast<uint64_t>(StateInt(state, "micro_batch", 0));
  return c;
}

data::DataPosition CheckpointDataPosition(const Value& state) {
  return {StateInt(state, "data_epoch", 1), StateInt(state, "data_batch", 0)};
}

Result<std::unique_ptr<TrainingRun>> MakeTrainingRun(const config::ExperimentConfig& cfg, std::string config_yaml,
                                                     Value hparams, const TrainingRunOptions& options) {
  if (cfg.data.speech_data()) {
    SF_ASSIGN_OR_RETURN(std::unique_ptr<SpeechRun> run,
                        SpeechRun::Create(cfg, std::move(config_yaml), std::move(hparams), options));
    return std::unique_ptr<TrainingRun>(std::move(run));
  }
  SF_ASSIGN_OR_RETURN(std::unique_ptr<TextRun> run,
                      TextRun::Create(cfg, std::move(config_yaml), std::move(hparams), options));
  return std::unique_ptr<TrainingRun>(std::move(run));
}

}  // namespace sf
