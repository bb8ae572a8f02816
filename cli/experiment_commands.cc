// `sf experiment ...`: create (packing a user trial's context directory), fork, continue, list,
// describe, and the state changes, one experiment or many, through the master's Api methods
// (what create and fork submit: experiment_submission.h).
#include <cctype>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cli/cluster_command.h"
#include "cli/experiment_submission.h"
#include "cli/output.h"
#include "cli/reply_text.h"
#include "common/command_line.h"
#include "common/value.h"
#include "steadfast/v1/api.pb.h"

namespace sf::cli {
namespace {

namespace v1 = steadfast::v1;

std::vector<std::string> ExperimentRow(const v1::Experiment& e) {
  return {std::to_string(e.id()),
          e.name(),
          EnumText(e.state()),
          e.searcher(),
          std::to_string(e.num_completed_trials()) + "/" + std::to_string(e.num_trials()),
          NumberText(e.has_best_validation_metric(), e.best_validation_metric()),
          e.owner(),
          TimeText(e.has_start_time(), e.start_time()),
          TimeText(e.has_end_time(), e.end_time())};
}

std::optional<Reply<v1::GetExperimentResponse>> GetExperiment(Api& api, int64_t id) {
  v1::GetExperimentRequest request;
  request.set_experiment_id(id);
  return api.Call<v1::GetExperimentResponse>("GetExperiment", request);
}

std::optional<Reply<v1::GetExperimentTrialsResponse>> GetTrials(Api& api, int64_t experiment_id) {
  v1::GetExperimentTrialsRequest request;
  request.set_experiment_id(experiment_id);
  return api.Call<v1::GetExperimentTrialsResponse>("GetExperimentTrials", request);
}

// Follows an experiment until it ends; prints trial progress. Exit code: 0 COMPLETED, 1 else.
int FollowExperiment(Api& api, int64_t id) {
  std::string last;
  std::map<int64_t, std::string> trial_lines;
  while (true) {
    auto e = GetExperiment(api, id);
    if (!e) return api.exit_code;
    const v1::Experiment& exp = e->message.experiment();
    auto trials = GetTrials(api, id);  // a failed read (printed) is tried again next time
    const auto no_trials = google::protobuf::RepeatedPtrField<v1::Trial>();
    const auto& trial_list = trials ? trials->message.trials() : no_trials;
    for (const v1::Trial& t : trial_list) {
      std::string line = EnumText(t.state()) + " batches=" + std::to_string(t.total_batches());
      if (t.has_latest_validation_metric())
        line += " metric=" + NumberText(t.latest_validation_metric());
      if (t.restarts() != 0) line += " restarts=" + std::to_string(t.restarts());
      if (trial_lines[t.id()] != line) {
        std::cout << "  trial " << t.id() << ": " << line << "\n" << std::flush;
        trial_lines[t.id()] = line;
      }
    }
    const std::string state = EnumText(exp.state());
    if (state != last) {  // after the trials, so the experiment's end is the last line
      std::cout << "experiment " << id << ": " << state << "\n" << std::flush;
      last = state;
    }
    // Each failed trial's own reason (rank, agent, the trainer's first error line), also when
    // the search as a whole completed: a user reads why a trial of it failed.
    auto trial_reasons = [&] {
      for (const v1::Trial& t : trial_list) {
        if (t.state() != v1::TRIAL_STATE_ERROR || t.error().empty()) continue;
        const std::string self = "trial " + std::to_string(t.id()) + ": ";
        const bool named = t.error().rfind(self, 0) == 0;  // some reasons name their trial already
        std::cerr << "sf: " << (named ? "" : self) << t.error() << "\n";
      }
    };
    if (exp.state() == v1::EXPERIMENT_STATE_COMPLETED) {
      trial_reasons();
      return kExitOk;
    }
    if (exp.state() == v1::EXPERIMENT_STATE_CANCELED || exp.state() == v1::EXPERIMENT_STATE_ERROR) {
      if (!exp.error().empty()) std::cerr << "sf: experiment " << id << ": " << exp.error() << "\n";
      trial_reasons();
      return kExitFailed;
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

// Calls `method` (CreateExperiment, ContinueExperiment: a method that creates an experiment),
// prints "created experiment N" and `note` (or the JSON with --json), then follows it with
// --follow.
int SubmitExperiment(const Flags& f, Api& api, const std::string& method,
                     const google::protobuf::Message& request, const std::string& note = "") {
  auto r = api.Call<v1::CreateExperimentResponse>(method, request);
  if (!r) return api.exit_code;
  const int64_t id = r->message.experiment().id();
  if (f.json) {
    std::cout << r->json << "\n";
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
  v1::CreateExperimentRequest request;
  request.set_config_yaml(prepared->text);
  request.set_activate(!f.paused);
  request.set_workspace(f.workspace);
  if (prepared->resolved.has_entrypoint()) {
    auto packed = PackExperimentContext(prepared->resolved);
    if (!packed.ok()) return ConfigUsageError(InvalidArgument(f.file + ": " + packed.status().message()));
    if (!f.json) {
      std::cerr << "sf: packed " << packed->files << " files (" << (packed->file_bytes + 1023) / 1024 << " KiB) of "
                << *prepared->resolved.context_directory << "\n";
    }
    request.set_context(packed->archive);
  }
  return SubmitExperiment(f, api, "CreateExperiment", request);
}

// `sf experiment fork ID`: the experiment's config as it was submitted, with --config overrides,
// validated here, submitted as a new experiment (its paths stay as the original's: the CLI made
// them absolute when that one was created) in the original's workspace unless --workspace says
// another.
int ForkExperiment(const Flags& f, Api& api) {
  const auto id = IntegerId(f.id);
  if (!id) return kExitUsage;
  auto original = GetExperiment(api, *id);
  if (!original) return api.exit_code;
  const v1::Experiment& experiment = original->message.experiment();
  if (!experiment.has_config_yaml()) {
    std::cerr << "sf: the master sent experiment " << f.id << " without its config\n";
    return kExitFailed;
  }
  std::string text = experiment.config_yaml();
  auto parsed = OverrideAndValidate(text, f.overrides, "experiment " + f.id);
  if (!parsed.ok()) return ConfigUsageError(parsed.status());
  v1::CreateExperimentRequest request;
  request.set_config_yaml(text);
  request.set_activate(!f.paused);
  request.set_workspace(f.workspace.empty() ? experiment.workspace() : f.workspace);
  request.set_context_of(
      *id);  // a user trial's code comes along: the master copies the original's context
  return SubmitExperiment(f, api, "CreateExperiment", request,
                          " (fork of experiment " + f.id + ")");
}

// `sf experiment continue ID --max-length N`.
int ContinueExperiment(const Flags& f, Api& api) {
  const auto id = IntegerId(f.id);
  if (!id) return kExitUsage;
  v1::ContinueExperimentRequest request;
  request.set_id(*id);
  request.set_max_length(f.max_length);
  return SubmitExperiment(
      f, api, "ContinueExperiment", request,
      " (continues experiment " + f.id + " to " + std::to_string(f.max_length) + " batches)");
}

int ListExperiments(const Flags& f, Api& api) {
  v1::GetExperimentsRequest request;
  request.set_limit(1000);
  auto r = api.Call<v1::GetExperimentsResponse>("GetExperiments", request);
  if (!r) return api.exit_code;
  if (f.json) {
    std::cout << r->json << "\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const v1::Experiment& e : r->message.experiments()) rows.push_back(ExperimentRow(e));
  PrintTable({"ID", "NAME", "STATE", "SEARCHER", "TRIALS", "BEST", "OWNER", "STARTED", "ENDED"},
             rows);
  return kExitOk;
}

// The experiment's reply with the trials' list added, as `describe --json` prints it.
std::string WithTrials(const std::string& experiment_json, const std::string& trials_json) {
  Value out = *Value::FromJson(experiment_json);
  auto trials = Value::FromJson(trials_json);
  const Value* list = trials.ok() ? trials->Find("trials") : nullptr;
  out.as_map()["trials"] = list ? *list : Value(Value::List{});
  return out.ToJson();
}

int DescribeExperiment(const Flags& f, Api& api) {
  const auto id = IntegerId(f.id);
  if (!id) return kExitUsage;
  auto r = GetExperiment(api, *id);
  if (!r) return api.exit_code;
  auto trials = GetTrials(api, *id);
  if (!trials) return api.exit_code;
  if (f.json) {
    std::cout << WithTrials(r->json, trials->json) << "\n";
    return kExitOk;
  }
  PrintTable({"ID", "NAME", "STATE", "SEARCHER", "TRIALS", "BEST", "OWNER", "STARTED", "ENDED"},
             {ExperimentRow(r->message.experiment())});
  std::cout << "\n";
  std::vector<std::vector<std::string>> rows;
  for (const v1::Trial& t : trials->message.trials()) {
    rows.push_back({std::to_string(t.id()), EnumText(t.state()), std::to_string(t.total_batches()),
                    std::to_string(t.restarts()),
                    NumberText(t.has_latest_validation_metric(), t.latest_validation_metric()),
                    NumberText(t.has_best_validation_metric(), t.best_validation_metric()),
                    t.has_hparams() ? StructJson(t.hparams()) : ""});
  }
  PrintTable({"TRIAL", "STATE", "BATCHES", "RESTARTS", "LATEST", "BEST", "HYPERPARAMETERS"}, rows);
  // Why the queued ones wait (the scheduler's words), one line each under the table.
  for (const v1::Trial& t : trials->message.trials()) {
    if (!t.pending_reason().empty())
      std::cout << "trial " << t.id() << " waits: " << t.pending_reason() << "\n";
  }
  return kExitOk;
}

// "kill" -> "Kill": the Api's methods are named for the verbs (KillExperiment, KillExperiments).
std::string MethodVerb(std::string verb) {
  verb[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(verb[0])));
  return verb;
}

// One experiment, `id` (digits, checked): kill, pause, activate, archive, unarchive
// (KillExperiment, ...) or delete (DeleteExperiment).
int ChangeExperiment(const std::string& verb, const std::string& id, const Flags& f, Api& api) {
  v1::ExperimentActionRequest request;
  request.set_id(std::stoll(id));
  if (verb == "delete") {
    auto r = api.Call<v1::DeleteExperimentResponse>("DeleteExperiment", request);
    if (!r) return api.exit_code;
    std::cout << (f.json ? r->json : "experiment " + id + ": deleted") << "\n";
    return kExitOk;
  }
  auto r = api.Call<v1::ExperimentActionResponse>(MethodVerb(verb) + "Experiment", request);
  if (!r) return api.exit_code;
  if (f.json) {
    std::cout << r->json << "\n";
  } else {
    std::cout << "experiment " << id << ": " << EnumText(r->message.experiment().state()) << "\n";
  }
  return kExitOk;
}

// The experiment states --state accepts: their names without the prefix, any case.
const std::vector<std::string> kExperimentStates = {"ACTIVE",   "PAUSED",   "STOPPING_COMPLETED",
                                                    "STOPPING_CANCELED", "STOPPING_ERROR",
                                                    "COMPLETED", "CANCELED", "ERROR"};

// kill, pause, activate, archive, unarchive, delete on several experiments (IDs, or a filter):
// KillExperiments, ..., one line per experiment. Exit 0 when every one succeeded, 2 when an id
// does not exist, else 1 when the master refused one (e.g. pausing a completed experiment).
int ChangeExperiments(const std::string& verb, const Flags& f, Api& api) {
  v1::BulkExperimentActionRequest request;
  if (!f.ids.empty()) {
    for (const std::string& id : f.ids) request.add_ids(std::stoll(id));  // digits, checked
  } else {
    v1::BulkExperimentFilter* filter = request.mutable_filter();
    for (const std::string& s : f.states) {
      v1::ExperimentState state;
      if (!v1::ExperimentState_Parse("EXPERIMENT_STATE_" + s, &state)) {
        std::cerr << "sf: --state: " << s << " is not an experiment state\n";
        return kExitUsage;
      }
      filter->add_states(state);
    }
    filter->set_name(f.name);
    filter->set_owner(f.owner);
    filter->set_include_archived(f.include_archived);
  }
  auto r = api.Call<v1::BulkExperimentActionResponse>(MethodVerb(verb) + "Experiments", request);
  if (!r) return api.exit_code;
  using Result = v1::BulkExperimentActionResult;
  const int exit_code = PrintResults(
      r->message.results(), r->json, f,
      [&](const Result& result) {
        return "experiment " + std::to_string(result.id()) + ": " +
               (verb == "delete" ? "deleted" : EnumText(result.state()));
      },
      [](const Result& result) {
        return "experiment " + std::to_string(result.id()) + ": " + result.error();
      });
  if (!f.json && r->message.results().empty()) std::cout << "no experiment matches\n";
  return exit_code;
}

// `sf experiment VERB`: one ID goes to the single-experiment method (KillExperiment, ...,
// DeleteExperiment), several IDs or a filter to the bulk one (KillExperiments, ...).
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
  return ChangeExperiment(verb, f.ids[0], f, api);
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
