// What a failed API call is: ApiError says why (the master unreachable, an error answer, or
// something that is not the JSON we expect) and what the dashboard may do about it (log in again,
// retry later); errorFromResponse turns a non-2xx answer into one, from the master's
// {"code","message","details"} body and its Retry-After header.
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
