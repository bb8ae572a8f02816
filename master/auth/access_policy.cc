#include "master/auth/access_policy.h"

#include <sstream>

#include "common/utf8.h"

namespace sf::master {

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
  }
  return "?";
}

const std::vector<RestRule>& RestPolicy() {
  static const std::vector<RestRule> kRules = [] {
    std::vector<RestRule> r = {
        {"GET", "/health", Need::kPublic, "check health"},
        {"GET", "/api/v1/openapi.json", Need::kPublic, "read the API description"},
        {"POST", "/api/v1/auth/login", Need::kPublic, "log in"},
        {"POST", "/api/v1/auth/logout", Need::kSignedIn, "log out"},
        {"GET", "/api/v1/auth/me", Need::kSignedIn, "read"},
        {"GET", "/api/v1/experiments", Need::kSignedIn, "read"},
        {"POST", "/api/v1/experiments", Need::kCreator, "create experiments"},
        {"GET", "/api/v1/experiments/{id}", Need::kSignedIn, "read"},
        {"DELETE", "/api/v1/experiments/{id}", Need::kExperiment, "delete"},
        {"POST", "/api/v1/experiments/{id}/continue", Need::kExperiment, "continue"},
        {"GET", "/api/v1/experiments/{id}/trials", Need::kSignedIn, "read"},
        {"GET", "/api/v1/experiments/{id}/checkpoints", Need::kSignedIn, "read"},
        {"GET", "/api/v1/experiments/{id}/searcher", Need::kSignedIn, "read"},
        {"POST", "/api/v1/checkpoints/delete", Need::kExperiments, "delete checkpoints of"},
        {"DELETE", "/api/v1/checkpoints/{uuid}", Need::kCheckpoint, "delete checkpoints of"},
        {"GET", "/api/v1/trials/{id}", Need::kSignedIn, "read"},
        {"GET", "/api/v1/trials/{id}/metrics", Need::kSignedIn, "read"},
        {"GET", "/api/v1/trials/{id}/logs", Need::kSignedIn, "read"},
        {"GET", "/api/v1/agents", Need::kSignedIn, "read"},
        {"POST", "/api/v1/agents/{agent}/revoke", Need::kAdmin, "revoke agents"},
        {"POST", "/api/v1/agents/{agent}/restore", Need::kAdmin, "restore agents"},
        {"GET", "/api/v1/resource-pools", Need::kSignedIn, "read"},
        {"GET", "/api/v1/cluster/utilization", Need::kSignedIn, "read"},
        {"GET", "/api/v1/master", Need::kSignedIn, "read"},
        {"GET", "/api/v1/audit", Need::kAdmin, "read the audit log"},
        {"GET", "/api/v1/users", Need::kAdmin, "list users"},
        {"POST", "/api/v1/users", Need::kAdmin, "create users"},
        {"POST", "/api/v1/users/{username}/role", Need::kAdmin, "change the role of"},
        {"POST", "/api/v1/users/{username}/activate", Need::kAdmin, "activate"},
        {"POST", "/api/v1/users/{username}/deactivate", Need::kAdmin, "deactivate"},
        {"POST", "/api/v1/users/{username}/password", Need::kSelf, "set the password of"},
        {"GET", "/api/v1/tokens", Need::kSignedIn, "list tokens"},
        {"POST", "/api/v1/tokens", Need::kSignedIn, "create tokens"},
        {"DELETE", "/api/v1/tokens/{id}", Need::kSignedIn, "revoke tokens"},
        {"GET", "/api/v1/workspaces", Need::kSignedIn, "read"},
        {"POST", "/api/v1/workspaces", Need::kCreator, "create workspaces"},
        {"PUT", "/api/v1/workspaces/{workspace}/members/{username}", Need::kWorkspace,
         "manage the members of"},
        {"DELETE", "/api/v1/workspaces/{workspace}/members/{username}", Need::kWorkspace,
         "manage the members of"},
    };
    for (const char* action : {"pause", "activate", "kill", "archive", "unarchive"}) {
      r.push_back(
          {"POST", std::string("/api/v1/experiments/{id}/") + action, Need::kExperiment, action});
    }
    for (const char* action : {"pause", "activate", "kill", "archive", "unarchive", "delete"}) {
      r.push_back(
          {"POST", std::string("/api/v1/experiments/") + action, Need::kExperiments, action});
    }
    return r;
  }();
  return kRules;
}

