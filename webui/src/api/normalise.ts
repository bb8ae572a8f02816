// Normalisation of the master's protobuf JSON into the dashboard's types (types.ts), one
// normaliser per message. Each takes the generated wire type, so a renamed or removed field fails
// `tsc`; fields.ts reads the fields.
import { bool, list, msg, num, obj, optNum, optStr, str } from './fields';
import type * as wire from './generated/wire';
import type { ResponseOf } from './operations';
import type {
  Agent,
  Checkpoint,
  ApiToken,
  ContextFile,
  Experiment,
  ExperimentContext,
  GpuUsage,
  LogLine,
  MasterInfo,
  MetricReport,
  Model,
  ModelVersion,
  ModelVersionDetail,
  Pagination,
  ResourcePool,
  Serving,
  Slot,
  Task,
  Trial,
  TrialDetail,
  User,
  UserRole,
  UtilizationPoint,
  Whoami,
  WorkspaceMembership,
} from './types';

export function normExperiment(j: wire.Experiment | undefined): Experiment {
  const o = msg(j);
  return {
    id: num(o.id),
    name: str(o.name),
    description: str(o.description),
    state: (str(o.state) || 'EXPERIMENT_STATE_UNSPECIFIED') as Experiment['state'],
    configYaml: str(o.configYaml),
    owner: str(o.owner),
    workspace: str(o.workspace),
    archived: bool(o.archived),
    unmanaged: bool(o.unmanaged),
    searcher: str(o.searcher),
    metric: str(o.metric),
    smallerIsBetter: bool(o.smallerIsBetter),
    numTrials: num(o.numTrials),
    numCompletedTrials: num(o.numCompletedTrials),
    bestValidationMetric: optNum(o.bestValidationMetric),
    startTime: optStr(o.startTime),
    endTime: optStr(o.endTime),
    priority: num(o.priority),
    error: str(o.error),
  };
}

export function normTrial(j: wire.Trial | undefined): Trial {
  const o = msg(j);
  return {
    id: num(o.id),
    experimentId: num(o.experimentId),
    state: (str(o.state) || 'TRIAL_STATE_UNSPECIFIED') as Trial['state'],
    hparams: obj(o.hparams),
    restarts: num(o.restarts),
    totalBatches: num(o.totalBatches),
    targetBatches: num(o.targetBatches),
    bestValidationMetric: optNum(o.bestValidationMetric),
    latestValidationMetric: optNum(o.latestValidationMetric),
    latestCheckpointUuid: str(o.latestCheckpointUuid),
    startTime: optStr(o.startTime),
    endTime: optStr(o.endTime),
    error: str(o.error),
    pendingReason: str(o.pendingReason),
    jobId: str(o.jobId),
    hosts: list(o.hosts).map(str).filter((h) => h !== ''),
  };
}

/** GET /trials/{id}'s answer; `metricGroups` is left out (empty) for a trial that reported nothing. */
export function normTrialDetail(j: ResponseOf<'GetTrial'> | undefined): TrialDetail {
  const o = msg(j);
  return { ...normTrial(o.trial), metricGroups: list(o.metricGroups).map(str).filter((g) => g !== '') };
}

export function normMetric(j: wire.MetricReport | undefined): MetricReport {
  const o = msg(j);
  return {
    trialId: num(o.trialId),
    batches: num(o.batches),
    kind: str(o.kind),
    values: obj(o.values),
    time: optStr(o.time),
    restart: num(o.restart),
  };
}

export function normContextFile(j: wire.ContextFile | undefined): ContextFile {
  const o = msg(j);
  return { path: str(o.path), size: num(o.size), linkTarget: str(o.linkTarget) };
}

/** GET /experiments/{id}/context's answer; `archive` is base64 (protobuf JSON's bytes). */
export function normExperimentContext(j: ResponseOf<'GetExperimentContext'> | undefined): ExperimentContext {
  const o = msg(j);
  return { files: list(o.files).map(normContextFile), fileBytes: num(o.fileBytes), archiveBytes: num(o.archiveBytes), sha256: str(o.sha256), archiveBase64: str(o.archive) };
}

export function normCheckpoint(j: wire.Checkpoint | undefined): Checkpoint {
  const o = msg(j);
  return {
    uuid: str(o.uuid),
    trialId: num(o.trialId),
    experimentId: num(o.experimentId),
    batches: num(o.batches),
    path: str(o.path),
    size: num(o.size),
    files: list(o.files).map((f) => ({ path: str(f?.path), size: num(f?.size), sha256: str(f?.sha256) })),
    metadata: obj(o.metadata),
    validationMetric: optNum(o.validationMetric),
    time: optStr(o.time),
    state: str(o.state),
  };
}

