// The only module that knows the REST routes and JSON shapes of the master. A mismatch with the
// server is fixed here. Every call returns normalised types (types.ts) or throws ApiError; it
// never throws anything else, so pages can show one error banner for every failure.
//
// Routes and wire shapes come from generated/wire.ts, which `npm run gen:api` writes from the
// OpenAPI document the build generates from the proto: each call names its operationId (so a
// removed route or path parameter fails `tsc`), and each normaliser takes the generated wire type
// (so a renamed or removed field does too). Reply types are reached through their operations
// (ResponseOf<'GetMe'>) rather than by reply-message names, which may still change.
import { operations } from './generated/wire';
import type * as wire from './generated/wire';
import type { OperationId, OperationTypes } from './generated/wire';
import type {
  Agent,
  Checkpoint,
  ConfigError,
  ApiToken,
  CreatedToken,
  Experiment,
  ExperimentAction,
  ExperimentsQuery,
  GpuUsage,
  LogLine,
  MasterInfo,
  MetricKind,
  MetricReport,
  Pagination,
  ResourcePool,
  Slot,
  Trial,
  User,
  UserRole,
  UtilizationPoint,
  Whoami,
  WorkspaceMembership,
} from './types';

export type ApiErrorKind = 'network' | 'timeout' | 'http' | 'parse' | 'aborted';

/** A failed API call. `kind` says why: the master was unreachable, answered an error, or sent
 *  something that is not the JSON we expect. `status` is the HTTP status (0 when none). */
export class ApiError extends Error {
  readonly kind: ApiErrorKind;
  readonly status: number;
  readonly code?: number;
  readonly details: unknown[];
  /** False when an HTTP error body was not the master's {"code","message"} JSON: something else
   *  (a static file server, a proxy) answered, so the master itself is not reachable there. */
  readonly fromMaster: boolean;
  /** Seconds to wait before trying again, from a 429's Retry-After header (or its message). */
  readonly retryAfterS?: number;
  constructor(kind: ApiErrorKind, message: string, status = 0, code?: number, details: unknown[] = [], fromMaster = true, retryAfterS?: number) {
    super(message);
    this.fromMaster = fromMaster;
    this.retryAfterS = retryAfterS;
    this.name = 'ApiError';
    this.kind = kind;
    this.status = status;
    this.code = code;
    this.details = details;
  }
  /** True when the master was not reached at all: network failure, timeout, or an HTTP error that
   *  did not come from the master. */
  get unreachable(): boolean {
    return this.kind === 'network' || this.kind === 'timeout' || (this.kind === 'http' && !this.fromMaster);
  }
  /** True when the master wants the user to log in (again): no session, or it expired. */
  get unauthenticated(): boolean {
    return this.kind === 'http' && this.status === 401;
  }
  /** True when the master refused the action for the user's role or ownership. */
  get forbidden(): boolean {
    return this.kind === 'http' && this.status === 403;
  }
  /** True when retrying later may help (network trouble or a 5xx/429). */
  get retryable(): boolean {
    return this.kind === 'network' || this.kind === 'timeout' || this.status >= 500 || this.status === 429;
  }
}

type FetchLike = (input: string, init?: RequestInit) => Promise<Response>;

export interface ApiClientOptions {
  baseUrl?: string; // '' = same origin as the dashboard
  fetch?: FetchLike;
  timeoutMs?: number;
}

// ---------- normalisation of protobuf JSON (proto3 omits default values) ----------

const num = (v: unknown, d = 0): number => {
  if (v === undefined || v === null || v === '') return d;
  const n = typeof v === 'number' ? v : Number(v);
  return Number.isFinite(n) ? n : d;
};
const optNum = (v: unknown): number | undefined => {
  if (v === undefined || v === null || v === '') return undefined;
  // protobuf JSON writes NaN/Infinity as strings
  const n = typeof v === 'number' ? v : Number(v);
  return Number.isNaN(n) && v !== 'NaN' ? undefined : n;
};
const str = (v: unknown): string => (typeof v === 'string' ? v : v === undefined || v === null ? '' : String(v));
const optStr = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);
const bool = (v: unknown): boolean => v === true || v === 'true';
const obj = (v: unknown): Record<string, any> => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, any>) : {});
/** A wire message as its generated type, or {} when the master sent something that is not a JSON
 *  object there (every wire field is optional, so {} is a valid, all-defaults message). */
const msg = <T extends object>(v: T | null | undefined): T => (v && typeof v === 'object' && !Array.isArray(v) ? v : ({} as T));
/** A repeated wire field, or [] when it is absent or not an array. */
const list = <T>(v: readonly T[] | null | undefined): T[] => (Array.isArray(v) ? (v as T[]) : []);

