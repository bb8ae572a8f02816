#include "common/config/hyperparameter_reader.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "common/config/hyperparameter_schema.h"
#include "common/config/model_hyperparameters.h"

namespace sf::config {
namespace {

constexpr int64_t kMaxGridTrials = 100000;
// Free-form int spaces: bounds are held as doubles, exact up to 2^53.
constexpr int64_t kMaxExactInt = int64_t{1} << 53;

bool IsSpaceType(const std::string& t) {
  return t == "const" || t == "int" || t == "double" || t == "log" || t == "categorical";
}

// Bounds print as written in docs/config.md: "1", "0.5", "1e-08".
std::string NumberText(double v) {
  if (v == std::floor(v) && std::abs(v) < 1e15) return std::to_string(static_cast<int64_t>(v));
  return Value(v).ToDisplay();
}

// Checks a constant against a spec. `at` gives the location (may be undefined).
void CheckConstant(ErrorSink& sink, const Value& v, const HpSpec& spec, const std::string& path,
                   const YAML::Node& at) {
  auto range_error = [&](double x) -> std::optional<std::string> {
    if (spec.min_exclusive ? x <= spec.min : x < spec.min) {
      return std::string("must be ") + (spec.min_exclusive ? "> " : ">= ") + NumberText(spec.min);
    }
    if (spec.max_exclusive ? x >= spec.max : x > spec.max) {
      return std::string("must be ") + (spec.max_exclusive ? "< " : "<= ") + NumberText(spec.max);
    }
    return std::nullopt;
  };
  switch (spec.type) {
    case HpSpec::Type::kInt:
      if (!v.is_int()) {
        sink.Add(path, at, v.ToDisplay() + " is not an integer");
      } else if (auto e = range_error(static_cast<double>(v.as_int()))) {
        sink.Add(path, at, v.ToDisplay() + " " + *e);
      }
      return;
    case HpSpec::Type::kDouble:
      if (!v.is_number()) {
        sink.Add(path, at, v.ToDisplay() + " is not a number");
      } else if (!std::isfinite(v.as_double())) {
        sink.Add(path, at, v.ToDisplay() + " must be a finite number");
      } else if (auto e = range_error(v.as_double())) {
        sink.Add(path, at, v.ToDisplay() + " " + *e);
      }
      return;
    case HpSpec::Type::kBool:
      if (!v.is_bool()) sink.Add(path, at, v.ToDisplay() + " is not a boolean (true or false)");
      return;
    case HpSpec::Type::kEnum: {
      bool found = false;
      if (v.is_string()) {
        for (const auto& o : spec.options) found |= (o == v.as_string());
      }
      if (!found) {
        std::string joined;
        for (const auto& o : spec.options) joined += (joined.empty() ? "" : ", ") + o;
        std::string msg = v.ToDisplay() + " must be one of " + joined;
        if (v.is_string()) {
          std::string s = ClosestMatch(v.as_string(), spec.options);
          if (!s.empty()) msg += " (did you mean \"" + s + "\"?)";
        }
        sink.Add(path, at, msg);
      }
      return;
    }
    case HpSpec::Type::kNumberList: {
      if (!v.is_list() || v.as_list().size() != spec.list_length) {
        sink.Add(
            path, at,
            v.ToDisplay() + " must be a list of " + std::to_string(spec.list_length) + " numbers");
        return;
      }
      for (size_t i = 0; i < v.as_list().size(); ++i) {
        const Value& e = v.as_list()[i];
        if (!e.is_number()) {
          sink.Add(IndexPath(path, i), at, e.ToDisplay() + " is not a number");
        } else if (auto err = range_error(e.as_double())) {
          sink.Add(IndexPath(path, i), at, e.ToDisplay() + " " + *err);
        }
      }
      return;
    }
    case HpSpec::Type::kGroup: {
      if (!v.is_map()) {
        sink.Add(path, at, "expected a mapping with a type, got " + v.ToDisplay());
        return;
      }
      const HpSpec* type_spec = spec.Member("type");
      std::string type = type_spec->default_value.as_string();
      if (const Value* t = v.Find("type")) {
        CheckConstant(sink, *t, *type_spec, JoinPath(path, "type"), at);
        if (!t->is_string()) return;
        type = t->as_string();
      }
      auto applies = spec.members_by_type.find(type);
      if (applies == spec.members_by_type.end()) return;  // bad type already reported
      std::vector<std::string> known;
      for (const auto& [n, s] : spec.members) known.push_back(n);
      for (const auto& [k, member] : v.as_map()) {
        if (k == "type") continue;
        const HpSpec* ms = spec.Member(k);
        bool applicable = false;
        for (const auto& a : applies->second) applicable |= (a == k);
        if (!ms) {
          std::string msg = "unknown field";
          std::string s = ClosestMatch(k, known);
          if (!s.empty()) msg += " (did you mean \"" + s + "\"?)";
          sink.Add(JoinPath(path, k), at, msg);
        } else if (!applicable) {
          sink.Add(JoinPath(path, k), at, "does not apply to type " + type);
        } else {
          CheckConstant(sink, member, *ms, JoinPath(path, k), at);
        }
      }
      return;
    }
  }
}

// Checks a free-form constant: any value, but numbers must be finite (trials get their
// hyperparameters as JSON, which has no NaN or infinity).
void CheckFreeFormConstant(ErrorSink& sink, const Value& v, const std::string& path,
                           const YAML::Node& at) {
  if (v.is_double() && !std::isfinite(v.as_double())) {
    sink.Add(path, at,
             v.ToDisplay() + " must be a finite number (trials get their hyperparameters as JSON)");
  } else if (v.is_list()) {
    for (size_t i = 0; i < v.as_list().size(); ++i) {
      CheckFreeFormConstant(sink, v.as_list()[i], IndexPath(path, i), at);
    }
  } else if (v.is_map()) {
    for (const auto& [k, member] : v.as_map()) {
      CheckFreeFormConstant(sink, member, JoinPath(path, k), at);
    }
  }
}

class HyperparameterReader {
 public:
  HyperparameterReader(ErrorSink& sink, HyperparameterLocations& locations)
      : sink_(sink), locations_(locations) {}