export function normLog(j: wire.LogLine | undefined): LogLine {
  const o = msg(j);
  return {
    id: num(o.id),
    trialId: num(o.trialId),
    rank: num(o.rank),
    stream: str(o.stream),
    message: str(o.message),
    time: optStr(o.time),
    agentId: str(o.agentId),
    taskId: str(o.taskId),
  };
}

function normSlot(j: wire.Slot | undefined): Slot {
  const o = msg(j);
  return {
    id: str(o.id),
    type: (str(o.type) || 'SLOT_TYPE_UNSPECIFIED') as Slot['type'],
    device: str(o.device),
    enabled: o.enabled === undefined ? false : bool(o.enabled),
    trialId: num(o.trialId),
    allocationId: str(o.allocationId),
    uuid: str(o.uuid),
    memoryTotalBytes: num(o.memoryTotalBytes),
    usage: o.usage && typeof o.usage === 'object' ? normGpuUsage(o.usage) : undefined,
  };
}

function normGpuUsage(j: wire.GpuUsage | undefined): GpuUsage {
  const o = msg(j);
  return { utilizationPercent: num(o.utilizationPercent), memoryUsedBytes: num(o.memoryUsedBytes), sampleTime: optStr(o.sampleTime) };
}

export function normAgent(j: wire.Agent | undefined): Agent {
  const o = msg(j);
  return {
    id: str(o.id),
    hostname: str(o.hostname),
    resourcePool: str(o.resourcePool),
    slots: list(o.slots).map(normSlot),
    connected: bool(o.connected),
    registeredTime: optStr(o.registeredTime),
    lastHeartbeat: optStr(o.lastHeartbeat),
    version: str(o.version),
    address: str(o.address),
  };
}

export function normResourcePool(j: wire.ResourcePool | undefined): ResourcePool {
  const o = msg(j);
  return {
    name: str(o.name) || 'default',
    scheduler: str(o.scheduler) || 'priority',
    agents: num(o.agents),
    totalSlots: num(o.totalSlots),
    usedSlots: num(o.usedSlots),
    runningTrials: num(o.runningTrials),
    queuedTrials: num(o.queuedTrials),
    queuedSlots: num(o.queuedSlots),
    nodes: num(o.nodes),
  };
}

/** A utilisation point, or undefined when its time is missing or unparsable (a point without a
 *  time cannot be placed on the chart). */
export function normUtilizationPoint(j: wire.UtilizationPoint | undefined): UtilizationPoint | undefined {
  const o = msg(j);
  const time = Date.parse(str(o.time));
  if (!Number.isFinite(time)) return undefined;
  return {
    pool: str(o.pool) || 'default',
    time: time / 1000,
    slotsTotal: num(o.slotsTotal),
    slotsBusy: num(o.slotsBusy),
    slotsBusyMax: num(o.slotsBusyMax),
    samples: num(o.samples),
  };
}

export function normPagination(j: wire.Pagination | undefined, count: number): Pagination {
  const o = msg(j);
  return {
    offset: num(o.offset),
    limit: num(o.limit),
    total: o.total === undefined ? count : num(o.total),
    startIndex: num(o.startIndex),
    endIndex: num(o.endIndex),
  };
}

export function normMaster(j: ResponseOf<'GetMaster'> | undefined): MasterInfo {
  const o = msg(j);
  return {
    version: str(o.version),
    masterId: str(o.masterId),
    clusterName: str(o.clusterName),
    schemaVersion: num(o.schemaVersion),
    connectedAgents: num(o.connectedAgents),
    totalSlots: num(o.totalSlots),
    usedSlots: num(o.usedSlots),
  };
}

const ROLES: UserRole[] = ['admin', 'user', 'viewer'];
// An unknown role is read as the least one: the UI offers less, the master decides anyway.
const role = (v: unknown): UserRole => (ROLES.includes(v as UserRole) ? (v as UserRole) : 'viewer');
const WORKSPACE_ROLES: WorkspaceMembership['role'][] = ['admin', 'editor', 'viewer'];

/** GET /auth/me's answer; {"user": {...}, "workspaces": [...]} is tolerated too. */
type WhoamiWire = ResponseOf<'GetMe'> & { user?: ResponseOf<'GetMe'> };

export function normWhoami(j: WhoamiWire | undefined): Whoami {
  const o = msg(j);
  const u = o.user && typeof o.user === 'object' ? msg(o.user) : o; // tolerate {"user": {...}}
  return {
    username: str(u.username),
    role: role(u.role),
    workspaces: list(u.workspaces ?? o.workspaces).map((w) => {
      const r = str(msg(w).role) as WorkspaceMembership['role'];
      return { name: str(msg(w).name), role: WORKSPACE_ROLES.includes(r) ? r : 'viewer' };
    }),
  };
}

