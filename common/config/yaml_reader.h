// Building blocks for reading a YAML document into typed values with precise errors.
//
// Internal to common/config: the experiment config parser and the master's own config file
// reader use these to walk yaml-cpp nodes while tracking the dotted field path, so that each
// error names the path, the value as the user wrote it and the reason.
#pragma once

#include <yaml-cpp/yaml.h>

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/config/experiment_config.h"

namespace sf::config {

// Collects errors while walking a document.
class ErrorSink {
 public:
  void Add(const std::string& path, const YAML::Node& at, std::string message);
  void Add(const std::string& path, const YAML::Mark& mark, std::string message);
  void AddNoLocation(const std::string& path, std::string message);
  bool empty() const { return errors_.empty(); }
  size_t size() const { return errors_.size(); }
  std::vector<ConfigError>& errors() { return errors_; }

 private:
  std::vector<ConfigError> errors_;
};

std::string JoinPath(const std::string& parent, const std::string& key);
std::string IndexPath(const std::string& parent, size_t index);

// The closest of `candidates` to `word` within a small edit distance, or "".
std::string ClosestMatch(const std::string& word, const std::vector<std::string>& candidates);

// "the string \"two\"", "a mapping", "a list", "null", or the scalar as written ("-3").
std::string DescribeNode(const YAML::Node& node);

// Converts a node to a Value following YAML 1.2 core schema rules: quoted scalars are strings;
// plain scalars are null/bool/int/double when they look like one. Duplicate map keys are
// reported to `sink` (when given) at `path`.
Value NodeToValue(const YAML::Node& node, const std::string& path, ErrorSink* sink);

// A mapping being read: hands out members by key, remembers which were read, and reports the
// rest as unknown (with a "did you mean") when Finish() is called.
class MapReader {
 public:
  // `node` must be a map (check with RequireMap first).
  MapReader(ErrorSink& sink, const YAML::Node& node, std::string path);

  // The member, or nullopt when absent (an explicit null counts as absent).
  std::optional<YAML::Node> Take(const std::string& key);
  bool Has(const std::string& key) const;
  // Reports a missing required member at path.key.
  void Missing(const std::string& key);

  // Reports every member not taken. `known` are all names valid somewhere in this map (for
  // suggestions); `not_applicable` maps a known-but-unusable key to the reason
  // ("is not used by the grid searcher").
  void Finish(const std::vector<std::string>& known,
              const std::vector<std::pair<std::string, std::string>>& not_applicable = {});

  const std::string& path() const { return path_; }
  const YAML::Node& node() const { return node_; }
  std::string Child(const std::string& key) const { return JoinPath(path_, key); }

 private:
  ErrorSink& sink_;
  YAML::Node node_;
  std::string path_;
  std::vector<std::pair<std::string, YAML::Node>> members_;  // document order
  std::set<std::string> taken_;
};

// Each reader checks the node's type and range; on failure it records an error and returns
// false, leaving `out` unchanged.
bool RequireMap(ErrorSink& sink, const YAML::Node& node, const std::string& path);
bool ReadBool(ErrorSink& sink, const YAML::Node& node, const std::string& path, bool& out);
bool ReadString(ErrorSink& sink, const YAML::Node& node, const std::string& path,
                std::string& out, bool allow_empty = false);
bool ReadInt(ErrorSink& sink, const YAML::Node& node, const std::string& path, int64_t& out,
             std::optional<int64_t> min = std::nullopt, std::optional<int64_t> max = std::nullopt);
// min_exclusive/max_exclusive turn >= / <= into > / <.
bool ReadDouble(ErrorSink& sink, const YAML::Node& node, const std::string& path, double& out,
                std::optional<double> min = std::nullopt, std::optional<double> max = std::nullopt,
                bool min_exclusive = false, bool max_exclusive = false);
bool ReadEnum(ErrorSink& sink, const YAML::Node& node, const std::string& path,
              const std::vector<std::string>& options, std::string& out);

}  // namespace sf::config
