#include "common/config/experiment_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>

#include "common/config/data_config.h"
#include "common/config/experiment_sections.h"
#include "common/config/hyperparameter_reader.h"
#include "common/config/hyperparameter_schema.h"
#include "common/config/model_hyperparameters.h"
#include "common/config/yaml_reader.h"
#include "common/utf8.h"

namespace sf::config {
namespace {

constexpr char kDocument[] = "<document>";

// ---------------------------------------------------------------------------------------------
// Whole document

// The node at `keys` under `root`, each a member of a mapping; undefined when one is not (an
// error there is then reported without a location). Where a cross-section error is located.
YAML::Node NodeAt(const YAML::Node& root, std::initializer_list<const char*> keys) {
  YAML::Node node = root;
  for (const char* key : keys) {
    if (!node.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
    // The const operator[] adds no missing key (it returns an invalid node, on which anything
    // but IsDefined throws); reset() rebinds `node`, where assigning would overwrite the
    // document's node it refers to.
    const YAML::Node& map = node;
    const YAML::Node child = map[key];
    if (!child.IsDefined()) return YAML::Node(YAML::NodeType::Undefined);
    node.reset(child);
  }
  return node;
}

// Each metric against the archs that report it (the first of `archs` that does not, refused at
// the metric): a language model scores no translation (`bleu`); a speech recogniser reports
// wer, cer and validation_loss but no bleu or perplexity; only it reports wer and cer.
void CheckMetricForArchs(ErrorSink& sink, const ExperimentConfig& c,
                         const std::vector<std::string>& archs, const YAML::Node& root) {
  const std::string& metric = c.searcher.metric;
  const bool speech_metric = metric == "wer" || metric == "cer";
  for (const std::string& arch : archs) {
    const std::string family = ArchFamily(arch);
    if (family.empty()) continue;
    std::string problem;
    if (metric == "bleu" && IsLanguageModelFamily(family)) {
      problem = "bleu scores translations; arch " + arch +
                " is a language model (use validation_perplexity or validation_loss)";
    } else if ((metric == "bleu" || metric == "validation_perplexity") && IsSpeechFamily(family)) {
      problem = metric + " scores text models; arch " + arch + " recognises speech (use wer, cer or validation_loss)";
    } else if (speech_metric && !IsSpeechFamily(family)) {
      problem = metric + " scores transcripts; arch " + arch + " is not a speech model";
    }
    if (problem.empty()) continue;
    sink.Add("searcher.metric", NodeAt(root, {"searcher", "metric"}), problem);
    return;
  }
}

// Checks across sections, once every section is read (`root`: the document, to locate their
// errors). `user_code`: the document has an entrypoint (the native trainer's rules do not
// apply).
void CrossCheck(ErrorSink& sink, const ExperimentConfig& c, const YAML::Node& root,
                const HyperparameterLocations& locations, const std::optional<bool>& smaller_given,
                bool has_searcher, bool user_code) {
  if (!user_code) {
    CheckNativeModelHyperparameters(sink, c, locations);
    const std::vector<std::string> archs = ArchCandidates(c.hyperparameters, locations);
    CheckDataForArchs(sink, c.data, archs, NodeAt(root, {"data", "train"}));
    if (has_searcher) CheckMetricForArchs(sink, c, archs, root);
  }
  if (!has_searcher) return;
  // Metric direction: the native trainer's metrics have a known direction.
  if (!user_code && !c.searcher.metric.empty() && smaller_given) {
    bool higher_better = c.searcher.metric == "bleu";
    if (*smaller_given == higher_better) {
      sink.AddNoLocation("searcher.smaller_is_better",
                         std::string(*smaller_given ? "true" : "false") + " contradicts metric " +
                             c.searcher.metric + " (" +
                             (higher_better ? "higher" : "lower") + " is better)");
    }
  }
  CheckSearchSpaces(sink, c, locations);
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

// A directory made absolute against `base` and normalised, without a trailing separator.
std::string ResolveDirectory(const std::string& base, const std::string& dir) {
  std::filesystem::path p(dir);
  if (!p.is_absolute()) p = std::filesystem::path(base) / p;
  std::string out = p.lexically_normal().string();
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
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
  // With an entrypoint, user code runs instead of the native trainer, whose rules then do not
  // apply. Decided by the key's presence, so that a malformed entrypoint is reported alone.
  const bool user_code = m.Has("entrypoint");
  std::optional<bool> smaller_given;
  if (auto v = m.Take("name")) ReadString(sink, *v, "name", c.name);
  else m.Missing("name");
  if (c.name.size() > 128) sink.Add("name", root["name"], "longer than 128 characters");
  if (auto v = m.Take("description")) ReadString(sink, *v, "description", c.description, true);
  if (auto v = m.Take("entrypoint")) ReadEntrypoint(sink, *v, "entrypoint", c);
  if (auto v = m.Take("context_directory")) {
    ReadContextDirectory(sink, *v, "context_directory", user_code, c);
  }
  if (auto v = m.Take("data")) ReadData(sink, *v, "data", c.data);
  else if (!user_code) m.Missing("data");
  HyperparameterLocations hp_locations;
  if (auto v = m.Take("hyperparameters")) {
    ReadHyperparameters(sink, *v,
                        user_code ? HyperparameterMode::kFreeForm : HyperparameterMode::kNative,
                        c.hyperparameters, hp_locations);
  }
  if (auto v = m.Take("precision")) ReadPrecision(sink, *v, "precision", c.precision);
  bool loss_scaling_given = false;
  if (auto v = m.Take("loss_scaling")) {
    loss_scaling_given = true;
    ReadLossScaling(sink, *v, "loss_scaling", c.loss_scaling);
  }
  if (auto v = m.Take("optimizations")) ReadOptimizations(sink, *v, "optimizations", c.optimizations);
  if (auto v = m.Take("resources")) ReadResources(sink, *v, "resources", c.resources);
  if (auto v = m.Take("slurm")) ReadSlurm(sink, *v, "slurm", c.slurm);
  bool has_searcher = false;
  if (auto v = m.Take("searcher")) {
    has_searcher = true;
    ReadSearcher(sink, *v, "searcher", c.searcher, smaller_given, user_code);
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
  if (auto v = m.Take("reproducibility")) ReadReproducibility(sink, *v, "reproducibility", c.experiment_seed);
  m.Finish({"name", "description", "entrypoint", "context_directory", "data", "hyperparameters",
            "precision", "loss_scaling", "optimizations", "resources", "slurm", "searcher",
            "min_validation_period", "min_checkpoint_period", "checkpoint_storage",
            "max_restarts", "scheduling_unit", "reproducibility"});

  // Defaults that depend on other fields.
  if (!loss_scaling_given && c.precision == Precision::kFp16) {
    c.loss_scaling.type = LossScalingConfig::Type::kDynamic;
  }
  if (!smaller_given) c.searcher.smaller_is_better = c.searcher.metric != "bleu";
  CrossCheck(sink, c, root, hp_locations, smaller_given, has_searcher, user_code);

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
  // A monolingual split's empty src stays empty (Resolve leaves "" as it is).
  auto files = [&](ParallelFiles& f) {
    f.src = Resolve(base, f.src);
    f.tgt = Resolve(base, f.tgt);
    f.manifest = Resolve(base, f.manifest);
  };
  files(c.data.train);
  if (c.data.valid) files(*c.data.valid);
  if (c.data.test) files(*c.data.test);
  if (c.data.tokenizer.model) c.data.tokenizer.model = Resolve(base, *c.data.tokenizer.model);
  if (c.checkpoint_storage && !c.checkpoint_storage->is_s3()) c.checkpoint_storage->host_path = Resolve(base, c.checkpoint_storage->host_path);
  if (c.context_directory) {
    c.context_directory = ResolveDirectory(base, *c.context_directory);
  } else if (c.has_entrypoint()) {
    c.context_directory = ResolveDirectory(base, ".");
  }
}

std::string RedactConfigSecrets(const std::string& config_yaml) {
  if (config_yaml.find("secret_key") == std::string::npos) return config_yaml;  // the common case, no parse
  try {
    YAML::Node root = YAML::Load(config_yaml);
    if (!root.IsMap() || !root["checkpoint_storage"].IsMap()) return config_yaml;
    YAML::Node storage = root["checkpoint_storage"];
    if (!storage["secret_key"]) return config_yaml;
    storage["secret_key"] = kRedacted;
    YAML::Emitter out;
    out << root;
    return std::string(out.c_str()) + "\n";
  } catch (const YAML::Exception&) {
    return config_yaml;  // stored configs parsed when submitted; nothing to hide in one that does not
  }
}

}  // namespace sf::config
