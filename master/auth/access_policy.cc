#include "master/auth/access_policy.h"

#include <sstream>

#include "common/utf8.h"
#include "master/db/model_store.h"
#include "master/db/pg_array.h"

namespace sf::master {

Status NoCredentials() {
  return Unauthenticated("log in first: no credentials (Authorization: Bearer TOKEN)");
}

const char* NeedName(Need need) {
  switch (need) {
    case Need::kPublic:
      return "public";
    case Need::kSignedIn:
      return "signed-in";
    case Need::kCreator:
      return "creator";
    case Need::kExperiment:
      return "experiment";
    case Need::kExperiments:
      return "experiments";
    case Need::kCheckpoint:
      return "checkpoint";
    case Need::kSelf:
      return "self";
    case Need::kWorkspace:
      return "workspace";
    case Need::kAdmin:
      return "admin";
    case Need::kModel:
      return "model";
    case Need::kTask:
      return "task";
  }
  return "?";
}

std::optional<Need> NeedFromProto(steadfast::v1::AccessNeed need) {
  namespace v1 = steadfast::v1;
  switch (need) {
    case v1::ACCESS_NEED_PUBLIC: return Need::kPublic;
    case v1::ACCESS_NEED_SIGNED_IN: return Need::kSignedIn;
    case v1::ACCESS_NEED_CREATOR: return Need::kCreator;
    case v1::ACCESS_NEED_EXPERIMENT: return Need::kExperiment;
    case v1::ACCESS_NEED_EXPERIMENTS: return Need::kExperiments;
    case v1::ACCESS_NEED_CHECKPOINT: return Need::kCheckpoint;
    case v1::ACCESS_NEED_SELF: return Need::kSelf;
    case v1::ACCESS_NEED_WORKSPACE: return Need::kWorkspace;
    case v1::ACCESS_NEED_ADMIN: return Need::kAdmin;
    case v1::ACCESS_NEED_MODEL: return Need::kModel;
    case v1::ACCESS_NEED_TASK: return Need::kTask;
    default: return std::nullopt;
  }
}

const std::vector<RestRule>& RestPolicy() {
  static const std::vector<RestRule> kRules = [] {
    // The routes that are not Api methods: the HTTP server's own.
    std::vector<RestRule> r = {
        {"GET", "/health", Need::kPublic, "check health"},
        {"GET", "/api/v1/openapi.json", Need::kPublic, "read the API description"},
    };
    // Every Api method on REST, as its options declare it.
    for (const ApiRoute& route : ApiRoutes()) {
      if (!route.ok || route.http_method.empty()) continue;
      r.push_back({route.http_method, route.path, *NeedFromProto(route.need), route.action, &route});
    }
    return r;
  }();
  return kRules;
}

const std::map<std::string, std::pair<Need, std::string>>& GrpcPolicy() {
  static const std::map<std::string, std::pair<Need, std::string>> kMethods = [] {
    std::map<std::string, std::pair<Need, std::string>> m;
    for (const ApiRoute& route : ApiRoutes()) {
      if (route.ok) m[route.method->name()] = {*NeedFromProto(route.need), route.action};
    }
    return m;
  }();
  return kMethods;
}

namespace {

std::vector<std::string_view> Segments(std::string_view path) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    out.push_back(path.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

// A rule's route split once into segments; `param[i]` names segment i's parameter ("" for a
// literal segment).
struct CompiledRule {
  const RestRule* rule;
  std::vector<std::string> segments, param;
};

// Every rule, compiled once, literal routes first: "/api/v1/experiments/kill" is the bulk
// kill, not the experiment with id "kill".
const std::vector<CompiledRule>& CompiledRules() {
  static const std::vector<CompiledRule> kCompiled = [] {
    std::vector<CompiledRule> out;
    for (int pass = 0; pass < 2; ++pass) {
      for (const RestRule& rule : RestPolicy()) {
        if ((rule.route.find('{') != std::string::npos) != (pass == 1)) continue;
        CompiledRule c{&rule, {}, {}};
        for (std::string_view seg : Segments(rule.route)) {
          const bool templ = seg.size() > 2 && seg.front() == '{' && seg.back() == '}';
          c.segments.emplace_back(seg);
          c.param.emplace_back(templ ? seg.substr(1, seg.size() - 2) : std::string_view());
        }
        out.push_back(std::move(c));
      }
    }
    return out;
  }();
  return kCompiled;
}

bool Matches(const CompiledRule& c, const std::vector<std::string_view>& segs) {
  if (c.segments.size() != segs.size()) return false;
  for (size_t i = 0; i < segs.size(); ++i) {
    if (c.param[i].empty() ? c.segments[i] != segs[i] : segs[i].empty()) return false;
  }
  return true;
}

}  // namespace

std::string AllowedMethods(const std::string& path) {
  std::string out;
  for (const char* method : {"GET", "POST", "PUT", "DELETE"}) {
    if (MatchRest(method, path)) out += (out.empty() ? "" : ", ") + std::string(method);
  }
  return out;
}

std::optional<RestMatch> MatchRest(std::string_view method, const std::string& path,
                                   bool* path_known) {
  if (path_known) *path_known = false;
  const std::vector<std::string_view> segs = Segments(path);
  for (const CompiledRule& c : CompiledRules()) {
    if (!Matches(c, segs)) continue;
    if (c.rule->method != method) {
      if (path_known) *path_known = true;
      continue;
    }
    RestMatch m;
    m.rule = c.rule;
    for (size_t i = 0; i < segs.size(); ++i) {
      if (!c.param[i].empty()) m.params[c.param[i]] = std::string(segs[i]);
    }
    return m;
  }
  return std::nullopt;
}

Status Authorizer::Check(const Principal& p, Need need, const std::string& action,
                         const Resource& r) {
  if (need == Need::kPublic) return Status::Ok();
  if (!p.authenticated()) return NoCredentials();
  switch (need) {
    case Need::kPublic:
    case Need::kSignedIn:
      return Status::Ok();
    case Need::kCreator:
      if (p.role >= Role::kUser) return Status::Ok();
      return PermissionDenied("user " + p.username + " may not " + action + ": role " + RoleName(p.role) +
                              " only reads");
    case Need::kExperiments:
      if (p.role >= Role::kUser) return Status::Ok();
      return PermissionDenied("user " + p.username + " may not " + action + " experiments: role " +
                              RoleName(p.role) + " only reads");
    case Need::kExperiment:
      return MayActOnExperiment(p, r.experiment_id, action);
    case Need::kCheckpoint:
      return MayActOnCheckpoint(p, r.checkpoint_uuid, action);
    case Need::kSelf:
      if (p.role == Role::kAdmin || p.username == r.username) return Status::Ok();
      return PermissionDenied("user " + p.username + " may not " + action + " user " +
                              ReplaceInvalidUtf8(r.username) + ": only that user or an admin may");
    case Need::kWorkspace:
      return MayManageWorkspace(p, r.workspace);
    case Need::kAdmin:
      if (p.role == Role::kAdmin) return Status::Ok();
      return PermissionDenied("user " + p.username + " may not " + action + ": admins only");
    case Need::kModel:
      return MayActOnModel(p, r.model, action);
    case Need::kTask:
      return MayActOnTask(p, r.task_id, action);
  }
  return PermissionDenied("no access rule");
}

namespace {


}  // namespace

Result<std::map<int64_t, Status>> Authorizer::RefusedExperiments(const Principal& p,
                                                                 const std::vector<int64_t>& ids,
                                                                 const std::string& action) {
  std::map<int64_t, Status> refused;
  if (!p.authenticated()) {
    for (int64_t id : ids) refused[id] = NoCredentials();
    return refused;
  }
  if (p.role == Role::kAdmin || ids.empty()) return refused;
  auto who = [&](int64_t id) {
    return "user " + p.username + " may not " + action + " experiment " + std::to_string(id);
  };
  if (p.role < Role::kUser) {
    for (int64_t id : ids) refused[id] = PermissionDenied(who(id) + ": role viewer only reads");
    return refused;
  }
  std::string array = "{";
  for (int64_t id : ids) array += (array.size() > 1 ? "," : "") + std::to_string(id);
  array += "}";
  // One query for all: each experiment's owner, workspace and the caller's role there. An id
  // that does not exist is not refused (the handler answers its NOT_FOUND).
  Status st = db_->Transact("experiment access", [&](pqxx::work& tx) {
    pqxx::result r = tx.exec_params(
        "SELECT e.id, e.owner, w.name, COALESCE(m.role, '') FROM experiments e "
        "JOIN workspaces w ON w.id = e.workspace_id "
        "LEFT JOIN workspace_members m ON m.workspace_id = e.workspace_id AND m.user_id = $2 "
        "WHERE e.id = ANY($1::bigint[])",
        array, p.user_id);
    for (const auto& row : r) {
      const int64_t id = row[0].as<int64_t>();
      const std::string owner = row[1].as<std::string>(), ws_role = row[3].as<std::string>();
      if (owner == p.username || ws_role == "editor" || ws_role == "admin") continue;
      refused[id] = PermissionDenied(who(id) + ": it belongs to " +
                                     (owner.empty() ? "nobody" : owner) + " and " + p.username +
                                     " is not an editor of workspace " + row[2].as<std::string>());
    }
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return refused;
}

Status Authorizer::MayActOnExperiment(const Principal& p, int64_t experiment_id,
                                      const std::string& action) {
  SF_ASSIGN_OR_RETURN(auto refused, RefusedExperiments(p, {experiment_id}, action));
  return refused.empty() ? Status::Ok() : refused.begin()->second;
}

Status Authorizer::MayActOnTask(const Principal& p, int64_t task_id, const std::string& action) {
  if (!p.authenticated()) return NoCredentials();
  if (p.role == Role::kAdmin) return Status::Ok();
  const std::string who = "user " + p.username + " may not " + action + " task " + std::to_string(task_id);
  if (p.role < Role::kUser) return PermissionDenied(who + ": role viewer only reads");
  Status refused = Status::Ok();
  SF_RETURN_IF_ERROR(db_->Transact("task access", [&](pqxx::work& tx) {
    pqxx::result r = tx.exec_params(
        "SELECT t.owner, w.name, COALESCE(m.role, '') FROM tasks t JOIN workspaces w ON w.id = t.workspace_id "
        "LEFT JOIN workspace_members m ON m.workspace_id = t.workspace_id AND m.user_id = $2 WHERE t.id = $1",
        task_id, p.user_id);
    if (r.empty()) return Status::Ok();  // the handler answers its NOT_FOUND
    const std::string owner = r[0][0].as<std::string>(), ws_role = r[0][2].as<std::string>();
    if (owner == p.username || ws_role == "editor" || ws_role == "admin") return Status::Ok();
    refused = PermissionDenied(who + ": it belongs to " + (owner.empty() ? "nobody" : owner) + " and " + p.username +
                               " is not an editor of workspace " + r[0][1].as<std::string>());
    return Status::Ok();
  }));
  return refused;
}

Result<std::map<std::string, Status>> Authorizer::RefusedCheckpoints(
    const Principal& p, const std::vector<std::string>& uuids, const std::string& action) {
  std::map<std::string, Status> refused;
  if (p.authenticated() && p.role == Role::kAdmin) return refused;
  // The checkpoints' experiments (one query); a uuid that is not text or not stored is left to
  // the handler, which refuses or answers NOT_FOUND for it.
  std::vector<std::string> texts;
  for (const std::string& uuid : uuids) {
    if (IsText(uuid)) texts.push_back(uuid);
  }
  std::map<std::string, int64_t> experiment_of;
  if (p.authenticated() && !texts.empty()) {
    Status st = db_->Transact("checkpoint access", [&](pqxx::work& tx) {
      pqxx::result r = tx.exec_params(
          "SELECT c.uuid, t.experiment_id FROM checkpoints c JOIN trials t ON t.id = c.trial_id "
          "WHERE c.uuid = ANY($1::text[])",
          TextArray(texts));
      for (const auto& row : r) experiment_of[row[0].as<std::string>()] = row[1].as<int64_t>();
      return Status::Ok();
    });
    if (!st.ok()) return st;
  }
  std::vector<int64_t> ids;
  for (const auto& [uuid, id] : experiment_of) ids.push_back(id);
  SF_ASSIGN_OR_RETURN(auto experiments, RefusedExperiments(p, ids, action));
  for (const std::string& uuid : uuids) {
    if (p.authenticated() && !IsText(uuid)) continue;
    auto it = experiment_of.find(uuid);
    if (it != experiment_of.end()) {
      if (auto r = experiments.find(it->second); r != experiments.end()) refused[uuid] = r->second;
    } else if (!p.authenticated()) {
      refused[uuid] = NoCredentials();
    } else if (p.role < Role::kUser) {
      refused[uuid] = PermissionDenied("user " + p.username + " may not " + action +
                                       " experiments: role viewer only reads");
    }
  }
  return refused;
}

Status Authorizer::MayActOnCheckpoint(const Principal& p, const std::string& uuid,
                                      const std::string& action) {
  SF_ASSIGN_OR_RETURN(auto refused, RefusedCheckpoints(p, {uuid}, action));
  return refused.empty() ? Status::Ok() : refused.begin()->second;
}

Status Authorizer::MayActOnModel(const Principal& p, const std::string& model, const std::string& action) {
  if (!p.authenticated()) return NoCredentials();
  if (p.role == Role::kAdmin) return Status::Ok();
  const std::string who = "user " + p.username + " may not " + action + " model \"" + ReplaceInvalidUtf8(model) + "\"";
  if (p.role < Role::kUser) return PermissionDenied(who + ": role viewer only reads");
  if (!IsText(model)) return Status::Ok();  // the handler refuses it
  SF_ASSIGN_OR_RETURN(std::optional<ModelOwnership> m, ModelStore(db_).Ownership(model, p.user_id));
  if (!m || m->owner == p.username || m->caller_workspace_role == "editor" || m->caller_workspace_role == "admin") {
    return Status::Ok();
  }
  return PermissionDenied(who + ": it belongs to " + (m->owner.empty() ? "nobody" : m->owner) + " and " + p.username +
                          " is not an editor of workspace " + m->workspace);
}

Status Authorizer::MayCreateIn(const Principal& p, int64_t workspace_id,
                               const std::string& workspace, const std::string& what) {
  if (!p.authenticated()) return NoCredentials();
  if (p.role == Role::kAdmin) return Status::Ok();
  if (p.role < Role::kUser) {
    return PermissionDenied("user " + p.username + " may not create " + what + ": role viewer only reads");
  }
  if (workspace_id == Accounts::kDefaultWorkspace) return Status::Ok();
  SF_ASSIGN_OR_RETURN(std::string role, accounts_->WorkspaceRole(p.user_id, workspace_id));
  if (role == "editor" || role == "admin") return Status::Ok();
  return PermissionDenied("user " + p.username + " may not create " + what + " in workspace " +
                          workspace + ": not an editor there");
}

Result<int64_t> Authorizer::WorkspaceForNewExperiment(const Principal& p,
                                                      const std::string& workspace, const std::string& what) {
  int64_t id = Accounts::kDefaultWorkspace;
  if (!workspace.empty() && workspace != "Uncategorized") {
    SF_ASSIGN_OR_RETURN(id, accounts_->WorkspaceId(workspace));
  }
  SF_RETURN_IF_ERROR(MayCreateIn(p, id, workspace.empty() ? "Uncategorized" : workspace, what));
  return id;
}

Status Authorizer::MayManageWorkspace(const Principal& p, const std::string& workspace) {
  if (!p.authenticated()) return NoCredentials();
  if (p.role == Role::kAdmin) return Status::Ok();
  auto id = accounts_->WorkspaceId(workspace);
  if (!id.ok()) return id.status().code() == StatusCode::kNotFound ? Status::Ok() : id.status();
  SF_ASSIGN_OR_RETURN(std::string role, accounts_->WorkspaceRole(p.user_id, *id));
  if (role == "admin" && p.role >= Role::kUser) return Status::Ok();
  return PermissionDenied("user " + p.username + " may not manage the members of workspace " +
                          ReplaceInvalidUtf8(workspace) + ": not an admin there");
}

}  // namespace sf::master
