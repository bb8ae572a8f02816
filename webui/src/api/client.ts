// ApiClient: the dashboard's calls to the master, one method per operation. Every call returns
// normalised types (types.ts) or throws ApiError; it never throws anything else, so pages can show
// one error banner for every failure. The modules of api/ are the only code that knows the REST
// routes and JSON shapes of the master; a mismatch with the server is fixed there:
//   errors.ts      ApiError, and how a non-2xx answer becomes one
//   transport.ts   ApiTransport: fetch with a timeout, the cookie session, 401 listeners
//   operations.ts  the generated description's operations: typed arguments, answers and paths
//   normalise.ts   the wire JSON -> types.ts normalisers (fields.ts reads the fields)
// This module re-exports what those offer the rest of the dashboard: import from api/client.
//
// Routes and wire shapes come from generated/wire.ts, which `npm run gen:api` writes from the
// OpenAPI document the build generates from the proto: each call names its operationId (so a
// removed route or path parameter fails `tsc`), and each normaliser takes the generated wire type
// (so a renamed or removed field does too). Reply types are reached through their operations
// (ResponseOf<'GetMe'>) rather than by reply-message names, which may still change.
import type {
  Agent,
  Checkpoint,
  ConfigError,
  ApiToken,
  CreatedToken,
  Experiment,
  ExperimentAction,
  ExperimentContext,
  ExperimentsQuery,
  LogLine,
  MasterInfo,
  MetricGroup,
  MetricReport,
  Model,
  ModelsQuery,
  ModelVersion,
  ModelVersionDetail,
  Pagination,
  ResourcePool,
  Serving,
  Task,
  TasksQuery,
  Trial,
  TrialDetail,
  User,
  UtilizationPoint,
  Whoami,
} from './types';
import { ApiError } from './errors';
import { list, msg, num, optStr, str } from './fields';
import {
  normAgent,
  normCheckpoint,
  normExperiment,
  normExperimentContext,
  normLog,
  normMaster,
  normMetric,
  normModel,
  normModelVersion,
  normModelVersionDetail,
  normPagination,
  normResourcePool,
  normServing,
  normTask,
  normToken,
  normTrial,
  normTrialDetail,
  normUser,
  normUtilizationPoint,
  normWhoami,
} from './normalise';
import { operationPath } from './operations';
import type { ApiOperation, QueryOf, ResponseOf } from './operations';
import { ApiTransport } from './transport';

export { ApiError, errorFromResponse, retryAfterSeconds } from './errors';
export type { ApiErrorKind } from './errors';
export * from './normalise';
export { operationPath } from './operations';
export type { QueryOf, ResponseOf } from './operations';
export { REQUESTED_WITH, queryString } from './transport';
export type { ApiClientOptions, UnauthorizedListener } from './transport';

/** The operation behind each experiment action of the dashboard. */
const EXPERIMENT_ACTIONS = { pause: 'PauseExperiment', activate: 'ActivateExperiment', kill: 'KillExperiment', archive: 'ArchiveExperiment' } as const satisfies Record<ExperimentAction, ApiOperation>;

/** Talks to the master on behalf of the logged-in browser: the session is an HttpOnly cookie the
 *  master sets at login, so no token is ever held in JavaScript or in web storage. */
export class ApiClient extends ApiTransport {
  // ---------- authentication (the session itself is the HttpOnly cookie) ----------

  /** Logs in; the master answers with the user and sets the session cookie. A wrong password is
   *  an ApiError with status 401 (not told to onUnauthorized), too many tries 429 with
   *  `retryAfterS`. The token in the answer is dropped: the browser keeps only the cookie. */
  async login(username: string, password: string): Promise<Whoami> {
    const j = await this.call('Login', { body: { username, password }, quiet401: true });
    return normWhoami(j.user ?? {});
  }

  /** Ends the session on the master, which clears the cookie. */
  async logout(): Promise<void> {
    await this.call('Logout', { body: {}, quiet401: true });
  }

  /** Who the session belongs to, with workspace memberships; 401 when not logged in. */
  async whoami(signal?: AbortSignal): Promise<Whoami> {
    return normWhoami(await this.call('GetMe', { signal, quiet401: true }));
  }

  /** The caller's API tokens (an admin with `all`: everyone's). Secrets are never listed. */
  async getTokens(all = false, signal?: AbortSignal): Promise<ApiToken[]> {
    const j = await this.call('ListTokens', { query: { all: all || undefined }, signal });
    return list(j.tokens).map(normToken);
  }