  void ReadNativeSection(const YAML::Node& node, Hyperparameters& out) {
    MapReader m(sink_, node, "hyperparameters");
    for (const auto& kv : node) {
      if (!kv.first.IsScalar()) continue;
      const std::string name = kv.first.Scalar();
      const HpSpec* spec = FindHyperparameterSpec(name);
      if (!spec) continue;  // reported by Finish as unknown
      auto v = m.Take(name);
      if (!v) continue;
      Hyperparameter hp;
      if (Read(*v, *spec, m.Child(name), hp)) out[name] = std::move(hp);
    }
    m.Finish(HyperparameterNames());
  }

  // The section or a nested group, free-form: every member is read, whatever its name. An
  // explicit null is a constant (None to a Python script), not an absent member.
  void ReadFreeFormMap(const YAML::Node& node, const std::string& path, Hyperparameters& out) {
    MapReader m(sink_, node, path);  // reports keys that are not names, and duplicates
    std::set<std::string> seen;
    for (const auto& kv : node) {
      if (!kv.first.IsScalar()) continue;
      const std::string name = kv.first.Scalar();
      if (!seen.insert(name).second) continue;
      m.Take(name);
      if (name.empty()) {
        sink_.Add(path, kv.first, "a hyperparameter name must not be empty");
        continue;
      }
      Hyperparameter hp;
      if (ReadFreeForm(kv.second, m.Child(name), hp)) out[name] = std::move(hp);
    }
  }

 private:
  bool ReadFreeForm(const YAML::Node& node, const std::string& path, Hyperparameter& out) {
    locations_[path] = node;
    size_t before = sink_.size();
    if (node.IsMap()) {
      YAML::Node type = node["type"];
      if (type.IsDefined() && type.IsScalar() && IsSpaceType(type.Scalar())) {
        return ReadSpace(node, nullptr, path, out);
      }
      out.kind = Hyperparameter::Kind::kNested;
      ReadFreeFormMap(node, path, out.members);
      return sink_.size() == before;
    }
    Value v = NodeToValue(node, path, &sink_);
    CheckFreeFormConstant(sink_, v, path, node);
    if (sink_.size() != before) return false;
    out.kind = Hyperparameter::Kind::kConst;
    out.value = std::move(v);
    return true;
  }

  // Reads one native hyperparameter (constant, space, or group).
  bool Read(const YAML::Node& node, const HpSpec& spec, const std::string& path,
            Hyperparameter& out) {
    locations_[path] = node;
    if (node.IsMap()) {
      YAML::Node type = node["type"];
      bool space = type.IsDefined() && type.IsScalar() && IsSpaceType(type.Scalar());
      if (space) return ReadSpace(node, &spec, path, out);
      if (spec.type == HpSpec::Type::kGroup) return ReadGroup(node, spec, path, out);
      if (type.IsDefined()) {
        sink_.Add(JoinPath(path, "type"), type,
                  DescribeNode(type) + " must be one of const, int, double, log, categorical");
        return false;
      }
      sink_.Add(path, node,
                "a mapping must be a search space with a type (const, int, double, log, "
                "categorical)");
      return false;
    }
    Value v = NodeToValue(node, path, &sink_);
    size_t before = sink_.size();
    CheckConstant(sink_, v, spec, path, node);
    if (sink_.size() != before) return false;
    out.kind = Hyperparameter::Kind::kConst;
    out.value = std::move(v);
    return true;
  }

