// Hash routing with state in the URL: "#/experiments/12?metric=loss". Hash routes need no server
// configuration (the master only has to serve index.html at "/"), and deep links survive reloads.
import { useEffect, useState, useCallback } from 'react';

export interface Route {
  path: string; // "/experiments/12"
  params: URLSearchParams;
}

export function parseHash(hash: string): Route {
  const h = hash.replace(/^#/, '') || '/';
  const q = h.indexOf('?');
  const path = (q === -1 ? h : h.slice(0, q)) || '/';
  return { path: path.startsWith('/') ? path : `/${path}`, params: new URLSearchParams(q === -1 ? '' : h.slice(q + 1)) };
}

export function buildHash(path: string, params?: Record<string, string | number | boolean | undefined | null> | URLSearchParams): string {
  let qs = '';
  if (params instanceof URLSearchParams) qs = params.toString();
  else if (params) {
    const p = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '' && v !== false) p.set(k, String(v));
    qs = p.toString();
  }
  return `#${path}${qs ? `?${qs}` : ''}`;
}

export function useRoute(): Route {
  const [route, setRoute] = useState<Route>(() => parseHash(window.location.hash));
  useEffect(() => {
    const on = () => setRoute(parseHash(window.location.hash));
    window.addEventListener('hashchange', on);
    return () => window.removeEventListener('hashchange', on);
  }, []);
  return route;
}

export function navigate(hash: string, replace = false): void {
  if (replace) {
    history.replaceState(null, '', hash);
    window.dispatchEvent(new HashChangeEvent('hashchange'));
  } else {
    window.location.hash = hash;
  }
}

/** Reads and writes query parameters of the current route (replacing history entries, so typing
 *  in a filter does not flood the back button). */
export function useQueryState(route: Route): [URLSearchParams, (patch: Record<string, string | number | boolean | undefined | null>) => void] {
  const set = useCallback(
    (patch: Record<string, string | number | boolean | undefined | null>) => {
      const cur = parseHash(window.location.hash);
      const p = new URLSearchParams(cur.params);
      for (const [k, v] of Object.entries(patch)) {
        if (v === undefined || v === null || v === '' || v === false) p.delete(k);
        else p.set(k, String(v));
      }
      navigate(buildHash(cur.path, p), true);
    },
    [],
  );
  return [route.params, set];
}