  /** Creates an API token; `expiresInSeconds` 0 = never. The answer's `token` is the only time
   *  the secret is ever shown. */
  async createToken(name: string, expiresInSeconds: number): Promise<CreatedToken> {
    // int64 on the wire: a decimal string, as protobuf's JSON mapping writes it
    const j = msg(await this.call('CreateToken', { body: { name, expiresInSeconds: String(expiresInSeconds) } }));
    return { id: str(j.id), name: str(j.name), token: str(j.token), expiresAt: optStr(j.expiresAt) };
  }

  async revokeToken(id: string): Promise<void> {
    await this.call('RevokeToken', { path: { id } });
  }

  /** Admin only. */
  async getUsers(signal?: AbortSignal): Promise<User[]> {
    const j = await this.call('ListUsers', { signal });
    return list(j.users).map(normUser);
  }

  async getExperiments(q: ExperimentsQuery = {}, signal?: AbortSignal): Promise<{ experiments: Experiment[]; pagination: Pagination }> {
    const j = await this.call('GetExperiments', { query: { ...q }, signal });
    const experiments = list(j.experiments).map(normExperiment);
    return { experiments, pagination: normPagination(j.pagination, experiments.length) };
  }

  async getExperiment(id: number, signal?: AbortSignal): Promise<Experiment> {
    const j = await this.call('GetExperiment', { path: { id }, signal });
    return normExperiment(j.experiment);
  }

  async createExperiment(configYaml: string, activate = true): Promise<{ experiment?: Experiment; errors: ConfigError[] }> {
    const j = await this.call('CreateExperiment', { body: { configYaml, activate } });
    return {
      experiment: j.experiment ? normExperiment(j.experiment) : undefined,
      errors: list(j.errors).map((e) => ({ path: str(e?.path), message: str(e?.message), line: num(e?.line), column: num(e?.column) })),
    };
  }

  async experimentAction(id: number, action: ExperimentAction): Promise<Experiment | undefined> {
    const j = await this.call(EXPERIMENT_ACTIONS[action], { path: { id }, body: {} });
    return j.experiment ? normExperiment(j.experiment) : undefined;
  }

  async getExperimentTrials(id: number, signal?: AbortSignal): Promise<Trial[]> {
    // Page through so that large sweeps are complete.
    const out: Trial[] = [];
    for (let offset = 0; offset < 100000; ) {
      const j = await this.call('GetExperimentTrials', { path: { id }, query: { offset: offset || undefined, limit: 500 }, signal });
      const page = list(j.trials).map(normTrial);
      out.push(...page);
      const total = num(msg(j.pagination).total, out.length);
      if (page.length === 0 || out.length >= total) break;
      offset += page.length;
    }
    return out;
  }

  async getExperimentCheckpoints(id: number, signal?: AbortSignal): Promise<Checkpoint[]> {
    const j = await this.call('GetExperimentCheckpoints', { path: { id }, signal });
    return list(j.checkpoints).map(normCheckpoint);
  }

  /** What a user-code experiment runs from: its context's files, their total size, and the
   *  archive's size and SHA-256; with `includeArchive` the archive itself (base64). A native
   *  experiment, or one without a context, is an ApiError with status 404. */
  async getExperimentContext(id: number, includeArchive = false, signal?: AbortSignal): Promise<ExperimentContext> {
    return normExperimentContext(await this.call('GetExperimentContext', { path: { id }, query: { includeArchive: includeArchive || undefined }, signal }));
  }

  /** A trial with the metric groups it has reported. */
  async getTrial(id: number, signal?: AbortSignal): Promise<TrialDetail> {
    return normTrialDetail(await this.call('GetTrial', { path: { id }, signal }));
  }

  /** A trial's rows of one metric group (`training`, `validation` or one its code named), at most
   *  about `maxPoints` of them (the master downsamples evenly above that). */
  async getTrialMetrics(id: number, kind: MetricGroup, maxPoints?: number, signal?: AbortSignal): Promise<MetricReport[]> {
    const j = await this.call('GetTrialMetrics', { path: { id }, query: { kind, maxPoints }, signal });
    return list(j.metrics).map(normMetric);
  }

  async getTrialLogs(id: number, opts: { afterId?: number; limit?: number; search?: string } = {}, signal?: AbortSignal): Promise<LogLine[]> {
    const j = await this.call('GetTrialLogs', { path: { id }, query: { afterId: opts.afterId || undefined, limit: opts.limit, search: opts.search }, signal });
    return list(j.logs).map(normLog);
  }