/** The JSON answer of an operation, as the generated description types it. */
export type ResponseOf<O extends OperationId> = OperationTypes[O]['response'];

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
  };
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

function normPagination(j: wire.Pagination | undefined, count: number): Pagination {
  const o = msg(j);
  return {
    offset: num(o.offset),
    limit: num(o.limit),
    total: o.total === undefined ? count : num(o.total),
    startIndex: num(o.startIndex),
    endIndex: num(o.endIndex),
  };
}

function normMaster(j: ResponseOf<'GetMaster'> | undefined): MasterInfo {
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

// ---------- transport ----------

/** Every request carries this header. The master refuses cookie-authenticated POST and DELETE
 *  without it (a cross-site form cannot set it: CSRF defence). */
export const REQUESTED_WITH = { name: 'X-Requested-With', value: 'steadfast' } as const;

/** Seconds from a Retry-After header (delta-seconds or an HTTP date), else from a message such as
 *  "...; retry in 42 s". */
export function retryAfterSeconds(header: string | null | undefined, message = '', now = Date.now()): number | undefined {
  const h = (header ?? '').trim();
  if (/^\d+$/.test(h)) return Number(h);
  if (h) {
    const t = Date.parse(h);
    if (Number.isFinite(t)) return Math.max(0, Math.ceil((t - now) / 1000));
  }
  const m = message.match(/retry in (\d+)\s*s/i);
  return m ? Number(m[1]) : undefined;
}

/** Builds a query string; arrays become repeated keys (states=A&states=B), as grpc-gateway does.
 *  Undefined, empty strings and false are left out. */
export function queryString(params: Record<string, unknown>): string {
  const parts: string[] = [];
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === null || v === '' || v === false) continue;
    const vals = Array.isArray(v) ? v : [v];
    for (const x of vals) parts.push(`${encodeURIComponent(k)}=${encodeURIComponent(String(x))}`);
  }
  return parts.length ? `?${parts.join('&')}` : '';
}

/** Turns a non-2xx response body into an ApiError, using the master's {"code","message","details"}
 *  shape when the body has it. */
export function errorFromResponse(status: number, statusText: string, body: string, retryAfter?: string | null): ApiError {
  let message = '';
  let code: number | undefined;
  let details: unknown[] = [];
  let fromMaster = false;
  try {
    const j = JSON.parse(body);
    if (j && typeof j === 'object') {
      fromMaster = typeof j.message === 'string' || typeof j.code === 'number';
      message = typeof j.message === 'string' ? j.message : typeof j.error === 'string' ? j.error : '';
      code = typeof j.code === 'number' ? j.code : undefined;
      details = Array.isArray(j.details) ? j.details : [];
    }
  } catch {
    // not JSON: fall through to the status line
  }
  if (!message) message = `${status} ${statusText || 'error'}`.trim();
  const wait = status === 429 || status === 503 ? retryAfterSeconds(retryAfter, message) : undefined;
  return new ApiError('http', message, status, code, details, fromMaster, wait);
}

// ---------- operations of the generated description ----------

const API_PREFIX = '/api/v1';
/** The operations under /api/v1, the only ones the dashboard calls. */
type ApiOperation = { [O in OperationId]: (typeof operations)[O]['path'] extends `${typeof API_PREFIX}/${string}` ? O : never }[OperationId];
type PathParam<O extends OperationId> = (typeof operations)[O]['pathParams'][number];
/** protobuf's JSON name of a query parameter (`sort_by` → `sortBy`); the master takes both. */
type CamelCase<S extends string> = S extends `${infer H}_${infer T}` ? `${H}${Capitalize<CamelCase<T>>}` : S;
/** The query parameters an operation takes, by their JSON names; values are written as text. */
export type QueryOf<O extends OperationId> = { [K in keyof OperationTypes[O]['query'] as CamelCase<K & string>]?: unknown };
/** The JSON body of an operation; one that declares none may still be sent `{}`. */
type BodyOf<O extends OperationId> = OperationTypes[O]['request'] extends undefined ? Record<string, never> : OperationTypes[O]['request'];
type CallArgs<O extends OperationId> = { query?: QueryOf<O>; body?: BodyOf<O>; signal?: AbortSignal; quiet401?: boolean } & ([PathParam<O>] extends [never] ? { path?: undefined } : { path: Record<PathParam<O>, string | number> });

/** The path under /api/v1 of an operation, its {parameters} filled in (percent-encoded). */
export function operationPath<O extends ApiOperation>(op: O, params: Partial<Record<PathParam<O>, string | number>> = {}): string {
  const values = params as Record<string, string | number | undefined>;
  return operations[op].path.slice(API_PREFIX.length).replace(/\{([^}]+)\}/g, (_, name: string) => encodeURIComponent(String(values[name] ?? '')));
}

