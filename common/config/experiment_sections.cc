// The sections of an experiment config, each read into its struct (experiment_config.h says
// what they mean); ParseExperimentConfig reads the whole document with them.
#include "common/config/experiment_sections.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/config/hyperparameter_schema.h"
#include "common/utf8.h"

namespace sf::config {
namespace {

// The longest entrypoint string (each list element) and context_directory, in bytes.
constexpr size_t kMaxCommandBytes = 4096;

}  // namespace

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

namespace {

// Slurm's time formats: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS; or UNLIMITED.
bool SlurmTimeFormat(const std::string& t) {
  if (t == "UNLIMITED" || t == "INFINITE") return true;
  std::string rest = t;
  size_t dash = t.find('-');
  auto digits = [](const std::string& s) {
    return !s.empty() && s.size() <= 6 && s.find_first_not_of("0123456789") == std::string::npos;
  };
  if (dash != std::string::npos) {
    if (!digits(t.substr(0, dash))) return false;
    rest = t.substr(dash + 1);
  }
  int parts = 0;
  size_t start = 0;
  while (true) {
    size_t colon = rest.find(':', start);
    if (!digits(rest.substr(start, colon == std::string::npos ? std::string::npos : colon - start))) return false;
    ++parts;
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return parts <= 3;
}

}  // namespace

void ReadReproducibility(ErrorSink& sink, const YAML::Node& node, const std::string& path,
                         std::optional<int64_t>& experiment_seed) {
  if (!RequireMap(sink, node, path)) return;
  MapReader m(sink, node, path);
  if (auto v = m.Take("experiment_seed")) {
    int64_t seed = 0;
    if (ReadInt(sink, *v, m.Child("experiment_seed"), seed, 0, 2147483647)) experiment_seed = seed;
  }
  m.Finish({"experiment_seed"});
}

void ReadSlurm(ErrorSink& sink, const YAML::Node& node, const std::string& path, SlurmConfig& out) {
  if (!RequireMap(sink, node, path)) return;
  MapReader m(sink, node, path);
  if (auto v = m.Take("time")) {
    if (ReadString(sink, *v, m.Child("time"), out.time) && !SlurmTimeFormat(out.time)) {
      sink.Add(m.Child("time"), *v,
               "\"" + out.time + "\" is not a Slurm time limit (minutes, HH:MM:SS or D-HH:MM:SS)");
    }
  }
  if (auto v = m.Take("account")) ReadString(sink, *v, m.Child("account"), out.account);
  if (auto v = m.Take("qos")) ReadString(sink, *v, m.Child("qos"), out.qos);
  if (auto v = m.Take("sbatch_args")) {
    if (!v->IsSequence()) {
      sink.Add(m.Child("sbatch_args"), *v, "expected a list of strings");
    } else {
      for (size_t i = 0; i < v->size(); ++i) {
        std::string arg;
        const std::string where = m.Child("sbatch_args") + "[" + std::to_string(i) + "]";
        if (!ReadString(sink, (*v)[i], where, arg)) continue;
        if (arg.rfind("--", 0) != 0) {
          sink.Add(where, (*v)[i], "\"" + arg + "\" must be one --option or --option=value");
          continue;
        }
        // What the master sets itself, or what would run the job as someone else or write
        // where the master's user may write.
        static const std::vector<std::string> kReserved = {
            "--output", "--error", "--input", "--chdir", "--export", "--export-file", "--uid", "--gid",
            "--wrap", "--comment", "--job-name", "--parsable", "--requeue", "--no-requeue", "--ntasks",
            "--nodes", "--partition", "--get-user-env", "--chdir", "--open-mode"};
        const std::string name = arg.substr(0, arg.find('='));
        if (std::find(kReserved.begin(), kReserved.end(), name) != kReserved.end()) {
          sink.Add(where, (*v)[i], name + " is set by Steadfast (or the pool's administrator) and cannot be given here");
          continue;
        }
        out.sbatch_args.push_back(arg);
      }
    }
  }
  m.Finish({"time", "account", "qos", "sbatch_args"});
}

const std::vector<std::string> kMetrics = {"validation_loss", "validation_perplexity", "bleu", "wer", "cer"};

// smaller_is_better given explicitly (nullopt: derived from the metric). `any_metric`: user
// code reports the metrics, so any name is allowed (with an entrypoint).
void ReadSearcher(ErrorSink& sink, const YAML::Node& node, const std::string& path,
                  SearcherConfig& out, std::optional<bool>& smaller_given, bool any_metric) {
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
      known_metric |= any_metric;
      if (known_metric) {
        out.metric = metric;
      } else {
        std::string msg = "\"" + metric + "\" is not a metric the trainer reports (" +
                          "validation_loss, validation_perplexity, bleu, wer, cer)";
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
  if (auto v = m.Take("type")) ReadEnum(sink, *v, m.Child("type"), {"shared_fs", "s3"}, out.type);
  std::vector<std::string> known = {"type", "save_experiment_best", "save_trial_best", "save_trial_latest",
                                    "host_path", "storage_path", "bucket", "prefix", "endpoint_url",
                                    "region", "access_key", "secret_key"};
  std::vector<std::string> other_type;  // fields of the other storage type: named as not applicable
  const std::vector<std::string> fs_fields = {"host_path", "storage_path"};
  const std::vector<std::string> s3_fields = {"bucket",     "prefix",     "endpoint_url",
                                              "region",     "access_key", "secret_key"};
  if (out.is_s3()) {
    other_type = fs_fields;
    if (auto v = m.Take("bucket")) ReadString(sink, *v, m.Child("bucket"), out.bucket);
    else m.Missing("bucket");
    if (auto v = m.Take("prefix")) ReadString(sink, *v, m.Child("prefix"), out.prefix, /*allow_empty=*/true);
    if (auto v = m.Take("endpoint_url")) {
      if (ReadString(sink, *v, m.Child("endpoint_url"), out.endpoint_url) &&
          out.endpoint_url.rfind("http://", 0) != 0 && out.endpoint_url.rfind("https://", 0) != 0) {
        sink.Add(m.Child("endpoint_url"), *v, "must start with http:// or https:// (got \"" + out.endpoint_url + "\")");
      }
    }
    if (auto v = m.Take("region")) ReadString(sink, *v, m.Child("region"), out.region);
    auto access = m.Take("access_key"), secret = m.Take("secret_key");
    if (access) ReadString(sink, *access, m.Child("access_key"), out.access_key);
    if (secret && ReadString(sink, *secret, m.Child("secret_key"), out.secret_key) && out.secret_key == kRedacted) {
      sink.Add(m.Child("secret_key"), *secret,
               "is the placeholder the API shows instead of the key (a config read back from the master); give "
               "the key, or leave both keys out to use the environment's");
    }
    if (access.has_value() != secret.has_value()) {
      const YAML::Node& at = access ? *access : *secret;
      sink.Add(m.Child(access ? "secret_key" : "access_key"), at,
               "give access_key and secret_key together, or neither (then AWS_ACCESS_KEY_ID and "
               "AWS_SECRET_ACCESS_KEY come from the environment)");
    }
    // Object keys: no leading or trailing '/', no empty or relative segments.
    while (!out.prefix.empty() && out.prefix.back() == '/') out.prefix.pop_back();
    if (!out.prefix.empty() && (out.prefix.front() == '/' || out.prefix.find("//") != std::string::npos ||
                                ("/" + out.prefix + "/").find("/../") != std::string::npos ||
                                ("/" + out.prefix + "/").find("/./") != std::string::npos)) {
      sink.Add(m.Child("prefix"), node["prefix"], "\"" + out.prefix + "\" is not a key prefix (no leading '/', "
               "empty, '.' or '..' parts)");
    }
  } else {
    other_type = s3_fields;
    if (auto v = m.Take("host_path")) ReadString(sink, *v, m.Child("host_path"), out.host_path);
    else m.Missing("host_path");
    if (auto v = m.Take("storage_path")) {
      std::string s;
      if (ReadString(sink, *v, m.Child("storage_path"), s)) out.storage_path = s;
    }
  }
  if (auto v = m.Take("save_experiment_best")) {
    ReadInt(sink, *v, m.Child("save_experiment_best"), out.save_experiment_best, 0, 1000000);
  }
  if (auto v = m.Take("save_trial_best")) ReadInt(sink, *v, m.Child("save_trial_best"), out.save_trial_best, 0, 1000000);
  if (auto v = m.Take("save_trial_latest")) {
    ReadInt(sink, *v, m.Child("save_trial_latest"), out.save_trial_latest, 0, 1000000);
  }
  std::vector<std::pair<std::string, std::string>> not_applicable;
  for (const std::string& f : other_type) {
    not_applicable.emplace_back(f, std::string("is not used by type ") + out.type + " storage" +
                                       (out.is_s3() ? "" : " (set type: s3 for object storage)"));
  }
  m.Finish(known, not_applicable);
}

// ---------------------------------------------------------------------------------------------
// Core API: entrypoint and context_directory

namespace {

// A string quoted for a message: its first 40 bytes or so (cut between UTF-8 sequences) and
// "..." when longer, a NUL shown as \0.
std::string Abbreviated(const std::string& s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    if (i >= 40) {
      out += "...";
      break;
    }
    if (s[i] == '\0') {
      out += "\\0";
      ++i;
      continue;
    }
    size_t n = std::max<size_t>(1, Utf8SequenceAt(s, i));
    out.append(s, i, n);
    i += n;
  }
  return out + "\"";
}

}  // namespace

namespace {

// One string of an entrypoint (the whole command line, or one list element): a YAML string
// (quoted, or plain and not a number, boolean or null), non-empty, without NUL, at most
// kMaxCommandBytes.
bool ReadCommandString(ErrorSink& sink, const YAML::Node& node, const std::string& path,
                       std::string& out) {
  if (!node.IsScalar() || !NodeToValue(node, path, nullptr).is_string()) {
    std::string message = "expected a string, got " + DescribeNode(node);
    if (node.IsScalar()) message += " (quote it: " + Abbreviated(node.Scalar()) + ")";
    sink.Add(path, node, message);
    return false;
  }
  const std::string& s = node.Scalar();
  if (s.empty()) {
    sink.Add(path, node, "must not be empty");
    return false;
  }
  if (s.find('\0') != std::string::npos) {
    sink.Add(path, node, Abbreviated(s) + " must not contain a NUL character (\\0)");
    return false;
  }
  if (s.size() > kMaxCommandBytes) {
    sink.Add(path, node,
             Abbreviated(s) + " is " + std::to_string(s.size()) + " bytes, longer than the " +
                 std::to_string(kMaxCommandBytes) + "-byte limit");
    return false;
  }
  out = s;
  return true;
}

}  // namespace

// `entrypoint: python3 train.py` (a shell command line) or `entrypoint: [python3, train.py]`
// (a program and its arguments).
void ReadEntrypoint(ErrorSink& sink, const YAML::Node& node, const std::string& path,
                    ExperimentConfig& out) {
  if (node.IsSequence()) {
    if (node.size() == 0) {
      sink.Add(path, node, "expected a non-empty list (a program and its arguments)");
      return;
    }
    std::vector<std::string> argv;
    bool ok = true;
    size_t i = 0;
    for (const auto& e : node) {
      std::string arg;
      ok = ReadCommandString(sink, e, IndexPath(path, i++), arg) && ok;
      argv.push_back(std::move(arg));
    }
    if (ok) {
      out.entrypoint = std::move(argv);
      out.entrypoint_is_shell = false;
    }
    return;
  }
  if (node.IsScalar() && NodeToValue(node, path, nullptr).is_string()) {
    std::string command;
    if (!ReadCommandString(sink, node, path, command)) return;
    if (command.find_first_not_of(" \t\r\n") == std::string::npos) {
      sink.Add(path, node, Abbreviated(command) + " is only white space; give a command to run");
      return;
    }
    out.entrypoint = {std::move(command)};
    out.entrypoint_is_shell = true;
    return;
  }
  sink.Add(path, node,
           "expected a command line (a string) or a list of strings (a program and its "
           "arguments), got " +
               DescribeNode(node));
}

void ReadContextDirectory(ErrorSink& sink, const YAML::Node& node, const std::string& path,
                          bool has_entrypoint, ExperimentConfig& out) {
  if (!has_entrypoint) {
    sink.Add(path, node,
             "needs an entrypoint (the native trainer reads data files, not a context)");
    return;
  }
  std::string dir;
  if (!ReadString(sink, node, path, dir)) return;
  if (dir.size() > kMaxCommandBytes) {
    sink.Add(path, node,
             Abbreviated(dir) + " is " + std::to_string(dir.size()) + " bytes, longer than the " +
                 std::to_string(kMaxCommandBytes) + "-byte limit");
    return;
  }
  out.context_directory = std::move(dir);
}

}  // namespace sf::config
