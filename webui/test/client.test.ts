import { describe, expect, it } from 'vitest';
import { ApiClient, ApiError, errorFromResponse, queryString } from '../src/api/client';

function fakeFetch(respond: (url: string, init?: RequestInit) => Response | Promise<Response>) {
  const calls: { url: string; init?: RequestInit }[] = [];
  const f = async (url: string, init?: RequestInit) => {
    calls.push({ url, init });
    return respond(url, init);
  };
  return { f, calls };
}
const json = (status: number, body: unknown) => new Response(typeof body === 'string' ? body : JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });

async function caught(p: Promise<unknown>): Promise<ApiError> {
  try {
    await p;
  } catch (e) {
    expect(e).toBeInstanceOf(ApiError);
    return e as ApiError;
  }
  throw new Error('expected a rejection');
}

describe('ApiClient', () => {
  it('builds Determined-style URLs with repeated array parameters', async () => {
    const { f, calls } = fakeFetch(() => json(200, { experiments: [], pagination: { total: 0 } }));
    const c = new ApiClient({ baseUrl: 'http://m:8080/', fetch: f });
    await c.getExperiments({ states: ['EXPERIMENT_STATE_ACTIVE', 'EXPERIMENT_STATE_PAUSED'], name: 'a b', sortBy: 'id', descending: true, offset: 0, limit: 25 });
    expect(calls[0].url).toBe('http://m:8080/api/v1/experiments?states=EXPERIMENT_STATE_ACTIVE&states=EXPERIMENT_STATE_PAUSED&name=a%20b&sortBy=id&descending=true&offset=0&limit=25');
    expect(queryString({ a: undefined, b: '', c: false, d: 0 })).toBe('?d=0');
  });

  it('normalises protobuf JSON: int64 strings, omitted defaults, optional metrics', async () => {
    const { f } = fakeFetch(() => json(200, { experiments: [{ id: '42', state: 'EXPERIMENT_STATE_ACTIVE', numTrials: 4, startTime: '2026-11-22T02:00:00Z' }], pagination: { limit: 25 } }));
    const r = await new ApiClient({ fetch: f }).getExperiments();
    expect(r.experiments[0]).toMatchObject({ id: 42, name: '', numTrials: 4, numCompletedTrials: 0, archived: false, bestValidationMetric: undefined, endTime: undefined });
    expect(r.pagination.total).toBe(1);
  });

  it('reports a network failure as kind "network", retryable', async () => {
    const c = new ApiClient({ fetch: async () => { throw new TypeError('Failed to fetch'); } });
    const e = await caught(c.getAgents());
    expect(e.kind).toBe('network');
    expect(e.retryable).toBe(true);
    expect(e.message).toMatch(/Cannot reach the master/);
  });

  it('reports a timeout', async () => {
    const c = new ApiClient({
      timeoutMs: 20,
      fetch: (_u, init) => new Promise((_res, rej) => init?.signal?.addEventListener('abort', () => rej(new DOMException('aborted', 'AbortError')))),
    });
    const e = await caught(c.getMaster());
    expect(e.kind).toBe('timeout');
  });

  it('uses the master JSON error body for 4xx', async () => {
    const { f } = fakeFetch(() => json(404, { code: 5, message: 'experiment 9 not found', details: [] }));
    const e = await caught(new ApiClient({ fetch: f }).getExperiment(9));
    expect(e).toMatchObject({ kind: 'http', status: 404, code: 5, message: 'experiment 9 not found', fromMaster: true });
    expect(e.retryable).toBe(false);
    expect(e.unreachable).toBe(false);
  });

  it('uses the master JSON error body for 409 on an illegal transition', async () => {
    const { f, calls } = fakeFetch(() => json(409, { code: 9, message: 'cannot pause a COMPLETED experiment' }));
    const e = await caught(new ApiClient({ fetch: f }).experimentAction(3, 'pause'));
    expect(e.status).toBe(409);
    expect(e.message).toBe('cannot pause a COMPLETED experiment');
    expect(calls[0].url).toBe('/api/v1/experiments/3/pause');
    expect(calls[0].init?.method).toBe('POST');
  });

  it('falls back to the status line for 5xx with a non-JSON body', async () => {
    const { f } = fakeFetch(() => new Response('<html>Bad Gateway</html>', { status: 502, statusText: 'Bad Gateway' }));
    const e = await caught(new ApiClient({ fetch: f }).getAgents());
    expect(e).toMatchObject({ kind: 'http', status: 502, message: '502 Bad Gateway', fromMaster: false });
    expect(e.retryable).toBe(true);
    expect(e.unreachable).toBe(true);
    expect(errorFromResponse(500, '', '{"message": 3}').message).toBe('500 error');
  });

  it('rejects malformed JSON and non-object answers with kind "parse"', async () => {
    const bad = await caught(new ApiClient({ fetch: async () => json(200, '{"experiments": [') }).getExperiments());
    expect(bad.kind).toBe('parse');
    expect(bad.message).toMatch(/malformed/);
    const arr = await caught(new ApiClient({ fetch: async () => json(200, '[1,2]') }).getExperiments());
    expect(arr.kind).toBe('parse');
  });

  it('tolerates missing arrays and wrong field types without throwing', async () => {
    const c = new ApiClient({ fetch: async () => json(200, { trials: 'nope', metrics: null }) });
    expect(await c.getExperimentTrials(1)).toEqual([]);
    expect(await c.getTrialMetrics(1, 'training')).toEqual([]);
  });

  it('pages through trials until the total is reached', async () => {
    const { f, calls } = fakeFetch((url) => {
      const off = Number(new URL(url, 'http://x').searchParams.get('offset') ?? 0);
      const trials = off === 0 ? Array.from({ length: 500 }, (_, i) => ({ id: String(i + 1) })) : [{ id: '501' }];
      return json(200, { trials, pagination: { total: 501 } });
    });
    const t = await new ApiClient({ fetch: f }).getExperimentTrials(7);
    expect(t.length).toBe(501);
    expect(calls.length).toBe(2);
  });

  it('sends create requests as {configYaml, activate}', async () => {
    const { f, calls } = fakeFetch(() => json(200, { experiment: { id: '5' } }));
    const r = await new ApiClient({ fetch: f }).createExperiment('name: x', true);
    expect(JSON.parse(String(calls[0].init?.body))).toEqual({ configYaml: 'name: x', activate: true });
    expect(r.experiment?.id).toBe(5);
  });
});

