// Types of the Steadfast REST API (proto/steadfast/v1, protobuf canonical JSON mapping), as
// client.ts normalises them from the wire types of generated/wire.ts: int64 ids become numbers,
// omitted proto3 defaults are filled in, timestamps stay RFC 3339 strings.
import type * as wire from './generated/wire';

/** True when A and B are the same type (not merely assignable one way). */
type Same<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;

export const EXPERIMENT_STATES = [
  'EXPERIMENT_STATE_ACTIVE',
  'EXPERIMENT_STATE_PAUSED',
  'EXPERIMENT_STATE_STOPPING_COMPLETED',
  'EXPERIMENT_STATE_STOPPING_CANCELED',
  'EXPERIMENT_STATE_STOPPING_ERROR',
  'EXPERIMENT_STATE_COMPLETED',
  'EXPERIMENT_STATE_CANCELED',
  'EXPERIMENT_STATE_ERROR',
] as const;
export type ExperimentState = (typeof EXPERIMENT_STATES)[number] | 'EXPERIMENT_STATE_UNSPECIFIED';
// The list above (in the order the filter shows it) must be the proto's enum: a state added to or
// removed from the proto fails `tsc` here until the list follows.
true satisfies Same<ExperimentState, NonNullable<wire.Experiment['state']>>;

export const TRIAL_STATES = [
  'TRIAL_STATE_QUEUED',
  'TRIAL_STATE_RUNNING',
  'TRIAL_STATE_PAUSED',
  'TRIAL_STATE_COMPLETED',
  'TRIAL_STATE_CANCELED',
  'TRIAL_STATE_ERROR',
] as const;
export type TrialState = (typeof TRIAL_STATES)[number] | 'TRIAL_STATE_UNSPECIFIED';
true satisfies Same<TrialState, NonNullable<wire.Trial['state']>>;

export interface Experiment {
  id: number;
  name: string;
  description: string;
  state: ExperimentState;
  /** Only from getExperiment (GET /experiments/{id}); '' in list rows, which leave it out. */
  configYaml: string;
  owner: string; // username
  workspace: string; // '' when the experiment is in no workspace
  archived: boolean;
  /** A script started by hand (not by the master) reports into it (the Core API's unmanaged mode). */
  unmanaged: boolean;
  searcher: string;
  metric: string;
  smallerIsBetter: boolean;
  numTrials: number;
  numCompletedTrials: number;
  bestValidationMetric?: number;
  startTime?: string;
  endTime?: string;
  priority: number;
  error: string;
}

/** One entry of a user-code experiment's context (GET /experiments/{id}/context). */
export interface ContextFile {
  path: string;
  /** Bytes on disk; 0 for a link. */
  size: number;
  /** A symbolic link's target; '' for a regular file. */
  linkTarget: string;
}

/** The context a user-code experiment runs from: its files and the archive's size and digest;
 *  `archiveBase64` only when asked for (includeArchive), '' otherwise. */
export interface ExperimentContext {
  files: ContextFile[];
  fileBytes: number;
  archiveBytes: number;
  sha256: string;
  archiveBase64: string;
}

export type HParamValue = number | string | boolean | null | HParamValue[] | { [k: string]: HParamValue };

export interface Trial {
  id: number;
  experimentId: number;
  state: TrialState;
  hparams: Record<string, HParamValue>;
  restarts: number;
  totalBatches: number;
  targetBatches: number;
  bestValidationMetric?: number;
  latestValidationMetric?: number;
  latestCheckpointUuid: string;
  startTime?: string;
  endTime?: string;
  error: string;
  // Why a QUEUED trial waits, in the scheduler's words; empty otherwise.
  pendingReason: string;
  /** Its latest run's job id at a resource manager other than the agents (a Slurm job id, for
   *  squeue/sacct); '' on agents. */
  jobId: string;
  /** Where its latest run ran, each place once: agent ids in rank order, or another manager's
   *  node list prefixed by it ("slurm:node[1-2]"; lib/hosts.ts). Empty before its first run
   *  starts; kept after it ends. */
  hosts: string[];
}