export function normToken(j: NonNullable<ResponseOf<'ListTokens'>['tokens']>[number] | undefined): ApiToken {
  const o = msg(j);
  return {
    id: str(o.id),
    name: str(o.name),
    username: str(o.username),
    kind: str(o.kind) === 'session' ? 'session' : 'api',
    createdAt: optStr(o.createdAt),
    expiresAt: optStr(o.expiresAt),
    lastUsedAt: optStr(o.lastUsedAt),
    revoked: bool(o.revoked),
  };
}

export function normUser(j: NonNullable<ResponseOf<'ListUsers'>['users']>[number] | undefined): User {
  const o = msg(j);
  return { username: str(o.username), role: role(o.role), active: o.active === undefined ? true : bool(o.active), createdAt: optStr(o.createdAt) };
}

export function normModel(j: wire.Model | undefined): Model {
  const o = msg(j);
  return {
    id: num(o.id),
    name: str(o.name),
    description: str(o.description),
    labels: list(o.labels).map(str).filter((l) => l !== ''),
    owner: str(o.owner),
    workspace: str(o.workspace),
    archived: bool(o.archived),
    numVersions: num(o.numVersions),
    latestVersion: num(o.latestVersion),
    createdAt: optStr(o.createdAt),
    updatedAt: optStr(o.updatedAt),
  };
}

export function normModelVersion(j: wire.ModelVersion | undefined): ModelVersion {
  const o = msg(j);
  return {
    modelId: num(o.modelId),
    modelName: str(o.modelName),
    version: num(o.version),
    checkpointUuid: str(o.checkpointUuid),
    experimentId: num(o.experimentId),
    trialId: num(o.trialId),
    notes: str(o.notes),
    creator: str(o.creator),
    createdAt: optStr(o.createdAt),
    metric: str(o.metric),
    smallerIsBetter: bool(o.smallerIsBetter),
    bestValidationMetric: optNum(o.bestValidationMetric),
    latestValidationMetric: optNum(o.latestValidationMetric),
    checkpointPath: str(o.checkpointPath),
  };
}

export function normModelVersionDetail(j: ResponseOf<'GetModelVersion'> | undefined): ModelVersionDetail {
  const o = msg(j);
  return {
    version: normModelVersion(o.version),
    checkpoint: o.checkpoint && typeof o.checkpoint === 'object' ? normCheckpoint(o.checkpoint) : undefined,
    metric: str(o.metric),
    smallerIsBetter: bool(o.smallerIsBetter),
    bestValidationMetric: optNum(o.bestValidationMetric),
    latestValidationMetric: optNum(o.latestValidationMetric),
    latestValidation: o.latestValidation && typeof o.latestValidation === 'object' ? normMetric(o.latestValidation) : undefined,
  };
}

export function normServing(j: wire.Serving | undefined): Serving {
  const o = msg(j);
  return {
    id: num(o.id),
    modelName: str(o.modelName),
    modelVersion: num(o.modelVersion),
    checkpointUuid: str(o.checkpointUuid),
    state: str(o.state) || 'UNKNOWN',
    url: str(o.url),
    slots: num(o.slots),
    resourcePool: str(o.resourcePool),
    owner: str(o.owner),
    workspace: str(o.workspace),
    agentId: str(o.agentId),
    createdAt: optStr(o.createdAt),
    endedAt: optStr(o.endedAt),
    error: str(o.error),
    restarts: num(o.restarts),
  };
}

export function normTask(j: wire.Task | undefined): Task {
  const o = msg(j);
  const exit = optNum(o.exitCode); // proto3 `optional`: present (0 too) once a command exited
  return {
    id: num(o.id),
    kind: str(o.kind) || 'UNKNOWN',
    state: str(o.state) || 'UNKNOWN',
    owner: str(o.owner),
    workspace: str(o.workspace),
    entrypoint: list(o.entrypoint).map(str),
    slots: num(o.slots),
    resourcePool: str(o.resourcePool),
    priority: num(o.priority),
    agentId: str(o.agentId),
    createdAt: optStr(o.createdAt),
    endedAt: optStr(o.endedAt),
    error: str(o.error),
    restarts: num(o.restarts),
    exitCode: exit !== undefined && Number.isFinite(exit) ? exit : undefined,
    pendingReason: str(o.pendingReason),
    allocationId: str(o.allocationId),
    experimentId: num(o.experimentId),
  };
}
