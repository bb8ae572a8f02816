// `sf experiment|trial|agent|slot|checkpoint|master ...`: the cluster over its REST API.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include "cli/command.h"
#include "cli/http_client.h"
#include "cli/output.h"
#include "common/config/experiment_config.h"
#include "common/value.h"

namespace sf::cli {
namespace {

struct Flags {
  std::string master;
  bool json = false;
  bool follow = false;
  bool paused = false;
  std::string kind = "training";
  std::vector<std::string> overrides;
  std::vector<std::string> positional;
};

// Parses the flags shared by the cluster commands; unknown flags are usage errors.
Result<Flags> ParseFlags(const std::vector<std::string>& args) {
  Flags f;
  if (const char* m = std::getenv("SF_MASTER")) f.master = m;
  if (f.master.empty()) f.master = "http://127.0.0.1:8080";
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](const std::string& name) -> Result<std::string> {
      if (i + 1 >= args.size()) return InvalidArgument(name + " needs a value");
      return args[++i];
    };
    if (a == "--json") f.json = true;
    else if (a == "--follow" || a == "-f") f.follow = true;
    else if (a == "--paused") f.paused = true;
    else if (a == "--master" || a == "-m") {
      SF_ASSIGN_OR_RETURN(f.master, value(a));
    } else if (a.rfind("--master=", 0) == 0) f.master = a.substr(9);
    else if (a == "--config") {
      SF_ASSIGN_OR_RETURN(std::string o, value(a));
      f.overrides.push_back(o);
    } else if (a == "--kind") {
      SF_ASSIGN_OR_RETURN(f.kind, value(a));
      if (f.kind != "training" && f.kind != "validation") {
        return InvalidArgument("--kind must be training or validation");
      }
    } else if (a.size() > 1 && a[0] == '-') {
      return InvalidArgument("unknown flag " + a);
    } else {
      f.positional.push_back(a);
    }
  }
  return f;
}

std::string StateName(const Value* v, const std::string& prefix) {
  if (!v || !v->is_string()) return "";
  std::string s = v->as_string();
  return s.rfind(prefix, 0) == 0 ? s.substr(prefix.size()) : s;
}

std::string Str(const Value& obj, const std::string& key) {
  const Value* v = obj.Find(key);
  if (!v || v->is_null()) return "";
  if (v->is_string()) return v->as_string();
  if (v->is_double()) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.4g", v->as_double());
    return buf;
  }
  return v->ToDisplay();
}

// Calls the API; prints a clean error (exit 1 for server-side failures, 2 for bad input).
struct Api {
  HttpClient client;
  int exit_code = kExitOk;

  std::optional<Value> Call(const std::string& method, const std::string& path, const std::string& body = "") {
    auto r = method == "GET" ? client.Get(path) : client.Post(path, body);
    if (!r.ok()) {
      std::cerr << "sf: " << r.status().message() << "\n";
      exit_code = kExitFailed;
      return std::nullopt;
    }
    auto v = Value::FromJson(r->body);
    if (r->status != 200) {
      std::string msg = v.ok() && v->Find("message") ? v->Find("message")->as_string() : r->body;
      std::cerr << "sf: " << msg << "\n";
      if (v.ok() && v->Find("errors") && v->Find("errors")->is_list()) {
        for (const Value& e : v->Find("errors")->as_list()) {
          std::cerr << "  " << Str(e, "path") << ": " << Str(e, "message") << "\n";
        }
      }
      exit_code = (r->status == 400 || r->status == 404 || r->status == 409) ? kExitUsage : kExitFailed;
      return std::nullopt;
    }
    if (!v.ok()) {
      std::cerr << "sf: the master sent invalid JSON: " << v.status().message() << "\n";
      exit_code = kExitFailed;
      return std::nullopt;
    }
    return *v;
  }
};

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
Result<std::string> PrepareConfig(const std::string& file, const std::vector<std::string>& overrides) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return InvalidArgument("cannot read " + file);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const auto& o : overrides) {
    SF_ASSIGN_OR_RETURN(text, config::ApplyOverride(text, o));
  }
  config::ParseResult parsed = config::ParseExperimentConfig(text);
  if (!parsed.ok()) {
    std::string msg;
    for (const auto& e : parsed.errors) msg += e.ToStringWithLocation(file) + "\n";
    return InvalidArgument(msg);
  }
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
      return kExitFailed;
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