/** One trial as GET /trials/{id} answers it: the trial and the metric groups it has reported. */
export interface TrialDetail extends Trial {
  /** The groups the trial has reported metrics in, as the master sorts them: the built-in
   *  `training` and `validation` and any its code named through the Core API
   *  (`report_metrics("inference", ...)`); empty when it has reported nothing. */
  metricGroups: string[];
}

/** The two built-in metric groups, which every trainer reports. */
export type MetricKind = 'training' | 'validation';
export const BUILTIN_METRIC_GROUPS: readonly MetricKind[] = ['training', 'validation'];
/** A metric group: a MetricKind, or a name user code chose (`^[a-z][a-z0-9_]{0,63}$`). Its rows
 *  are read like the built-in ones (GET /trials/{id}/metrics?kind=NAME). */
export type MetricGroup = MetricKind | (string & {});

/** A metric's value as stored: a number (what charts draw), or, in a group of the trial's own,
 *  any JSON value the trial reported (text, a list: a speech trial's validation_transcripts). */
export type MetricValue = number | string | boolean | null | readonly unknown[] | { readonly [key: string]: unknown };

export interface MetricReport {
  trialId: number;
  batches: number;
  kind: string;
  values: Record<string, MetricValue>;
  time?: string;
  restart: number;
}

export interface CheckpointFile {
  path: string;
  size: number;
  sha256: string;
}

export interface Checkpoint {
  uuid: string;
  trialId: number;
  experimentId: number;
  batches: number;
  path: string;
  size: number;
  files: CheckpointFile[];
  metadata: Record<string, unknown>;
  validationMetric?: number;
  time?: string;
  state: string;
}

/** One line of a trial's or a task's logs (GET /trials/{id}/logs; GET /tasks/{id}/logs for a
 *  command or a server). */
export interface LogLine {
  id: number;
  trialId: number; // 0 for a line of a task that is not a trial's (a command's, a server's)
  rank: number;
  stream: string;
  message: string;
  time?: string;
  agentId: string;
  /** The rank's task ("t12-r0-a1.0" for a trial's, "task7-r0-a1.0" for a command's or a
   *  server's). Agents set it: '' on a line the master wrote itself or an older agent sent. */
  taskId: string;
}

export type SlotType = NonNullable<wire.Slot['type']>; // SLOT_TYPE_UNSPECIFIED | _CPU | _CUDA

export interface Slot {
  id: string;
  type: SlotType;
  device: string;
  enabled: boolean;
  trialId: number; // the trial whose rank holds the slot; 0 when free or held by a task of its own
  /** The allocation placed on the slot: "t12-r0-a1" for a trial's rank, "task7-r0-a1" for a task
   *  of its own (command or server 7; trialId is then 0); '' when free (or from a master older
   *  than the field). */
  allocationId: string;
  uuid: string; // a GPU found through NVML: "GPU-…"; '' otherwise
  memoryTotalBytes: number; // a GPU's memory; 0 when unknown
  usage?: GpuUsage; // a GPU's latest sample (agent heartbeat); absent when there is none
}

/** One NVML sample of a GPU slot, as the agent's last heartbeat reported it. */
export interface GpuUsage {
  utilizationPercent: number; // 0..100
  memoryUsedBytes: number;
  sampleTime?: string; // when the master received it
}

export interface Agent {
  id: string;
  hostname: string;
  resourcePool: string;
  slots: Slot[];
  connected: boolean;
  registeredTime?: string;
  lastHeartbeat?: string;
  version: string;
  address: string;
}

/** A resource pool as the scheduler sees it now (GET /api/v1/resource-pools). */
export interface ResourcePool {
  name: string;
  scheduler: string; // priority | fair_share
  agents: number;
  totalSlots: number; // enabled slots of the pool's agents
  usedSlots: number; // slots held by running trials
  runningTrials: number;
  queuedTrials: number; // trials waiting for slots in the pool
  queuedSlots: number; // slots those trials ask for together
  nodes: number; // a pool another resource manager places (Slurm): its nodes that take jobs; 0 for agents
}