describe('getClusterUtilization', () => {
  it('asks for the history since a time (whole seconds) and for a pool', async () => {
    const { f, calls } = fakeFetch(() => json(200, { points: [] }));
    const c = new ApiClient({ fetch: f });
    expect(await c.getClusterUtilization({ since: 1795536060.7, pool: 'gpu' })).toEqual([]);
    expect(calls[0].url).toBe('/api/v1/cluster/utilization?since=1795536060&pool=gpu');
    await c.getClusterUtilization();
    expect(calls[1].url).toBe('/api/v1/cluster/utilization');
  });

  it('normalises points: time in seconds, omitted defaults, rows without a time dropped', async () => {
    const { f } = fakeFetch(() =>
      json(200, {
        points: [
          { pool: 'default', time: '2026-11-24T16:01:00Z', slotsTotal: 4, slotsBusy: 1.5, slotsBusyMax: 2, samples: 6 },
          { time: '2026-11-24T16:02:00Z' },
          { pool: 'default', slotsBusy: 3 },
          { pool: 'default', time: 'garbage' },
        ],
      }),
    );
    const p = await new ApiClient({ fetch: f }).getClusterUtilization();
    expect(p).toEqual([
      { pool: 'default', time: Date.parse('2026-11-24T16:01:00Z') / 1000, slotsTotal: 4, slotsBusy: 1.5, slotsBusyMax: 2, samples: 6 },
      { pool: 'default', time: Date.parse('2026-11-24T16:02:00Z') / 1000, slotsTotal: 0, slotsBusy: 0, slotsBusyMax: 0, samples: 0 },
    ]);
  });

  it("passes the master's 400 for a bad since through as an ApiError", async () => {
    const { f } = fakeFetch(() => json(400, { code: 3, message: 'since: "x" is not an RFC 3339 time', errors: [] }));
    const e = await caught(new ApiClient({ fetch: f }).getClusterUtilization({ since: 1 }));
    expect(e).toMatchObject({ kind: 'http', status: 400, message: 'since: "x" is not an RFC 3339 time' });
  });
});

describe('followTrialLogs', () => {
  it('falls back to polling after ids when EventSource is unavailable, without duplicates', async () => {
    const pages = [[{ id: '11', message: 'a' }, { id: '12', message: 'b' }], [{ id: '12', message: 'b' }, { id: '13', message: 'c' }], []];
    const { f, calls } = fakeFetch(() => json(200, { logs: pages.shift() ?? [] }));
    const c = new ApiClient({ fetch: f });
    const got: string[] = [];
    const modes: string[] = [];
    const stop = c.followTrialLogs(4, { afterId: 10, pollMs: 5 }, (l) => got.push(l.message), undefined, (m) => modes.push(m));
    await new Promise((r) => setTimeout(r, 60));
    stop();
    expect(got).toEqual(['a', 'b', 'c']);
    expect(modes[0]).toBe('poll');
    expect(calls[0].url).toBe('/api/v1/trials/4/logs?afterId=10&limit=1000');
    expect(calls[1].url).toBe('/api/v1/trials/4/logs?afterId=12&limit=1000');
  });
});
