// ApplyOverride, declared in experiment_config.h: `sf experiment create|fork --config KEY=VALUE`
// edits the YAML text, which is then parsed and validated like any other document.
#include <yaml-cpp/yaml.h>

#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "common/config/experiment_config.h"

namespace sf::config {

Result<std::string> ApplyOverride(std::string_view yaml_text, std::string_view assignment) {
  size_t eq = assignment.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    return InvalidArgument("override \"" + std::string(assignment) + "\" must look like KEY=VALUE");
  }
  std::string key(assignment.substr(0, eq));
  std::string value(assignment.substr(eq + 1));
  try {
    YAML::Node root = YAML::Load(std::string(yaml_text));
    if (!root.IsMap()) {
      return InvalidArgument("override " + key + ": the document is not a mapping");
    }
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

}  // namespace sf::config