  bool ReadGroup(const YAML::Node& node, const HpSpec& spec, const std::string& path,
                 Hyperparameter& out) {
    MapReader m(sink_, node, path);
    const HpSpec* type_spec = spec.Member("type");
    std::string type = type_spec->default_value.as_string();
    size_t before = sink_.size();
    if (auto v = m.Take("type")) {
      if (!ReadEnum(sink_, *v, m.Child("type"), type_spec->options, type)) {
        m.Finish({});
        return false;
      }
    }
    out.kind = Hyperparameter::Kind::kNested;
    Hyperparameter type_hp;
    type_hp.value = Value(type);
    out.members["type"] = type_hp;
    const auto& applies = spec.members_by_type.at(type);
    std::vector<std::string> known = {"type"};
    std::vector<std::pair<std::string, std::string>> not_applicable;
    for (const auto& [name, member_spec] : spec.members) {
      if (name == "type") continue;
      known.push_back(name);
      bool applicable = false;
      for (const auto& a : applies) applicable |= (a == name);
      if (!applicable) {
        not_applicable.emplace_back(name, "does not apply to " + path + ".type " + type);
        continue;
      }
      if (auto v = m.Take(name)) {
        Hyperparameter hp;
        if (Read(*v, member_spec, m.Child(name), hp)) out.members[name] = std::move(hp);
      }
    }
    m.Finish(known, not_applicable);
    return sink_.size() == before;
  }

