#include "common/config/command_config.h"

#include <yaml-cpp/yaml.h>

#include "common/config/experiment_sections.h"
#include "common/config/yaml_reader.h"

namespace sf::config {

CommandConfigResult ParseCommandConfig(std::string_view yaml_text) {
  CommandConfigResult result;
  ErrorSink sink;
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml_text));
  } catch (const YAML::Exception& e) {
    sink.Add("", e.mark, "YAML syntax error: " + e.msg);
    result.errors = std::move(sink.errors());
    return result;
  }
  if (root.IsNull()) {
    sink.AddNoLocation("", "the document is empty");
    result.errors = std::move(sink.errors());
    return result;
  }
  if (!RequireMap(sink, root, "")) {
    result.errors = std::move(sink.errors());
    return result;
  }
  CommandConfig& out = result.config;
  MapReader m(sink, root, "");
  if (auto v = m.Take("entrypoint")) {
    // The experiment config's rules: a list is the program and its arguments; a string is a
    // shell command.
    ExperimentConfig e;
    ReadEntrypoint(sink, *v, "entrypoint", e);
    if (!e.entrypoint.empty()) {
      out.entrypoint = e.entrypoint_is_shell
                           ? std::vector<std::string>{"/bin/sh", "-c", e.entrypoint.front()}
                           : e.entrypoint;
    }
  }
  if (auto v = m.Take("resources"); v && RequireMap(sink, *v, "resources")) {
    MapReader r(sink, *v, "resources");
    int64_t n = 0;
    if (auto s = r.Take("slots"); s && ReadInt(sink, *s, r.Child("slots"), n, 1, 4096))
      out.slots = n;
    std::string text;
    if (auto p = r.Take("resource_pool");
        p && ReadString(sink, *p, r.Child("resource_pool"), text)) {
      out.resource_pool = text;
    }
    if (auto p = r.Take("priority"); p && ReadInt(sink, *p, r.Child("priority"), n, 1, 99))
      out.priority = n;
    // The command line's names, as a user may carry them over.
    r.Finish(
        {"slots", "resource_pool", "priority"},
        {{"pool", "unknown field (the pool is \"resource_pool\" here; --pool on the command line)"},
         {"slots_per_trial", "unknown field (a command's slots are \"slots\")"}});
  }
  std::string text;
  if (auto v = m.Take("workspace"); v && ReadString(sink, *v, "workspace", text))
    out.workspace = text;
  if (auto v = m.Take("context"); v && ReadString(sink, *v, "context", text)) out.context = text;
  m.Finish({"entrypoint", "resources", "workspace", "context"});
  result.errors = std::move(sink.errors());
  return result;
}

}  // namespace sf::config
