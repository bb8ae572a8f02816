// GENERATED from the OpenAPI document (Steadfast API v1) by webui/scripts/gen-api-types.mjs.
// Do not edit: change the proto (or the document's source), build the CMake target openapi_json,
// then run `npm run gen:api` in webui/. CI runs `npm run check:api`, which fails while this
// file differs from what the document generates.
//
// The wire JSON (protobuf's JSON mapping): 64-bit integers are decimal strings, enums their value
// names, Timestamps RFC 3339 strings; a property is optional unless the document requires it,
// since proto3 leaves default values out. client.ts turns these into the types of types.ts.

export interface Agent {
  address?: string;
  connected?: boolean;
  hostname?: string;
  id?: string;
  lastHeartbeat?: string; // date-time
  registeredTime?: string; // date-time
  resourcePool?: string;
  slots?: Slot[];
  version?: string;
}

export interface AgentRevocationResponse {
  agentId?: string;
  revoked?: boolean;
}

export interface AuditLogEntry {
  actor?: string;
  id?: string; // int64
  method?: string;
  path?: string;
  peer?: string;
  status?: number;
  time?: string; // date-time
}

export interface BulkExperimentActionRequest {
  filter?: BulkExperimentFilter;
  ids?: string[]; // int64
}

export interface BulkExperimentActionResponse {
  results?: BulkExperimentActionResult[];
}

export interface BulkExperimentActionResult {
  code?: number;
  error?: string;
  id?: string; // int64
  ok?: boolean;
  state?: "EXPERIMENT_STATE_UNSPECIFIED" | "EXPERIMENT_STATE_ACTIVE" | "EXPERIMENT_STATE_PAUSED" | "EXPERIMENT_STATE_STOPPING_COMPLETED" | "EXPERIMENT_STATE_STOPPING_CANCELED" | "EXPERIMENT_STATE_STOPPING_ERROR" | "EXPERIMENT_STATE_COMPLETED" | "EXPERIMENT_STATE_CANCELED" | "EXPERIMENT_STATE_ERROR";
}

export interface BulkExperimentFilter {
  includeArchived?: boolean;
  name?: string;
  owner?: string;
  states?: ("EXPERIMENT_STATE_UNSPECIFIED" | "EXPERIMENT_STATE_ACTIVE" | "EXPERIMENT_STATE_PAUSED" | "EXPERIMENT_STATE_STOPPING_COMPLETED" | "EXPERIMENT_STATE_STOPPING_CANCELED" | "EXPERIMENT_STATE_STOPPING_ERROR" | "EXPERIMENT_STATE_COMPLETED" | "EXPERIMENT_STATE_CANCELED" | "EXPERIMENT_STATE_ERROR")[];
}

export interface Checkpoint {
  batches?: string; // int64
  experimentId?: string; // int64
  files?: CheckpointFile[];
  metadata?: {
    [key: string]: unknown;
  };
  path?: string;
  size?: string; // int64
  state?: string;
  time?: string; // date-time
  trialId?: string; // int64
  uuid?: string;
  validationMetric?: number;
}

export interface CheckpointFile {
  path?: string;
  sha256?: string;
  size?: string; // int64
}

export interface CheckpointLocation {
  endpointUrl?: string;
  region?: string;
  type?: string;
}

export interface ConfigError {
  column?: number;
  line?: number;
  message?: string;
  path?: string;
}

export interface ContextFile {
  linkTarget?: string;
  path?: string;
  size?: string; // int64
}

export interface ContinueExperimentRequest {
  id?: string; // int64
  maxLength?: string; // int64
}

export interface CreateCommandRequest {
  context?: string; // byte
  entrypoint?: string[];
  priority?: number;
  resourcePool?: string;
  slots?: number;
  workspace?: string;
}

export interface CreateExperimentRequest {
  activate?: boolean;
  configYaml?: string;
  context?: string; // byte
  contextOf?: string; // int64
  validateOnly?: boolean;
  workspace?: string;
}

export interface CreateExperimentResponse {
  errors?: ConfigError[];
  experiment?: Experiment;
}

export interface CreateModelRequest {
  description?: string;
  labels?: string[];
  name?: string;
  workspace?: string;
}

export interface CreateTokenRequest {
  expiresInSeconds?: string; // int64
  name?: string;
}

export interface CreateUnmanagedTrialRequest {
  configYaml?: string;
  workspace?: string;
}

export interface CreateUnmanagedTrialResponse {
  checkpointDir?: string;
  errors?: ConfigError[];
  experiment?: Experiment;
  taskId?: string;
  taskToken?: string;
  trial?: Trial;
  trialLinkAddress?: string;
  trialSeed?: string; // int64
}

export interface CreateUserRequest {
  password?: string;
  role?: string;
  username?: string;
}