  // A space; `spec` is the native hyperparameter's, nullptr for a free-form one (then nothing
  // is checked against a schema).
  bool ReadSpace(const YAML::Node& node, const HpSpec* spec, const std::string& path,
                 Hyperparameter& out) {
    MapReader m(sink_, node, path);
    std::string type = m.Take("type")->Scalar();
    size_t before = sink_.size();
    const std::vector<std::string> known = {"type",  "val",  "minval", "maxval",
                                            "count", "base", "vals"};
    std::vector<std::pair<std::string, std::string>> not_applicable;
    auto not_for = [&](std::initializer_list<const char*> keys) {
      for (const char* k : keys) {
        not_applicable.emplace_back(k, "is not used by a " + type + " space");
      }
    };
    auto check = [&](const Value& v, const std::string& at_path, const YAML::Node& at) {
      if (spec) {
        CheckConstant(sink_, v, *spec, at_path, at);
      } else {
        CheckFreeFormConstant(sink_, v, at_path, at);
      }
    };
    if (type == "const") {
      out.kind = Hyperparameter::Kind::kConst;
      if (auto v = m.Take("val")) {
        if (spec && spec->type == HpSpec::Type::kGroup) {
          Hyperparameter inner;
          if (Read(*v, *spec, m.Child("val"), inner)) out = std::move(inner);
        } else {
          out.value = NodeToValue(*v, m.Child("val"), &sink_);
          check(out.value, m.Child("val"), *v);
        }
      } else {
        m.Missing("val");
      }
      not_for({"minval", "maxval", "count", "base", "vals"});
    } else if (type == "categorical") {
      out.kind = Hyperparameter::Kind::kCategorical;
      if (auto v = m.Take("vals")) {
        std::string vp = m.Child("vals");
        if (!v->IsSequence() || v->size() == 0) {
          sink_.Add(vp, *v, "expected a non-empty list, got " + DescribeNode(*v));
        } else {
          size_t i = 0;
          for (const auto& e : *v) {
            Value val = NodeToValue(e, IndexPath(vp, i), &sink_);
            check(val, IndexPath(vp, i), e);
            out.vals.push_back(std::move(val));
            ++i;
          }
        }
      } else {
        m.Missing("vals");
      }
      not_for({"val", "minval", "maxval", "count", "base"});
    } else {
      // int, double, log: numeric ranges.
      out.kind = type == "int"      ? Hyperparameter::Kind::kInt
                 : type == "double" ? Hyperparameter::Kind::kDouble
                                    : Hyperparameter::Kind::kLog;
      if (spec) {
        bool numeric_spec = spec->type == HpSpec::Type::kInt || spec->type == HpSpec::Type::kDouble;
        if (!numeric_spec) {
          sink_.Add(JoinPath(path, "type"), node,
                    "a " + type + " space needs a numeric hyperparameter; use categorical");
          m.Finish(known);
          return false;
        }
        if (type != "int" && spec->type == HpSpec::Type::kInt) {
          sink_.Add(JoinPath(path, "type"), node,
                    type + " space for an integer hyperparameter; use an int space");
        }
      }
      bool have_min = false, have_max = false;
      if (type == "int") {
        // Native bounds are checked against the schema below; free-form ones must be exact.
        std::optional<int64_t> lowest, highest;
        if (!spec) {
          lowest = -kMaxExactInt;
          highest = kMaxExactInt;
        }
        int64_t lo = 0, hi = 0;
        if (auto v = m.Take("minval")) {
          have_min = ReadInt(sink_, *v, m.Child("minval"), lo, lowest, highest);
        } else {
          m.Missing("minval");
        }
        if (auto v = m.Take("maxval")) {
          have_max = ReadInt(sink_, *v, m.Child("maxval"), hi, lowest, highest);
        } else {
          m.Missing("maxval");
        }
        out.minval = static_cast<double>(lo);
        out.maxval = static_cast<double>(hi);
      } else {
        if (auto v = m.Take("minval")) {
          have_min = ReadDouble(sink_, *v, m.Child("minval"), out.minval);
        } else {
          m.Missing("minval");
        }
        if (auto v = m.Take("maxval")) {
          have_max = ReadDouble(sink_, *v, m.Child("maxval"), out.maxval);
        } else {
          m.Missing("maxval");
        }
      }
      if (auto v = m.Take("count")) {
        int64_t c = 0;
        if (ReadInt(sink_, *v, m.Child("count"), c, 1, 100000)) out.count = c;
      }
      if (type == "log") {
        if (auto v = m.Take("base")) {
          if (ReadDouble(sink_, *v, m.Child("base"), out.base, 0.0, std::nullopt, true) &&
              out.base == 1.0) {
            sink_.Add(m.Child("base"), *v, "1 is not a valid logarithm base");
          }
        }
      } else {
        not_for({"base"});
      }
      not_for({"val", "vals"});
      if (have_min && have_max) {
        if (out.minval > out.maxval) {
          sink_.Add(m.Child("maxval"), node,
                    NumberText(out.maxval) + " is smaller than minval " + NumberText(out.minval));
        } else if (spec) {
          // The range's end points must be valid values themselves.
          double lo = out.minval, hi = out.maxval;
          if (type == "log") {
            lo = std::pow(out.base, out.minval);
            hi = std::pow(out.base, out.maxval);
          }
          Value vlo = type == "int" ? Value(static_cast<int64_t>(lo)) : Value(lo);
          Value vhi = type == "int" ? Value(static_cast<int64_t>(hi)) : Value(hi);
          CheckConstant(sink_, vlo, *spec, m.Child("minval"), node);
          CheckConstant(sink_, vhi, *spec, m.Child("maxval"), node);
        } else if (type == "log") {
          // Free-form: the values the space gives must still be numbers JSON can carry.
          for (const char* end : {"minval", "maxval"}) {
            double exponent = std::string(end) == "minval" ? out.minval : out.maxval;
            if (!std::isfinite(std::pow(out.base, exponent))) {
              sink_.Add(
                  m.Child(end), node,
                  NumberText(out.base) + "^" + NumberText(exponent) + " is not a finite number");
            }
          }
        }
      }
    }
    m.Finish(known, not_applicable);
    return sink_.size() == before;
  }

