// How ApiClient talks to the master: one JSON request at a time over fetch, with a timeout, the
// session cookie (same origin) and the X-Requested-With header the master requires, every failure
// as an ApiError, and each 401 told to the onUnauthorized listeners; `call` runs one operation of
// the generated description through it.
import { operations } from './generated/wire';
import { ApiError, errorFromResponse } from './errors';
import { operationPath } from './operations';
import type { ApiOperation, CallArgs, ResponseOf } from './operations';

type FetchLike = (input: string, init?: RequestInit) => Promise<Response>;

export interface ApiClientOptions {
  baseUrl?: string; // '' = same origin as the dashboard
  fetch?: FetchLike;
  timeoutMs?: number;
}

/** Every request carries this header. The master refuses cookie-authenticated POST and DELETE
 *  without it (a cross-site form cannot set it: CSRF defence). */
export const REQUESTED_WITH = { name: 'X-Requested-With', value: 'steadfast' } as const;

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

/** Told about every 401 the master gives (except a login's own wrong password). */
export type UnauthorizedListener = (e: ApiError, path: string) => void;

/** The transport under ApiClient (which adds one method per operation): requests to the master,
 *  and the listeners told about a 401. */
export class ApiTransport {
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
  protected async call<O extends ApiOperation>(op: O, args: CallArgs<O>): Promise<ResponseOf<O>> {
    const { method } = operations[op];
    const path = operationPath(op, args.path);
    return (await this.request(method, path, args.query, args.body, args.signal, args.quiet401)) as ResponseOf<O>;
  }
}
