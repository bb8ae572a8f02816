// The access policy: for every REST route and every gRPC Api method, what a caller needs
// (docs/security.md has the same table in words; tests/master/auth/access_policy_test.cc and
// tests/e2e/access_matrix_test.cc hold every route to it).
//
// Contract:
// - The rules of steadfast.v1.Api's methods come from the proto (each method's
//   (steadfast.v1.access) and (steadfast.v1.http) options, common/api/route_table.h);
//   this file adds only the two REST routes that are not Api methods (health, the API
//   description).
// - RestPolicy() lists every route the REST server serves, by method and route template
//   ("/api/v1/experiments/{id}/kill"); GrpcPolicy() every method of steadfast.v1.Api. The
//   servers look a request up here BEFORE running it: a REST route with no entry is answered
//   404 and a gRPC method with no entry PERMISSION_DENIED, so a route added without a policy
//   entry cannot be reached (and its tests fail).
// - Needs, weakest first:
//     kPublic      no credentials (health, the API description, login, the dashboard's files)
//     kSignedIn    any active user, viewers included: every read, and one's own session/tokens
//     kCreator     role user or admin: create experiments and workspaces
//     kExperiment  act on the experiment the request names: its owner (role user), an editor
//                  or admin of its workspace, or an admin
//     kExperiments bulk actions: role user or admin; each experiment named is checked as
//                  kExperiment (refused ones get PERMISSION_DENIED in their result) and a filter
//                  selects only experiments the caller may act on
//     kCheckpoint  act on the experiment that owns the checkpoint(s) named (as kExperiment)
//     kSelf        the user named in the path, or an admin
//     kWorkspace   an admin of the workspace named in the path, or an admin
//     kAdmin       role admin
//     kModel       act on the model the request names (`name`: its name or id): its owner (role
//                  user), an editor or admin of its workspace, or an admin (docs/registry.md)
//     kTask        act on the task the request names (`id`: a server, master/tasks): its owner
//                  (role user), an editor or admin of its workspace, or an admin
// - Authorizer::Check answers OK or kPermissionDenied with one line that names the user, the
//   action and the reason ("user bob may not kill experiment 12: it belongs to alice and bob is
//   not an editor of workspace Uncategorized"). A resource that does not exist passes, so the
//   handler answers its own 404.
// - Thread-safe (reads the database per check; no state).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/api/route_table.h"
#include "common/status.h"
#include "master/auth/accounts.h"
#include "master/auth/principal.h"
#include "master/db/database.h"

namespace sf::master {

// The route table lives in common/api (the CLI reads it too); the master names it as its own.
using api::ApiRoute;
using api::ApiRoutes;
using api::FindApiRoute;
using api::RouteTableProblems;

// The refusal for a request without credentials (401), the same on REST and gRPC.
Status NoCredentials();

enum class Need { kPublic, kSignedIn, kCreator, kExperiment, kExperiments, kCheckpoint, kSelf, kWorkspace, kAdmin, kModel, kTask };
const char* NeedName(Need need);
// The proto's AccessNeed as a Need (ACCESS_NEED_UNSPECIFIED: nullopt).
std::optional<Need> NeedFromProto(steadfast::v1::AccessNeed need);

struct RestRule {
  std::string method;  // "GET", "POST", "PUT", "DELETE"
  std::string route;   // template: "{name}" matches one path segment
  Need need;
  std::string action;  // the verb a refusal names: "kill", "read", "create experiments in"
  const ApiRoute* api = nullptr;  // the Api method served there; null for the routes above
};

const std::vector<RestRule>& RestPolicy();
// gRPC Api method name ("KillExperiment") -> what it needs and its verb.
const std::map<std::string, std::pair<Need, std::string>>& GrpcPolicy();

struct RestMatch {
  const RestRule* rule = nullptr;
  std::map<std::string, std::string> params;  // {name} -> the (percent-decoded) segment
};
// The rule for `method` on `path`; nullopt when no rule matches. `path_known` (optional) is set
// when some rule matches the path with another method (the server answers 405 then).
std::optional<RestMatch> MatchRest(std::string_view method, const std::string& path, bool* path_known = nullptr);
// The methods some rule serves `path` with, for a 405's Allow header: "GET, DELETE" (in the order
// GET, POST, PUT, DELETE); empty when none does.
std::string AllowedMethods(const std::string& path);

// What a check is about: the ids and names the request carries.
struct Resource {
  int64_t experiment_id = 0;
  std::string checkpoint_uuid;
  std::string username;
  std::string workspace;
  std::string model;  // a model's name or id (kModel)
  int64_t task_id = 0;  // kTask
};

class Authorizer {
 public:
  Authorizer(Accounts* accounts, Database* db) : accounts_(accounts), db_(db) {}

  // OK, kUnauthenticated for a need above kPublic without a principal, or kPermissionDenied.
  Status Check(const Principal& p, Need need, const std::string& action, const Resource& r);

  Status MayActOnExperiment(const Principal& p, int64_t experiment_id, const std::string& action);
  Status MayActOnCheckpoint(const Principal& p, const std::string& uuid, const std::string& action);
  // kModel: "user bob may not archive model \"m\": it belongs to alice and bob is not an editor of
  // workspace W". A model that does not exist passes (the handler answers its 404).
  Status MayActOnModel(const Principal& p, const std::string& model, const std::string& action);
  Status MayActOnTask(const Principal& p, int64_t task_id, const std::string& action);
  // The same for many at once, in one query (bulk actions): the refused ones, each with its
  // refusal; the others (and ids or uuids that do not exist) are absent.
  Result<std::map<int64_t, Status>> RefusedExperiments(const Principal& p, const std::vector<int64_t>& ids,
                                                       const std::string& action);
  Result<std::map<std::string, Status>> RefusedCheckpoints(const Principal& p, const std::vector<std::string>& uuids,
                                                           const std::string& action);
  // Creating an experiment (or `what`: "models") in workspace `workspace_id`: role user, and for
  // a workspace other than Uncategorized, editor or admin there (or an admin).
  Status MayCreateIn(const Principal& p, int64_t workspace_id, const std::string& workspace,
                     const std::string& what = "experiments");
  Status MayManageWorkspace(const Principal& p, const std::string& workspace);
  // The id of the workspace a new experiment (or `what`) goes to (empty name: Uncategorized), once
  // MayCreateIn allows it; kNotFound for an unknown name.
  Result<int64_t> WorkspaceForNewExperiment(const Principal& p, const std::string& workspace,
                                            const std::string& what = "experiments");

 private:
  Accounts* accounts_;
  Database* db_;
};

}  // namespace sf::master