export interface CreateWebhookRequest {
  events?: string[];
  experimentId?: string; // int64
  url?: string;
}

export interface CreateWorkspaceRequest {
  name?: string;
}

export interface DeleteCheckpointResponse {}

export interface DeleteCheckpointResult {
  code?: number;
  error?: string;
  ok?: boolean;
  uuid?: string;
}

export interface DeleteCheckpointsRequest {
  uuids?: string[];
}

export interface DeleteCheckpointsResponse {
  results?: DeleteCheckpointResult[];
}

export interface DeleteExperimentResponse {}

export interface DeleteModelResponse {}

export interface DeleteModelVersionResponse {}

export interface DeleteWebhookResponse {}

export interface Empty {}

export interface Error {
  code?: number;
  errors?: ConfigError[];
  message?: string;
}

export interface Experiment {
  archived?: boolean;
  bestValidationMetric?: number;
  configYaml?: string;
  description?: string;
  endTime?: string; // date-time
  error?: string;
  id?: string; // int64
  metric?: string;
  name?: string;
  numCompletedTrials?: number;
  numTrials?: number;
  owner?: string;
  priority?: number;
  searcher?: string;
  smallerIsBetter?: boolean;
  startTime?: string; // date-time
  state?: "EXPERIMENT_STATE_UNSPECIFIED" | "EXPERIMENT_STATE_ACTIVE" | "EXPERIMENT_STATE_PAUSED" | "EXPERIMENT_STATE_STOPPING_COMPLETED" | "EXPERIMENT_STATE_STOPPING_CANCELED" | "EXPERIMENT_STATE_STOPPING_ERROR" | "EXPERIMENT_STATE_COMPLETED" | "EXPERIMENT_STATE_CANCELED" | "EXPERIMENT_STATE_ERROR";
  unmanaged?: boolean;
  workspace?: string;
}

export interface ExperimentActionResponse {
  experiment?: Experiment;
}

export interface GetAgentsResponse {
  agents?: Agent[];
}

export interface GetAuditLogResponse {
  entries?: AuditLogEntry[];
}

export interface GetCheckpointResponse {
  checkpoint?: Checkpoint;
  location?: CheckpointLocation;
}

export interface GetClusterUtilizationResponse {
  points?: UtilizationPoint[];
}

export interface GetExperimentCheckpointsResponse {
  checkpoints?: Checkpoint[];
}

export interface GetExperimentContextResponse {
  archive?: string; // byte
  archiveBytes?: string; // int64
  fileBytes?: string; // int64
  files?: ContextFile[];
  sha256?: string;
}

export interface GetExperimentResponse {
  experiment?: Experiment;
}

export interface GetExperimentSearcherResponse {
  summary?: {
    [key: string]: unknown;
  };
}

export interface GetExperimentTrialsResponse {
  pagination?: Pagination;
  trials?: Trial[];
}

export interface GetExperimentsResponse {
  experiments?: Experiment[];
  pagination?: Pagination;
}

export interface GetMasterResponse {
  clusterName?: string;
  connectedAgents?: number;
  masterId?: string;
  schemaVersion?: number;
  totalSlots?: number;
  usedSlots?: number;
  version?: string;
}

export interface GetMeResponse {
  role?: string;
  username?: string;
  workspaces?: WorkspaceMembership[];
}

export interface GetModelResponse {
  model?: Model;
  versions?: ModelVersion[];
}

export interface GetModelVersionResponse {
  bestValidationMetric?: number;
  checkpoint?: Checkpoint;
  latestValidation?: MetricReport;
  latestValidationMetric?: number;
  metric?: string;
  smallerIsBetter?: boolean;
  version?: ModelVersion;
}

export interface GetResourcePoolsResponse {
  resourcePools?: ResourcePool[];
}

export interface GetTrialLogsResponse {
  logs?: LogLine[];
}

export interface GetTrialMetricsResponse {
  metrics?: MetricReport[];
}

export interface GetTrialResponse {
  metricGroups?: string[];
  trial?: Trial;
}

export interface GpuUsage {
  memoryUsedBytes?: string; // int64
  sampleTime?: string; // date-time
  utilizationPercent?: number;
}

export interface Health {
  database?: string;
  status?: string;
}

export interface InteractiveTaskRequest {
  context?: string; // byte
  idleTimeoutSeconds?: number;
  priority?: number;
  resourcePool?: string;
  slots?: number;
  workspace?: string;
}

export interface ListModelsResponse {
  models?: Model[];
  pagination?: Pagination;
}

export interface ListServingsResponse {
  servings?: Serving[];
}

export interface ListTasksResponse {
  tasks?: Task[];
}

export interface ListTokensResponse {
  tokens?: Token[];
}