int ExperimentCommand(const std::string& verb, Flags& f, Api& api) {
  if (verb == "create") {
    if (f.positional.size() != 1) {
      std::cerr << "usage: sf experiment create FILE [--follow] [--paused] [--config KEY=VALUE]...\n";
      return kExitUsage;
    }
    auto text = PrepareConfig(f.positional[0], f.overrides);
    if (!text.ok()) {
      std::cerr << text.status().message();
      if (text.status().message().back() != '\n') std::cerr << "\n";
      return kExitUsage;
    }
    Value body(Value::Map{{"configYaml", *text}, {"activate", !f.paused}});
    auto r = api.Call("POST", "/api/v1/experiments", body.ToJson());
    if (!r) return api.exit_code;
    const Value& e = *r->Find("experiment");
    std::string id = Str(e, "id");
    if (f.json) std::cout << r->ToJson() << "\n";
    else std::cout << "created experiment " << id << "\n" << std::flush;
    return f.follow ? FollowExperiment(api, id) : kExitOk;
  }
  if (verb == "list") {
    auto r = api.Call("GET", "/api/v1/experiments?limit=1000");
    if (!r) return api.exit_code;
    if (f.json) {
      std::cout << r->ToJson() << "\n";
      return kExitOk;
    }
    std::vector<std::vector<std::string>> rows;
    for (const Value& e : r->Find("experiments")->as_list()) rows.push_back(ExperimentRow(e));
    PrintTable({"ID", "NAME", "STATE", "SEARCHER", "TRIALS", "BEST", "OWNER", "STARTED", "ENDED"}, rows);
    return kExitOk;
  }
  if (f.positional.size() != 1) {
    std::cerr << "usage: sf experiment " << verb << " ID\n";
    return kExitUsage;
  }
  const std::string& id = f.positional[0];
  if (verb == "describe") {
    auto r = api.Call("GET", "/api/v1/experiments/" + id);
    if (!r) return api.exit_code;
    auto trials = api.Call("GET", "/api/v1/experiments/" + id + "/trials");
    if (!trials) return api.exit_code;
    if (f.json) {
      Value out = *r;
      out.as_map()["trials"] = *trials->Find("trials");
      std::cout << out.ToJson() << "\n";
      return kExitOk;
    }
    const Value& e = *r->Find("experiment");
    PrintTable({"ID", "NAME", "STATE", "SEARCHER", "TRIALS", "BEST", "OWNER", "STARTED", "ENDED"}, {ExperimentRow(e)});
    std::cout << "\n";
    std::vector<std::vector<std::string>> rows;
    for (const Value& t : trials->Find("trials")->as_list()) {
      std::string hp = t.Find("hparams") ? t.Find("hparams")->ToJson() : "";
      rows.push_back({Str(t, "id"), StateName(t.Find("state"), "TRIAL_STATE_"), Str(t, "totalBatches"),
                      Str(t, "restarts"), Str(t, "latestValidationMetric"), Str(t, "bestValidationMetric"), hp});
    }
    PrintTable({"TRIAL", "STATE", "BATCHES", "RESTARTS", "LATEST", "BEST", "HYPERPARAMETERS"}, rows);
    return kExitOk;
  }
  if (verb == "kill" || verb == "pause" || verb == "activate" || verb == "archive") {
    auto r = api.Call("POST", "/api/v1/experiments/" + id + "/" + verb);
    if (!r) return api.exit_code;
    if (f.json) std::cout << r->ToJson() << "\n";
    else std::cout << "experiment " << id << ": " << StateName(r->Find("experiment")->Find("state"), "EXPERIMENT_STATE_") << "\n";
    return kExitOk;
  }
  std::cerr << "sf experiment: unknown command \"" << verb << "\"\n";
  return kExitUsage;
}