// The dashboard's own query types use the operations' parameter names (checked here, at compile time).
true satisfies [Exclude<keyof ExperimentsQuery, keyof QueryOf<'GetExperiments'>>] extends [never] ? true : false;

/** Told about every 401 the master gives (except a login's own wrong password). */
export type UnauthorizedListener = (e: ApiError, path: string) => void;

/** The operation behind each experiment action of the dashboard. */
const EXPERIMENT_ACTIONS = { pause: 'PauseExperiment', activate: 'ActivateExperiment', kill: 'KillExperiment', archive: 'ArchiveExperiment' } as const satisfies Record<ExperimentAction, ApiOperation>;

/** Talks to the master on behalf of the logged-in browser: the session is an HttpOnly cookie the
 *  master sets at login, so no token is ever held in JavaScript or in web storage. */
export class ApiClient {
  readonly baseUrl: string;
  private readonly fetchImpl: FetchLike;
  private readonly timeoutMs: number;
  private readonly unauthorizedListeners = new Set<UnauthorizedListener>();

  constructor(opts: ApiClientOptions = {}) {
    this.baseUrl = (opts.baseUrl ?? '').replace(/\/+$/, '');
    this.fetchImpl = opts.fetch ?? ((input, init) => globalThis.fetch(input, init));
    this.timeoutMs = opts.timeoutMs ?? 15000;
  }

  /** Calls `fn` whenever a request answers 401 (not logged in, or the session expired), so the
   *  app can show the login page. Returns the function that unsubscribes. */
  onUnauthorized(fn: UnauthorizedListener): () => void {
    this.unauthorizedListeners.add(fn);
    return () => this.unauthorizedListeners.delete(fn);
  }

  url(path: string, params: Record<string, unknown> = {}): string {
    return `${this.baseUrl}/api/v1${path}${queryString(params)}`;
  }

  /** One JSON request, with the session cookie (same origin) and the X-Requested-With header.
   *  Throws ApiError for network failures, timeouts, non-2xx answers and bodies that are not a
   *  JSON object; a 401 is also told to the onUnauthorized listeners unless `quiet401`. */
  async request(method: string, path: string, params: Record<string, unknown> = {}, body?: unknown, signal?: AbortSignal, quiet401 = false): Promise<Record<string, any>> {
    const ctl = new AbortController();
    const onAbort = () => ctl.abort();
    signal?.addEventListener('abort', onAbort);
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      ctl.abort();
    }, this.timeoutMs);
    let res: Response;
    let text: string;
    try {
      const headers: Record<string, string> = { Accept: 'application/json', [REQUESTED_WITH.name]: REQUESTED_WITH.value };
      if (body !== undefined) headers['Content-Type'] = 'application/json';
      res = await this.fetchImpl(this.url(path, params), {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        credentials: 'same-origin',
        signal: ctl.signal,
      });
      text = await res.text();
    } catch (e) {
      if (timedOut) throw new ApiError('timeout', `The master did not answer within ${Math.round(this.timeoutMs / 1000)} s`);
      if (signal?.aborted) throw new ApiError('aborted', 'Request cancelled');
      throw new ApiError('network', `Cannot reach the master (${e instanceof Error ? e.message : String(e)})`);
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    }
    if (!res.ok) {
      const err = errorFromResponse(res.status, res.statusText, text, res.headers?.get?.('Retry-After'));
      if (err.unauthenticated && !quiet401) for (const fn of [...this.unauthorizedListeners]) fn(err, path);
      throw err;
    }
    if (text.trim() === '') return {};
    let j: unknown;
    try {
      j = JSON.parse(text);
    } catch {
      throw new ApiError('parse', `The master sent a malformed answer for ${path} (not JSON)`, res.status);
    }
    if (!j || typeof j !== 'object' || Array.isArray(j)) {
      throw new ApiError('parse', `The master sent an unexpected answer for ${path} (not a JSON object)`, res.status);
    }
    return j as Record<string, any>;
  }

  /** One operation of the generated description: its method and path, the path parameters filled
   *  in, and its answer typed as the wire JSON (not yet normalised). Throws as `request` does. */
  private async call<O extends ApiOperation>(op: O, args: CallArgs<O>): Promise<ResponseOf<O>> {
    const { method } = operations[op];
    const path = operationPath(op, args.path);
    return (await this.request(method, path, args.query, args.body, args.signal, args.quiet401)) as ResponseOf<O>;
  }

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

  async getTrial(id: number, signal?: AbortSignal): Promise<Trial> {
    const j = await this.call('GetTrial', { path: { id }, signal });
    return normTrial(j.trial);
  }

  async getTrialMetrics(id: number, kind: MetricKind, maxPoints?: number, signal?: AbortSignal): Promise<MetricReport[]> {
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
