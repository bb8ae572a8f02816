import { createRoot } from 'react-dom/client';
import { App } from './App';
import './styles.css';

// The master may serve client routes like /experiments/3 with index.html: move them into the hash.
if (!window.location.hash && window.location.pathname.replace(/\/index\.html$/, '/').replace(/\/+$/, '') !== '' && /\/(experiments|trials|cluster|tokens|users)(\/|$)/.test(window.location.pathname)) {
  const m = window.location.pathname.match(/\/(experiments|trials|cluster|tokens|users)(\/.*)?$/);
  if (m) history.replaceState(null, '', `${window.location.pathname.slice(0, m.index) || '/'}#/${m[1]}${m[2] ?? ''}${window.location.search}`);
}
createRoot(document.getElementById('root')!).render(<App />);