int TrialCommand(const std::string& verb, Flags& f, Api& api) {
  if (f.positional.size() != 1) {
    std::cerr << "usage: sf trial " << verb << (verb == "list" ? " EXPERIMENT_ID" : " TRIAL_ID") << "\n";
    return kExitUsage;
  }
  const std::string& id = f.positional[0];
  if (verb == "list") {
    auto r = api.Call("GET", "/api/v1/experiments/" + id + "/trials");
    if (!r) return api.exit_code;
    if (f.json) {
      std::cout << r->ToJson() << "\n";
      return kExitOk;
    }
    std::vector<std::vector<std::string>> rows;
    for (const Value& t : r->Find("trials")->as_list()) {
      rows.push_back({Str(t, "id"), StateName(t.Find("state"), "TRIAL_STATE_"), Str(t, "totalBatches"),
                      Str(t, "restarts"), Str(t, "bestValidationMetric"),
                      t.Find("hparams") ? t.Find("hparams")->ToJson() : ""});
    }
    PrintTable({"TRIAL", "STATE", "BATCHES", "RESTARTS", "BEST", "HYPERPARAMETERS"}, rows);
    return kExitOk;
  }
  if (verb == "describe") {
    auto r = api.Call("GET", "/api/v1/trials/" + id);
    if (!r) return api.exit_code;
    if (f.json) {
      std::cout << r->ToJson() << "\n";
      return kExitOk;
    }
    const Value& t = *r->Find("trial");
    for (const char* k : {"id", "experimentId", "state", "restarts", "totalBatches", "targetBatches",
                          "latestValidationMetric", "bestValidationMetric", "latestCheckpointUuid", "startTime",
                          "endTime", "error"}) {
      std::cout << k << ": " << Str(t, k) << "\n";
    }
    std::cout << "hparams: " << (t.Find("hparams") ? t.Find("hparams")->ToJson() : "{}") << "\n";
    return kExitOk;
  }
  if (verb == "logs") {
    if (f.follow) {
      Status st = api.client.Stream("/api/v1/trials/" + id + "/logs?follow=true",
                                    [](const std::string& event, const std::string& data) {
                                      if (event == "end") return false;
                                      auto v = Value::FromJson(data);
                                      if (v.ok()) std::cout << Str(*v, "message") << "\n" << std::flush;
                                      return true;
                                    });
      if (!st.ok()) {
        std::cerr << "sf: " << st.message() << "\n";
        return kExitFailed;
      }
      return kExitOk;
    }
    int64_t after = 0;
    while (true) {
      auto r = api.Call("GET", "/api/v1/trials/" + id + "/logs?limit=10000&afterId=" + std::to_string(after));
      if (!r) return api.exit_code;
      const auto& logs = r->Find("logs")->as_list();
      for (const Value& l : logs) {
        if (f.json) std::cout << l.ToJson() << "\n";
        else std::cout << Str(l, "message") << "\n";
        after = std::stoll(Str(l, "id"));
      }
      if (logs.size() < 10000) return kExitOk;
    }
  }
  if (verb == "metrics") {
    auto r = api.Call("GET", "/api/v1/trials/" + id + "/metrics?kind=" + f.kind);
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
  std::cerr << "sf trial: unknown command \"" << verb << "\"\n";
  return kExitUsage;
}

}  // namespace

