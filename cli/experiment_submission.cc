#include "cli/experiment_submission.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <utility>

namespace sf::cli {
namespace {

std::string YamlQuote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// The script an entrypoint names, relative to the context, when it names one: the first word
// that is a relative path ending in .py or .sh, or starting with "./" ("python3 train.py",
// "./run.sh"); empty otherwise ("python3 -m pkg.train").
std::string EntrypointScript(const config::ExperimentConfig& c) {
  std::vector<std::string> words;
  for (const std::string& part : c.entrypoint) {
    std::istringstream in(part);
    for (std::string w; in >> w;) words.push_back(w);
  }
  for (size_t i = 0; i < words.size(); ++i) {
    std::string w = words[i];
    if (w.empty() || w[0] == '-' || w[0] == '/' || w.find('=') != std::string::npos) continue;
    const bool dot_slash = w.rfind("./", 0) == 0;
    auto ends_with = [&](const char* suffix) {
      const std::string s(suffix);
      return w.size() > s.size() && w.compare(w.size() - s.size(), s.size(), s) == 0;
    };
    if (!dot_slash && !ends_with(".py") && !ends_with(".sh")) continue;
    if (i == 0 && !dot_slash) continue;  // the program itself, found on PATH
    while (w.rfind("./", 0) == 0) w = w.substr(2);
    return w;
  }
  return "";
}

}  // namespace

Result<config::ParseResult> OverrideAndValidate(std::string& text,
                                                const std::vector<std::string>& overrides,
                                                const std::string& source) {
  for (const auto& o : overrides) {
    SF_ASSIGN_OR_RETURN(text, config::ApplyOverride(text, o));
  }
  config::ParseResult parsed = config::ParseExperimentConfig(text);
  if (!parsed.ok()) {
    std::string msg;
    for (const auto& e : parsed.errors) msg += e.ToStringWithLocation(source) + "\n";
    return InvalidArgument(msg);
  }
  return parsed;
}

Result<PreparedConfig> PrepareConfig(const std::string& file,
                                     const std::vector<std::string>& overrides) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return InvalidArgument("cannot read " + file);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  SF_ASSIGN_OR_RETURN(config::ParseResult parsed, OverrideAndValidate(text, overrides, file));
  std::string base = std::filesystem::absolute(file).parent_path().string();
  config::ExperimentConfig resolved = *parsed.config;
  config::ResolvePaths(resolved, base);
  auto set = [&](const std::string& key, const std::string& before,
                 const std::string& after) -> Status {
    if (before == after) return Status::Ok();
    SF_ASSIGN_OR_RETURN(text, config::ApplyOverride(text, key + "=" + YamlQuote(after)));
    return Status::Ok();
  };
  const auto& c = *parsed.config;
  // Each file under the key the document gives it (data.train.text for one-sided text).
  const auto given = config::DataFiles(c.data), absolute = config::DataFiles(resolved.data);
  for (size_t i = 0; i < given.size(); ++i) {
    SF_RETURN_IF_ERROR(set(given[i].first, given[i].second, absolute[i].second));
  }
  if (c.data.tokenizer.model) {
    SF_RETURN_IF_ERROR(
        set("data.tokenizer.model", *c.data.tokenizer.model, *resolved.data.tokenizer.model));
  }
  if (c.checkpoint_storage && !c.checkpoint_storage->is_s3()) {
    SF_RETURN_IF_ERROR(set("checkpoint_storage.host_path", c.checkpoint_storage->host_path,
                           resolved.checkpoint_storage->host_path));
  }
  if (c.has_entrypoint() && resolved.context_directory) {
    // Written out even when it was the default: the trials learn where their code came from
    // (SF_CONTEXT_DIRECTORY).
    SF_RETURN_IF_ERROR(
        set("context_directory", c.context_directory.value_or(""), *resolved.context_directory));
  }
  return PreparedConfig{text, std::move(resolved)};
}

Result<context::PackedContext> PackExperimentContext(const config::ExperimentConfig& c) {
  const std::string dir = c.context_directory.value_or(".");
  SF_ASSIGN_OR_RETURN(context::PackedContext packed, context::PackContext(dir));
  const std::string script = EntrypointScript(c);
  if (!script.empty() && !std::binary_search(packed.paths.begin(), packed.paths.end(), script)) {
    return InvalidArgument(
        "entrypoint: " + script + " is not in the context directory " + dir +
        (std::filesystem::exists(std::filesystem::path(dir) / script)
             ? " once .sfignore is applied (remove it from " + dir + "/.sfignore)"
             : " (context_directory names the directory the trials' code comes from)"));
  }
  return packed;
}

}  // namespace sf::cli