  /** Follows a trial's logs over server-sent events (each event's data is one LogLine JSON),
   *  resuming after the last id seen whenever the stream breaks. When the stream cannot be opened
   *  twice in a row (no EventSource, or the master does not speak SSE there), it falls back to
   *  polling `GET /trials/{id}/logs?afterId=` every `pollMs`. Returns a function that stops.
   *  `onOpen` says which mode is live; `onError` is told about each interruption. */
  followTrialLogs(
    id: number,
    opts: { afterId?: number; search?: string; pollMs?: number },
    onLine: (l: LogLine) => void,
    onError?: (e: ApiError) => void,
    onOpen?: (mode: 'sse' | 'poll') => void,
  ): () => void {
    let lastId = opts.afterId ?? 0;
    let es: EventSource | null = null;
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let failedOpens = 0;
    const pollMs = opts.pollMs ?? 2000;
    const deliver = (line: LogLine) => {
      if (line.id && line.id <= lastId) return;
      if (line.id) lastId = line.id;
      onLine(line);
    };
    const poll = async () => {
      if (stopped) return;
      try {
        const lines = await this.getTrialLogs(id, { afterId: lastId, limit: 1000, search: opts.search });
        onOpen?.('poll');
        lines.forEach(deliver);
      } catch (e) {
        onError?.(e instanceof ApiError ? e : new ApiError('network', String(e)));
      }
      if (!stopped) timer = setTimeout(poll, pollMs);
    };
    const open = () => {
      if (stopped) return;
      if (typeof EventSource === 'undefined' || failedOpens >= 2) {
        void poll();
        return;
      }
      let opened = false;
      const query: QueryOf<'GetTrialLogs'> = { follow: true, afterId: lastId || undefined, search: opts.search };
      es = new EventSource(this.url(operationPath('GetTrialLogs', { id }), query));
      es.onopen = () => {
        opened = true;
        failedOpens = 0;
        onOpen?.('sse');
      };
      es.onmessage = (ev) => {
        try {
          let j = JSON.parse(ev.data);
          // tolerate grpc-gateway's {"result": {...}} stream framing
          if (j && typeof j === 'object' && 'result' in j && !('message' in j)) j = j.result;
          deliver(normLog(j));
        } catch {
          onError?.(new ApiError('parse', 'Malformed log event from the master'));
        }
      };
      es.onerror = () => {
        if (!opened) failedOpens++;
        onError?.(new ApiError('network', 'Log stream interrupted; reconnecting'));
        // reopen ourselves so that afterId carries the last line seen
        es?.close();
        if (!stopped) timer = setTimeout(open, opened ? 1000 : 2000);
      };
    };
    open();
    return () => {
      stopped = true;
      clearTimeout(timer);
      es?.close();
    };
  }

  // ---------- model registry (docs/registry.md); `name` may also be the model's id ----------

  async getModels(q: ModelsQuery = {}, signal?: AbortSignal): Promise<{ models: Model[]; pagination: Pagination }> {
    const j = await this.call('ListModels', { query: { ...q }, signal });
    const models = list(j.models).map(normModel);
    return { models, pagination: normPagination(j.pagination, models.length) };
  }

  /** A model and its versions (ascending by number, as the master lists them). */
  async getModel(name: string, signal?: AbortSignal): Promise<{ model: Model; versions: ModelVersion[] }> {
    const j = await this.call('GetModel', { path: { name }, signal });
    return { model: normModel(j.model), versions: list(j.versions).map(normModelVersion) };
  }

  /** One version with its checkpoint and its source trial's validation results. */
  async getModelVersion(name: string, version: number, signal?: AbortSignal): Promise<ModelVersionDetail> {
    return normModelVersionDetail(await this.call('GetModelVersion', { path: { name, version }, signal }));
  }

  // ---------- servers the master schedules (`sf serve start`; docs/serving.md) ----------

  /** The live servers (QUEUED to STOPPING), by id; with `includeStopped` also the newest 100
   *  STOPPED and FAILED ones. */
  async getServings(includeStopped = false, signal?: AbortSignal): Promise<Serving[]> {
    const j = await this.call('ListServings', { query: { includeStopped: includeStopped || undefined }, signal });
    return list(j.servings).map(normServing);
  }

  async getServing(id: number, signal?: AbortSignal): Promise<Serving> {
    const j = await this.call('GetServing', { path: { id }, signal });
    return normServing(j.serving);
  }

