// `sf config validate FILE...`: validates experiment YAML files with the same parser the
// master uses, and checks that the data files they name can be read from here.
#include <google/protobuf/util/json_util.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/command.h"
#include "common/config/experiment_config.h"
#include "steadfast/v1/api.pb.h"

namespace sf::cli {
namespace {

constexpr char kValidateFooter[] =
    "Prints one line per valid file on stdout; errors go to stderr as\n"
    "FILE:LINE:COLUMN: FIELD.PATH: REASON. Exit code 2 when any file is invalid. --json prints\n"
    "one JSON object per file on stdout instead, with the errors in the API's ConfigError form\n"
    "({\"file\", \"valid\", \"errors\": [{\"path\", \"message\", \"line\", \"column\"}]}), the "
    "same\n"
    "shape the master returns for a rejected experiment.";

struct ValidateFlags {
  bool no_file_checks = false;
  bool json = false;
  std::vector<std::string> files;
};

// Data files named by the config must exist and be readable from this machine.
std::vector<config::ConfigError> CheckFiles(const config::ExperimentConfig& c) {
  std::vector<config::ConfigError> errors;
  auto check = [&](const std::string& path, const std::string& file) {
    std::error_code ec;
    if (!std::filesystem::exists(file, ec)) {
      errors.push_back({path, "\"" + file + "\" does not exist", 0, 0});
    } else if (std::filesystem::is_directory(file, ec)) {
      errors.push_back({path, "\"" + file + "\" is a directory, not a file", 0, 0});
    } else if (access(file.c_str(), R_OK) != 0) {
      errors.push_back({path, "\"" + file + "\" is not readable", 0, 0});
    }
  };
  if (c.has_entrypoint() && c.context_directory) {
    std::error_code ec;
    if (!std::filesystem::is_directory(*c.context_directory, ec)) {
      errors.push_back({"context_directory", "\"" + *c.context_directory + "\" is not a directory", 0, 0});
    }
  }
  if (!c.has_data()) return errors;  // an entrypoint experiment without data: its code reads what it likes
  for (const auto& [key, file] : config::DataFiles(c.data)) check(key, file);
  if (c.data.tokenizer.model) check("data.tokenizer.model", *c.data.tokenizer.model);
  return errors;
}

std::string Summary(const config::ExperimentConfig& c) {
  std::string s = "name=" + c.name + " searcher=" + config::SearcherName(c.searcher.name);
  if (c.searcher.name == config::SearcherConfig::Name::kGrid) {
    int64_t n = 1;
    for (const auto& [k, hp] : c.hyperparameters) n *= config::GridPointCount(hp);
    s += " trials=" + std::to_string(n);
  } else if (c.searcher.name != config::SearcherConfig::Name::kSingle) {
    s += " max_trials=" + std::to_string(c.searcher.max_trials);
  } else {
    s += " trials=1";
  }
  if (c.has_entrypoint()) {
    s += " entrypoint=\"";
    for (size_t i = 0; i < c.entrypoint.size(); ++i) s += (i ? " " : "") + c.entrypoint[i];
    s += "\"";
  } else {
    s += " precision=" + std::string(config::PrecisionName(c.precision));
  }
  s += " max_length=" + c.searcher.max_length.ToString();
  return s;
}

// One file's outcome as JSON through the wire types (protobuf's JSON mapping).
std::string JsonReport(const std::string& file, const std::vector<config::ConfigError>& errors) {
  steadfast::v1::CreateExperimentResponse response;
  for (const auto& e : errors) {
    steadfast::v1::ConfigError* out = response.add_errors();
    out->set_path(e.path);
    out->set_message(e.message);
    out->set_line(e.line);
    out->set_column(e.column);
  }
  std::string errors_json;
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  (void)google::protobuf::util::MessageToJsonString(response, &errors_json, options);
  // {"experiment":null,"errors":[...]} -> keep the errors array, add file and validity.
  Value parsed = Value::FromJson(errors_json).value();
  const Value* list = parsed.Find("errors");
  Value::Map report{
      {"file", file}, {"valid", errors.empty()}, {"errors", list ? *list : Value(Value::List{})}};
  return Value(std::move(report)).ToJson();
}

int Validate(const ValidateFlags& flags) {
  int exit_code = kExitOk;
  for (const std::string& file : flags.files) {
    config::ParseResult r = config::LoadExperimentConfigFile(file);
    std::vector<config::ConfigError> errors = r.errors;
    if (r.config && !flags.no_file_checks) errors = CheckFiles(*r.config);
    if (flags.json) {
      std::cout << JsonReport(file, errors) << "\n";
      if (!errors.empty()) exit_code = kExitUsage;
      continue;
    }
    if (!errors.empty()) {
      for (const auto& e : errors) std::cerr << e.ToStringWithLocation(file) << "\n";
      std::cerr << file << ": " << errors.size() << (errors.size() == 1 ? " error" : " errors")
                << "\n";
      exit_code = kExitUsage;
      continue;
    }
    std::cout << file << ": valid (" << Summary(*r.config) << ")\n";
  }
  return exit_code;
}

}  // namespace

void AddConfigCommands(CLI::App& sf, CommandAction& action) {
  CLI::App* config = sf.add_subcommand("config", "work with experiment configuration files");
  config->require_subcommand(1);
  CLI::App* validate = config->add_subcommand(
      "validate",
      "check experiment YAML files with the master's parser, and that their data files exist");
  validate->footer(kValidateFooter);
  auto flags = std::make_shared<ValidateFlags>();
  validate->add_flag("--no-file-checks", flags->no_file_checks,
                     "skip checking that the data files the config names are readable here");
  validate->add_flag("--json", flags->json, "print one JSON object per file on stdout");
  validate->add_option("FILE", flags->files, "experiment YAML files")
      ->type_name("")
      ->default_str("")
      ->required();
  OnSelected(validate, action, [flags] { return Validate(*flags); });
}

}  // namespace sf::cli