/** One minute of one resource pool in the master's utilisation history
 *  (GET /api/v1/cluster/utilization). */
export interface UtilizationPoint {
  pool: string;
  time: number; // start of the minute, seconds since the epoch
  slotsTotal: number; // enabled slots of connected agents (most seen in the minute)
  slotsBusy: number; // busy slots, mean of the minute's samples
  slotsBusyMax: number; // busy slots, most in one sample
  samples: number;
}

export interface Pagination {
  offset: number;
  limit: number;
  total: number;
  startIndex: number;
  endIndex: number;
}

export interface MasterInfo {
  version: string;
  masterId: string;
  clusterName: string;
  schemaVersion: number;
  connectedAgents: number;
  totalSlots: number;
  usedSlots: number;
}

export interface ConfigError {
  path: string;
  message: string;
  line: number;
  column: number;
}

export type ExperimentAction = 'pause' | 'activate' | 'kill' | 'archive';

export interface ExperimentsQuery {
  states?: string[];
  name?: string;
  sortBy?: string; // id | name | state | start_time | end_time | best_metric
  descending?: boolean;
  offset?: number;
  limit?: number;
  includeArchived?: boolean;
  /** Large fields to include in each row: ['config'] fills `configYaml`. */
  fields?: string[];
}

export type UserRole = 'admin' | 'user' | 'viewer';

export interface WorkspaceMembership {
  name: string;
  role: 'admin' | 'editor' | 'viewer';
}

/** The logged-in user (GET /api/v1/auth/me; POST /auth/login answers the same without workspaces). */
export interface Whoami {
  username: string;
  role: UserRole;
  workspaces: WorkspaceMembership[];
}

/** A long-lived API token as listed (never with its secret). Times are RFC 3339; undefined = none. */
export interface ApiToken {
  id: string;
  name: string;
  username: string;
  /** 'api' for a token made on the tokens page or by `sf token create`; 'session' for a login
   *  (the master lists live sessions too). */
  kind: 'api' | 'session';
  createdAt?: string;
  expiresAt?: string; // undefined: never expires
  lastUsedAt?: string; // undefined: never used
  revoked: boolean;
}

/** POST /api/v1/tokens: the secret `token` is in this answer only. */
export interface CreatedToken {
  id: string;
  name: string;
  token: string;
  expiresAt?: string;
}

export interface User {
  username: string;
  role: UserRole;
  active: boolean;
  createdAt?: string;
}

/** A registered model (docs/registry.md). */
export interface Model {
  id: number;
  name: string;
  description: string;
  labels: string[];
  owner: string; // username of its creator
  workspace: string; // '' when in no workspace
  archived: boolean;
  numVersions: number;
  latestVersion: number; // 0 when it has none
  createdAt?: string;
  updatedAt?: string;
}

/** A version of a model: a checkpoint registered under it. */
export interface ModelVersion {
  modelId: number;
  modelName: string;
  version: number;
  checkpointUuid: string;
  experimentId: number; // the checkpoint's source; 0 when unknown
  trialId: number;
  notes: string;
  creator: string;
  createdAt?: string;
  /** The source trial's validation results, carried by GetModel's versions too (so the model page
   *  needs no GetModelVersion per version): its experiment's searcher metric ('' when it has none),
   *  which way is better, the trial's best and latest values (undefined when it has none). */
  metric: string;
  smallerIsBetter: boolean;
  bestValidationMetric?: number;
  latestValidationMetric?: number;
  checkpointPath: string; // where the checkpoint is; '' when unknown
}

/** GET /models/{name}/versions/{version}: the version with its checkpoint and the source trial's
 *  validation results (the experiment's searcher metric). */
