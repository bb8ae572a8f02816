// Who is logged in, for the whole app. The session itself is the master's HttpOnly cookie; this
// only knows its owner (GET /auth/me) and whether the master wants a login. Any 401 from any
// request — at start, or in the middle of a session when it expires — switches to the login page;
// the route (the URL hash) is left alone, so after logging in the user is back where they were.
import { createContext, useCallback, useContext, useEffect, useMemo, useState, type ReactNode } from 'react';
import { api as defaultApi, ApiClient, ApiError } from '../api/client';
import type { Whoami } from '../api/types';
import { toApiError } from './hooks';
import type { Viewer } from './permissions';

export type LoginReason = 'start' | 'expired' | 'logout';

export type SessionState =
  | { status: 'checking' } // asking /auth/me
  | { status: 'in'; me: Whoami }
  | { status: 'out'; reason: LoginReason } // the login page is shown
  | { status: 'open' } // the master has no /auth routes: nothing to log in to
  | { status: 'unknown'; error: ApiError }; // the master could not be asked; pages show why

export interface Session {
  state: SessionState;
  /** The user for permission checks; undefined unless logged in (then the master decides). */
  me: Viewer;
  /** After a successful login: fetches the user's workspaces and shows the app again. Throws an
   *  Error when the browser did not keep the session (the next request would be a 401 again). */
  loggedIn: (user: Whoami) => Promise<void>;
  /** Ends the session on the master and shows the login page. Throws ApiError when the master
   *  could not be told (the session then still stands). */
  logout: () => Promise<void>;
}

const Ctx = createContext<Session>({
  state: { status: 'open' },
  me: undefined,
  loggedIn: async () => {},
  logout: async () => {},
});

/** The session, or outside a SessionProvider (the render bench, component tests) a master
 *  without authentication: nothing hidden. */
export function useSession(): Session {
  return useContext(Ctx);
}

const RECHECK_MS = 10000;

export function SessionProvider({ children, client = defaultApi, initial }: { children: ReactNode; client?: ApiClient; initial?: SessionState }) {
  const [state, setState] = useState<SessionState>(initial ?? { status: 'checking' });

  const check = useCallback(async () => {
    try {
      setState({ status: 'in', me: await client.whoami() });
    } catch (e) {
      const err = toApiError(e);
      if (err.unauthenticated) setState({ status: 'out', reason: 'start' });
      else if (err.kind === 'http' && err.status === 404 && err.fromMaster) setState({ status: 'open' });
      else setState({ status: 'unknown', error: err });
    }
  }, [client]);

  useEffect(() => {
    if (!initial) void check();
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [check]);

  // Any 401 anywhere: the session is gone (or never was).
  useEffect(
    () =>
      client.onUnauthorized(() =>
        setState((prev) => (prev.status === 'out' ? prev : { status: 'out', reason: prev.status === 'in' ? 'expired' : 'start' })),
      ),
    [client],
  );

  // The master could not be asked: ask again now and then, so that an auth-enabled master that
  // comes back is noticed even on a page that makes no requests.
  useEffect(() => {
    if (state.status !== 'unknown') return;
    const t = setTimeout(() => void check(), RECHECK_MS);
    return () => clearTimeout(t);
  }, [state, check]);

  const loggedIn = useCallback(
    async (user: Whoami) => {
      try {
        setState({ status: 'in', me: await client.whoami() });
      } catch (e) {
        const err = toApiError(e);
        if (err.unauthenticated) {
          throw new Error('The master accepted the password, but the browser did not keep the session cookie (a Secure cookie over plain HTTP?).');
        }
        setState({ status: 'in', me: user }); // workspaces unknown until the next reload
      }
    },
    [client],
  );

  const logout = useCallback(async () => {
    try {
      await client.logout();
    } catch (e) {
      if (!toApiError(e).unauthenticated) throw toApiError(e);
    }
    setState({ status: 'out', reason: 'logout' });
  }, [client]);

  const value = useMemo<Session>(() => ({ state, me: state.status === 'in' ? state.me : undefined, loggedIn, logout }), [state, loggedIn, logout]);
  return <Ctx.Provider value={value}>{children}</Ctx.Provider>;
}