export interface ListUsersResponse {
  users?: User[];
}

export interface ListWebhookDeliveriesResponse {
  deliveries?: WebhookDelivery[];
}

export interface ListWebhooksResponse {
  webhooks?: Webhook[];
}

export interface ListWorkspacesResponse {
  workspaces?: Workspace[];
}

export interface LogLine {
  agentId?: string;
  id?: string; // int64
  message?: string;
  rank?: number;
  stream?: string;
  taskId?: string;
  time?: string; // date-time
  trialId?: string; // int64
}

export interface LoginRequest {
  password?: string;
  username?: string;
}

export interface LoginResponse {
  token?: string;
  user?: User;
}

export interface LogoutResponse {}

export interface MetricReport {
  batches?: string; // int64
  kind?: string;
  restart?: number;
  time?: string; // date-time
  trialId?: string; // int64
  values?: {
    [key: string]: unknown;
  };
}

export interface Model {
  archived?: boolean;
  createdAt?: string; // date-time
  description?: string;
  id?: string; // int64
  labels?: string[];
  latestVersion?: number;
  name?: string;
  numVersions?: number;
  owner?: string;
  updatedAt?: string; // date-time
  workspace?: string;
}

export interface ModelResponse {
  model?: Model;
}

export interface ModelVersion {
  bestValidationMetric?: number;
  checkpointPath?: string;
  checkpointUuid?: string;
  createdAt?: string; // date-time
  creator?: string;
  experimentId?: string; // int64
  latestValidationMetric?: number;
  metric?: string;
  modelId?: string; // int64
  modelName?: string;
  notes?: string;
  smallerIsBetter?: boolean;
  trialId?: string; // int64
  version?: number;
}

export interface ModelVersionResponse {
  version?: ModelVersion;
}

export interface Pagination {
  endIndex?: number;
  limit?: number;
  offset?: number;
  startIndex?: number;
  total?: number;
}

export interface RegisterModelVersionRequest {
  checkpointUuid?: string;
  name?: string;
  notes?: string;
}

export interface ResourcePool {
  agents?: number;
  name?: string;
  nodes?: number;
  queuedSlots?: number;
  queuedTrials?: number;
  runningTrials?: number;
  scheduler?: string;
  totalSlots?: number;
  usedSlots?: number;
}

export interface RevokeTokenResponse {}

export interface Serving {
  agentId?: string;
  checkpointUuid?: string;
  createdAt?: string; // date-time
  endedAt?: string; // date-time
  error?: string;
  id?: string; // int64
  modelName?: string;
  modelVersion?: number;
  owner?: string;
  resourcePool?: string;
  restarts?: number;
  slots?: number;
  state?: string;
  token?: string;
  url?: string;
  workspace?: string;
}

export interface ServingResponse {
  serving?: Serving;
}

export interface SetUserPasswordRequest {
  password?: string;
  username?: string;
}

export interface SetUserRoleRequest {
  role?: string;
  username?: string;
}

export interface SetWorkspaceMemberRequest {
  role?: string;
  username?: string;
  workspace?: string;
}

export interface Slot {
  allocationId?: string;
  device?: string;
  enabled?: boolean;
  id?: string;
  memoryTotalBytes?: string; // int64
  trialId?: string; // int64
  type?: "SLOT_TYPE_UNSPECIFIED" | "SLOT_TYPE_CPU" | "SLOT_TYPE_CUDA";
  usage?: GpuUsage;
  uuid?: string;
}

export interface StartServingRequest {
  bind?: string;
  maxBatchSentences?: number;
  maxBatchTokens?: number;
  maxRestarts?: number;
  maxWaitMs?: number;
  model?: string;
  priority?: number;
  resourcePool?: string;
  slots?: number;
  threads?: number;
  version?: number;
  workspace?: string;
}

export interface Task {
  agentId?: string;
  allocationId?: string;
  createdAt?: string; // date-time
  endedAt?: string; // date-time
  entrypoint?: string[];
  error?: string;
  exitCode?: number;
  experimentId?: string; // int64
  id?: string; // int64
  kind?: string;
  owner?: string;
  pendingReason?: string;
  priority?: number;
  resourcePool?: string;
  restarts?: number;
  slots?: number;
  state?: string;
  workspace?: string;
}

export interface TaskResponse {
  task?: Task;
}

export interface TestWebhookResponse {
  delivery?: WebhookDelivery;
}

export interface Token {
  createdAt?: string; // date-time
  expiresAt?: string; // date-time
  id?: string; // int64
  kind?: string;
  lastUsedAt?: string; // date-time
  name?: string;
  revoked?: boolean;
  token?: string;
  username?: string;
}

