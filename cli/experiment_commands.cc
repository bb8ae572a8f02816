// `sf experiment ...`: create (packing a user trial's context directory), fork, continue, list,
// describe, and the state changes, one experiment or many, over the master's REST API.
#include <openssl/evp.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include "cli/cluster_command.h"
#include "cli/output.h"
#include "common/command_line.h"
#include "common/config/experiment_config.h"
#include "common/context/context_archive.h"

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

// Reads FILE, applies --config overrides, validates it locally, and makes its relative paths
// absolute (against the file's directory) so the cluster reads the files the user meant.
// Applies --config overrides to `text` and validates the result with the master's parser;
// errors name `source` (a file, or "experiment 7") and the field.
Result<config::ParseResult> OverrideAndValidate(std::string& text, const std::vector<std::string>& overrides,
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

// The submitted text (overrides applied, relative paths made absolute) and the config it parses
// to, with its paths resolved.
struct PreparedConfig {
  std::string text;
  config::ExperimentConfig resolved;
};

Result<PreparedConfig> PrepareConfig(const std::string& file, const std::vector<std::string>& overrides) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return InvalidArgument("cannot read " + file);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  SF_ASSIGN_OR_RETURN(config::ParseResult parsed, OverrideAndValidate(text, overrides, file));
  std::string base = std::filesystem::absolute(file).parent_path().string();
  config::ExperimentConfig resolved = *parsed.config;
  config::ResolvePaths(resolved, base);
  auto set = [&](const std::string& key, const std::string& before, const std::string& after) -> Status {
    if (before == after) return Status::Ok();
    SF_ASSIGN_OR_RETURN(text, config::ApplyOverride(text, key + "=" + YamlQuote(after)));
    return Status::Ok();
  };
  const auto& c = *parsed.config;
  SF_RETURN_IF_ERROR(set("data.train.src", c.data.train.src, resolved.data.train.src));
  SF_RETURN_IF_ERROR(set("data.train.tgt", c.data.train.tgt, resolved.data.train.tgt));
  if (c.data.valid) {
    SF_RETURN_IF_ERROR(set("data.valid.src", c.data.valid->src, resolved.data.valid->src));
    SF_RETURN_IF_ERROR(set("data.valid.tgt", c.data.valid->tgt, resolved.data.valid->tgt));
  }
  if (c.data.test) {
    SF_RETURN_IF_ERROR(set("data.test.src", c.data.test->src, resolved.data.test->src));
    SF_RETURN_IF_ERROR(set("data.test.tgt", c.data.test->tgt, resolved.data.test->tgt));
  }
  if (c.data.tokenizer.model) {
    SF_RETURN_IF_ERROR(set("data.tokenizer.model", *c.data.tokenizer.model, *resolved.data.tokenizer.model));
  }
  if (c.checkpoint_storage) {
    SF_RETURN_IF_ERROR(set("checkpoint_storage.host_path", c.checkpoint_storage->host_path,
                           resolved.checkpoint_storage->host_path));
  }
  if (c.has_entrypoint() && resolved.context_directory) {
    // Written out even when it was the default: the trials learn where their code came from
    // (SF_CONTEXT_DIRECTORY).
    SF_RETURN_IF_ERROR(set("context_directory", c.context_directory.value_or(""), *resolved.context_directory));
  }
  return PreparedConfig{text, std::move(resolved)};
}

