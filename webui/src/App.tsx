// Shell: header navigation and the route switch. Every page catches its own API errors; the
// error boundary is the last line so that a rendering bug shows a message, not a blank page.
import { Component, type ReactNode } from 'react';
import { useRoute } from './lib/router';
import { ExperimentsList } from './pages/ExperimentsList';
import { ExperimentPage } from './pages/ExperimentPage';
import { TrialPage } from './pages/TrialPage';
import { ClusterPage } from './pages/ClusterPage';

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

export function App() {
  const route = useRoute();
  const parts = route.path.split('/').filter(Boolean);
  let page: ReactNode;
  let section = 'experiments';
  if (parts.length === 0 || (parts[0] === 'experiments' && parts.length === 1)) page = <ExperimentsList route={route} />;
  else if (parts[0] === 'experiments' && /^\d+$/.test(parts[1])) page = <ExperimentPage key={parts[1]} id={Number(parts[1])} route={route} />;
  else if (parts[0] === 'trials' && /^\d+$/.test(parts[1] ?? '')) page = <TrialPage key={parts[1]} id={Number(parts[1])} route={route} />;
  else if (parts[0] === 'cluster') {
    page = <ClusterPage />;
    section = 'cluster';
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
        <nav aria-label="Main">
          <a href="#/experiments" aria-current={section === 'experiments' ? 'page' : undefined}>
            Experiments
          </a>
          <a href="#/cluster" aria-current={section === 'cluster' ? 'page' : undefined}>
            Cluster
          </a>
        </nav>
      </header>
      <main id="main" tabIndex={-1}>
        <Boundary resetKey={route.path}>{page}</Boundary>
      </main>
    </>
  );
}
