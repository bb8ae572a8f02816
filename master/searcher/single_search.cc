// single: one trial with the constant hyperparameters, trained to max_length.
#include <memory>

#include "master/searcher/builtin_searchers.h"
#include "master/searcher/fixed_length_search.h"
#include "master/searcher/hyperparameter_sampling.h"

namespace sf::master {
namespace {

class SingleSearch final : public FixedLengthSearch {
 public:
  SingleSearch(Value hparams, int64_t max_length)
      : FixedLengthSearch("single", 1, 1, max_length), hparams_(std::move(hparams)) {}

 protected:
  Value NextHyperparameters(int64_t) override { return hparams_; }

 private:
  Value hparams_;
};

}  // namespace

Result<std::unique_ptr<SearchMethod>> MakeSingleSearch(const config::ExperimentConfig& config) {
  if (HasSearchSpace(config.hyperparameters)) {
    return InvalidArgument(
        "searcher.name: single runs constant hyperparameters; use grid, random or adaptive_asha "
        "for search spaces");
  }
  return std::unique_ptr<SearchMethod>(std::make_unique<SingleSearch>(
      config::ConstantHyperparameters(config.hyperparameters), config.searcher.max_length.value));
}

}  // namespace sf::master