  ErrorSink& sink_;
  HyperparameterLocations& locations_;
};

YAML::Node At(const HyperparameterLocations& locations, const std::string& path) {
  auto it = locations.find(path);
  return it == locations.end() ? YAML::Node() : it->second;
}

}  // namespace

void ReadHyperparameters(ErrorSink& sink, const YAML::Node& node, HyperparameterMode mode,
                         Hyperparameters& out, HyperparameterLocations& locations) {
  if (!RequireMap(sink, node, "hyperparameters")) return;
  HyperparameterReader reader(sink, locations);
  if (mode == HyperparameterMode::kNative) {
    reader.ReadNativeSection(node, out);
  } else {
    reader.ReadFreeFormMap(node, "hyperparameters", out);
  }
}

void CheckSearchSpaces(ErrorSink& sink, const ExperimentConfig& c,
                       const HyperparameterLocations& locations) {
  auto at = [&](const std::string& path) { return At(locations, path); };
  int64_t grid_size = 1;
  std::function<void(const std::string&, const Hyperparameter&)> visit =
      [&](const std::string& path, const Hyperparameter& hp) {
        if (hp.kind == Hyperparameter::Kind::kNested) {
          for (const auto& [k, m] : hp.members) visit(JoinPath(path, k), m);
          return;
        }
        if (hp.kind == Hyperparameter::Kind::kConst) return;
        if (c.searcher.name == SearcherConfig::Name::kSingle) {
          sink.Add(path, at(path),
                   "a search space needs a grid, random or adaptive_asha searcher "
                   "(searcher.name is single)");
          return;
        }
        if (c.searcher.name != SearcherConfig::Name::kGrid) return;
        int64_t n = GridPointCount(hp);
        if (n == 0) {
          std::string kind = hp.kind == Hyperparameter::Kind::kLog      ? "log"
                             : hp.kind == Hyperparameter::Kind::kDouble ? "double"
                                                                        : "int";
          sink.Add(path, at(path),
                   "grid search over a " + kind + " space needs count (how many grid points)");
          return;
        }
        if (grid_size <= kMaxGridTrials) grid_size *= n;
      };
  for (const auto& [name, hp] : c.hyperparameters) visit("hyperparameters." + name, hp);
  if (c.searcher.name == SearcherConfig::Name::kGrid && grid_size > kMaxGridTrials) {
    sink.AddNoLocation("hyperparameters",
                       "the grid has more than " + std::to_string(kMaxGridTrials) + " points");
  }
}

bool Hyperparameter::is_space() const {
  if (kind == Kind::kNested) {
    for (const auto& [k, m] : members) {
      if (m.is_space()) return true;
    }
    return false;
  }
  return kind != Kind::kConst;
}

std::vector<ConfigError> ValidateTrialHyperparameters(const Value& hparams) {
  ErrorSink sink;
  if (!hparams.is_map()) {
    sink.AddNoLocation("hyperparameters", "expected a mapping, got " + hparams.ToDisplay());
    return std::move(sink.errors());
  }
  // The trial's arch; "" when it is not a valid one (reported below as a bad constant).
  std::string arch = FindHyperparameterSpec("arch")->default_value.as_string();
  if (const Value* a = hparams.Find("arch")) arch = a->is_string() ? a->as_string() : "";
  const std::string family = ArchFamily(arch);
  for (const auto& [name, v] : hparams.as_map()) {
    const HpSpec* spec = FindHyperparameterSpec(name);
    std::string path = "hyperparameters." + name;
    if (!spec) {
      std::string msg = "unknown field";
      std::string s = ClosestMatch(name, HyperparameterNames());
      if (!s.empty()) msg += " (did you mean \"" + s + "\"?)";
      sink.AddNoLocation(path, msg);
      continue;
    }
    if (!family.empty() && !AppliesTo(*spec, family)) {
      sink.AddNoLocation(path, NotForArchMessage(*spec, arch));
      continue;
    }
    CheckConstant(sink, v, *spec, path, YAML::Node(YAML::NodeType::Undefined));
  }
  if (!sink.empty()) return std::move(sink.errors());
  CheckTrialModelHyperparameters(sink, hparams, family);
  return std::move(sink.errors());
}

Value ConstantHyperparameters(const Hyperparameters& hps) {
  Value::Map out;
  for (const auto& [name, hp] : hps) {
    if (hp.kind == Hyperparameter::Kind::kConst) {
      out[name] = hp.value;
    } else if (hp.kind == Hyperparameter::Kind::kNested) {
      Value inner = ConstantHyperparameters(hp.members);
      out[name] = inner;
    }
  }
  return Value(std::move(out));
}

int64_t GridPointCount(const Hyperparameter& hp) {
  switch (hp.kind) {
    case Hyperparameter::Kind::kConst:
      return 1;
    case Hyperparameter::Kind::kCategorical:
      return static_cast<int64_t>(hp.vals.size());
    case Hyperparameter::Kind::kInt: {
      int64_t range = static_cast<int64_t>(hp.maxval - hp.minval) + 1;
      if (hp.count) return std::min(*hp.count, range);
      return range <= 1000 ? range : 0;
    }
    case Hyperparameter::Kind::kDouble:
    case Hyperparameter::Kind::kLog:
      return hp.count ? *hp.count : 0;
    case Hyperparameter::Kind::kNested: {
      int64_t n = 1;
      for (const auto& [k, m] : hp.members) {
        int64_t c = GridPointCount(m);
        if (c == 0) return 0;
        if (n > std::numeric_limits<int64_t>::max() / c) {
          n = std::numeric_limits<int64_t>::max();  // saturated; keep looking for a 0
        } else {
          n *= c;
        }
      }
      return n;
    }
  }
  return 0;
}

}  // namespace sf::config
