#include "master/searcher/hyperparameter_sampling.h"

#include <cmath>
#include <sstream>

namespace sf::master {

using config::Hyperparameter;
using Kind = config::Hyperparameter::Kind;

int64_t SearchRng::UniformInt(int64_t lo, int64_t hi) {
  if (hi <= lo) return lo;
  const uint64_t range = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo) + 1;  // 0: all
  if (range == 0) return static_cast<int64_t>(engine_());
  // Rejection sampling: draws above the largest multiple of `range` are redrawn.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % range;
  uint64_t x = engine_();
  while (x >= limit) x = engine_();
  return static_cast<int64_t>(static_cast<uint64_t>(lo) + x % range);
}

double SearchRng::UniformDouble(double lo, double hi) {
  // 53 random bits -> [0, 1).
  const double unit = static_cast<double>(engine_() >> 11) * (1.0 / 9007199254740992.0);
  return lo + (hi - lo) * unit;
}

std::string SearchRng::State() const {
  std::ostringstream out;
  out << engine_;
  return out.str();
}

Status SearchRng::SetState(const std::string& state) {
  std::istringstream in(state);
  std::mt19937_64 engine;
  in >> engine;
  if (in.fail()) return InvalidArgument("searcher snapshot: malformed random engine state");
  engine_ = engine;
  return Status::Ok();
}

namespace {

// Evenly spaced points from lo to hi inclusive; the midpoint when count is 1.
std::vector<double> Linspace(double lo, double hi, int64_t count) {
  std::vector<double> out;
  if (count <= 1) {
    out.push_back((lo + hi) / 2);
    return out;
  }
  for (int64_t i = 0; i < count; ++i) {
    out.push_back(i == count - 1 ? hi : lo + (hi - lo) * static_cast<double>(i) / (count - 1));
  }
  return out;
}

}  // namespace

std::vector<Value> SpaceGridPoints(const Hyperparameter& hp) {
  std::vector<Value> out;
  switch (hp.kind) {
    case Kind::kConst:
      out.push_back(hp.value);
      break;
    case Kind::kCategorical:
      out = hp.vals;
      break;
    case Kind::kInt: {
      const auto lo = static_cast<int64_t>(std::llround(hp.minval));
      const auto hi = static_cast<int64_t>(std::llround(hp.maxval));
      const int64_t count = config::GridPointCount(hp);
      if (count <= 0) break;
      if (count >= hi - lo + 1) {
        for (int64_t v = lo; v <= hi; ++v) out.push_back(Value(v));
      } else {
        for (double v : Linspace(static_cast<double>(lo), static_cast<double>(hi), count)) {
          out.push_back(Value(static_cast<int64_t>(std::llround(v))));
        }
      }
      break;
    }
    case Kind::kDouble:
      if (hp.count && *hp.count > 0) {
        for (double v : Linspace(hp.minval, hp.maxval, *hp.count)) out.push_back(Value(v));
      }
      break;
    case Kind::kLog:
      if (hp.count && *hp.count > 0) {
        for (double e : Linspace(hp.minval, hp.maxval, *hp.count)) {
          out.push_back(Value(std::pow(hp.base, e)));
        }
      }
      break;
    case Kind::kNested:
      break;
  }
  return out;
}

namespace {

// Grid points of a hyperparameter including nested groups (each point a map for a group).
Result<std::vector<Value>> PointsOf(const std::string& path, const Hyperparameter& hp,
                                    int64_t max_points);

Result<std::vector<Value>> Product(const std::string& path, const config::Hyperparameters& hps,
                                   int64_t max_points) {
  std::vector<Value> points = {Value(Value::Map{})};
  for (const auto& [name, hp] : hps) {  // std::map: sorted names; last name varies fastest
    const std::string child = path.empty() ? name : path + "." + name;
    SF_ASSIGN_OR_RETURN(std::vector<Value> values, PointsOf(child, hp, max_points));
    if (static_cast<double>(points.size()) * static_cast<double>(values.size()) >
        static_cast<double>(max_points)) {
      return InvalidArgument("hyperparameters: the grid has more than " +
                             std::to_string(max_points) + " points");
    }
    std::vector<Value> next;
    next.reserve(points.size() * values.size());
    for (const Value& p : points) {
      for (const Value& v : values) {
        Value q = p;
        q.as_map()[name] = v;
        next.push_back(std::move(q));
      }
    }
    points = std::move(next);
  }
  return points;
}

Result<std::vector<Value>> PointsOf(const std::string& path, const Hyperparameter& hp,
                                    int64_t max_points) {
  if (hp.kind == Kind::kNested) return Product(path, hp.members, max_points);
  std::vector<Value> values = SpaceGridPoints(hp);
  if (values.empty()) {
    return InvalidArgument("hyperparameters." + path +
                           ": grid search needs grid points (set count on double and log spaces)");
  }
  return values;
}

}  // namespace

Result<std::vector<Value>> GridPoints(const config::Hyperparameters& hps, int64_t max_points) {
  return Product("", hps, max_points);
}

Value SampleHyperparameters(const config::Hyperparameters& hps, SearchRng& rng) {
  Value::Map out;
  for (const auto& [name, hp] : hps) {
    switch (hp.kind) {
      case Kind::kConst:
        out[name] = hp.value;
        break;
      case Kind::kInt:
        out[name] = Value(rng.UniformInt(static_cast<int64_t>(std::llround(hp.minval)),
                                         static_cast<int64_t>(std::llround(hp.maxval))));
        break;
      case Kind::kDouble:
        out[name] = Value(rng.UniformDouble(hp.minval, hp.maxval));
        break;
      case Kind::kLog:
        out[name] = Value(std::pow(hp.base, rng.UniformDouble(hp.minval, hp.maxval)));
        break;
      case Kind::kCategorical:
        out[name] = hp.vals.empty() ? Value()
                                    : hp.vals[static_cast<size_t>(rng.UniformInt(
                                          0, static_cast<int64_t>(hp.vals.size()) - 1))];
        break;
      case Kind::kNested:
        out[name] = SampleHyperparameters(hp.members, rng);
        break;
    }
  }
  return Value(std::move(out));
}

bool HasSearchSpace(const config::Hyperparameters& hps) {
  for (const auto& [name, hp] : hps) {
    if (hp.is_space()) return true;
  }
  return false;
}

}  // namespace sf::master