std::string Base64(const std::string& bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
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

// Packs a user trial's context directory (docs/core-api.md); checks the script the entrypoint
// names is in it.
Result<context::PackedContext> PackExperimentContext(const config::ExperimentConfig& c) {
  const std::string dir = c.context_directory.value_or(".");
  SF_ASSIGN_OR_RETURN(context::PackedContext packed, context::PackContext(dir));
  const std::string script = EntrypointScript(c);
  if (!script.empty() && !std::binary_search(packed.paths.begin(), packed.paths.end(), script)) {
    return InvalidArgument("entrypoint: " + script + " is not in the context directory " + dir +
                           (std::filesystem::exists(std::filesystem::path(dir) / script)
                                ? " once .sfignore is applied (remove it from " + dir + "/.sfignore)"
                                : " (context_directory names the directory the trials' code comes from)"));
  }
  return packed;
}

std::vector<std::string> ExperimentRow(const Value& e) {
  std::string progress = Str(e, "numCompletedTrials") + "/" + Str(e, "numTrials");
  return {Str(e, "id"), Str(e, "name"), StateName(e.Find("state"), "EXPERIMENT_STATE_"), Str(e, "searcher"),
          progress, Str(e, "bestValidationMetric"), Str(e, "owner"), Str(e, "startTime"), Str(e, "endTime")};
}

// Follows an experiment until it ends; prints trial progress. Exit code: 0 COMPLETED, 1 else.
int FollowExperiment(Api& api, const std::string& id) {
  std::string last;
  std::map<std::string, std::string> trial_lines;
  while (true) {
    auto e = api.Call("GET", "/api/v1/experiments/" + id);
    if (!e) return api.exit_code;
    const Value& exp = *e->Find("experiment");
    std::string state = StateName(exp.Find("state"), "EXPERIMENT_STATE_");
    auto trials = api.Call("GET", "/api/v1/experiments/" + id + "/trials");
    if (trials && trials->Find("trials")) {
      for (const Value& t : trials->Find("trials")->as_list()) {
        std::string line = StateName(t.Find("state"), "TRIAL_STATE_") + " batches=" + Str(t, "totalBatches");
        if (!Str(t, "latestValidationMetric").empty()) line += " metric=" + Str(t, "latestValidationMetric");
        if (t.Find("restarts") && Str(t, "restarts") != "0") line += " restarts=" + Str(t, "restarts");
        std::string tid = Str(t, "id");
        if (trial_lines[tid] != line) {
          std::cout << "  trial " << tid << ": " << line << "\n" << std::flush;
          trial_lines[tid] = line;
        }
      }
    }
    if (state != last) {  // after the trials, so the experiment's end is the last line
      std::cout << "experiment " << id << ": " << state << "\n" << std::flush;
      last = state;
    }
    if (state == "COMPLETED") return kExitOk;
    if (state == "CANCELED" || state == "ERROR") {
      if (!Str(exp, "error").empty()) std::cerr << "sf: experiment " << id << ": " << Str(exp, "error") << "\n";
      // Each failed trial's own reason (rank, agent, the trainer's first error line).
      if (trials && trials->Find("trials")) {
        for (const Value& t : trials->Find("trials")->as_list()) {
          if (StateName(t.Find("state"), "TRIAL_STATE_") == "ERROR" && !Str(t, "error").empty()) {
            std::cerr << "sf: trial " << Str(t, "id") << ": " << Str(t, "error") << "\n";
          }
        }
      }
      return kExitFailed;
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

// POSTs `body` to `path` (a route that creates an experiment), prints "created experiment N" and
// `note` (or the JSON with --json), then follows it with --follow.
int SubmitExperiment(const Flags& f, Api& api, const std::string& path, const Value& body,
                     const std::string& note = "") {
  auto r = api.Call("POST", path, body.ToJson());
  if (!r) return api.exit_code;
  const std::string id = Str(*r->Find("experiment"), "id");
  if (f.json) {
    std::cout << r->ToJson() << "\n";
  } else {
    std::cout << "created experiment " << id << note << "\n" << std::flush;
  }
  return f.follow ? FollowExperiment(api, id) : kExitOk;
}

// A config that did not validate here: its errors on stderr, exit 2.
int ConfigUsageError(const Status& st) {
  std::cerr << st.message();
  if (st.message().back() != '\n') std::cerr << "\n";
  return kExitUsage;
}

int CreateExperiment(const Flags& f, Api& api) {
  auto prepared = PrepareConfig(f.file, f.overrides);
  if (!prepared.ok()) return ConfigUsageError(prepared.status());
  Value::Map body{{"configYaml", prepared->text}, {"activate", !f.paused}, {"workspace", f.workspace}};
  if (prepared->resolved.has_entrypoint()) {
    auto packed = PackExperimentContext(prepared->resolved);
    if (!packed.ok()) return ConfigUsageError(InvalidArgument(f.file + ": " + packed.status().message()));
    if (!f.json) {
      std::cerr << "sf: packed " << packed->files << " files (" << (packed->file_bytes + 1023) / 1024 << " KiB) of "
                << *prepared->resolved.context_directory << "\n";
    }
    body["context"] = Base64(packed->archive);
  }
  return SubmitExperiment(f, api, "/api/v1/experiments", Value(std::move(body)));
}

// `sf experiment fork ID`: the experiment's config as it was submitted, with --config overrides,
// validated here, submitted as a new experiment (its paths stay as the original's: the CLI made
// them absolute when that one was created) in the original's workspace unless --workspace says
// another.
int ForkExperiment(const Flags& f, Api& api) {
  auto original = api.Call("GET", "/api/v1/experiments/" + f.id);
  if (!original) return api.exit_code;
  const Value* experiment = original->Find("experiment");
  const Value* yaml = experiment ? experiment->Find("configYaml") : nullptr;
  if (!yaml || !yaml->is_string()) {
    std::cerr << "sf: the master sent experiment " << f.id << " without its config\n";
    return kExitFailed;
  }
  std::string text = yaml->as_string();
  auto parsed = OverrideAndValidate(text, f.overrides, "experiment " + f.id);
  if (!parsed.ok()) return ConfigUsageError(parsed.status());
  std::string workspace = f.workspace;
  if (const Value* ws = experiment->Find("workspace"); workspace.empty() && ws && ws->is_string()) {
    workspace = ws->as_string();
  }
  // A user trial's code comes along: the master copies the original's context.
  return SubmitExperiment(f, api, "/api/v1/experiments",
                          Value(Value::Map{{"configYaml", text},
                                           {"activate", !f.paused},
                                           {"workspace", workspace},
                                           {"contextOf", f.id}}),
                          " (fork of experiment " + f.id + ")");
}

// `sf experiment continue ID --max-length N`: POST /api/v1/experiments/ID/continue.
int ContinueExperiment(const Flags& f, Api& api) {
  return SubmitExperiment(f, api, "/api/v1/experiments/" + f.id + "/continue",
                          Value(Value::Map{{"maxLength", std::to_string(f.max_length)}}),
                          " (continues experiment " + f.id + " to " + std::to_string(f.max_length) + " batches)");
}

int ListExperiments(const Flags& f, Api& api) {
  auto r = api.Call("GET", "/api/v1/experiments?limit=1000");
  if (!r) return api.exit_code;
  if (f.json) {
    std::cout << r->ToJson() << "\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const Value& e : r->Find("experiments")->as_list()) rows.push_back(ExperimentRow(e));
  PrintTable({"ID", "NAME", "STATE", "SEARCHER", "TRIALS", "BEST", "OWNER", "STARTED", "ENDED"},
             rows);
  return kExitOk;
}

int DescribeExperiment(const Flags& f, Api& api) {
  auto r = api.Call("GET", "/api/v1/experiments/" + f.id);
  if (!r) return api.exit_code;
  auto trials = api.Call("GET", "/api/v1/experiments/" + f.id + "/trials");
  if (!trials) return api.exit_code;
  if (f.json) {
    Value out = *r;
    out.as_map()["trials"] = *trials->Find("trials");
    std::cout << out.ToJson() << "\n";
    return kExitOk;
  }
  const Value& e = *r->Find("experiment");
  PrintTable({"ID", "NAME", "STATE", "SEARCHER", "TRIALS", "BEST", "OWNER", "STARTED", "ENDED"},
             {ExperimentRow(e)});
  std::cout << "\n";
  std::vector<std::vector<std::string>> rows;
  for (const Value& t : trials->Find("trials")->as_list()) {
    std::string hp = t.Find("hparams") ? t.Find("hparams")->ToJson() : "";
    rows.push_back({Str(t, "id"), StateName(t.Find("state"), "TRIAL_STATE_"),
                    Str(t, "totalBatches"), Str(t, "restarts"), Str(t, "latestValidationMetric"),
                    Str(t, "bestValidationMetric"), hp});
  }
  PrintTable({"TRIAL", "STATE", "BATCHES", "RESTARTS", "LATEST", "BEST", "HYPERPARAMETERS"}, rows);
  // Why the queued ones wait (the scheduler's words), one line each under the table.
  for (const Value& t : trials->Find("trials")->as_list()) {
    if (!Str(t, "pendingReason").empty()) {
      std::cout << "trial " << Str(t, "id") << " waits: " << Str(t, "pendingReason") << "\n";
    }
  }
  return kExitOk;
}

// kill, pause, activate, archive: POST /api/v1/experiments/ID/VERB.
int ChangeExperiment(const std::string& verb, const Flags& f, Api& api) {
  auto r = api.Call("POST", "/api/v1/experiments/" + f.id + "/" + verb);
  if (!r) return api.exit_code;
  if (f.json) {
    std::cout << r->ToJson() << "\n";
  } else {
    std::cout << "experiment " << f.id << ": "
              << StateName(r->Find("experiment")->Find("state"), "EXPERIMENT_STATE_") << "\n";
  }
  return kExitOk;
}

// The experiment states --state accepts: their names without the prefix, any case.
const std::vector<std::string> kExperimentStates = {"ACTIVE",   "PAUSED",   "STOPPING_COMPLETED",
                                                    "STOPPING_CANCELED", "STOPPING_ERROR",
                                                    "COMPLETED", "CANCELED", "ERROR"};

// kill, pause, activate, archive, unarchive, delete on several experiments (IDs, or a filter):
// POST /api/v1/experiments/VERB, one line per experiment. Exit 0 when every one succeeded, 2 when
// an id does not exist, else 1 when the master refused one (e.g. pausing a completed experiment).
int ChangeExperiments(const std::string& verb, const Flags& f, Api& api) {
  Value::Map body;
  if (!f.ids.empty()) {
    Value::List ids;
    for (const std::string& id : f.ids) ids.push_back(Value(id));
    body["ids"] = Value(std::move(ids));
  } else {
    Value::Map filter;
    if (!f.states.empty()) {
      Value::List states;
      for (const std::string& s : f.states) states.push_back(Value("EXPERIMENT_STATE_" + s));
      filter["states"] = Value(std::move(states));
    }
    if (!f.name.empty()) filter["name"] = Value(f.name);
    if (!f.owner.empty()) filter["owner"] = Value(f.owner);
    if (f.include_archived) filter["includeArchived"] = Value(true);
    body["filter"] = Value(std::move(filter));
  }
  auto r = api.Call("POST", "/api/v1/experiments/" + verb, Value(std::move(body)).ToJson());
  if (!r) return api.exit_code;
  const int exit_code = PrintResults(
      *r, f,
      [&](const Value& result) {
        return "experiment " + Str(result, "id") + ": " +
               (verb == "delete" ? "deleted" : StateName(result.Find("state"), "EXPERIMENT_STATE_"));
      },
      [](const Value& result) { return "experiment " + Str(result, "id") + ": " + Str(result, "error"); });
  const Value* results = r->Find("results");
  if (!f.json && (!results || !results->is_list() || results->as_list().empty())) {
    std::cout << "no experiment matches\n";
  }
  return exit_code;
}

// `sf experiment VERB`: one ID goes to the single-experiment route (POST .../ID/VERB, or DELETE
// .../ID), several IDs or a filter to the bulk one.
int ChangeExperimentsOrOne(const std::string& verb, const CLI::App& command, const Flags& f, Api& api) {
  const bool filtered = !f.states.empty() || !f.name.empty() || !f.owner.empty();
  if (f.ids.empty() && !filtered) {
    return cmdline::UsageError(command, "name the experiments: ID... or --state/--name/--owner", std::cerr);
  }
  if (!f.ids.empty() && filtered) {
    return cmdline::UsageError(command, "give IDs or --state/--name/--owner, not both", std::cerr);
  }
  if (f.include_archived && !filtered) {
    return cmdline::UsageError(command, "--include-archived needs --state, --name or --owner", std::cerr);
  }
  for (const std::string& id : f.ids) {
    if (id.empty() || id.size() > 18 || id.find_first_not_of("0123456789") != std::string::npos) {
      return cmdline::UsageError(command, "ID: \"" + id + "\" is not an experiment id", std::cerr);
    }
  }
  if (f.ids.size() != 1) return ChangeExperiments(verb, f, api);
  Flags one = f;
  one.id = f.ids[0];
  if (verb != "delete") return ChangeExperiment(verb, one, api);
  auto r = api.Call("DELETE", "/api/v1/experiments/" + one.id);
  if (!r) return api.exit_code;
  std::cout << (f.json ? r->ToJson() : "experiment " + one.id + ": deleted") << "\n";
  return kExitOk;
}

}  // namespace

namespace {

// --config KEY=VALUE, repeatable: one KEY=VALUE per flag, so a positional may follow it.
void AddConfigOverrides(ClusterCommand& command, const std::string& help) {
  command.app->add_option("--config", command.flags->overrides, help)
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false)
      ->default_str("")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

}  // namespace

void AddExperimentCommands(CLI::App& sf, CommandAction& action) {
  CLI::App* experiment = sf.add_subcommand("experiment", "create, list and control experiments");
  experiment->alias("e");
  experiment->require_subcommand(1);

  ClusterCommand create = AddCommand(experiment, "create",
                                     "submit an experiment from a YAML file (validated here first)",
                                     action, CreateExperiment);
  create.app->add_option("FILE", create.flags->file, "the experiment's YAML file")
      ->type_name("")
      ->required();
  create.app->add_flag(
      "-f,--follow", create.flags->follow,
      "print trial progress until the experiment ends; exit 1 unless it COMPLETED");
  create.app->add_flag("--paused", create.flags->paused,
                       "create it paused (start it with `sf experiment activate`)");
  create.app->add_option("-w,--workspace", create.flags->workspace,
                         "the workspace it belongs to (default Uncategorized; you must be an editor there)");
  AddConfigOverrides(create, "override one field of the YAML (e.g. searcher.max_trials=4); repeatable");

  ClusterCommand fork = AddCommand(experiment, "fork",
                                   "create a new experiment from an existing one's config, with overrides",
                                   action, ForkExperiment);
  fork.Id("ID", "the experiment to copy");
  fork.app->add_flag("-f,--follow", fork.flags->follow,
                     "print trial progress until the new experiment ends; exit 1 unless it COMPLETED");
  fork.app->add_flag("--paused", fork.flags->paused, "create it paused (start it with `sf experiment activate`)");
  fork.app->add_option("-w,--workspace", fork.flags->workspace,
                       "the workspace it belongs to (default: the original's; you must be an editor there)");
  AddConfigOverrides(fork, "override one field of the config (e.g. searcher.max_length.batches=5000); repeatable");

  ClusterCommand resume = AddCommand(
      experiment, "continue",
      "train a completed single-trial experiment further from its latest checkpoint, as a new experiment",
      action, ContinueExperiment);
  resume.Id("ID", "the completed experiment");
  resume.app->add_option("--max-length", resume.flags->max_length, "batches to train to in all (the step count goes on)")
      ->type_name("N")
      ->check(cmdline::AtLeast(1))
      ->required();
  resume.app->add_flag("-f,--follow", resume.flags->follow,
                       "print trial progress until the new experiment ends; exit 1 unless it COMPLETED");

  AddCommand(experiment, "list", "list experiments", action, ListExperiments);
  AddCommand(experiment, "describe", "show an experiment and its trials", action,
             DescribeExperiment)
      .Id("ID", "the experiment's id");
  for (const auto& [verb, description] : std::vector<std::pair<std::string, std::string>>{
           {"kill", "kill experiments' trials; they end CANCELED"},
           {"pause", "pause experiments: their trials checkpoint and stop"},
           {"activate", "start paused experiments, or resume them from their checkpoints"},
           {"archive", "archive ended experiments (hidden from listings)"},
           {"unarchive", "show archived experiments in listings again"},
           {"delete", "delete ended experiments: their trials, metrics, logs and checkpoint files"}}) {
    // The callback needs its own command (for usage errors); it is set once the command exists.
    auto command_of = std::make_shared<CLI::App*>(nullptr);
    ClusterCommand command = AddCommand(
        experiment, verb, description, action, [verb = verb, command_of](const Flags& f, Api& api) {
          return ChangeExperimentsOrOne(verb, **command_of, f, api);
        });
    *command_of = command.app;
    command.app->add_option("ID", command.flags->ids, "the experiments' ids (or select them with the flags below)")
        ->type_name("")
        ->default_str("");
    command.app
        ->add_option("--state", command.flags->states,
                     "experiments in this state (any case); repeatable")
        ->transform(CLI::IsMember(kExperimentStates, CLI::ignore_case))
        ->type_name("STATE")
        ->allow_extra_args(false)
        ->default_str("")
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    command.app->add_option("--name", command.flags->name, "experiments whose name contains this")
        ->type_name("TEXT")
        ->default_str("");
    command.app->add_option("--owner", command.flags->owner, "experiments this user submitted")
        ->type_name("USER")
        ->default_str("");
    command.app->add_flag("--include-archived", command.flags->include_archived,
                          "with a filter: archived experiments too (unarchive always looks at them)");
  }
}

}  // namespace sf::cli