export interface Trial {
  bestValidationMetric?: number;
  endTime?: string; // date-time
  error?: string;
  experimentId?: string; // int64
  hosts?: string[];
  hparams?: {
    [key: string]: unknown;
  };
  id?: string; // int64
  jobId?: string;
  latestCheckpointUuid?: string;
  latestValidationMetric?: number;
  pendingReason?: string;
  restarts?: number;
  startTime?: string; // date-time
  state?: "TRIAL_STATE_UNSPECIFIED" | "TRIAL_STATE_QUEUED" | "TRIAL_STATE_RUNNING" | "TRIAL_STATE_PAUSED" | "TRIAL_STATE_COMPLETED" | "TRIAL_STATE_CANCELED" | "TRIAL_STATE_ERROR";
  targetBatches?: string; // int64
  totalBatches?: string; // int64
}

export interface UpdateModelRequest {
  addLabels?: string[];
  description?: string;
  name?: string;
  removeLabels?: string[];
}

export interface User {
  active?: boolean;
  createdAt?: string; // date-time
  role?: string;
  username?: string;
}

export interface UserResponse {
  user?: User;
}

export interface UtilizationPoint {
  pool?: string;
  samples?: number;
  slotsBusy?: number;
  slotsBusyMax?: number;
  slotsTotal?: number;
  time?: string; // date-time
}

export interface Webhook {
  createdAt?: string; // date-time
  events?: string[];
  experimentId?: string; // int64
  id?: string; // int64
  owner?: string;
  secret?: string;
  url?: string;
}

export interface WebhookDelivery {
  attemptLog?: WebhookDeliveryAttempt[];
  attempts?: number;
  createdAt?: string; // date-time
  deliveredAt?: string; // date-time
  id?: string;
  lastError?: string;
  lastStatusCode?: number;
  nextAttemptAt?: string; // date-time
  payloadJson?: string;
  state?: string;
  type?: string;
  webhookId?: string; // int64
}

export interface WebhookDeliveryAttempt {
  attempt?: number;
  durationMs?: number;
  error?: string;
  statusCode?: number;
  time?: string; // date-time
}

export interface Workspace {
  id?: string; // int64
  members?: WorkspaceMember[];
  name?: string;
}

export interface WorkspaceMember {
  role?: string;
  username?: string;
}

export interface WorkspaceMemberResponse {}

export interface WorkspaceMembership {
  name?: string;
  role?: string;
}

/** Every operation of the document by operationId: its HTTP method, path template (with
 *  {parameters}), and the names of its path and query parameters as the document spells them. */
