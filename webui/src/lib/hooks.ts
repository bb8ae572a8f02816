// Data loading with polling: keeps the last good data while a refresh fails, exposes the error
// for the banner, pauses while the tab is hidden, and never lets a rejected promise escape.
import { useCallback, useEffect, useRef, useState } from 'react';
import { ApiError } from '../api/client';

export interface Loaded<T> {
  data: T | undefined;
  error: ApiError | undefined;
  loading: boolean; // true until the first answer (data or error)
  reload: () => void;
  updatedAt: number;
}

export function toApiError(e: unknown): ApiError {
  if (e instanceof ApiError) return e;
  return new ApiError('parse', e instanceof Error ? e.message : String(e));
}

/** Calls `load` now, whenever `deps` change, and every `intervalMs` (0: no polling). When deps
 *  change the old data is dropped (loading again) unless `keepOnChange`, which avoids flashing a
 *  skeleton when, say, one more trial joins a chart. */
export function usePolling<T>(load: (signal: AbortSignal) => Promise<T>, deps: unknown[], intervalMs = 0, keepOnChange = false): Loaded<T> {
  const [data, setData] = useState<T>();
  const [error, setError] = useState<ApiError>();
  const [loading, setLoading] = useState(true);
  const [updatedAt, setUpdatedAt] = useState(0);
  const [tick, setTick] = useState(0);
  const loadRef = useRef(load);
  loadRef.current = load;
  const depKey = JSON.stringify(deps);
  const lastKey = useRef(depKey);

  useEffect(() => {
    if (lastKey.current !== depKey) {
      lastKey.current = depKey;
      if (!keepOnChange) {
        setData(undefined);
        setLoading(true);
      }
    }
    const ctl = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    let alive = true;
    const run = async () => {
      try {
        const d = await loadRef.current(ctl.signal);
        if (!alive) return;
        setData(d);
        setError(undefined);
        setUpdatedAt(Date.now());
      } catch (e) {
        if (!alive) return;
        const err = toApiError(e);
        if (err.kind !== 'aborted') setError(err);
      } finally {
        if (alive) {
          setLoading(false);
          if (intervalMs > 0) timer = setTimeout(schedule, intervalMs);
        }
      }
    };
    const schedule = () => {
      if (document.visibilityState === 'hidden') {
        timer = setTimeout(schedule, 1000);
        return;
      }
      void run();
    };
    void run();
    return () => {
      alive = false;
      ctl.abort();
      clearTimeout(timer);
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [depKey, intervalMs, tick]);

  const reload = useCallback(() => setTick((t) => t + 1), []);
  return { data, error, loading, reload, updatedAt };
}

/** A value that follows `value` after it has been stable for `ms`. */
export function useDebounced<T>(value: T, ms: number): T {
  const [v, setV] = useState(value);
  useEffect(() => {
    const t = setTimeout(() => setV(value), ms);
    return () => clearTimeout(t);
  }, [value, ms]);
  return v;
}