export interface ModelVersionDetail {
  version: ModelVersion;
  checkpoint?: Checkpoint;
  metric: string; // '' when the experiment has none
  smallerIsBetter: boolean;
  bestValidationMetric?: number;
  latestValidationMetric?: number;
  latestValidation?: MetricReport;
}

export interface ModelsQuery {
  name?: string; // substring
  label?: string;
  includeArchived?: boolean;
  workspace?: string;
  sortBy?: string;
  descending?: boolean;
  offset?: number;
  limit?: number;
}

/** A translation server the master schedules on agent slots (`sf serve start`, GET
 *  /api/v1/servings). It is a task of its own, not an experiment: `id` is its task's id, and its
 *  logs are read by that id (GET /api/v1/tasks/{id}/logs; ApiClient.getTaskLogs). */
export interface Serving {
  id: number;
  modelName: string;
  modelVersion: number;
  checkpointUuid: string;
  /** QUEUED (waiting for slots), STARTING (placed, loading the weights), READY (answering at
   *  `url`), STOPPING, STOPPED, FAILED (see `error`); 'UNKNOWN' when the master sent none.
   *  A string in the proto, not an enum: a state added later is shown as the master names it. */
  state: string;
  url: string; // set while READY: http://HOST:PORT
  slots: number;
  resourcePool: string; // '' = the default pool
  owner: string;
  workspace: string;
  agentId: string; // '' when not placed
  createdAt?: string;
  endedAt?: string; // once STOPPED or FAILED
  error: string;
  restarts: number; // times it was started again after a failure
}

/** The kinds of task the master lists (docs/tasks.md, "Every task"): its own tasks, and TRIAL,
 *  an experiment's trial shown in the same list. A string in the proto: a kind added later is
 *  shown as the master names it. */
export type TaskKind = 'COMMAND' | 'SERVER' | 'NOTEBOOK' | 'SHELL' | 'TRIAL' | (string & {});

/** A row of GET /api/v1/tasks: a task of its own (a command, `sf cmd run`; a server, `sf serve
 *  start`, whose task view is RUNNING where the server is STARTING or READY; a notebook; a shell),
 *  or an experiment's trial (kind TRIAL). A TRIAL's `id` is the trial's, numbered apart from the
 *  tasks' (a trial and a command may share an id), and the task routes (GetTask, KillTask,
 *  GetTaskLogs) do not take it: its page, logs and stop are the trial's and its experiment's. */
export interface Task {
  id: number;
  kind: TaskKind; // 'UNKNOWN' when the master sent none
  /** QUEUED (waiting for slots: `pendingReason` says why), RUNNING, STOPPING (being killed),
   *  STOPPED (killed; a server stopped), COMPLETED (a command that exited 0), FAILED (`error`);
   *  a TRIAL may also be PAUSED (its experiment paused); 'UNKNOWN' when the master sent none. */
  state: string;
  owner: string;
  workspace: string;
  entrypoint: string[]; // what its ranks run: the program and its arguments
  slots: number;
  resourcePool: string; // '' = the default pool
  priority: number;
  agentId: string; // where rank 0 runs now; '' when not placed
  createdAt?: string;
  endedAt?: string; // once STOPPED, COMPLETED or FAILED
  error: string;
  restarts: number;
  /** Rank 0's exit status once a command ended (128 + N for a signal N); undefined before, and
   *  when it ended without one (killed while queued, its agent lost). */
  exitCode?: number;
  pendingReason: string; // QUEUED: why it waits, as its resource manager says; '' otherwise
  allocationId: string; // its newest allocation ("task7-r0-a1", a trial's "t12-r0-a1"); '' before the first
  experimentId: number; // a TRIAL's experiment; 0 for every other kind
}

/** GET /api/v1/tasks's filters: one kind (all when absent), and the newest 100 ended ones (and
 *  100 ended trials) too. */
export interface TasksQuery {
  kind?: 'COMMAND' | 'SERVER' | 'NOTEBOOK' | 'SHELL' | 'TRIAL';
  includeEnded?: boolean;
}