const std::map<std::string, std::pair<Need, std::string>>& GrpcPolicy() {
  static const std::map<std::string, std::pair<Need, std::string>> kMethods = {
      {"CreateExperiment", {Need::kCreator, "create experiments"}},
      {"GetExperiments", {Need::kSignedIn, "read"}},
      {"GetExperiment", {Need::kSignedIn, "read"}},
      {"KillExperiment", {Need::kExperiment, "kill"}},
      {"PauseExperiment", {Need::kExperiment, "pause"}},
      {"ActivateExperiment", {Need::kExperiment, "activate"}},
      {"ArchiveExperiment", {Need::kExperiment, "archive"}},
      {"UnarchiveExperiment", {Need::kExperiment, "unarchive"}},
      {"DeleteExperiment", {Need::kExperiment, "delete"}},
      {"KillExperiments", {Need::kExperiments, "kill"}},
      {"PauseExperiments", {Need::kExperiments, "pause"}},
      {"ActivateExperiments", {Need::kExperiments, "activate"}},
      {"ArchiveExperiments", {Need::kExperiments, "archive"}},
      {"UnarchiveExperiments", {Need::kExperiments, "unarchive"}},
      {"DeleteExperiments", {Need::kExperiments, "delete"}},
      {"DeleteCheckpoints", {Need::kExperiments, "delete checkpoints of"}},
      {"GetResourcePools", {Need::kSignedIn, "read"}},
      {"ContinueExperiment", {Need::kExperiment, "continue"}},
      {"GetExperimentTrials", {Need::kSignedIn, "read"}},
      {"GetExperimentCheckpoints", {Need::kSignedIn, "read"}},
      {"GetTrial", {Need::kSignedIn, "read"}},
      {"GetTrialMetrics", {Need::kSignedIn, "read"}},
      {"FollowTrialMetrics", {Need::kSignedIn, "read"}},
      {"GetTrialLogs", {Need::kSignedIn, "read"}},
      {"FollowTrialLogs", {Need::kSignedIn, "read"}},
      {"GetAgents", {Need::kSignedIn, "read"}},
      {"GetMaster", {Need::kSignedIn, "read"}},
      {"GetClusterUtilization", {Need::kSignedIn, "read"}},
  };
  return kMethods;
}

