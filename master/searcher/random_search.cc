// random: max_trials samples from the spaces with a PRNG seeded from searcher.seed; the PRNG's
// state is part of the snapshot, so a restored search draws the same samples.
#include <memory>

#include "master/searcher/builtin_searchers.h"
#include "master/searcher/fixed_length_search.h"
#include "master/searcher/hyperparameter_sampling.h"
#include "master/searcher/snapshot_fields.h"

namespace sf::master {
namespace {

class RandomSearch final : public FixedLengthSearch {
 public:
  explicit RandomSearch(const config::ExperimentConfig& config)
      : FixedLengthSearch("random", config.searcher.max_trials,
                          config.searcher.max_concurrent_trials, config.searcher.max_length.value,
                          /*replace_invalid=*/true),
        hps_(config.hyperparameters),
        rng_(static_cast<uint64_t>(config.searcher.seed)) {}

 protected:
  Value NextHyperparameters(int64_t) override { return SampleHyperparameters(hps_, rng_); }
  Value ExtraSnapshot() const override { return Value(Value::Map{{"rng", Value(rng_.State())}}); }
  Status RestoreExtra(const Value& extra) override {
    std::string state;
    SF_RETURN_IF_ERROR(snapshot::String(extra, "rng", state));
    return rng_.SetState(state);
  }

 private:
  config::Hyperparameters hps_;
  SearchRng rng_;
};

}  // namespace

Result<std::unique_ptr<SearchMethod>> MakeRandomSearch(const config::ExperimentConfig& config) {
  if (config.searcher.max_trials < 1) {
    return InvalidArgument("searcher.max_trials: " + std::to_string(config.searcher.max_trials) +
                           " must be >= 1");
  }
  return std::unique_ptr<SearchMethod>(std::make_unique<RandomSearch>(config));
}

}  // namespace sf::master
