// The OpenAPI 3 description of the REST routes served by HttpServer. Request and response
// bodies are the steadfast.v1 messages in protobuf's JSON mapping (lowerCamelCase names, int64
// as strings, enums by name).
#include "master/api/http_server.h"

namespace sf::master {
namespace {

Value Ref(const std::string& name) { return Value(Value::Map{{"$ref", "#/components/schemas/" + name}}); }

Value JsonResponse(const std::string& schema, const std::string& description) {
  return Value(Value::Map{
      {"description", description},
      {"content", Value::Map{{"application/json", Value::Map{{"schema", Ref(schema)}}}}}});
}

Value Param(const std::string& name, const std::string& in, const std::string& type,
            const std::string& description) {
  return Value(Value::Map{{"name", name},
                          {"in", in},
                          {"required", in == "path"},
                          {"description", description},
                          {"schema", Value::Map{{"type", type}}}});
}

Value Op(const std::string& summary, const std::string& op_id, Value::List params,
         const std::string& response, std::optional<std::string> body = std::nullopt) {
  Value::Map responses{{"200", JsonResponse(response, "OK")},
                       {"400", JsonResponse("Error", "bad request (field paths in errors)")},
                       {"401", JsonResponse("Error", "no, malformed, unknown, expired or revoked credentials "
                                                     "(Authorization: Bearer TOKEN)")},
                       {"403", JsonResponse("Error", "the caller's role or ownership does not allow it "
                                                     "(docs/security.md, the access policy)")},
                       {"404", JsonResponse("Error", "not found")},
                       {"409", JsonResponse("Error", "illegal state transition")},
                       {"503", JsonResponse("Error",
                                            "the master is at its connection cap (http_max_connections) "
                                            "or its database is unreachable; retry after Retry-After seconds")}};
  Value::Map op{{"summary", summary}, {"operationId", op_id}, {"parameters", params},
                {"responses", responses}};
  if (body) {
    op["requestBody"] = Value::Map{
        {"required", true},
        {"content", Value::Map{{"application/json", Value::Map{{"schema", Ref(*body)}}}}}};
  }
  return Value(std::move(op));
}

Value Object(Value::Map properties) {
  return Value(Value::Map{{"type", "object"}, {"properties", std::move(properties)}});
}
Value Type(const std::string& t) { return Value(Value::Map{{"type", t}}); }
Value ArrayOf(const std::string& schema) { return Value(Value::Map{{"type", "array"}, {"items", Ref(schema)}}); }

}  // namespace

std::string OpenApiDocument() {
  Value id = Param("id", "path", "string", "numeric id");
  Value::Map paths;
  paths["/api/v1/experiments"] = Value::Map{
      {"get", Op("List experiments: summaries without configYaml unless fields=config "
                 "(GET /api/v1/experiments/{id} always has it)",
                 "GetExperiments",
                 {Param("states", "query", "string", "EXPERIMENT_STATE_ACTIVE,... (repeatable)"),
                  Param("name", "query", "string", "substring of the name"),
                  Param("sortBy", "query", "string", "id|name|state|start_time|end_time|best_metric|progress"),
                  Param("descending", "query", "boolean", "sort order"),
                  Param("offset", "query", "integer", "first row"),
                  Param("limit", "query", "integer", "rows (default 100, max 1000)"),
                  Param("includeArchived", "query", "boolean", "include archived experiments"),
                  Param("fields", "query", "string",
                        "large fields to include in each row, comma-separated (repeatable): config "
                        "(configYaml)")},
                 "GetExperimentsResponse")},
      {"post", Op("Create an experiment from YAML", "CreateExperiment", {}, "CreateExperimentResponse",
                  "CreateExperimentRequest")}};
  paths["/api/v1/unmanaged-trials"] = Value::Map{
      {"post", Op("Unmanaged mode (docs/core-api.md): make an experiment of one trial that a script started by hand "
                  "reports into over TrialLink, with the task id and token in the response",
                  "CreateUnmanagedTrial", {}, "CreateUnmanagedTrialResponse", "CreateUnmanagedTrialRequest")}};
  paths["/api/v1/experiments/{id}"] = Value::Map{
      {"get", Op("Get an experiment", "GetExperiment", {id}, "GetExperimentResponse")},
      {"delete", Op("Delete a completed, canceled or errored experiment: its rows and its checkpoints' files "
                    "(409 in any other state)",
                    "DeleteExperiment", {id}, "DeleteExperimentResponse")}};
  for (const char* action : {"pause", "activate", "kill", "archive", "unarchive"}) {
    paths[std::string("/api/v1/experiments/{id}/") + action] =
        Value::Map{{"post", Op(std::string(action) + " an experiment", std::string(action) + "Experiment", {id},
                               "ExperimentActionResponse")}};
  }
  for (const char* action : {"pause", "activate", "kill", "archive", "unarchive", "delete"}) {
    paths[std::string("/api/v1/experiments/") + action] = Value::Map{
        {"post", Op(std::string(action) + " several experiments, named by ids or selected by a filter (not both); "
                        "200 with one result per experiment, each ok or with its own error",
                    std::string(action) + "Experiments", {}, "BulkExperimentActionResponse",
                    "BulkExperimentActionRequest")}};
  }
  paths["/api/v1/experiments/{id}/continue"] = Value::Map{
      {"post", Op("Train a completed single-searcher experiment's trial further, to maxLength batches, as a new "
                  "experiment starting from its latest checkpoint (409 when that is not possible)",
                  "ContinueExperiment", {id}, "CreateExperimentResponse", "ContinueExperimentRequest")}};
  paths["/api/v1/experiments/{id}/trials"] = Value::Map{
      {"get", Op("List an experiment's trials", "GetExperimentTrials",
                 {id, Param("offset", "query", "integer", "first row"),
                  Param("limit", "query", "integer", "rows (default 1000)")},
                 "GetExperimentTrialsResponse")}};
  paths["/api/v1/experiments/{id}/checkpoints"] = Value::Map{
      {"get", Op("List an experiment's checkpoints", "GetExperimentCheckpoints", {id},
                 "GetExperimentCheckpointsResponse")}};
  paths["/api/v1/experiments/{id}/searcher"] = Value::Map{
      {"get", Op("The searcher's summary (e.g. ASHA rungs)", "GetSearcherSummary", {id}, "SearcherSummary")}};
  paths["/api/v1/checkpoints/delete"] = Value::Map{
      {"post", Op("Delete checkpoints now (files, and state DELETED); 200 with one result per uuid; the "
                  "checkpoint an unfinished trial would resume from is refused in its result",
                  "DeleteCheckpoints", {}, "DeleteCheckpointsResponse", "DeleteCheckpointsRequest")}};
  paths["/api/v1/checkpoints/{uuid}"] = Value::Map{
      {"delete", Op("Delete one checkpoint (409 for the one an unfinished trial would resume from)",
                    "DeleteCheckpoint", {Param("uuid", "path", "string", "the checkpoint's uuid")},
                    "DeleteExperimentResponse")}};
  paths["/api/v1/trials/{id}"] = Value::Map{{"get", Op("Get a trial", "GetTrial", {id}, "GetTrialResponse")}};
  paths["/api/v1/trials/{id}/metrics"] = Value::Map{
      {"get", Op("A trial's metrics", "GetTrialMetrics",
                 {id, Param("kind", "query", "string", "training|validation"),
                  Param("startBatches", "query", "integer", "from this step (inclusive)"),
                  Param("endBatches", "query", "integer", "to this step (exclusive)"),
                  Param("maxPoints", "query", "integer", "downsample to at most this many rows")},
                 "GetTrialMetricsResponse")}};
  paths["/api/v1/trials/{id}/logs"] = Value::Map{
      {"get", Op("A trial's logs; follow=true streams server-sent events", "GetTrialLogs",
                 {id, Param("afterId", "query", "integer", "lines after this id"),
                  Param("limit", "query", "integer", "at most this many lines"),
                  Param("search", "query", "string", "substring filter"),
                  Param("follow", "query", "boolean", "stream new lines (text/event-stream)")},
                 "GetTrialLogsResponse")}};
  paths["/api/v1/agents"] = Value::Map{{"get", Op("List agents and their slots", "GetAgents", {}, "GetAgentsResponse")}};
  for (const char* action : {"revoke", "restore"}) {
    paths[std::string("/api/v1/agents/{agent}/") + action] = Value::Map{
        {"post", Op(std::string(action) + " an agent (admins): a revoked agent is refused at AgentLink even with the "
                                          "join token, and disconnected if connected",
                    std::string(action) + "Agent", {Param("agent", "path", "string", "the agent's id")}, "AgentRevocation")}};
  }
  paths["/api/v1/resource-pools"] = Value::Map{
      {"get", Op("The resource pools (of agents, or asked for by waiting trials): slots, usage and queue",
                 "GetResourcePools", {}, "GetResourcePoolsResponse")}};
  paths["/api/v1/cluster/utilization"] = Value::Map{
      {"get", Op("Busy and total slots per resource pool, one point per minute, recorded by the master",
                 "GetClusterUtilization",
                 {Param("since", "query", "string",
                        "from this time: RFC 3339 or seconds since the epoch (default: 24 hours ago)"),
                  Param("pool", "query", "string", "one resource pool (default: every pool)")},
                 "GetClusterUtilizationResponse")}};
  paths["/api/v1/audit"] = Value::Map{
      {"get", Op("The audit log: every POST, PUT, PATCH and DELETE under /api/v1/ with who (X-SF-User until users "
                 "exist), from where, what, when and its HTTP status; newest first",
                 "GetAuditLog",
                 {Param("since", "query", "string", "from this time: RFC 3339 or seconds since the epoch"),
                  Param("actor", "query", "string", "only this actor"),
                  Param("limit", "query", "integer", "rows (default 100, 1-1000)")},
                 "GetAuditLogResponse")}};
  paths["/api/v1/master"] = Value::Map{{"get", Op("Master information", "GetMaster", {}, "GetMasterResponse")}};
  paths["/health"] = Value::Map{{"get", Op("Liveness and database health", "Health", {}, "Health")}};
  paths["/api/v1/openapi.json"] = Value::Map{{"get", Op("This document (OpenAPI 3)", "OpenApi", {}, "Empty")}};
  // Accounts (docs/security.md): sessions, users, API tokens, workspaces.
  Value user = Param("username", "path", "string", "a user name");
  paths["/api/v1/auth/login"] = Value::Map{
      {"post", Op("Log in: a session token (also set as the HttpOnly cookie sf_session); 429 with Retry-After when "
                  "rate limited",
                  "Login", {}, "LoginResponse", "LoginRequest")}};
  paths["/api/v1/auth/logout"] = Value::Map{{"post", Op("End the caller's session", "Logout", {}, "Empty")}};
  paths["/api/v1/auth/me"] = Value::Map{{"get", Op("Who the caller is: name, role, workspaces", "WhoAmI", {}, "Me")}};
  paths["/api/v1/users"] = Value::Map{{"get", Op("List users (admins)", "ListUsers", {}, "UsersResponse")},
                                      {"post", Op("Create a user (admins)", "CreateUser", {}, "UserResponse", "NewUser")}};
  for (const char* action : {"role", "activate", "deactivate", "password"}) {
    paths[std::string("/api/v1/users/{username}/") + action] = Value::Map{
        {"post", Op(std::string("Set a user's ") + action +
                        (std::string(action) == "password" ? " (the user, or admins)" : " (admins)"),
                    std::string("User_") + action, {user}, "UserResponse", "UserChange")}};
  }
  paths["/api/v1/tokens"] = Value::Map{
      {"get", Op("The caller's API tokens and sessions (all=true: everyone's, admins)", "ListTokens",
                 {Param("all", "query", "boolean", "every user's (admins)")}, "TokensResponse")},
      {"post", Op("Create an API token; the token is in this answer only", "CreateToken", {}, "NewToken",
                  "TokenRequest")}};
  paths["/api/v1/tokens/{id}"] = Value::Map{
      {"delete", Op("Revoke a token (one's own; admins any)", "RevokeToken", {id}, "Empty")}};
  paths["/api/v1/workspaces"] = Value::Map{
      {"get", Op("Workspaces and their members", "ListWorkspaces", {}, "WorkspacesResponse")},
      {"post", Op("Create a workspace (its creator becomes its admin)", "CreateWorkspace", {}, "Workspace",
                  "WorkspaceRequest")}};
  paths["/api/v1/workspaces/{workspace}/members/{username}"] = Value::Map{
      {"put", Op("Add a member or change their role (workspace admins, admins)", "SetWorkspaceMember",
                 {Param("workspace", "path", "string", "the workspace"), user}, "Empty", "MemberRole")},
      {"delete", Op("Remove a member (workspace admins, admins)", "RemoveWorkspaceMember",
                    {Param("workspace", "path", "string", "the workspace"), user}, "Empty")}};

  Value::Map schemas;
  schemas["Empty"] = Object({});
  schemas["AgentRevocation"] = Object({{"agentId", Type("string")}, {"revoked", Type("boolean")}});
  schemas["LoginRequest"] = Object({{"username", Type("string")}, {"password", Type("string")}});
  schemas["User"] = Object({{"username", Type("string")}, {"role", Type("string")}, {"active", Type("boolean")},
                            {"createdAt", Type("string")}});
  schemas["LoginResponse"] = Object({{"token", Type("string")}, {"user", Ref("User")}});
  schemas["Membership"] = Object({{"name", Type("string")}, {"role", Type("string")}});
  schemas["Me"] = Object({{"username", Type("string")}, {"role", Type("string")}, {"workspaces", ArrayOf("Membership")}});
  schemas["UsersResponse"] = Object({{"users", ArrayOf("User")}});
  schemas["UserResponse"] = Object({{"user", Ref("User")}});
  schemas["NewUser"] = Object({{"username", Type("string")}, {"password", Type("string")}, {"role", Type("string")}});
  schemas["UserChange"] = Object({{"role", Type("string")}, {"password", Type("string")}});
  schemas["Token"] = Object({{"id", Type("string")}, {"name", Type("string")}, {"username", Type("string")},
                             {"kind", Type("string")}, {"createdAt", Type("string")}, {"expiresAt", Type("string")},
                             {"lastUsedAt", Type("string")}, {"revoked", Type("boolean")}});
  schemas["TokensResponse"] = Object({{"tokens", ArrayOf("Token")}});
  schemas["TokenRequest"] = Object({{"name", Type("string")}, {"expiresInSeconds", Type("integer")}});
  schemas["NewToken"] = Object({{"id", Type("string")}, {"name", Type("string")}, {"token", Type("string")},
                                {"expiresAt", Type("string")}});
  schemas["Member"] = Object({{"username", Type("string")}, {"role", Type("string")}});
  schemas["Workspace"] = Object({{"id", Type("string")}, {"name", Type("string")}, {"members", ArrayOf("Member")}});
  schemas["WorkspacesResponse"] = Object({{"workspaces", ArrayOf("Workspace")}});
  schemas["WorkspaceRequest"] = Object({{"name", Type("string")}});
  schemas["MemberRole"] = Object({{"role", Type("string")}});
  schemas["Error"] = Object({{"code", Type("integer")}, {"message", Type("string")}, {"errors", ArrayOf("ConfigError")}});
  schemas["AuditEntry"] = Object({{"id", Type("string")}, {"time", Type("string")}, {"actor", Type("string")},
                                  {"peer", Type("string")}, {"method", Type("string")}, {"path", Type("string")},
                                  {"status", Type("integer")}});
  schemas["GetAuditLogResponse"] = Object({{"entries", ArrayOf("AuditEntry")}});
  schemas["ConfigError"] = Object({{"path", Type("string")}, {"message", Type("string")},
                                   {"line", Type("integer")}, {"column", Type("integer")}});
  schemas["CreateExperimentRequest"] = Object(
      {{"configYaml", Type("string")}, {"activate", Type("boolean")}, {"validateOnly", Type("boolean")},
       {"workspace", Type("string")},
       {"context", Value(Value::Map{{"type", "string"},
                                    {"format", "byte"},
                                    {"description", "base64 of the context directory's .tar.gz (entrypoint experiments, "
                                                    "docs/core-api.md)"}})},
       {"contextOf", Value(Value::Map{{"type", "string"},
                                      {"description", "without context: copy this experiment's context (int64)"}})}});
  schemas["Experiment"] = Object({{"id", Type("string")}, {"name", Type("string")}, {"state", Type("string")},
                                  {"configYaml", Value(Value::Map{{"type", "string"},
                                                                  {"description",
                                                                   "the YAML as submitted; absent from list rows "
                                                                   "unless fields=config"}})},
                                  {"numTrials", Type("integer")},
                                  {"numCompletedTrials", Type("integer")}, {"bestValidationMetric", Type("number")},
                                  {"startTime", Type("string")}, {"endTime", Type("string")}});
  schemas["Trial"] = Object({{"id", Type("string")}, {"experimentId", Type("string")}, {"state", Type("string")},
                             {"hparams", Type("object")}, {"restarts", Type("integer")},
                             {"totalBatches", Type("string")}, {"bestValidationMetric", Type("number")},
                             {"pendingReason", Type("string")}});
  schemas["MetricReport"] = Object({{"trialId", Type("string")}, {"batches", Type("string")}, {"kind", Type("string")},
                                    {"values", Type("object")}, {"time", Type("string")}});
  schemas["Checkpoint"] = Object({{"uuid", Type("string")}, {"trialId", Type("string")}, {"batches", Type("string")},
                                  {"path", Type("string")}, {"size", Type("string")},
                                  {"validationMetric", Type("number")}, {"state", Type("string")}});
  schemas["LogLine"] = Object({{"id", Type("string")}, {"trialId", Type("string")}, {"stream", Type("string")},
                               {"message", Type("string")}, {"time", Type("string")}});
  schemas["Agent"] = Object({{"id", Type("string")}, {"resourcePool", Type("string")}, {"connected", Type("boolean")},
                             {"slots", ArrayOf("Slot")}});
  // uuid, memoryTotalBytes and usage: GPU slots found through NVML (docs/agent.md, "GPU slots").
  schemas["Slot"] = Object({{"id", Type("string")}, {"type", Type("string")}, {"device", Type("string")},
                            {"enabled", Type("boolean")}, {"trialId", Type("string")}, {"uuid", Type("string")},
                            {"memoryTotalBytes", Type("string")}, {"usage", Ref("GpuUsage")}});
  schemas["GpuUsage"] = Object({{"utilizationPercent", Type("integer")}, {"memoryUsedBytes", Type("string")},
                                {"sampleTime", Type("string")}});
  schemas["Pagination"] = Object({{"offset", Type("integer")}, {"limit", Type("integer")}, {"total", Type("integer")}});
  schemas["CreateExperimentResponse"] = Object({{"experiment", Ref("Experiment")}, {"errors", ArrayOf("ConfigError")}});
  schemas["CreateUnmanagedTrialRequest"] = Object({{"configYaml", Type("string")}, {"workspace", Type("string")}});
  schemas["CreateUnmanagedTrialResponse"] = Object(
      {{"experiment", Ref("Experiment")}, {"trial", Ref("Trial")}, {"taskId", Type("string")},
       {"taskToken", Type("string")}, {"trialLinkAddress", Type("string")}, {"checkpointDir", Type("string")},
       {"errors", ArrayOf("ConfigError")}});
  schemas["GetExperimentsResponse"] = Object({{"experiments", ArrayOf("Experiment")}, {"pagination", Ref("Pagination")}});
  schemas["GetExperimentResponse"] = Object({{"experiment", Ref("Experiment")}});
  schemas["ExperimentActionResponse"] = Object({{"experiment", Ref("Experiment")}});
  schemas["DeleteExperimentResponse"] = Object({});
  schemas["ContinueExperimentRequest"] = Object(
      {{"maxLength", Value(Value::Map{{"type", "string"}, {"description", "batches in all (int64)"}})}});
  schemas["BulkExperimentFilter"] = Object(
      {{"states", Value(Value::Map{{"type", "array"}, {"items", Type("string")},
                                   {"description", "EXPERIMENT_STATE_ACTIVE, ..."}})},
       {"name", Value(Value::Map{{"type", "string"}, {"description", "substring of the name"}})},
       {"owner", Value(Value::Map{{"type", "string"}, {"description", "exactly this owner"}})},
       {"includeArchived", Value(Value::Map{{"type", "boolean"},
                                            {"description", "also archived experiments (always for unarchive)"}})}});
  schemas["BulkExperimentActionRequest"] = Object(
      {{"ids", Value(Value::Map{{"type", "array"}, {"items", Type("string")}, {"description", "at most 10000"}})},
       {"filter", Ref("BulkExperimentFilter")}});
  schemas["BulkExperimentActionResult"] = Object(
      {{"id", Type("string")}, {"ok", Type("boolean")},
       {"code", Value(Value::Map{{"type", "integer"}, {"description", "gRPC code: 5 not found, 9 not allowed"}})},
       {"error", Type("string")}, {"state", Type("string")}});
  schemas["DeleteCheckpointsRequest"] = Object(
      {{"uuids", Value(Value::Map{{"type", "array"}, {"items", Type("string")}, {"description", "1 to 10000"}})}});
  schemas["DeleteCheckpointResult"] = Object({{"uuid", Type("string")}, {"ok", Type("boolean")},
                                             {"code", Type("integer")}, {"error", Type("string")}});
  schemas["DeleteCheckpointsResponse"] = Object({{"results", ArrayOf("DeleteCheckpointResult")}});
  schemas["BulkExperimentActionResponse"] = Object({{"results", ArrayOf("BulkExperimentActionResult")}});
  schemas["GetExperimentTrialsResponse"] = Object({{"trials", ArrayOf("Trial")}, {"pagination", Ref("Pagination")}});
  schemas["GetExperimentCheckpointsResponse"] = Object({{"checkpoints", ArrayOf("Checkpoint")}});
  schemas["SearcherSummary"] = Object({{"summary", Type("object")}});
  schemas["GetTrialResponse"] = Object({{"trial", Ref("Trial")}});
  schemas["GetTrialMetricsResponse"] = Object({{"metrics", ArrayOf("MetricReport")}});
  schemas["GetTrialLogsResponse"] = Object({{"logs", ArrayOf("LogLine")}});
  schemas["ResourcePool"] = Object({{"name", Type("string")}, {"scheduler", Type("string")},
                                    {"agents", Type("integer")}, {"totalSlots", Type("integer")},
                                    {"usedSlots", Type("integer")}, {"runningTrials", Type("integer")},
                                    {"queuedTrials", Type("integer")}, {"queuedSlots", Type("integer")}});
  schemas["GetResourcePoolsResponse"] = Object({{"resourcePools", ArrayOf("ResourcePool")}});
  schemas["GetAgentsResponse"] = Object({{"agents", ArrayOf("Agent")}});
  schemas["GetMasterResponse"] = Object({{"version", Type("string")}, {"connectedAgents", Type("integer")},
                                         {"totalSlots", Type("integer")}, {"usedSlots", Type("integer")}});
  schemas["UtilizationPoint"] = Object({{"pool", Type("string")}, {"time", Type("string")},
                                        {"slotsTotal", Type("integer")}, {"slotsBusy", Type("number")},
                                        {"slotsBusyMax", Type("integer")}, {"samples", Type("integer")}});
  schemas["GetClusterUtilizationResponse"] = Object({{"points", ArrayOf("UtilizationPoint")}});
  schemas["Health"] = Object({{"status", Type("string")}, {"database", Type("string")}});

  Value doc(Value::Map{
      {"openapi", "3.0.3"},
      {"info", Value::Map{{"title", "Steadfast API"}, {"version", "v1"},
                          {"description", "The Api service of steadfast.v1 over HTTP/JSON."}}},
      {"paths", paths},
      {"components", Value::Map{{"schemas", schemas}}}});
  return doc.ToJson();
}

}  // namespace sf::master