int RunClusterCommand(const std::string& noun, const std::vector<std::string>& args) {
  if (args.empty() && noun != "master") {
    std::cerr << "usage: sf " << noun << " COMMAND ... (see sf --help)\n";
    return kExitUsage;
  }
  std::string verb = args.empty() ? "info" : args[0];
  auto flags = ParseFlags(std::vector<std::string>(args.begin() + (args.empty() ? 0 : 1), args.end()));
  if (!flags.ok()) {
    std::cerr << "sf " << noun << " " << verb << ": " << flags.status().message() << "\n";
    return kExitUsage;
  }
  auto client = HttpClient::Create(flags->master);
  if (!client.ok()) {
    std::cerr << "sf: " << client.status().message() << "\n";
    return kExitUsage;
  }
  Api api{*client};
  if (noun == "experiment" || noun == "e") return ExperimentCommand(verb, *flags, api);
  if (noun == "trial" || noun == "t") return TrialCommand(verb, *flags, api);
  if (noun == "agent" || noun == "slot") {
    if (verb != "list") {
      std::cerr << "usage: sf " << noun << " list\n";
      return kExitUsage;
    }
    auto r = api.Call("GET", "/api/v1/agents");
    if (!r) return api.exit_code;
    if (flags->json) {
      std::cout << r->ToJson() << "\n";
      return kExitOk;
    }
    std::vector<std::vector<std::string>> rows;
    for (const Value& a : r->Find("agents")->as_list()) {
      const auto& slots = a.Find("slots")->as_list();
      if (noun == "agent") {
        int busy = 0;
        for (const Value& s : slots) busy += Str(s, "trialId") != "0" && !Str(s, "trialId").empty();
        rows.push_back({Str(a, "id"), Str(a, "resourcePool"), Str(a, "connected"),
                        std::to_string(slots.size()), std::to_string(busy), Str(a, "lastHeartbeat")});
      } else {
        for (const Value& s : slots) {
          std::string trial = Str(s, "trialId");
          rows.push_back({Str(a, "id"), Str(s, "id"), StateName(s.Find("type"), "SLOT_TYPE_"), Str(s, "device"),
                          trial == "0" || trial.empty() ? "free" : "trial " + trial});
        }
      }
    }
    if (noun == "agent") PrintTable({"AGENT", "POOL", "CONNECTED", "SLOTS", "BUSY", "LAST HEARTBEAT"}, rows);
    else PrintTable({"AGENT", "SLOT", "TYPE", "DEVICE", "STATE"}, rows);
    return kExitOk;
  }
  if (noun == "checkpoint") {
    if (verb != "list" || flags->positional.size() != 1) {
      std::cerr << "usage: sf checkpoint list EXPERIMENT_ID\n";
      return kExitUsage;
    }
    auto r = api.Call("GET", "/api/v1/experiments/" + flags->positional[0] + "/checkpoints");
    if (!r) return api.exit_code;
    if (flags->json) {
      std::cout << r->ToJson() << "\n";
      return kExitOk;
    }
    std::vector<std::vector<std::string>> rows;
    for (const Value& c : r->Find("checkpoints")->as_list()) {
      rows.push_back({Str(c, "uuid"), Str(c, "trialId"), Str(c, "batches"), Str(c, "size"),
                      Str(c, "validationMetric"), Str(c, "path")});
    }
    PrintTable({"UUID", "TRIAL", "BATCHES", "SIZE", "METRIC", "PATH"}, rows);
    return kExitOk;
  }
  if (noun == "master") {
    if (verb != "info") {
      std::cerr << "usage: sf master info\n";
      return kExitUsage;
    }
    auto r = api.Call("GET", "/api/v1/master");
    if (!r) return api.exit_code;
    if (flags->json) {
      std::cout << r->ToJson() << "\n";
      return kExitOk;
    }
    for (const auto& [k, v] : r->as_map()) std::cout << k << ": " << Str(*r, k) << "\n";
    return kExitOk;
  }
  std::cerr << "sf: unknown command \"" << noun << "\"\n";
  return kExitUsage;
}

}  // namespace sf::cli
