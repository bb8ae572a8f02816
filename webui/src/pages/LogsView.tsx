// Trial logs: first page, "load more", server-side search, follow mode over SSE, download.
import { useEffect, useRef, useState } from 'react';
import { api } from '../api/client';
import type { LogLine } from '../api/types';
import { ApiError } from '../api/client';
import { ErrorBanner } from '../components/common';
import { formatDateTime } from '../lib/format';
import { toApiError, useDebounced } from '../lib/hooks';
import { useQueryState, type Route } from '../lib/router';

const PAGE = 1000;
const KEEP = 20000; // lines kept in the view

export function LogsView({ trialId, live, route }: { trialId: number; live: boolean; route: Route }) {
  const [q, setQ] = useQueryState(route);
  const follow = q.get('follow') === '1';
  const [searchInput, setSearchInput] = useState(q.get('search') ?? '');
  const search = useDebounced(searchInput, 300);
  const [lines, setLines] = useState<LogLine[]>([]);
  const [error, setError] = useState<ApiError>();
  const [loading, setLoading] = useState(true);
  const [more, setMore] = useState(false);
  const [streamState, setStreamState] = useState<'off' | 'connecting' | 'open' | 'retrying'>('off');
  const [streamMode, setStreamMode] = useState<'sse' | 'poll'>('sse');
  const [tick, setTick] = useState(0);
  const box = useRef<HTMLDivElement>(null);
  const lastId = lines.length ? lines[lines.length - 1].id : 0;
  const lastIdRef = useRef(0);
  lastIdRef.current = lastId;

  useEffect(() => {
    if ((q.get('search') ?? '') !== search) setQ({ search });
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [search]);

  // first page whenever the trial or the search changes
  useEffect(() => {
    const ctl = new AbortController();
    setLoading(true);
    setLines([]);
    api
      .getTrialLogs(trialId, { limit: PAGE, search: search || undefined }, ctl.signal)
      .then((l) => {
        setLines(l);
        setMore(l.length > 0 && l.length >= Math.min(PAGE, 100));
        setError(undefined);
      })
      .catch((e) => {
        const err = toApiError(e);
        if (err.kind !== 'aborted') setError(err);
      })
      .finally(() => setLoading(false));
    return () => ctl.abort();
  }, [trialId, search, tick]);

  // follow over SSE once the first page is in
  useEffect(() => {
    if (!follow || loading) {
      setStreamState('off');
      return;
    }
    setStreamState('connecting');
    const stop = api.followTrialLogs(
      trialId,
      { afterId: lastIdRef.current, search: search || undefined },
      (line) => setLines((prev) => {
        if (prev.length && line.id && line.id <= prev[prev.length - 1].id) return prev;
        const next = prev.length >= KEEP ? prev.slice(prev.length - KEEP + 1) : prev.slice();
        next.push(line);
        return next;
      }),
      () => setStreamState('retrying'),
      (mode) => {
        setStreamMode(mode);
        setStreamState('open');
      },
    );
    return stop;
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [follow, loading, trialId, search]);

  // keep the newest line visible while following
  useEffect(() => {
    if (follow && box.current) box.current.scrollTop = box.current.scrollHeight;
  }, [lines, follow]);

  const loadMore = async () => {
    try {
      const l = await api.getTrialLogs(trialId, { afterId: lastId, limit: PAGE, search: search || undefined });
      setLines((prev) => [...prev, ...l.filter((x) => x.id > lastId)]);
      setMore(l.length > 0);
    } catch (e) {
      setError(toApiError(e));
    }
  };

  const download = async () => {
    try {
      const all: LogLine[] = [];
      let after = 0;
      for (let i = 0; i < 1000; i++) {
        const l = await api.getTrialLogs(trialId, { afterId: after, limit: 5000, search: search || undefined });
        // the master may cap `limit` lower: stop on an empty page, not a short one
        if (l.length === 0 || l[l.length - 1].id <= after) break;
        all.push(...l);
        after = l[l.length - 1].id;
      }
      const text = all.map((l) => `${l.time ?? ''} [rank ${l.rank}] ${l.stream}: ${l.message}`).join('\n') + '\n';
      const url = URL.createObjectURL(new Blob([text], { type: 'text/plain' }));
      const a = document.createElement('a');
      a.href = url;
      a.download = `trial-${trialId}-logs${search ? '-filtered' : ''}.txt`;
      document.body.appendChild(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 5000);
    } catch (e) {
      setError(toApiError(e));
    }
  };

  return (
    <div className="card">
      <div className="card-head">
        <h2>Logs</h2>
        <label>
          Search
          <input type="search" value={searchInput} onChange={(e) => setSearchInput(e.target.value)} placeholder="substring" data-testid="log-search" />
        </label>
        <label className="check">
          <input type="checkbox" checked={follow} onChange={(e) => setQ({ follow: e.target.checked ? '1' : undefined })} data-testid="log-follow" /> Follow
        </label>
        <span className="muted small" role="status" aria-live="polite" data-testid="log-stream-state" data-state={streamState} data-mode={streamMode}>
          {follow ? (streamState === 'open' ? (streamMode === 'sse' ? 'following (live stream)' : 'following (polling)') : streamState === 'retrying' ? 'reconnecting…' : 'connecting…') : live ? 'not following' : ''}
        </span>
        <div className="grow" />
        <button type="button" className="btn btn-small" onClick={download} data-testid="log-download">
          Download
        </button>
      </div>
      <ErrorBanner error={error} onRetry={() => setTick((t) => t + 1)} />
      <div className="logs" ref={box} tabIndex={0} role="log" aria-label={`Logs of trial ${trialId}`} data-testid="logs" data-lines={lines.length}>
        {loading ? (
          <div className="muted">Loading logs…</div>
        ) : lines.length === 0 ? (
          <div className="muted">{search ? 'No log line matches.' : 'No log lines yet.'}</div>
        ) : (
          lines.map((l) => (
            <div key={l.id} className={`log-line log-${l.stream}`}>
              <span className="log-time">{formatDateTime(l.time)}</span> <span className="log-rank">[{l.rank}]</span> {l.message}
            </div>
          ))
        )}
      </div>
      {more && !follow && (
        <button type="button" className="btn btn-small" onClick={loadMore}>
          Load more
        </button>
      )}
    </div>
  );
}
