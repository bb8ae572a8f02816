#include "common/config/experiment_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>

#include "common/config/hyperparameter_schema.h"
#include "common/config/yaml_reader.h"
#include "common/utf8.h"

namespace sf::config {
namespace {

constexpr char kDocument[] = "<document>";
constexpr int64_t kMaxGridTrials = 100000;

// ---------------------------------------------------------------------------------------------
// Small sections

bool ReadLength(ErrorSink& sink, const YAML::Node& node, const std::string& path, Length& out) {
  if (!RequireMap(sink, node, path)) return false;
  MapReader m(sink, node, path);
  auto batches = m.Take("batches");
  auto epochs = m.Take("epochs");
  m.Finish({"batches", "epochs"});
  if (batches && epochs) {
    sink.Add(path, node, "give either batches or epochs, not both");
    return false;
  }
  if (!batches && !epochs) {
    sink.Add(path, node, "expected {batches: N} or {epochs: N}");
    return false;
  }
  Length len;
  len.unit = batches ? Length::Unit::kBatches : Length::Unit::kEpochs;
  if (!ReadInt(sink, batches ? *batches : *epochs, m.Child(batches ? "batches" : "epochs"),
               len.value, 1)) {
    return false;
  }
  out = len;
  return true;
}

void ReadParallelFiles(ErrorSink& sink, const YAML::Node& node, const std::string& path,
                       ParallelFiles& out) {
  if (!RequireMap(sink, node, path)) return;
  MapReader m(sink, node, path);
  if (auto v = m.Take("src")) ReadString(sink, *v, m.Child("src"), out.src);
  else m.Missing("src");
  if (auto v = m.Take("tgt")) ReadString(sink, *v, m.Child("tgt"), out.tgt);
  else m.Missing("tgt");
  m.Finish({"src", "tgt"});
}

void ReadTokenizer(ErrorSink& sink, const YAML::Node& node, const std::string& path,
                   TokenizerConfig& out) {
  if (!RequireMap(sink, node, path)) return;
  MapReader m(sink, node, path);
  if (auto v = m.Take("type")) ReadEnum(sink, *v, m.Child("type"), {"sentencepiece"}, out.type);
  if (auto v = m.Take("vocab_size")) ReadInt(sink, *v, m.Child("vocab_size"), out.vocab_size, 16, 1000000);
  if (auto v = m.Take("model_type")) {
    ReadEnum(sink, *v, m.Child("model_type"), {"bpe", "unigram", "char", "word"}, out.model_type);
  }
  if (auto v = m.Take("shared")) ReadBool(sink, *v, m.Child("shared"), out.shared);
  if (auto v = m.Take("model")) {
    std::string s;
    if (ReadString(sink, *v, m.Child("model"), s)) out.model = s;
  }
  if (auto v = m.Take("character_coverage")) {
    ReadDouble(sink, *v, m.Child("character_coverage"), out.character_coverage, 0.0, 1.0, true);
  }
  m.Finish({"type", "vocab_size", "model_type", "shared", "model", "character_coverage"});
}

void ReadData(ErrorSink& sink, const YAML::Node& node, const std::string& path, DataConfig& out) {
  if (!RequireMap(sink, node, path)) return;
  MapReader m(sink, node, path);
  if (auto v = m.Take("train")) ReadParallelFiles(sink, *v, m.Child("train"), out.train);
  else m.Missing("train");
  if (auto v = m.Take("valid")) {
    out.valid.emplace();
    ReadParallelFiles(sink, *v, m.Child("valid"), *out.valid);
  }
  if (auto v = m.Take("test")) {
    out.test.emplace();
    ReadParallelFiles(sink, *v, m.Child("test"), *out.test);
  }
  if (auto v = m.Take("tokenizer")) ReadTokenizer(sink, *v, m.Child("tokenizer"), out.tokenizer);
  if (auto v = m.Take("max_source_positions")) {
    ReadInt(sink, *v, m.Child("max_source_positions"), out.max_source_positions, 1, 65536);
  }
  if (auto v = m.Take("max_target_positions")) {
    ReadInt(sink, *v, m.Child("max_target_positions"), out.max_target_positions, 1, 65536);
  }
  m.Finish({"train", "valid", "test", "tokenizer", "max_source_positions", "max_target_positions"});
}

bool ReadPrecision(ErrorSink& sink, const YAML::Node& node, const std::string& path,
                   Precision& out) {
  std::string s;
  if (!ReadEnum(sink, node, path, {"fp32", "bf16", "fp16"}, s)) return false;
  out = s == "fp32" ? Precision::kFp32 : s == "bf16" ? Precision::kBf16 : Precision::kFp16;
  return true;
}

void ReadLossScaling(ErrorSink& sink, const YAML::Node& node, const std::string& path,
                     LossScalingConfig& out) {
  if (!RequireMap(sink, node, path)) return;
  MapReader m(sink, node, path);
  std::string type = "dynamic";
  if (auto v = m.Take("type")) {
    if (!ReadEnum(sink, *v, m.Child("type"), {"none", "static", "dynamic"}, type)) {
      m.Finish({"type", "scale", "init_scale", "growth_interval", "scale_factor", "min_scale"});
      return;
    }
  } else {
    m.Missing("type");
    return;
  }
  out.type = type == "none" ? LossScalingConfig::Type::kNone
             : type == "static" ? LossScalingConfig::Type::kStatic
                                : LossScalingConfig::Type::kDynamic;
  const std::vector<std::string> known = {"type", "scale", "init_scale", "growth_interval",
                                          "scale_factor", "min_scale"};
  std::vector<std::pair<std::string, std::string>> not_applicable;
  if (type == "static") {
    if (auto v = m.Take("scale")) ReadDouble(sink, *v, m.Child("scale"), out.scale, 0.0, 1e30, true);
    else m.Missing("scale");
    for (const char* k : {"init_scale", "growth_interval", "scale_factor", "min_scale"}) {
      not_applicable.emplace_back(k, "applies to dynamic loss scaling only");
    }
  } else if (type == "dynamic") {
    if (auto v = m.Take("init_scale")) {
      ReadDouble(sink, *v, m.Child("init_scale"), out.init_scale, 0.0, 1e30, true);
    }
    if (auto v = m.Take("growth_interval")) {
      int64_t g = 0;
      if (ReadInt(sink, *v, m.Child("growth_interval"), g, 1)) out.growth_interval = g;
    }
    if (auto v = m.Take("scale_factor")) {
      ReadDouble(sink, *v, m.Child("scale_factor"), out.scale_factor, 1.0, 1e3, true);
    }
    if (auto v = m.Take("min_scale")) {
      ReadDouble(sink, *v, m.Child("min_scale"), out.min_scale, 0.0, 1e30, true);
    }
    not_applicable.emplace_back("scale", "applies to static loss scaling only");
  } else {
    for (const char* k : {"scale", "init_scale", "growth_interval", "scale_factor", "min_scale"}) {
      not_applicable.emplace_back(k, "does not apply when type is none");
    }
  }
  m.Finish(known, not_applicable);
  if (type == "dynamic" && out.min_scale > out.init_scale) {
    sink.Add(m.Child("min_scale"), node,
             "min_scale must not exceed init_scale");
  }
}

void ReadOptimizations(ErrorSink& sink, const YAML::Node& node, const std::string& path,
                       OptimizationsConfig& out) {
  if (!RequireMap(sink, node, path)) return;
  MapReader m(sink, node, path);
  if (auto v = m.Take("aggregation_frequency")) {
    ReadInt(sink, *v, m.Child("aggregation_frequency"), out.aggregation_frequency, 1, 65536);
  }
  if (auto v = m.Take("allreduce_dtype")) ReadPrecision(sink, *v, m.Child("allreduce_dtype"), out.allreduce_dtype);
  if (auto v = m.Take("bucket_size_mb")) ReadInt(sink, *v, m.Child("bucket_size_mb"), out.bucket_size_mb, 1, 4096);
  m.Finish({"aggregation_frequency", "allreduce_dtype", "bucket_size_mb"});
}

void ReadResources(ErrorSink& sink, const YAML::Node& node, const std::string& path,
                   ResourcesConfig& out) {
  if (!RequireMap(sink, node, path)) return;
  MapReader m(sink, node, path);
  if (auto v = m.Take("slots_per_trial")) ReadInt(sink, *v, m.Child("slots_per_trial"), out.slots_per_trial, 1, 4096);
  if (auto v = m.Take("resource_pool")) ReadString(sink, *v, m.Child("resource_pool"), out.resource_pool);
  if (auto v = m.Take("priority")) ReadInt(sink, *v, m.Child("priority"), out.priority, 1, 99);
  if (auto v = m.Take("max_slots")) {
    int64_t s = 0;
    if (ReadInt(sink, *v, m.Child("max_slots"), s, 1)) out.max_slots = s;
  }
  if (auto v = m.Take("weight")) ReadDouble(sink, *v, m.Child("weight"), out.weight, 0.0, 1e6, true);
  m.Finish({"slots_per_trial", "resource_pool", "priority", "max_slots", "weight"});
  if (out.max_slots && *out.max_slots < out.slots_per_trial) {
    sink.Add(m.Child("max_slots"), node,
             std::to_string(*out.max_slots) + " is smaller than slots_per_trial " +
                 std::to_string(out.slots_per_trial));
  }
}

const std::vector<std::string> kMetrics = {"validation_loss", "validation_perplexity", "bleu"};

// smaller_is_better given explicitly (nullopt: derived from the metric).
void ReadSearcher(ErrorSink& sink, const YAML::Node& node, const std::string& path,
                  SearcherConfig& out, std::optional<bool>& smaller_given) {
  if (!RequireMap(sink, node, path)) return;
  MapReader m(sink, node, path);
  const std::vector<std::string> known = {
      "name", "metric", "smaller_is_better", "max_length", "max_trials", "max_concurrent_trials",
      "seed", "mode", "divisor", "max_rungs", "bracket_rungs"};
  std::string name;
  if (auto v = m.Take("name")) {
    if (!ReadEnum(sink, *v, m.Child("name"), {"single", "grid", "random", "adaptive_asha"}, name)) {
      // Which fields apply depends on the name; without one, only report unknown fields.
      for (const auto& k : known) m.Take(k);
      m.Finish(known);
      return;
    }
  } else {
    m.Missing("name");
    m.Finish(known);
    return;
  }
  out.name = name == "single"   ? SearcherConfig::Name::kSingle
             : name == "grid"   ? SearcherConfig::Name::kGrid
             : name == "random" ? SearcherConfig::Name::kRandom
                                : SearcherConfig::Name::kAdaptiveAsha;
  if (auto v = m.Take("metric")) {
    std::string metric;
    if (ReadString(sink, *v, m.Child("metric"), metric)) {
      bool known_metric = false;
      for (const auto& k : kMetrics) known_metric |= (k == metric);
      if (known_metric) {
        out.metric = metric;
      } else {
        std::string msg = "\"" + metric + "\" is not a metric the trainer reports (" +
                          "validation_loss, validation_perplexity, bleu)";
        std::string s = ClosestMatch(metric, kMetrics);
        if (!s.empty()) msg += " (did you mean \"" + s + "\"?)";
        sink.Add(m.Child("metric"), *v, msg);
      }
    }
  } else {
    m.Missing("metric");
  }
  if (auto v = m.Take("smaller_is_better")) {
    bool b = true;
    if (ReadBool(sink, *v, m.Child("smaller_is_better"), b)) {
      smaller_given = b;
      out.smaller_is_better = b;
    }
  }
  if (auto v = m.Take("max_length")) ReadLength(sink, *v, m.Child("max_length"), out.max_length);
  else m.Missing("max_length");

  const bool sampling = name == "random" || name == "adaptive_asha";
  const bool multi = name != "single";
  const std::string not_used = "is not used by the " + name + " searcher";
  std::vector<std::pair<std::string, std::string>> not_applicable;
  if (sampling) {
    if (auto v = m.Take("max_trials")) ReadInt(sink, *v, m.Child("max_trials"), out.max_trials, 1, 100000);
    else m.Missing("max_trials");
    if (auto v = m.Take("seed")) ReadInt(sink, *v, m.Child("seed"), out.seed, 0);
  } else {
    not_applicable.emplace_back("max_trials", not_used);
    not_applicable.emplace_back("seed", not_used);
  }
  if (multi) {
    if (auto v = m.Take("max_concurrent_trials")) {
      ReadInt(sink, *v, m.Child("max_concurrent_trials"), out.max_concurrent_trials, 0, 100000);
    }
  } else {
    not_applicable.emplace_back("max_concurrent_trials", not_used);
  }
  if (name == "adaptive_asha") {
    if (auto v = m.Take("mode")) {
      std::string mode;
      if (ReadEnum(sink, *v, m.Child("mode"), {"aggressive", "standard", "conservative"}, mode)) {
        out.mode = mode == "aggressive" ? SearcherConfig::AshaMode::kAggressive
                   : mode == "standard" ? SearcherConfig::AshaMode::kStandard
                                        : SearcherConfig::AshaMode::kConservative;
      }
    }
    if (auto v = m.Take("divisor")) ReadDouble(sink, *v, m.Child("divisor"), out.divisor, 1.0, 100.0, true);
    if (auto v = m.Take("max_rungs")) ReadInt(sink, *v, m.Child("max_rungs"), out.max_rungs, 1, 32);
    if (auto v = m.Take("bracket_rungs")) {
      std::string bp = m.Child("bracket_rungs");
      if (!v->IsSequence()) {
        sink.Add(bp, *v, "expected a list of integers, got " + DescribeNode(*v));
      } else {
        size_t i = 0;
        for (const auto& e : *v) {
          int64_t r = 0;
          if (ReadInt(sink, e, IndexPath(bp, i), r, 1, out.max_rungs)) out.bracket_rungs.push_back(r);
          ++i;
        }
      }
    }
  } else {
    for (const char* k : {"mode", "divisor", "max_rungs", "bracket_rungs"}) {
      not_applicable.emplace_back(k, not_used);
    }
  }
  m.Finish(known, not_applicable);
}

void ReadCheckpointStorage(ErrorSink& sink, const YAML::Node& node, const std::string& path,
                           CheckpointStorageConfig& out) {
  if (!RequireMap(sink, node, path)) return;
  MapReader m(sink, node, path);
  if (auto v = m.Take("type")) ReadEnum(sink, *v, m.Child("type"), {"shared_fs"}, out.type);
  if (auto v = m.Take("host_path")) ReadString(sink, *v, m.Child("host_path"), out.host_path);
  else m.Missing("host_path");
  if (auto v = m.Take("storage_path")) {
    std::string s;
    if (ReadString(sink, *v, m.Child("storage_path"), s)) out.storage_path = s;
  }
  if (auto v = m.Take("save_experiment_best")) {
    ReadInt(sink, *v, m.Child("save_experiment_best"), out.save_experiment_best, 0, 1000000);
  }
  if (auto v = m.Take("save_trial_best")) ReadInt(sink, *v, m.Child("save_trial_best"), out.save_trial_best, 0, 1000000);
  if (auto v = m.Take("save_trial_latest")) {
    ReadInt(sink, *v, m.Child("save_trial_latest"), out.save_trial_latest, 0, 1000000);
  }
  m.Finish({"type", "host_path", "storage_path", "save_experiment_best", "save_trial_best",
            "save_trial_latest"});
}

// ---------------------------------------------------------------------------------------------
// Hyperparameters

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
        sink.Add(path, at,
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

class HyperparameterReader {
 public:
  explicit HyperparameterReader(ErrorSink& sink) : sink_(sink) {}

  void ReadSection(const YAML::Node& node, Hyperparameters& out) {
    if (!RequireMap(sink_, node, "hyperparameters")) return;
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

  const std::map<std::string, YAML::Node>& locations() const { return locations_; }

 private:
  // Reads one hyperparameter (constant, space, or group).
  bool Read(const YAML::Node& node, const HpSpec& spec, const std::string& path,
            Hyperparameter& out) {
    locations_[path] = node;
    if (node.IsMap()) {
      YAML::Node type = node["type"];
      bool space = type.IsDefined() && type.IsScalar() && IsSpaceType(type.Scalar());
      if (space) return ReadSpace(node, spec, path, out);
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

  bool ReadSpace(const YAML::Node& node, const HpSpec& spec, const std::string& path,
                 Hyperparameter& out) {
    MapReader m(sink_, node, path);
    std::string type = m.Take("type")->Scalar();
    size_t before = sink_.size();
    const std::vector<std::string> known = {"type", "val", "minval", "maxval", "count", "base", "vals"};
    std::vector<std::pair<std::string, std::string>> not_applicable;
    auto not_for = [&](std::initializer_list<const char*> keys) {
      for (const char* k : keys) not_applicable.emplace_back(k, "is not used by a " + type + " space");
    };
    if (type == "const") {
      out.kind = Hyperparameter::Kind::kConst;
      if (auto v = m.Take("val")) {
        if (spec.type == HpSpec::Type::kGroup) {
          Hyperparameter inner;
          if (Read(*v, spec, m.Child("val"), inner)) out = std::move(inner);
        } else {
          out.value = NodeToValue(*v, m.Child("val"), &sink_);
          CheckConstant(sink_, out.value, spec, m.Child("val"), *v);
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
            CheckConstant(sink_, val, spec, IndexPath(vp, i), e);
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
      out.kind = type == "int" ? Hyperparameter::Kind::kInt
                 : type == "double" ? Hyperparameter::Kind::kDouble
                                    : Hyperparameter::Kind::kLog;
      bool numeric_spec = spec.type == HpSpec::Type::kInt || spec.type == HpSpec::Type::kDouble;
      if (!numeric_spec) {
        sink_.Add(JoinPath(path, "type"), node,
                  "a " + type + " space needs a numeric hyperparameter; use categorical");
        m.Finish(known);
        return false;
      }
      if (type != "int" && spec.type == HpSpec::Type::kInt) {
        sink_.Add(JoinPath(path, "type"), node,
                  type + " space for an integer hyperparameter; use an int space");
      }
      bool have_min = false, have_max = false;
      if (type == "int") {
        int64_t lo = 0, hi = 0;
        if (auto v = m.Take("minval")) have_min = ReadInt(sink_, *v, m.Child("minval"), lo);
        else m.Missing("minval");
        if (auto v = m.Take("maxval")) have_max = ReadInt(sink_, *v, m.Child("maxval"), hi);
        else m.Missing("maxval");
        out.minval = static_cast<double>(lo);
        out.maxval = static_cast<double>(hi);
      } else {
        if (auto v = m.Take("minval")) have_min = ReadDouble(sink_, *v, m.Child("minval"), out.minval);
        else m.Missing("minval");
        if (auto v = m.Take("maxval")) have_max = ReadDouble(sink_, *v, m.Child("maxval"), out.maxval);
        else m.Missing("maxval");
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
        } else {
          // The range's end points must be valid values themselves.
          double lo = out.minval, hi = out.maxval;
          if (type == "log") {
            lo = std::pow(out.base, out.minval);
            hi = std::pow(out.base, out.maxval);
          }
          Value vlo = type == "int" ? Value(static_cast<int64_t>(lo)) : Value(lo);
          Value vhi = type == "int" ? Value(static_cast<int64_t>(hi)) : Value(hi);
          CheckConstant(sink_, vlo, spec, m.Child("minval"), node);
          CheckConstant(sink_, vhi, spec, m.Child("maxval"), node);
        }
      }
    }
    m.Finish(known, not_applicable);
    return sink_.size() == before;
  }

  ErrorSink& sink_;
  std::map<std::string, YAML::Node> locations_;
};

// Candidate values of a top-level hyperparameter for cross-field checks: a constant, the
// categorical values, a small int range, or the arch preset when absent. Empty when unknown.
std::vector<Value> Candidates(const Hyperparameters& hps, const std::string& name) {
  auto it = hps.find(name);
  if (it == hps.end()) {
    if (name == "arch") return {Value("transformer")};  // the schema's default
    std::vector<Value> out;
    std::vector<Value> archs = Candidates(hps, "arch");
    for (const Value& a : archs) {
      if (!a.is_string()) continue;
      auto preset = ArchPresets().find(a.as_string());
      if (preset == ArchPresets().end()) continue;
      auto p = preset->second.find(name);
      if (p != preset->second.end()) out.push_back(p->second);
    }
    return out;
  }
  const Hyperparameter& hp = it->second;
  switch (hp.kind) {
    case Hyperparameter::Kind::kConst: return {hp.value};
    case Hyperparameter::Kind::kCategorical: return hp.vals;
    case Hyperparameter::Kind::kInt:
      if (hp.maxval - hp.minval <= 64) {
        std::vector<Value> out;
        for (int64_t v = static_cast<int64_t>(hp.minval); v <= static_cast<int64_t>(hp.maxval); ++v) {
          out.push_back(Value(v));
        }
        return out;
      }
      return {};
    default: return {};
  }
}

void CrossCheck(ErrorSink& sink, const ExperimentConfig& c, const HyperparameterReader& hr,
                const std::optional<bool>& smaller_given, bool has_searcher) {
  auto at = [&](const std::string& path) {
    auto it = hr.locations().find(path);
    return it == hr.locations().end() ? YAML::Node() : it->second;
  };
  // heads must divide d_model.
  for (const Value& h : Candidates(c.hyperparameters, "heads")) {
    for (const Value& d : Candidates(c.hyperparameters, "d_model")) {
      if (!h.is_int() || !d.is_int() || h.as_int() <= 0) continue;
      if (d.as_int() % h.as_int() != 0) {
        std::string p = c.hyperparameters.count("heads") ? "hyperparameters.heads"
                                                         : "hyperparameters.d_model";
        sink.Add(p, at(p),
                 std::to_string(h.as_int()) + " heads do not divide d_model " +
                     std::to_string(d.as_int()));
        goto heads_done;
      }
    }
  }
heads_done:
  for (const Value& s : Candidates(c.hyperparameters, "share_embeddings")) {
    if (s.is_bool() && s.as_bool() && !c.data.tokenizer.shared) {
      sink.Add("hyperparameters.share_embeddings", at("hyperparameters.share_embeddings"),
               "true needs one shared vocabulary (data.tokenizer.shared: true)");
      break;
    }
  }
  if (!has_searcher) return;
  // Metric direction.
  if (!c.searcher.metric.empty() && smaller_given) {
    bool higher_better = c.searcher.metric == "bleu";
    if (*smaller_given == higher_better) {
      sink.AddNoLocation("searcher.smaller_is_better",
                         std::string(*smaller_given ? "true" : "false") + " contradicts metric " +
                             c.searcher.metric + " (" +
                             (higher_better ? "higher" : "lower") + " is better)");
    }
  }
  // Searcher vs. spaces.
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
          std::string kind = hp.kind == Hyperparameter::Kind::kLog ? "log" :
                             hp.kind == Hyperparameter::Kind::kDouble ? "double" : "int";
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

// Whether `s` is well-formed UTF-8 without NUL; `bad_offset` is the first byte that is not.
bool IsValidUtf8(std::string_view s, size_t& bad_offset) {
  for (size_t i = 0, n = 0; i < s.size(); i += n) {
    if (s[i] == '\0' || (n = Utf8SequenceAt(s, i)) == 0) {
      bad_offset = i;
      return false;
    }
  }
  return true;
}

std::string Resolve(const std::string& base, const std::string& p) {
  if (p.empty() || std::filesystem::path(p).is_absolute()) return p;
  return (std::filesystem::path(base) / p).lexically_normal().string();
}

}  // namespace

// ---------------------------------------------------------------------------------------------

std::string ConfigError::ToString() const { return path + ": " + message; }

std::string ConfigError::ToStringWithLocation(std::string_view source) const {
  std::string out(source);
  if (line > 0) out += ":" + std::to_string(line) + ":" + std::to_string(column);
  if (!out.empty()) out += ": ";
  return out + ToString();
}

std::string Length::ToString() const {
  return std::string("{") + (unit == Unit::kBatches ? "batches" : "epochs") + ": " +
         std::to_string(value) + "}";
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

const char* PrecisionName(Precision p) {
  switch (p) {
    case Precision::kFp32: return "fp32";
    case Precision::kBf16: return "bf16";
    case Precision::kFp16: return "fp16";
  }
  return "?";
}

const char* SearcherName(SearcherConfig::Name n) {
  switch (n) {
    case SearcherConfig::Name::kSingle: return "single";
    case SearcherConfig::Name::kGrid: return "grid";
    case SearcherConfig::Name::kRandom: return "random";
    case SearcherConfig::Name::kAdaptiveAsha: return "adaptive_asha";
  }
  return "?";
}

std::string ParseResult::ErrorText() const {
  std::string out;
  for (const auto& e : errors) out += e.ToString() + "\n";
  return out;
}

ParseResult ParseExperimentConfig(std::string_view text) {
  ParseResult result;
  ErrorSink sink;
  if (text.size() > kMaxConfigBytes) {
    sink.AddNoLocation(kDocument, std::to_string(text.size()) + " bytes is larger than the " +
                                      std::to_string(kMaxConfigBytes) + "-byte limit");
    result.errors = std::move(sink.errors());
    return result;
  }
  size_t bad = 0;
  if (!IsValidUtf8(text, bad)) {
    sink.AddNoLocation(kDocument, "not a UTF-8 text document (byte " + std::to_string(bad) +
                                      " is not valid UTF-8)");
    result.errors = std::move(sink.errors());
    return result;
  }
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(std::string(text));
  } catch (const YAML::Exception& e) {
    sink.Add(kDocument, e.mark, "YAML syntax error: " + e.msg);
    result.errors = std::move(sink.errors());
    return result;
  }
  if (docs.empty() || docs[0].IsNull()) {
    sink.AddNoLocation(kDocument, "the document is empty");
    result.errors = std::move(sink.errors());
    return result;
  }
  if (docs.size() > 1) {
    sink.Add(kDocument, docs[1], "expected one YAML document, found " + std::to_string(docs.size()));
  }
  const YAML::Node& root = docs[0];
  if (!RequireMap(sink, root, "")) {
    result.errors = std::move(sink.errors());
    return result;
  }

  ExperimentConfig c;
  MapReader m(sink, root, "");
  std::optional<bool> smaller_given;
  if (auto v = m.Take("name")) ReadString(sink, *v, "name", c.name);
  else m.Missing("name");
  if (c.name.size() > 128) sink.Add("name", root["name"], "longer than 128 characters");
  if (auto v = m.Take("description")) ReadString(sink, *v, "description", c.description, true);
  if (auto v = m.Take("data")) ReadData(sink, *v, "data", c.data);
  else m.Missing("data");
  HyperparameterReader hr(sink);
  if (auto v = m.Take("hyperparameters")) hr.ReadSection(*v, c.hyperparameters);
  if (auto v = m.Take("precision")) ReadPrecision(sink, *v, "precision", c.precision);
  bool loss_scaling_given = false;
  if (auto v = m.Take("loss_scaling")) {
    loss_scaling_given = true;
    ReadLossScaling(sink, *v, "loss_scaling", c.loss_scaling);
  }
  if (auto v = m.Take("optimizations")) ReadOptimizations(sink, *v, "optimizations", c.optimizations);
  if (auto v = m.Take("resources")) ReadResources(sink, *v, "resources", c.resources);
  bool has_searcher = false;
  if (auto v = m.Take("searcher")) {
    has_searcher = true;
    ReadSearcher(sink, *v, "searcher", c.searcher, smaller_given);
  } else {
    m.Missing("searcher");
  }
  if (auto v = m.Take("min_validation_period")) {
    Length l;
    if (ReadLength(sink, *v, "min_validation_period", l)) c.min_validation_period = l;
  }
  if (auto v = m.Take("min_checkpoint_period")) {
    Length l;
    if (ReadLength(sink, *v, "min_checkpoint_period", l)) c.min_checkpoint_period = l;
  }
  if (auto v = m.Take("checkpoint_storage")) {
    c.checkpoint_storage.emplace();
    ReadCheckpointStorage(sink, *v, "checkpoint_storage", *c.checkpoint_storage);
  }
  if (auto v = m.Take("max_restarts")) ReadInt(sink, *v, "max_restarts", c.max_restarts, 0, 1000);
  if (auto v = m.Take("scheduling_unit")) ReadInt(sink, *v, "scheduling_unit", c.scheduling_unit, 1, 1000000);
  m.Finish({"name", "description", "data", "hyperparameters", "precision", "loss_scaling",
            "optimizations", "resources", "searcher", "min_validation_period",
            "min_checkpoint_period", "checkpoint_storage", "max_restarts", "scheduling_unit"});

  // Defaults that depend on other fields.
  if (!loss_scaling_given && c.precision == Precision::kFp16) {
    c.loss_scaling.type = LossScalingConfig::Type::kDynamic;
  }
  if (!smaller_given) c.searcher.smaller_is_better = c.searcher.metric != "bleu";
  CrossCheck(sink, c, hr, smaller_given, has_searcher);

  result.errors = std::move(sink.errors());
  // Document order; errors without a location (cross-field checks) last.
  std::stable_sort(result.errors.begin(), result.errors.end(),
                   [](const ConfigError& a, const ConfigError& b) {
                     if ((a.line == 0) != (b.line == 0)) return b.line == 0;
                     return std::make_pair(a.line, a.column) < std::make_pair(b.line, b.column);
                   });
  if (result.errors.empty()) result.config = std::move(c);
  return result;
}

ParseResult LoadExperimentConfigFile(const std::string& path) {
  ParseResult result;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    result.errors.push_back({kDocument, path + " is a directory, not a YAML file", 0, 0});
    return result;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    result.errors.push_back({kDocument, "cannot read " + path + ": " + std::strerror(errno), 0, 0});
    return result;
  }
  // Read at most one byte past the limit so a huge file is refused without loading it all.
  std::string text;
  text.resize(kMaxConfigBytes + 1);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxConfigBytes) {
    auto size = std::filesystem::file_size(path, ec);
    result.errors.push_back({kDocument,
                             std::to_string(ec ? text.size() : size) + " bytes is larger than the " +
                                 std::to_string(kMaxConfigBytes) + "-byte limit",
                             0, 0});
    return result;
  }
  result = ParseExperimentConfig(text);
  if (result.config) {
    std::filesystem::path base = std::filesystem::absolute(path, ec).parent_path();
    ResolvePaths(*result.config, base.string());
  }
  return result;
}

void ResolvePaths(ExperimentConfig& c, const std::string& base) {
  auto files = [&](ParallelFiles& f) {
    f.src = Resolve(base, f.src);
    f.tgt = Resolve(base, f.tgt);
  };
  files(c.data.train);
  if (c.data.valid) files(*c.data.valid);
  if (c.data.test) files(*c.data.test);
  if (c.data.tokenizer.model) c.data.tokenizer.model = Resolve(base, *c.data.tokenizer.model);
  if (c.checkpoint_storage) c.checkpoint_storage->host_path = Resolve(base, c.checkpoint_storage->host_path);
}

Result<std::string> ApplyOverride(std::string_view yaml_text, std::string_view assignment) {
  size_t eq = assignment.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    return InvalidArgument("override \"" + std::string(assignment) + "\" must look like KEY=VALUE");
  }
  std::string key(assignment.substr(0, eq));
  std::string value(assignment.substr(eq + 1));
  try {
    YAML::Node root = YAML::Load(std::string(yaml_text));
    if (!root.IsMap()) return InvalidArgument("override " + key + ": the document is not a mapping");
    YAML::Node new_value = YAML::Load(value);
    std::vector<std::string> parts;
    std::stringstream ss(key);
    for (std::string part; std::getline(ss, part, '.');) {
      if (part.empty()) return InvalidArgument("override key \"" + key + "\" has an empty part");
      parts.push_back(part);
    }
    // Walk down with fresh handles (yaml-cpp node assignment rebinds, so use a recursive set).
    std::function<void(YAML::Node, size_t)> set = [&](YAML::Node node, size_t i) {
      if (i + 1 == parts.size()) {
        node[parts[i]] = new_value;
        return;
      }
      YAML::Node child = node[parts[i]];
      if (!child.IsMap()) {
        node[parts[i]] = YAML::Node(YAML::NodeType::Map);
        child = node[parts[i]];
      }
      set(child, i + 1);
    };
    set(root, 0);
    YAML::Emitter out;
    out << root;
    return std::string(out.c_str()) + "\n";
  } catch (const YAML::Exception& e) {
    return InvalidArgument("override " + key + ": " + e.msg);
  }
}

std::vector<ConfigError> ValidateTrialHyperparameters(const Value& hparams) {
  ErrorSink sink;
  if (!hparams.is_map()) {
    sink.AddNoLocation("hyperparameters", "expected a mapping, got " + hparams.ToDisplay());
    return std::move(sink.errors());
  }
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
    CheckConstant(sink, v, *spec, path, YAML::Node(YAML::NodeType::Undefined));
  }
  if (sink.empty()) {
    Value full = WithDefaults(hparams);
    int64_t d = full.Find("d_model")->as_int(), h = full.Find("heads")->as_int();
    if (d % h != 0) {
      sink.AddNoLocation("hyperparameters.heads", std::to_string(h) +
                                                      " heads do not divide d_model " +
                                                      std::to_string(d));
    }
  }
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
    case Hyperparameter::Kind::kConst: return 1;
    case Hyperparameter::Kind::kCategorical: return static_cast<int64_t>(hp.vals.size());
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
        n *= c;
      }
      return n;
    }
  }
  return 0;
}

}  // namespace sf::config
