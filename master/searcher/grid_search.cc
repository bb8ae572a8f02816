// grid: every point of the cartesian product of the spaces, in a fixed order (names sorted, the
// last varying fastest), max_concurrent_trials at a time.
#include <memory>
#include <vector>

#include "master/searcher/builtin_searchers.h"
#include "master/searcher/fixed_length_search.h"
#include "master/searcher/hyperparameter_sampling.h"

namespace sf::master {
namespace {

// The config parser refuses larger grids; this guards configs built by hand.
constexpr int64_t kMaxGridPoints = 100000;

class GridSearch final : public FixedLengthSearch {
 public:
  GridSearch(std::vector<Value> points, int64_t max_concurrent_trials, int64_t max_length)
      : FixedLengthSearch("grid", static_cast<int64_t>(points.size()), max_concurrent_trials,
                          max_length),
        points_(std::move(points)) {}

 protected:
  Value NextHyperparameters(int64_t index) override { return points_[static_cast<size_t>(index)]; }

 private:
  std::vector<Value> points_;
};

}  // namespace

Result<std::unique_ptr<SearchMethod>> MakeGridSearch(const config::ExperimentConfig& config) {
  SF_ASSIGN_OR_RETURN(std::vector<Value> points,
                      GridPoints(config.hyperparameters, kMaxGridPoints));
  return std::unique_ptr<SearchMethod>(std::make_unique<GridSearch>(
      std::move(points), config.searcher.max_concurrent_trials, config.searcher.max_length.value));
}

}  // namespace sf::master