export const operations = {
  "ActivateExperiment": {"method":"POST","path":"/api/v1/experiments/{id}/activate","pathParams":["id"],"queryParams":[]},
  "ActivateExperiments": {"method":"POST","path":"/api/v1/experiments/activate","pathParams":[],"queryParams":[]},
  "ActivateUser": {"method":"POST","path":"/api/v1/users/{username}/activate","pathParams":["username"],"queryParams":[]},
  "ArchiveExperiment": {"method":"POST","path":"/api/v1/experiments/{id}/archive","pathParams":["id"],"queryParams":[]},
  "ArchiveExperiments": {"method":"POST","path":"/api/v1/experiments/archive","pathParams":[],"queryParams":[]},
  "ArchiveModel": {"method":"POST","path":"/api/v1/models/{name}/archive","pathParams":["name"],"queryParams":[]},
  "ContinueExperiment": {"method":"POST","path":"/api/v1/experiments/{id}/continue","pathParams":["id"],"queryParams":[]},
  "CreateCommand": {"method":"POST","path":"/api/v1/commands","pathParams":[],"queryParams":[]},
  "CreateExperiment": {"method":"POST","path":"/api/v1/experiments","pathParams":[],"queryParams":[]},
  "CreateModel": {"method":"POST","path":"/api/v1/models","pathParams":[],"queryParams":[]},
  "CreateNotebook": {"method":"POST","path":"/api/v1/notebooks","pathParams":[],"queryParams":[]},
  "CreateShell": {"method":"POST","path":"/api/v1/shells","pathParams":[],"queryParams":[]},
  "CreateToken": {"method":"POST","path":"/api/v1/tokens","pathParams":[],"queryParams":[]},
  "CreateUnmanagedTrial": {"method":"POST","path":"/api/v1/unmanaged-trials","pathParams":[],"queryParams":[]},
  "CreateUser": {"method":"POST","path":"/api/v1/users","pathParams":[],"queryParams":[]},
  "CreateWebhook": {"method":"POST","path":"/api/v1/webhooks","pathParams":[],"queryParams":[]},
  "CreateWorkspace": {"method":"POST","path":"/api/v1/workspaces","pathParams":[],"queryParams":[]},
  "DeactivateUser": {"method":"POST","path":"/api/v1/users/{username}/deactivate","pathParams":["username"],"queryParams":[]},
  "DeleteCheckpoint": {"method":"DELETE","path":"/api/v1/checkpoints/{uuid}","pathParams":["uuid"],"queryParams":[]},
  "DeleteCheckpoints": {"method":"POST","path":"/api/v1/checkpoints/delete","pathParams":[],"queryParams":[]},
  "DeleteExperiment": {"method":"DELETE","path":"/api/v1/experiments/{id}","pathParams":["id"],"queryParams":[]},
  "DeleteExperiments": {"method":"POST","path":"/api/v1/experiments/delete","pathParams":[],"queryParams":[]},
  "DeleteModel": {"method":"DELETE","path":"/api/v1/models/{name}","pathParams":["name"],"queryParams":["force"]},
  "DeleteModelVersion": {"method":"DELETE","path":"/api/v1/models/{name}/versions/{version}","pathParams":["name","version"],"queryParams":[]},
  "DeleteWebhook": {"method":"DELETE","path":"/api/v1/webhooks/{id}","pathParams":["id"],"queryParams":[]},
  "GetAgents": {"method":"GET","path":"/api/v1/agents","pathParams":[],"queryParams":[]},
  "GetAuditLog": {"method":"GET","path":"/api/v1/audit","pathParams":[],"queryParams":["since","limit","actor"]},
  "GetCheckpoint": {"method":"GET","path":"/api/v1/checkpoints/{uuid}","pathParams":["uuid"],"queryParams":[]},
  "GetClusterUtilization": {"method":"GET","path":"/api/v1/cluster/utilization","pathParams":[],"queryParams":["since","pool"]},
  "GetExperiment": {"method":"GET","path":"/api/v1/experiments/{id}","pathParams":["id"],"queryParams":[]},
  "GetExperimentCheckpoints": {"method":"GET","path":"/api/v1/experiments/{id}/checkpoints","pathParams":["id"],"queryParams":[]},
  "GetExperimentContext": {"method":"GET","path":"/api/v1/experiments/{id}/context","pathParams":["id"],"queryParams":["include_archive"]},
  "GetExperimentSearcher": {"method":"GET","path":"/api/v1/experiments/{id}/searcher","pathParams":["id"],"queryParams":[]},
  "GetExperimentTrials": {"method":"GET","path":"/api/v1/experiments/{id}/trials","pathParams":["id"],"queryParams":["offset","limit"]},
  "GetExperiments": {"method":"GET","path":"/api/v1/experiments","pathParams":[],"queryParams":["states","name","sort_by","descending","offset","limit","include_archived","fields"]},
  "GetMaster": {"method":"GET","path":"/api/v1/master","pathParams":[],"queryParams":[]},
  "GetMe": {"method":"GET","path":"/api/v1/auth/me","pathParams":[],"queryParams":[]},
  "GetModel": {"method":"GET","path":"/api/v1/models/{name}","pathParams":["name"],"queryParams":[]},
  "GetModelVersion": {"method":"GET","path":"/api/v1/models/{name}/versions/{version}","pathParams":["name","version"],"queryParams":[]},
  "GetResourcePools": {"method":"GET","path":"/api/v1/resource-pools","pathParams":[],"queryParams":[]},
  "GetServing": {"method":"GET","path":"/api/v1/servings/{id}","pathParams":["id"],"queryParams":[]},
  "GetTask": {"method":"GET","path":"/api/v1/tasks/{id}","pathParams":["id"],"queryParams":[]},
  "GetTaskLogs": {"method":"GET","path":"/api/v1/tasks/{id}/logs","pathParams":["id"],"queryParams":["after_id","limit","search"]},
  "GetTrial": {"method":"GET","path":"/api/v1/trials/{id}","pathParams":["id"],"queryParams":[]},
  "GetTrialLogs": {"method":"GET","path":"/api/v1/trials/{id}/logs","pathParams":["id"],"queryParams":["after_id","limit","follow","search"]},
  "GetTrialMetrics": {"method":"GET","path":"/api/v1/trials/{id}/metrics","pathParams":["id"],"queryParams":["kind","start_batches","end_batches","max_points"]},
  "Health": {"method":"GET","path":"/health","pathParams":[],"queryParams":[]},
  "KillExperiment": {"method":"POST","path":"/api/v1/experiments/{id}/kill","pathParams":["id"],"queryParams":[]},
  "KillExperiments": {"method":"POST","path":"/api/v1/experiments/kill","pathParams":[],"queryParams":[]},
  "KillTask": {"method":"POST","path":"/api/v1/tasks/{id}/kill","pathParams":["id"],"queryParams":[]},
  "ListModels": {"method":"GET","path":"/api/v1/models","pathParams":[],"queryParams":["name","label","include_archived","workspace","sort_by","descending","offset","limit"]},
  "ListServings": {"method":"GET","path":"/api/v1/servings","pathParams":[],"queryParams":["include_stopped"]},
  "ListTasks": {"method":"GET","path":"/api/v1/tasks","pathParams":[],"queryParams":["kind","include_ended"]},
  "ListTokens": {"method":"GET","path":"/api/v1/tokens","pathParams":[],"queryParams":["all"]},
  "ListUsers": {"method":"GET","path":"/api/v1/users","pathParams":[],"queryParams":[]},
  "ListWebhookDeliveries": {"method":"GET","path":"/api/v1/webhooks/{id}/deliveries","pathParams":["id"],"queryParams":["limit"]},
  "ListWebhooks": {"method":"GET","path":"/api/v1/webhooks","pathParams":[],"queryParams":[]},
  "ListWorkspaces": {"method":"GET","path":"/api/v1/workspaces","pathParams":[],"queryParams":[]},
  "Login": {"method":"POST","path":"/api/v1/auth/login","pathParams":[],"queryParams":[]},
  "Logout": {"method":"POST","path":"/api/v1/auth/logout","pathParams":[],"queryParams":[]},
  "OpenApi": {"method":"GET","path":"/api/v1/openapi.json","pathParams":[],"queryParams":[]},
  "PauseExperiment": {"method":"POST","path":"/api/v1/experiments/{id}/pause","pathParams":["id"],"queryParams":[]},
  "PauseExperiments": {"method":"POST","path":"/api/v1/experiments/pause","pathParams":[],"queryParams":[]},
  "RegisterModelVersion": {"method":"POST","path":"/api/v1/models/{name}/versions","pathParams":["name"],"queryParams":[]},
  "RemoveWorkspaceMember": {"method":"DELETE","path":"/api/v1/workspaces/{workspace}/members/{username}","pathParams":["workspace","username"],"queryParams":[]},
  "RestoreAgent": {"method":"POST","path":"/api/v1/agents/{agent}/restore","pathParams":["agent"],"queryParams":[]},
  "RevokeAgent": {"method":"POST","path":"/api/v1/agents/{agent}/revoke","pathParams":["agent"],"queryParams":[]},
  "RevokeToken": {"method":"DELETE","path":"/api/v1/tokens/{id}","pathParams":["id"],"queryParams":[]},
  "SetUserPassword": {"method":"POST","path":"/api/v1/users/{username}/password","pathParams":["username"],"queryParams":[]},
  "SetUserRole": {"method":"POST","path":"/api/v1/users/{username}/role","pathParams":["username"],"queryParams":[]},
  "SetWorkspaceMember": {"method":"PUT","path":"/api/v1/workspaces/{workspace}/members/{username}","pathParams":["workspace","username"],"queryParams":[]},
  "StartServing": {"method":"POST","path":"/api/v1/servings","pathParams":[],"queryParams":[]},
  "StopServing": {"method":"POST","path":"/api/v1/servings/{id}/stop","pathParams":["id"],"queryParams":[]},
  "TestWebhook": {"method":"POST","path":"/api/v1/webhooks/{id}/test","pathParams":["id"],"queryParams":[]},
  "UnarchiveExperiment": {"method":"POST","path":"/api/v1/experiments/{id}/unarchive","pathParams":["id"],"queryParams":[]},
  "UnarchiveExperiments": {"method":"POST","path":"/api/v1/experiments/unarchive","pathParams":[],"queryParams":[]},
  "UnarchiveModel": {"method":"POST","path":"/api/v1/models/{name}/unarchive","pathParams":["name"],"queryParams":[]},
  "UpdateModel": {"method":"PUT","path":"/api/v1/models/{name}","pathParams":["name"],"queryParams":[]}
} as const;

