// `sf experiment|trial|agent|slot|checkpoint|master ...`: the cluster over its REST API.
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <thread>

#include "cli/api_call.h"
#include "cli/cli_defaults.h"
#include "cli/command.h"
#include "cli/http_client.h"
#include "cli/output.h"
#include "common/command_line.h"
#include "common/config/experiment_config.h"
#include "common/value.h"

namespace sf::cli {
namespace {

// The values of a cluster command's flags and its one positional.
struct Flags {
  std::string master;   // --master; empty: $SF_MASTER, the defaults file, ... (cli/cli_defaults.h)
  std::string ca_file;  // --ca-file; empty: $SF_CA_FILE, the defaults file's, the system's CAs
  bool json = false;
  bool follow = false;
  bool paused = false;
  std::string kind = "training";
  std::vector<std::string> overrides;  // --config KEY=VALUE, in order
  std::string id;                      // ID, TRIAL_ID or EXPERIMENT_ID
  // Bulk experiment actions: the experiments, by id or by a filter.
  std::vector<std::string> ids;
  std::vector<std::string> states;     // --state ACTIVE (repeatable)
  std::string name, owner;             // --name, --owner
  bool include_archived = false;
  int64_t max_length = 0;              // experiment continue's --max-length
  std::string file;                    // experiment create's FILE
  int limit = 100;                     // audit list's --limit
  std::string actor;                   // audit list's --actor
  std::string workspace;               // experiment create's --workspace
};

std::string StateName(const Value* v, const std::string& prefix) {
  if (!v || !v->is_string()) return "";
  std::string s = v->as_string();
  return s.rfind(prefix, 0) == 0 ? s.substr(prefix.size()) : s;
}

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

Result<std::string> PrepareConfig(const std::string& file, const std::vector<std::string>& overrides) {
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
  return text;
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
  auto text = PrepareConfig(f.file, f.overrides);
  if (!text.ok()) return ConfigUsageError(text.status());
  return SubmitExperiment(f, api, "/api/v1/experiments",
                          Value(Value::Map{{"configYaml", *text}, {"activate", !f.paused}, {"workspace", f.workspace}}));
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
  return SubmitExperiment(f, api, "/api/v1/experiments",
                          Value(Value::Map{{"configYaml", text}, {"activate", !f.paused}, {"workspace", workspace}}),
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

// A bulk reply's {"results": [...]}: for each, `ok_line` on stdout when it succeeded, else "sf: "
// + `error_line` on stderr (the JSON instead with --json). Returns 2 when one was not found
// (code 5), else 1 when one failed, else 0.
int PrintResults(const Value& reply, const Flags& f, const std::function<std::string(const Value&)>& ok_line,
                 const std::function<std::string(const Value&)>& error_line) {
  if (f.json) std::cout << reply.ToJson() << "\n";
  int exit_code = kExitOk;
  const Value* results = reply.Find("results");
  for (const Value& result : results && results->is_list() ? results->as_list() : Value::List{}) {
    const Value* ok = result.Find("ok");
    if (ok && ok->is_bool() && ok->as_bool()) {
      if (!f.json) std::cout << ok_line(result) << "\n";
      continue;
    }
    exit_code = Str(result, "code") == "5" || exit_code == kExitUsage ? kExitUsage : kExitFailed;
    if (!f.json) std::cerr << "sf: " << error_line(result) << "\n";
  }
  return exit_code;
}

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

int ListTrials(const Flags& f, Api& api) {
  auto r = api.Call("GET", "/api/v1/experiments/" + f.id + "/trials");
  if (!r) return api.exit_code;
  if (f.json) {
    std::cout << r->ToJson() << "\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const Value& t : r->Find("trials")->as_list()) {
    rows.push_back({Str(t, "id"), StateName(t.Find("state"), "TRIAL_STATE_"),
                    Str(t, "totalBatches"), Str(t, "restarts"), Str(t, "bestValidationMetric"),
                    t.Find("hparams") ? t.Find("hparams")->ToJson() : ""});
  }
  PrintTable({"TRIAL", "STATE", "BATCHES", "RESTARTS", "BEST", "HYPERPARAMETERS"}, rows);
  return kExitOk;
}

int DescribeTrial(const Flags& f, Api& api) {
  auto r = api.Call("GET", "/api/v1/trials/" + f.id);
  if (!r) return api.exit_code;
  if (f.json) {
    std::cout << r->ToJson() << "\n";
    return kExitOk;
  }
  const Value& t = *r->Find("trial");
  for (const char* k : {"id", "experimentId", "state", "pendingReason", "restarts", "totalBatches", "targetBatches",
                        "latestValidationMetric", "bestValidationMetric", "latestCheckpointUuid",
                        "startTime", "endTime", "error"}) {
    std::cout << k << ": " << Str(t, k) << "\n";
  }
  std::cout << "hparams: " << (t.Find("hparams") ? t.Find("hparams")->ToJson() : "{}") << "\n";
  return kExitOk;
}

int TrialLogs(const Flags& f, Api& api) {
  if (f.follow) {
    // The same answer for an unknown trial as without -f (exit 2, the master's message).
    if (!api.Call("GET", "/api/v1/trials/" + f.id)) return api.exit_code;
    bool ended = false, malformed = false;
    Status st = api.client.Stream("/api/v1/trials/" + f.id + "/logs?follow=true",
                                  [&](const std::string& event, const std::string& data) {
                                    if (event == "end") {
                                      ended = true;
                                      return false;
                                    }
                                    auto v = Value::FromJson(data);
                                    if (!v.ok()) {
                                      std::cerr << "sf: the master sent a log event that is not JSON: "
                                                << v.status().message() << "\n";
                                      malformed = true;
                                      return false;
                                    }
                                    std::cout << Str(*v, "message") << "\n" << std::flush;
                                    return true;
                                  });
    if (!st.ok()) {
      std::cerr << "sf: " << st.message() << "\n";
      return kExitFailed;
    }
    if (malformed) return kExitFailed;
    if (!ended) {
      std::cerr << "sf: the master closed the log stream of trial " << f.id << " before the trial ended\n";
      return kExitFailed;
    }
    return kExitOk;
  }
  int64_t after = 0;
  while (true) {
    auto r = api.Call(
        "GET", "/api/v1/trials/" + f.id + "/logs?limit=10000&afterId=" + std::to_string(after));
    if (!r) return api.exit_code;
    const auto& logs = r->Find("logs")->as_list();
    for (const Value& l : logs) {
      std::cout << (f.json ? l.ToJson() : Str(l, "message")) << "\n";
      after = std::stoll(Str(l, "id"));
    }
    if (logs.size() < 10000) return kExitOk;
  }
}

int TrialMetrics(const Flags& f, Api& api) {
  auto r = api.Call("GET", "/api/v1/trials/" + f.id + "/metrics?kind=" + f.kind);
  if (!r) return api.exit_code;
  if (f.json) {
    std::cout << r->ToJson() << "\n";
    return kExitOk;
  }
  std::vector<std::string> keys;
  for (const Value& m : r->Find("metrics")->as_list()) {
    if (const Value* vals = m.Find("values"); vals && vals->is_map()) {
      for (const auto& [k, v] : vals->as_map()) {
        if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
      }
    }
  }
  std::vector<std::string> header = {"BATCHES"};
  for (const auto& k : keys) header.push_back(k);
  std::vector<std::vector<std::string>> rows;
  for (const Value& m : r->Find("metrics")->as_list()) {
    std::vector<std::string> row = {Str(m, "batches")};
    for (const auto& k : keys) row.push_back(m.Find("values") ? Str(*m.Find("values"), k) : "");
    rows.push_back(row);
  }
  PrintTable(header, rows);
  return kExitOk;
}

// Bytes (a protobuf int64, a JSON string) as GiB with one decimal: "79.6".
std::string Gibibytes(const std::string& bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f",
                std::strtod(bytes.c_str(), nullptr) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

// One row per GPU slot: agent, slot, GPU name, memory used/total, utilisation, what runs on it.
// Usage the master has no current sample for reads "-".
std::vector<std::vector<std::string>> GpuRows(const Value& agents) {
  std::vector<std::vector<std::string>> rows;
  for (const Value& a : agents.as_list()) {
    const Value* slots = a.Find("slots");
    if (!slots || !slots->is_list()) continue;
    for (const Value& s : slots->as_list()) {
      if (Str(s, "type") != "SLOT_TYPE_CUDA") continue;
      const Value* usage = s.Find("usage");
      const bool sampled = usage && usage->is_map();
      const std::string total = Str(s, "memoryTotalBytes");
      const std::string used = sampled ? Str(*usage, "memoryUsedBytes") : "";
      std::string memory = (sampled ? Gibibytes(used.empty() ? "0" : used) : "-") + "/" +
                           (total.empty() ? "-" : Gibibytes(total)) + " GiB";
      std::string util = Str(sampled ? *usage : s, "utilizationPercent");
      std::string trial = Str(s, "trialId");
      rows.push_back({Str(a, "id"), Str(s, "id"), Str(s, "device"), memory,
                      sampled ? (util.empty() ? "0" : util) + "%" : "-",
                      trial == "0" || trial.empty() ? "free" : "trial " + trial});
    }
  }
  return rows;
}

// `agent list` (one row per agent, then one per GPU slot, if any) and `slot list` (one row per
// slot) read the same listing.
int ListAgentsOrSlots(bool slots_view, const Flags& f, Api& api) {
  auto r = api.Call("GET", "/api/v1/agents");
  if (!r) return api.exit_code;
  if (f.json) {
    std::cout << r->ToJson() << "\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const Value& a : r->Find("agents")->as_list()) {
    const auto& slots = a.Find("slots")->as_list();
    if (!slots_view) {
      int busy = 0;
      for (const Value& s : slots) busy += Str(s, "trialId") != "0" && !Str(s, "trialId").empty();
      rows.push_back({Str(a, "id"), Str(a, "resourcePool"), Str(a, "connected"),
                      std::to_string(slots.size()), std::to_string(busy), Str(a, "lastHeartbeat")});
    } else {
      for (const Value& s : slots) {
        std::string trial = Str(s, "trialId");
        rows.push_back({Str(a, "id"), Str(s, "id"), StateName(s.Find("type"), "SLOT_TYPE_"),
                        Str(s, "device"),
                        trial == "0" || trial.empty() ? "free" : "trial " + trial});
      }
    }
  }
  if (slots_view) {
    PrintTable({"AGENT", "SLOT", "TYPE", "DEVICE", "STATE"}, rows);
  } else {
    PrintTable({"AGENT", "POOL", "CONNECTED", "SLOTS", "BUSY", "LAST HEARTBEAT"}, rows);
    std::vector<std::vector<std::string>> gpus = GpuRows(*r->Find("agents"));
    if (!gpus.empty()) {
      std::cout << "\n";
      PrintTable({"AGENT", "GPU SLOT", "DEVICE", "MEMORY USED/TOTAL", "UTIL", "STATE"}, gpus);
    }
  }
  return kExitOk;
}

int ListCheckpoints(const Flags& f, Api& api) {
  auto r = api.Call("GET", "/api/v1/experiments/" + f.id + "/checkpoints");
  if (!r) return api.exit_code;
  if (f.json) {
    std::cout << r->ToJson() << "\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const Value& c : r->Find("checkpoints")->as_list()) {
    rows.push_back({Str(c, "uuid"), Str(c, "trialId"), Str(c, "batches"), Str(c, "size"),
                    Str(c, "validationMetric"), Str(c, "state"), Str(c, "path")});
  }
  PrintTable({"UUID", "TRIAL", "BATCHES", "SIZE", "METRIC", "STATE", "PATH"}, rows);
  return kExitOk;
}

// `sf checkpoint delete UUID...`: POST /api/v1/checkpoints/delete, one line per checkpoint; exit 2
// when a uuid does not exist, else 1 when one was refused, else 0.
int DeleteCheckpoints(const Flags& f, Api& api) {
  Value::List uuids;
  for (const std::string& uuid : f.ids) uuids.push_back(Value(uuid));
  auto r = api.Call("POST", "/api/v1/checkpoints/delete", Value(Value::Map{{"uuids", Value(std::move(uuids))}}).ToJson());
  if (!r) return api.exit_code;
  return PrintResults(
      *r, f, [](const Value& result) { return "checkpoint " + Str(result, "uuid") + ": deleted"; },
      [](const Value& result) { return Str(result, "error"); });
}

int ListResourcePools(const Flags& f, Api& api) {
  auto r = api.Call("GET", "/api/v1/resource-pools");
  if (!r) return api.exit_code;
  if (f.json) {
    std::cout << r->ToJson() << "\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  const Value* pools = r->Find("resourcePools");
  for (const Value& p : pools && pools->is_list() ? pools->as_list() : Value::List{}) {
    rows.push_back({Str(p, "name"), Str(p, "scheduler"), Str(p, "agents"), Str(p, "totalSlots"),
                    Str(p, "usedSlots"), Str(p, "runningTrials"), Str(p, "queuedTrials"), Str(p, "queuedSlots")});
  }
  PrintTable({"POOL", "SCHEDULER", "AGENTS", "SLOTS", "USED", "RUNNING", "QUEUED", "QUEUED SLOTS"}, rows);
  return kExitOk;
}

// Percent-encodes a query parameter's value (RFC 3986 unreserved characters stay).
std::string QueryValue(const std::string& v) {
  std::string out;
  for (unsigned char c : v) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

int ListAudit(const Flags& f, Api& api) {
  std::string path = "/api/v1/audit?limit=" + std::to_string(f.limit);
  if (!f.actor.empty()) path += "&actor=" + QueryValue(f.actor);
  auto r = api.Call("GET", path);
  if (!r) return api.exit_code;
  if (f.json) {
    std::cout << r->ToJson() << "\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  const Value* entries = r->Find("entries");
  for (const Value& e : entries && entries->is_list() ? entries->as_list() : Value::List{}) {
    rows.push_back({Str(e, "time"), Str(e, "actor"), Str(e, "peer"), Str(e, "method") + " " + Str(e, "path"),
                    Str(e, "status")});
  }
  PrintTable({"TIME", "WHO", "FROM", "WHAT", "STATUS"}, rows);
  return kExitOk;
}

int MasterInfo(const Flags& f, Api& api) {
  auto r = api.Call("GET", "/api/v1/master");
  if (!r) return api.exit_code;
  if (f.json) {
    std::cout << r->ToJson() << "\n";
    return kExitOk;
  }
  for (const auto& [k, v] : r->as_map()) std::cout << k << ": " << Str(*r, k) << "\n";
  return kExitOk;
}

using ClusterRun = std::function<int(const Flags&, Api&)>;

// Connects to the master (--master, $SF_MASTER, the defaults file: cli/cli_defaults.h) and runs
// the command; a malformed URL or defaults file is bad usage.
int RunAgainstMaster(const Flags& f, const ClusterRun& run) {
  Result<Api> api = ConnectToMaster(f.master, f.ca_file);
  if (!api.ok()) {
    std::cerr << "sf: " << api.status().message() << "\n";
    return kExitUsage;
  }
  return run(f, *api);
}

// A command under `parent` that talks to the master: it takes -m/--master and --json and, when
// selected, runs `run`. Its positional and other flags are the caller's to add, into `flags`.
struct ClusterCommand {
  CLI::App* app;
  std::shared_ptr<Flags> flags;

  // The command's one positional (ID, TRIAL_ID, EXPERIMENT_ID), required.
  ClusterCommand& Id(const std::string& name, const std::string& description) {
    app->add_option(name, flags->id, description)->type_name("")->required();
    return *this;
  }
};

ClusterCommand AddCommand(CLI::App* parent, const std::string& name, const std::string& description,
                          CommandAction& action, ClusterRun run) {
  ClusterCommand command{parent->add_subcommand(name, description), std::make_shared<Flags>()};
  AddMasterOptions(command.app, &command.flags->master, &command.flags->ca_file, &command.flags->json);
  OnSelected(command.app, action, [flags = command.flags, run = std::move(run)] {
    return RunAgainstMaster(*flags, run);
  });
  return command;
}

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
  create.app
      ->add_option("--config", create.flags->overrides,
                   "override one field of the YAML (e.g. searcher.max_trials=4); repeatable")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false)  // one KEY=VALUE per --config, so FILE may follow it
      ->default_str("")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);

  ClusterCommand fork = AddCommand(experiment, "fork",
                                   "create a new experiment from an existing one's config, with overrides",
                                   action, ForkExperiment);
  fork.Id("ID", "the experiment to copy");
  fork.app->add_flag("-f,--follow", fork.flags->follow,
                     "print trial progress until the new experiment ends; exit 1 unless it COMPLETED");
  fork.app->add_flag("--paused", fork.flags->paused, "create it paused (start it with `sf experiment activate`)");
  fork.app->add_option("-w,--workspace", fork.flags->workspace,
                       "the workspace it belongs to (default: the original's; you must be an editor there)");
  fork.app
      ->add_option("--config", fork.flags->overrides,
                   "override one field of the config (e.g. searcher.max_length.batches=5000); repeatable")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false)
      ->default_str("")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);

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

void AddTrialCommands(CLI::App& sf, CommandAction& action) {
  CLI::App* trial = sf.add_subcommand("trial", "inspect trials: state, logs, metrics");
  trial->alias("t");
  trial->require_subcommand(1);

  AddCommand(trial, "list", "list an experiment's trials", action, ListTrials)
      .Id("EXPERIMENT_ID", "the experiment's id");
  AddCommand(trial, "describe", "show one trial", action, DescribeTrial)
      .Id("TRIAL_ID", "the trial's id");
  ClusterCommand logs = AddCommand(trial, "logs", "print a trial's logs", action, TrialLogs);
  logs.Id("TRIAL_ID", "the trial's id");
  logs.app->add_flag("-f,--follow", logs.flags->follow,
                     "keep printing new lines until the trial ends");
  ClusterCommand metrics = AddCommand(
      trial, "metrics", "print a trial's metrics, one row per report", action, TrialMetrics);
  metrics.Id("TRIAL_ID", "the trial's id");
  metrics.app->add_option("--kind", metrics.flags->kind, "which metrics: training or validation")
      ->type_name("KIND")
      ->check(CLI::IsMember({"training", "validation"}))
      ->capture_default_str();
}

}  // namespace

void AddClusterCommands(CLI::App& sf, CommandAction& action) {
  AddExperimentCommands(sf, action);
  AddTrialCommands(sf, action);

  CLI::App* agent = sf.add_subcommand("agent", "the agents connected to the master");
  agent->require_subcommand(1);
  AddCommand(agent, "list",
             "list agents, their slots and how many are busy, then each GPU slot: device, "
             "memory used/total, utilisation (NVML, as the agent's last heartbeat reported it)",
             action, [](const Flags& f, Api& api) { return ListAgentsOrSlots(false, f, api); });
  for (const char* what : {"revoke", "restore"}) {
    AddCommand(agent, what,
               std::string(what) == "revoke"
                   ? "shut one agent out (admins): refused even with the join token, disconnected if connected"
                   : "let a revoked agent join again (admins)",
               action,
               [w = std::string(what)](const Flags& f, Api& api) {
                 auto r = api.Call("POST", "/api/v1/agents/" + QueryValue(f.id) + "/" + w);
                 if (!r) return api.exit_code;
                 std::cout << (f.json ? r->ToJson() : "agent " + f.id + (w == "revoke" ? " revoked" : " restored"))
                           << "\n";
                 return kExitOk;
               })
        .Id("AGENT_ID", "the agent's id (sf agent list)");
  }

  CLI::App* slot = sf.add_subcommand("slot", "the agents' slots");
  slot->require_subcommand(1);
  AddCommand(slot, "list", "list every agent's slots and the trial on each", action,
             [](const Flags& f, Api& api) { return ListAgentsOrSlots(true, f, api); });

  CLI::App* pool = sf.add_subcommand("resource-pool", "the resource pools agents bring slots into");
  pool->require_subcommand(1);
  AddCommand(pool, "list", "list pools: scheduler, agents, slots, slots in use, running and queued trials",
             action, ListResourcePools);

  CLI::App* audit = sf.add_subcommand("audit", "the master's record of every change made through its API");
  audit->require_subcommand(1);
  ClusterCommand audit_list =
      AddCommand(audit, "list", "list recorded changes, newest first: when, who, from where, what, status", action,
                 ListAudit);
  audit_list.app->add_option("--limit", audit_list.flags->limit, "at most this many (1-1000, default 100)")
      ->check(CLI::Range(1, 1000));
  audit_list.app->add_option("--actor", audit_list.flags->actor, "only changes by this user");

  CLI::App* checkpoint = sf.add_subcommand("checkpoint", "an experiment's checkpoints");
  checkpoint->require_subcommand(1);
  AddCommand(checkpoint, "list", "list an experiment's checkpoints", action, ListCheckpoints)
      .Id("EXPERIMENT_ID", "the experiment's id");
  ClusterCommand delete_checkpoints = AddCommand(
      checkpoint, "delete", "delete checkpoints now: their files, and their state becomes DELETED", action,
      DeleteCheckpoints);
  delete_checkpoints.app->add_option("UUID", delete_checkpoints.flags->ids, "the checkpoints' uuids")
      ->type_name("")
      ->required();

  CLI::App* master =
      sf.add_subcommand("master", "the master itself (`sf master` alone is `sf master info`)");
  master->require_subcommand(0, 1);
  ClusterCommand info = AddCommand(master, "info", "show the master's version, id and slot counts",
                                   action, MasterInfo);
  // Subcommands' callbacks run before their parent's: `info` has had its say by now.
  master->callback([master, flags = info.flags, &action] {
    if (master->get_subcommands().empty()) {
      action = [flags] { return RunAgainstMaster(*flags, MasterInfo); };
    }
  });
}

}  // namespace sf::cli
