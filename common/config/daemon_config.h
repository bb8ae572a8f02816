// How a daemon (sf-master, sf-agent) loads its settings — one way for both: the defaults, then a
// YAML file (--config FILE), then environment variables, then flags, each overriding the one
// before. One table of settings drives all four and --help, so a setting is declared once: its
// key (the file's key; the flag is --key with '-' for '_'), what --help shows, the environment
// variables that set it, and its check-and-store.
//
// Contract:
// - A setting's `set` checks and stores a value given as text; its errors name the key
//   ("grpc_port: \"x\" is not a port (0-65535)"). The loader adds where the value came from:
//   "FILE: ...", "SF_DB: ...", "--grpc-port: ...".
// - The file is a mapping of keys to scalars (an empty file sets nothing). A key the table does
//   not have is an error with the closest key ("FILE: unknown setting \"mastr\" (did you mean
//   \"master\"?)"); a mapping or list value is an error ("FILE: KEY: expected a value") unless
//   the setting has `from_node`, which takes it whole. Unreadable files and YAML syntax errors
//   name the file (and the line).
// - Environment variables set only when non-empty. A BOOL setting's flag is bare (true) or
//   --flag=false. A setting with `file_only` has no flag.
// - --help and --version are actions, not errors; bad flags are InvalidArgument "... (see --help)".
// Header-only (a template over the daemon's config struct); needs sf_command_line and yaml-cpp.
#pragma once

#include <CLI/CLI.hpp>
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/command_line.h"
#include "common/config/yaml_reader.h"
#include "common/status.h"

namespace sf::config {

using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// The process's environment.
inline EnvLookup ProcessEnvironment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  };
}

template <class Config>
struct DaemonSetting {
  std::string key;
  std::string type;  // what --help shows ("PORT"); "BOOL": a flag
  std::string help;
  std::function<Status(Config&, const std::string& value)> set;
  std::function<std::string(const Config&)> default_text = nullptr;  // --help's default; null: none
  std::vector<std::string> env = {};      // environment variables that set it
  std::vector<std::string> aliases = {};  // more flag names ("--pool")
  // A non-scalar value in the file, taken whole; `where` is "FILE" (errors name it and the key).
  std::function<Status(Config&, const YAML::Node& value, const std::string& where)> from_node = nullptr;
  bool file_only = false;
};

enum class DaemonAction { kRun, kHelp, kVersion };

template <class Config>
class DaemonConfigLoader {
 public:
  struct Loaded {
    DaemonAction action = DaemonAction::kRun;
    Config config;
  };

  DaemonConfigLoader(std::string program, std::string description, std::string footer,
                     std::vector<DaemonSetting<Config>> settings)
      : program_(std::move(program)), description_(std::move(description)), footer_(std::move(footer)) {
    for (auto& s : settings) {
      order_.push_back(s.key);
      settings_.emplace(s.key, std::move(s));
    }
  }

  std::string Usage() const {
    CLI::App app(description_, program_);
    Flags flags;
    Build(app, &flags);
    return app.help();
  }

  // Parses `args` (without the program's name) over `config`'s values.
  Result<Loaded> Load(const std::vector<std::string>& args, const EnvLookup& env, Config config = Config()) const {
    CLI::App app(description_, program_);
    Flags flags;
    Build(app, &flags);
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    try {
      app.parse(reversed);
    } catch (const CLI::CallForHelp&) {
      return Loaded{DaemonAction::kHelp, std::move(config)};
    } catch (const CLI::ParseError& e) {
      return InvalidArgument(std::string(e.what()) + " (see --help)");
    }
    if (flags.version) return Loaded{DaemonAction::kVersion, std::move(config)};
    if (!flags.config_file.empty()) SF_RETURN_IF_ERROR(LoadFile(flags.config_file, config));
    for (const std::string& key : order_) {
      for (const std::string& var : settings_.at(key).env) {
        std::optional<std::string> value = env(var);
        if (value && !value->empty()) SF_RETURN_IF_ERROR(Set(config, key, *value, var));
      }
    }
    for (const auto& [option, key] : flags.options) {
      if (option->count() > 0) SF_RETURN_IF_ERROR(Set(config, key, flags.values[key], option->get_name()));
    }
    return Loaded{DaemonAction::kRun, std::move(config)};
  }

  // The settings of the YAML file at `path` over `config`'s.
  Status LoadFile(const std::string& path, Config& config) const {
    YAML::Node root;
    try {
      root = YAML::LoadFile(path);
    } catch (const YAML::BadFile&) {
      return NotFound(path + ": cannot read the config file");
    } catch (const YAML::Exception& e) {
      return InvalidArgument(path + ": line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
    }
    if (root.IsNull()) return Status::Ok();
    if (!root.IsMap()) return InvalidArgument(path + ": expected a mapping of settings");
    for (const auto& item : root) {
      const std::string key = item.first.as<std::string>("");
      auto it = settings_.find(key);
      if (it == settings_.end()) return Unknown(key, path);
      const YAML::Node& node = item.second;
      if (node.IsScalar()) {
        SF_RETURN_IF_ERROR(Set(config, key, node.Scalar(), path));
      } else if (it->second.from_node) {
        SF_RETURN_IF_ERROR(it->second.from_node(config, node, path));
      } else {
        return InvalidArgument(path + ": " + key + ": expected a value");
      }
    }
    return Status::Ok();
  }

  // Sets `key` from text; `where` names the value's origin in errors.
  Status Set(Config& config, const std::string& key, const std::string& value, const std::string& where) const {
    auto it = settings_.find(key);
    if (it == settings_.end() || !it->second.set) return Unknown(key, where);
    return it->second.set(config, value).WithContext(where);
  }

 private:
  // The command line: every setting as text, so the precedence and the checks stay in `set`.
  struct Flags {
    std::string config_file;
    std::map<std::string, std::string> values;
    std::vector<std::pair<CLI::Option*, std::string>> options;  // option, key
    bool version = false;
  };

  void Build(CLI::App& app, Flags* flags) const {
    cmdline::UseDefaults(app);
    app.add_option("--config", flags->config_file, "YAML file of settings (keys: the flag names with underscores)");
    for (const std::string& key : order_) {
      const DaemonSetting<Config>& s = settings_.at(key);
      if (s.file_only || !s.set) continue;
      std::string names = "--" + key;
      for (char& ch : names) ch = ch == '_' ? '-' : ch;
      for (const std::string& alias : s.aliases) names += "," + alias;
      const std::string& help = s.help;  // names its environment variables itself
      // A BOOL setting is a flag: bare means true; --flag=false also works.
      CLI::Option* opt = s.type == "BOOL" ? app.add_flag(names, flags->values[key], help)
                                          : app.add_option(names, flags->values[key], help);
      opt->type_name(s.type);
      if (s.default_text) opt->default_str(s.default_text(Config()));
      flags->options.emplace_back(opt, key);
    }
    app.add_flag("--version", flags->version, "print the version and exit");
    app.footer(footer_);
  }

  Status Unknown(const std::string& key, const std::string& where) const {
    std::string msg = where + ": unknown setting \"" + key + "\"";
    const std::string closest = ClosestMatch(key, order_);
    if (!closest.empty()) msg += " (did you mean \"" + closest + "\"?)";
    return InvalidArgument(msg);
  }

  std::string program_, description_, footer_;
  std::vector<std::string> order_;  // keys in declaration order (--help's order)
  std::map<std::string, DaemonSetting<Config>> settings_;
};

}  // namespace sf::config