export type OperationId = keyof typeof operations;

/** Per operation: its query parameters (named as the document names them), its JSON request
 *  body (undefined: none) and its JSON answer (the first 2xx; undefined: no body). */
export interface OperationTypes {
  ActivateExperiment: {
    query: {};
    request: undefined;
    response: ExperimentActionResponse;
  };
  ActivateExperiments: {
    query: {};
    request: BulkExperimentActionRequest;
    response: BulkExperimentActionResponse;
  };
  ActivateUser: {
    query: {};
    request: undefined;
    response: UserResponse;
  };
  ArchiveExperiment: {
    query: {};
    request: undefined;
    response: ExperimentActionResponse;
  };
  ArchiveExperiments: {
    query: {};
    request: BulkExperimentActionRequest;
    response: BulkExperimentActionResponse;
  };
  ArchiveModel: {
    query: {};
    request: undefined;
    response: ModelResponse;
  };
  ContinueExperiment: {
    query: {};
    request: ContinueExperimentRequest;
    response: CreateExperimentResponse;
  };
  CreateCommand: {
    query: {};
    request: CreateCommandRequest;
    response: TaskResponse;
  };
  CreateExperiment: {
    query: {};
    request: CreateExperimentRequest;
    response: CreateExperimentResponse;
  };
  CreateModel: {
    query: {};
    request: CreateModelRequest;
    response: ModelResponse;
  };
  CreateNotebook: {
    query: {};
    request: InteractiveTaskRequest;
    response: TaskResponse;
  };
  CreateShell: {
    query: {};
    request: InteractiveTaskRequest;
    response: TaskResponse;
  };
  CreateToken: {
    query: {};
    request: CreateTokenRequest;
    response: Token;
  };
  CreateUnmanagedTrial: {
    query: {};
    request: CreateUnmanagedTrialRequest;
    response: CreateUnmanagedTrialResponse;
  };
  CreateUser: {
    query: {};
    request: CreateUserRequest;
    response: UserResponse;
  };
  CreateWebhook: {
    query: {};
    request: CreateWebhookRequest;
    response: Webhook;
  };
  CreateWorkspace: {
    query: {};
    request: CreateWorkspaceRequest;
    response: Workspace;
  };
  DeactivateUser: {
    query: {};
    request: undefined;
    response: UserResponse;
  };
  DeleteCheckpoint: {
    query: {};
    request: undefined;
    response: DeleteCheckpointResponse;
  };
  DeleteCheckpoints: {
    query: {};
    request: DeleteCheckpointsRequest;
    response: DeleteCheckpointsResponse;
  };
  DeleteExperiment: {
    query: {};
    request: undefined;
    response: DeleteExperimentResponse;
  };
  DeleteExperiments: {
    query: {};
    request: BulkExperimentActionRequest;
    response: BulkExperimentActionResponse;
  };
  DeleteModel: {
    query: {
      force?: boolean;
    };
    request: undefined;
    response: DeleteModelResponse;
  };
  DeleteModelVersion: {
    query: {};
    request: undefined;
    response: DeleteModelVersionResponse;
  };
  DeleteWebhook: {
    query: {};
    request: undefined;
    response: DeleteWebhookResponse;
  };
  GetAgents: {
    query: {};
    request: undefined;
    response: GetAgentsResponse;
  };
  GetAuditLog: {
    query: {
      since?: string;
      limit?: number;
      actor?: string;
    };
    request: undefined;
    response: GetAuditLogResponse;
  };
  GetCheckpoint: {
    query: {};
    request: undefined;
    response: GetCheckpointResponse;
  };
  GetClusterUtilization: {
    query: {
      since?: string;
      pool?: string;
    };
    request: undefined;
    response: GetClusterUtilizationResponse;
  };
  GetExperiment: {
    query: {};
    request: undefined;
    response: GetExperimentResponse;
  };
  GetExperimentCheckpoints: {
    query: {};
    request: undefined;
    response: GetExperimentCheckpointsResponse;
  };
  GetExperimentContext: {
    query: {
      include_archive?: boolean;
    };
    request: undefined;
    response: GetExperimentContextResponse;
  };
  GetExperimentSearcher: {
    query: {};
    request: undefined;
    response: GetExperimentSearcherResponse;
  };
  GetExperimentTrials: {
    query: {
      offset?: number;
      limit?: number;
    };
    request: undefined;
    response: GetExperimentTrialsResponse;
  };
  GetExperiments: {
    query: {
      states?: ("EXPERIMENT_STATE_UNSPECIFIED" | "EXPERIMENT_STATE_ACTIVE" | "EXPERIMENT_STATE_PAUSED" | "EXPERIMENT_STATE_STOPPING_COMPLETED" | "EXPERIMENT_STATE_STOPPING_CANCELED" | "EXPERIMENT_STATE_STOPPING_ERROR" | "EXPERIMENT_STATE_COMPLETED" | "EXPERIMENT_STATE_CANCELED" | "EXPERIMENT_STATE_ERROR")[];
      name?: string;
      sort_by?: string;
      descending?: boolean;
      offset?: number;
      limit?: number;
      include_archived?: boolean;
      fields?: string[];
    };
    request: undefined;
    response: GetExperimentsResponse;
  };
  GetMaster: {
    query: {};
    request: undefined;
    response: GetMasterResponse;
  };
  GetMe: {
    query: {};
    request: undefined;
    response: GetMeResponse;
  };
  GetModel: {
    query: {};
    request: undefined;
    response: GetModelResponse;
  };
  GetModelVersion: {
    query: {};
    request: undefined;
    response: GetModelVersionResponse;
  };
  GetResourcePools: {
    query: {};
    request: undefined;
    response: GetResourcePoolsResponse;
  };
  GetServing: {
    query: {};
    request: undefined;
    response: ServingResponse;
  };
  GetTask: {
    query: {};
    request: undefined;
    response: TaskResponse;
  };
  GetTaskLogs: {
    query: {
      after_id?: string;
      limit?: number;
      search?: string;
    };
    request: undefined;
    response: GetTrialLogsResponse;
  };
  GetTrial: {
    query: {};
    request: undefined;
    response: GetTrialResponse;
  };
  GetTrialLogs: {
    query: {
      after_id?: string;
      limit?: number;
      /** true: stream as server-sent events (text/event-stream) until the end */
      follow?: boolean;
      search?: string;
    };
    request: undefined;
    response: GetTrialLogsResponse;
  };
  GetTrialMetrics: {
    query: {
      kind?: string;
      start_batches?: string;
      end_batches?: string;
      max_points?: number;
    };
    request: undefined;
    response: GetTrialMetricsResponse;
  };
  Health: {
    query: {};
    request: undefined;
    response: Health;
  };
  KillExperiment: {
    query: {};
    request: undefined;
    response: ExperimentActionResponse;
  };
  KillExperiments: {
    query: {};
    request: BulkExperimentActionRequest;
    response: BulkExperimentActionResponse;
  };
  KillTask: {
    query: {};
    request: undefined;
    response: TaskResponse;
  };
  ListModels: {
    query: {
      name?: string;
      label?: string;
      include_archived?: boolean;
      workspace?: string;
      sort_by?: string;
      descending?: boolean;
      offset?: number;
      limit?: number;
    };
    request: undefined;
    response: ListModelsResponse;
  };
  ListServings: {
    query: {
      include_stopped?: boolean;
    };
    request: undefined;
    response: ListServingsResponse;
  };
  ListTasks: {
    query: {
      kind?: string;
      include_ended?: boolean;
    };
    request: undefined;
    response: ListTasksResponse;
  };
  ListTokens: {
    query: {
      all?: boolean;
    };
    request: undefined;
    response: ListTokensResponse;
  };
  ListUsers: {
    query: {};
    request: undefined;
    response: ListUsersResponse;
  };
  ListWebhookDeliveries: {
    query: {
      limit?: number;
    };
    request: undefined;
    response: ListWebhookDeliveriesResponse;
  };
  ListWebhooks: {
    query: {};
    request: undefined;
    response: ListWebhooksResponse;
  };
  ListWorkspaces: {
    query: {};
    request: undefined;
    response: ListWorkspacesResponse;
  };
  Login: {
    query: {};
    request: LoginRequest;
    response: LoginResponse;
  };
  Logout: {
    query: {};
    request: undefined;
    response: LogoutResponse;
  };
  OpenApi: {
    query: {};
    request: undefined;
    response: Empty;
  };
  PauseExperiment: {
    query: {};
    request: undefined;
    response: ExperimentActionResponse;
  };
  PauseExperiments: {
    query: {};
    request: BulkExperimentActionRequest;
    response: BulkExperimentActionResponse;
  };
  RegisterModelVersion: {
    query: {};
    request: RegisterModelVersionRequest;
    response: ModelVersionResponse;
  };
  RemoveWorkspaceMember: {
    query: {};
    request: undefined;
    response: WorkspaceMemberResponse;
  };
  RestoreAgent: {
    query: {};
    request: undefined;
    response: AgentRevocationResponse;
  };
  RevokeAgent: {
    query: {};
    request: undefined;
    response: AgentRevocationResponse;
  };
  RevokeToken: {
    query: {};
    request: undefined;
    response: RevokeTokenResponse;
  };
  SetUserPassword: {
    query: {};
    request: SetUserPasswordRequest;
    response: UserResponse;
  };
  SetUserRole: {
    query: {};
    request: SetUserRoleRequest;
    response: UserResponse;
  };
  SetWorkspaceMember: {
    query: {};
    request: SetWorkspaceMemberRequest;
    response: WorkspaceMemberResponse;
  };
  StartServing: {
    query: {};
    request: StartServingRequest;
    response: ServingResponse;
  };
  StopServing: {
    query: {};
    request: undefined;
    response: ServingResponse;
  };
  TestWebhook: {
    query: {};
    request: undefined;
    response: TestWebhookResponse;
  };
  UnarchiveExperiment: {
    query: {};
    request: undefined;
    response: ExperimentActionResponse;
  };
  UnarchiveExperiments: {
    query: {};
    request: BulkExperimentActionRequest;
    response: BulkExperimentActionResponse;
  };
  UnarchiveModel: {
    query: {};
    request: undefined;
    response: ModelResponse;
  };
  UpdateModel: {
    query: {};
    request: UpdateModelRequest;
    response: ModelResponse;
  };
}
