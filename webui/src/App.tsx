// Shell: header navigation, the user menu and the route switch. Every page catches its own API
// errors; the error boundary is the last line so that a rendering bug shows a message, not a blank
// page. While the master wants a login (any 401), the login page stands in for the page, and the
// route is kept so that the user comes back to it.
import { Component, type ReactNode } from 'react';
import { Skeleton } from './components/common';
import { UserMenu } from './components/UserMenu';
import { useRoute } from './lib/router';
import { SessionProvider, useSession } from './lib/session';
import { LoginPage } from './pages/LoginPage';
import { TokensPage } from './pages/TokensPage';
import { UsersPage } from './pages/UsersPage';
import { ExperimentsList } from './pages/ExperimentsList';
import { ExperimentPage } from './pages/ExperimentPage';
import { TrialPage } from './pages/TrialPage';
import { ClusterPage } from './pages/ClusterPage';
import { ModelsList } from './pages/ModelsList';
import { ModelPage } from './pages/ModelPage';

class Boundary extends Component<{ children: ReactNode; resetKey: string }, { error?: Error; key?: string }> {
  state: { error?: Error; key?: string } = {};
  static getDerivedStateFromError(error: Error) {
    return { error };
  }
  componentDidUpdate(prev: { resetKey: string }) {
    if (prev.resetKey !== this.props.resetKey && this.state.error) this.setState({ error: undefined });
  }
  render() {
    if (this.state.error)
      return (
        <div className="error-banner" role="alert" data-testid="error-banner">
          <div>
            <strong>This page failed to render.</strong>
            <div className="error-detail">{this.state.error.message}</div>
          </div>
          <button type="button" className="btn" onClick={() => this.setState({ error: undefined })}>
            Retry
          </button>
        </div>
      );
    return this.props.children;
  }
}

/** A path segment decoded; as it was when it is not valid percent-encoding. */
function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

export function App() {
  return (
    <SessionProvider>
      <Shell />
    </SessionProvider>
  );
}

function Shell() {
  const route = useRoute();
  const session = useSession();
  const auth = session.state.status;
  const parts = route.path.split('/').filter(Boolean);
  let page: ReactNode;
  let section = 'experiments';
  if (parts.length === 0 || (parts[0] === 'experiments' && parts.length === 1)) page = <ExperimentsList route={route} />;
  else if (parts[0] === 'experiments' && /^\d+$/.test(parts[1])) page = <ExperimentPage key={parts[1]} id={Number(parts[1])} route={route} />;
  else if (parts[0] === 'trials' && /^\d+$/.test(parts[1] ?? '')) page = <TrialPage key={parts[1]} id={Number(parts[1])} route={route} />;
  else if (parts[0] === 'models' && parts.length <= 2) {
    const name = parts[1] === undefined ? undefined : safeDecode(parts[1]);
    page = name === undefined ? <ModelsList route={route} /> : <ModelPage key={name} name={name} />;
    section = 'models';
  } else if (parts[0] === 'cluster') {
    page = <ClusterPage route={route} />;
    section = 'cluster';
  } else if (parts[0] === 'tokens') {
    page = <TokensPage route={route} />;
    section = 'tokens';
  } else if (parts[0] === 'users') {
    page = <UsersPage />;
    section = 'users';
  } else
    page = (
      <div className="empty" data-testid="not-found">
        No page here. <a href="#/experiments">Go to the experiments</a>.
      </div>
    );
  return (
    <>
      <a
        className="skip"
        href="#main"
        onClick={(e) => {
          // the hash holds the route: move focus instead of navigating to "#main"
          e.preventDefault();
          document.getElementById('main')?.focus();
        }}
      >
        Skip to content
      </a>
      <header className="top">
        <a className="brand" href="#/experiments">
          Steadfast
        </a>
        {auth !== 'out' && (
          <nav aria-label="Main">
            <a href="#/experiments" aria-current={section === 'experiments' ? 'page' : undefined}>
              Experiments
            </a>
            <a href="#/models" aria-current={section === 'models' ? 'page' : undefined}>
              Models
            </a>
            <a href="#/cluster" aria-current={section === 'cluster' ? 'page' : undefined}>
              Cluster
            </a>
          </nav>
        )}
        <div className="grow" />
        {session.me && <UserMenu />}
      </header>
      <main id="main" tabIndex={-1}>
        {session.state.status === 'out' ? (
          <LoginPage reason={session.state.reason} />
        ) : auth === 'checking' ? (
          <Skeleton rows={6} />
        ) : (
          <Boundary resetKey={route.path}>{page}</Boundary>
        )}
      </main>
    </>
  );
}
