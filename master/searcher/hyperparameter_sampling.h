// Turning hyperparameter spaces into concrete values: the grid of a grid search, and seeded
// random samples for random search and adaptive ASHA.
//
// Values keep the config's shape: a nested group becomes a map of its members, so the result is
// what config::ValidateTrialHyperparameters expects. Functions are pure; SearchRng is a value
// type whose whole state can be saved as a string and restored (for searcher snapshots).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "common/config/experiment_config.h"
#include "common/status.h"
#include "common/value.h"

namespace sf::master {

// A seeded 64-bit Mersenne Twister with platform-independent draws (we do not use the standard
// distributions, whose outputs differ between library implementations).
class SearchRng {
 public:
  explicit SearchRng(uint64_t seed = 0) : engine_(seed) {}
  // Uniform integer in [lo, hi] (inclusive), without modulo bias.
  int64_t UniformInt(int64_t lo, int64_t hi);
  // Uniform double in [lo, hi).
  double UniformDouble(double lo, double hi);
  // The engine's full state (operator<< text) and back.
  std::string State() const;
  Status SetState(const std::string& state);

 private:
  std::mt19937_64 engine_;
};

// The grid points of one space, in increasing order (categorical: in the order given):
//   int: `count` evenly spaced integers including both ends (rounded), or every integer;
//   double: `count` evenly spaced values including both ends;
//   log: base^e for `count` evenly spaced exponents e including both ends;
//   const: the value; a count of 1 gives the midpoint of the range.
// Nested groups are not handled here (GridPoints expands them member by member).
std::vector<Value> SpaceGridPoints(const config::Hyperparameter& hp);

// The cartesian product of every space, in a fixed order: names sorted, the last name varying
// fastest. Each element is a complete hyperparameter map. Errors when a space has no grid
// points (double/log without count) or the product exceeds `max_points`.
Result<std::vector<Value>> GridPoints(const config::Hyperparameters& hps, int64_t max_points);

// One random sample of every space: int uniform inclusive, double uniform, log base^uniform(min,
// max), categorical uniform, const as is. Names are visited in sorted order so a seed always
// gives the same sample.
Value SampleHyperparameters(const config::Hyperparameters& hps, SearchRng& rng);

// True when some hyperparameter is a search space (not a constant).
bool HasSearchSpace(const config::Hyperparameters& hps);

}  // namespace sf::master