namespace {

std::vector<std::string> Segments(std::string_view path) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    out.emplace_back(path.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

bool Matches(const std::string& route, const std::vector<std::string>& segs,
             std::map<std::string, std::string>* params) {
  std::vector<std::string> want = Segments(route);
  if (want.size() != segs.size()) return false;
  std::map<std::string, std::string> out;
  for (size_t i = 0; i < want.size(); ++i) {
    const std::string& w = want[i];
    if (w.size() > 2 && w.front() == '{' && w.back() == '}') {
      if (segs[i].empty()) return false;
      out[w.substr(1, w.size() - 2)] = segs[i];
    } else if (w != segs[i]) {
      return false;
    }
  }
  if (params) *params = std::move(out);
  return true;
}

}  // namespace

std::optional<RestMatch> MatchRest(std::string_view method, const std::string& path,
                                   bool* path_known) {
  if (path_known) *path_known = false;
  const std::vector<std::string> segs = Segments(path);
  // Literal routes win over templates ("/api/v1/experiments/kill" is the bulk kill, not the
  // experiment with id "kill"): try routes without parameters first.
  for (int pass = 0; pass < 2; ++pass) {
    for (const RestRule& rule : RestPolicy()) {
      const bool templated = rule.route.find('{') != std::string::npos;
      if (templated != (pass == 1)) continue;
      RestMatch m;
      if (!Matches(rule.route, segs, &m.params)) continue;
      if (rule.method != method) {
        if (path_known) *path_known = true;
        continue;
      }
      m.rule = &rule;
      return m;
    }
  }
  return std::nullopt;
}

Status Authorizer::Check(const Principal& p, Need need, const std::string& action,
                         const Resource& r) {
  if (need == Need::kPublic) return Status::Ok();
  if (!p.authenticated())
    return Unauthenticated("log in first: no credentials (Authorization: Bearer TOKEN)");
  switch (need) {
    case Need::kPublic:
    case Need::kSignedIn:
      return Status::Ok();
    case Need::kCreator:
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
  }
  return PermissionDenied("no access rule");
}

Status Authorizer::MayActOnExperiment(const Principal& p, int64_t experiment_id,
                                      const std::string& action) {
  if (!p.authenticated())
    return Unauthenticated("log in first: no credentials (Authorization: Bearer TOKEN)");
  if (p.role == Role::kAdmin) return Status::Ok();
  const std::string who =
      "user " + p.username + " may not " + action + " experiment " + std::to_string(experiment_id);
  if (p.role < Role::kUser) return PermissionDenied(who + ": role viewer only reads");
  std::optional<std::pair<std::string, int64_t>> owner;  // owner, workspace id
  std::string workspace, ws_role;
  Status st = db_->Transact("experiment access", [&](pqxx::work& tx) {
    pqxx::result r = tx.exec_params(
        "SELECT e.owner, e.workspace_id, w.name, COALESCE(m.role, '') FROM experiments e "
        "JOIN workspaces w ON w.id = e.workspace_id "
        "LEFT JOIN workspace_members m ON m.workspace_id = e.workspace_id AND m.user_id = $2 WHERE "
        "e.id = $1",
        experiment_id, p.user_id);
    if (!r.empty()) {
      owner = std::make_pair(r[0][0].as<std::string>(), r[0][1].as<int64_t>());
      workspace = r[0][2].as<std::string>();
      ws_role = r[0][3].as<std::string>();
    }
    return Status::Ok();
  });
  if (!st.ok()) return st;
  if (!owner) return Status::Ok();  // the handler answers 404
  if (owner->first == p.username) return Status::Ok();
  if (ws_role == "editor" || ws_role == "admin") return Status::Ok();
  return PermissionDenied(who + ": it belongs to " +
                          (owner->first.empty() ? "nobody" : owner->first) + " and " + p.username +
                          " is not an editor of workspace " + workspace);
}

Status Authorizer::MayActOnCheckpoint(const Principal& p, const std::string& uuid,
                                      const std::string& action) {
  if (!p.authenticated())
    return Unauthenticated("log in first: no credentials (Authorization: Bearer TOKEN)");
  if (p.role == Role::kAdmin) return Status::Ok();
  if (!IsText(uuid)) return Status::Ok();  // the handler refuses it
  int64_t experiment_id = 0;
  Status st = db_->Transact("checkpoint access", [&](pqxx::work& tx) {
    pqxx::result r = tx.exec_params(
        "SELECT t.experiment_id FROM checkpoints c JOIN trials t ON t.id = c.trial_id WHERE c.uuid "
        "= $1",
        uuid);
    if (!r.empty()) experiment_id = r[0][0].as<int64_t>();
    return Status::Ok();
  });
  if (!st.ok()) return st;
  if (experiment_id == 0) {
    if (p.role < Role::kUser)
      return PermissionDenied("user " + p.username + " may not " + action +
                              " experiments: role viewer only reads");
    return Status::Ok();
  }
  return MayActOnExperiment(p, experiment_id, action);
}

Status Authorizer::MayCreateIn(const Principal& p, int64_t workspace_id,
                               const std::string& workspace) {
  if (!p.authenticated())
    return Unauthenticated("log in first: no credentials (Authorization: Bearer TOKEN)");
  if (p.role == Role::kAdmin) return Status::Ok();
  if (p.role < Role::kUser) {
    return PermissionDenied("user " + p.username +
                            " may not create experiments: role viewer only reads");
  }
  if (workspace_id == Accounts::kDefaultWorkspace) return Status::Ok();
  SF_ASSIGN_OR_RETURN(std::string role, accounts_->WorkspaceRole(p.user_id, workspace_id));
  if (role == "editor" || role == "admin") return Status::Ok();
  return PermissionDenied("user " + p.username + " may not create experiments in workspace " +
                          workspace + ": not an editor there");
}

Result<int64_t> Authorizer::WorkspaceForNewExperiment(const Principal& p,
                                                      const std::string& workspace) {
  int64_t id = Accounts::kDefaultWorkspace;
  if (!workspace.empty() && workspace != "Uncategorized") {
    SF_ASSIGN_OR_RETURN(id, accounts_->WorkspaceId(workspace));
  }
  SF_RETURN_IF_ERROR(MayCreateIn(p, id, workspace.empty() ? "Uncategorized" : workspace));
  return id;
}

Status Authorizer::MayManageWorkspace(const Principal& p, const std::string& workspace) {
  if (!p.authenticated())
    return Unauthenticated("log in first: no credentials (Authorization: Bearer TOKEN)");
  if (p.role == Role::kAdmin) return Status::Ok();
  auto id = accounts_->WorkspaceId(workspace);
  if (!id.ok()) return id.status().code() == StatusCode::kNotFound ? Status::Ok() : id.status();
  SF_ASSIGN_OR_RETURN(std::string role, accounts_->WorkspaceRole(p.user_id, *id));
  if (role == "admin" && p.role >= Role::kUser) return Status::Ok();
  return PermissionDenied("user " + p.username + " may not manage the members of workspace " +
                          ReplaceInvalidUtf8(workspace) + ": not an admin there");
}

}  // namespace sf::master
