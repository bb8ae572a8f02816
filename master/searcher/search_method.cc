#include "master/searcher/search_method.h"

#include "master/searcher/builtin_searchers.h"

namespace sf::master {

SearchMethod::~SearchMethod() = default;

std::string SearcherOp::ToString() const {
  switch (kind) {
    case Kind::kCreate:
      return "create(" + std::to_string(request_id) + ", " + hparams.ToJson() + ")";
    case Kind::kTrain:
      return "train(" + std::to_string(request_id) + ", " + std::to_string(target_length) + ")";
    case Kind::kClose:
      return "close(" + std::to_string(request_id) + ")";
    case Kind::kShutdown:
      return failure ? "shutdown(failure)" : "shutdown(ok)";
  }
  return "?";
}

const char* ExitReasonName(ExitReason reason) {
  switch (reason) {
    case ExitReason::kErrored:
      return "errored";
    case ExitReason::kUserCanceled:
      return "user_canceled";
    case ExitReason::kInvalidHyperparameters:
      return "invalid_hyperparameters";
  }
  return "errored";
}

Result<std::unique_ptr<SearchMethod>> MakeSearchMethod(const config::ExperimentConfig& config) {
  if (config.searcher.max_length.value <= 0) {
    return InvalidArgument("searcher.max_length: " + config.searcher.max_length.ToString() +
                           " must be at least 1");
  }
  using Name = config::SearcherConfig::Name;
  switch (config.searcher.name) {
    case Name::kSingle:
      return MakeSingleSearch(config);
    case Name::kGrid:
      return MakeGridSearch(config);
    case Name::kRandom:
      return MakeRandomSearch(config);
    case Name::kAdaptiveAsha:
      return MakeAdaptiveAshaSearch(config);
  }
  return InvalidArgument("searcher.name: unknown search method");
}

}  // namespace sf::master