  /** Stops a server (its sf-serve process ends, its slots are freed); answers it as it is now,
   *  usually STOPPING. Needs what acting on the server's task needs (403 otherwise): its owner,
   *  an editor or admin of its workspace, or an admin. */
  async stopServing(id: number): Promise<Serving> {
    const j = await this.call('StopServing', { path: { id }, body: {} });
    return normServing(j.serving);
  }

  /** Starts a server for a model version with the master's defaults (one slot, the default pool,
   *  the model's workspace, listening on 127.0.0.1 of its agent); version 0 is the latest. */
  async startServing(model: string, version: number): Promise<Serving> {
    const j = await this.call('StartServing', { body: { model, version } });
    return normServing(j.serving);
  }

  // ---------- tasks of their own: commands (`sf cmd run`) and servers (docs/tasks.md) ----------

  /** The live tasks (QUEUED to STOPPING) and experiments' trials (kind TRIAL, `id` the trial's:
   *  not for the task routes below); with `includeEnded` also the newest 100 ended ones of each;
   *  with `kind` only that kind. Any signed-in user may list them. */
  async getTasks(q: TasksQuery = {}, signal?: AbortSignal): Promise<Task[]> {
    const j = await this.call('ListTasks', { query: { kind: q.kind, includeEnded: q.includeEnded || undefined }, signal });
    return list(j.tasks).map(normTask);
  }

  /** One task; while QUEUED with why it waits (`pendingReason`). 404 when there is none. */
  async getTask(id: number, signal?: AbortSignal): Promise<Task> {
    const j = await this.call('GetTask', { path: { id }, signal });
    return normTask(j.task);
  }

  /** Kills a task (a command's processes end, a server stops; its slots are freed) and answers it
   *  as it is now: STOPPING, or STOPPED when it was still queued, or as it was when it had already
   *  ended. Needs acting on the task (403 otherwise): its owner, an editor or admin of its
   *  workspace, or an admin. */
  async killTask(id: number): Promise<Task> {
    const j = await this.call('KillTask', { path: { id }, body: {} });
    return normTask(j.task);
  }

  /** A task's log lines (a command's or a server's; a server's id is its task's) with ids above
   *  `afterId`, oldest first: what its processes wrote (stdout, stderr) and what the master said
   *  about it; at most `limit` (the master's default 10,000), with `search` only those containing
   *  it. There is no follow mode: to watch a live task, ask again with `afterId` = the last id
   *  seen. */
  async getTaskLogs(id: number, opts: { afterId?: number; limit?: number; search?: string } = {}, signal?: AbortSignal): Promise<LogLine[]> {
    const j = await this.call('GetTaskLogs', { path: { id }, query: { afterId: opts.afterId || undefined, limit: opts.limit, search: opts.search }, signal });
    return list(j.logs).map(normLog);
  }

  async getAgents(signal?: AbortSignal): Promise<Agent[]> {
    const j = await this.call('GetAgents', { signal });
    return list(j.agents).map(normAgent);
  }

  /** The resource pools, by name: slots, usage and queue as the scheduler sees them now. */
  async getResourcePools(signal?: AbortSignal): Promise<ResourcePool[]> {
    const j = await this.call('GetResourcePools', { signal });
    return list(j.resourcePools).map(normResourcePool);
  }

  /** The master's utilisation history: one point per resource pool per minute, ordered by time.
   *  `since` is seconds since the epoch (default on the master: 24 hours ago); `pool` narrows to
   *  one pool. */
  async getClusterUtilization(opts: { since?: number; pool?: string } = {}, signal?: AbortSignal): Promise<UtilizationPoint[]> {
    const since = opts.since === undefined ? undefined : Math.floor(opts.since);
    const j = await this.call('GetClusterUtilization', { query: { since, pool: opts.pool }, signal });
    const out: UtilizationPoint[] = [];
    for (const p of list(j.points)) {
      const n = normUtilizationPoint(p);
      if (n) out.push(n);
    }
    return out;
  }

  async getMaster(signal?: AbortSignal): Promise<MasterInfo> {
    // the GetMasterResponse fields, flat; a {"master": {...}} wrapper is tolerated too
    const j: ResponseOf<'GetMaster'> & { master?: ResponseOf<'GetMaster'> } = await this.call('GetMaster', { signal });
    return normMaster(j.master ?? j);
  }
}

const envBase = (import.meta as any).env?.VITE_SF_API_BASE as string | undefined;
/** The client the dashboard uses: same origin as the page unless built with VITE_SF_API_BASE. */
export const api = new ApiClient({ baseUrl: envBase ?? '' });
