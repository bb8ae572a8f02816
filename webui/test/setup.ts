// Run before every test file (vite.config.ts, test.setupFiles). uPlot reads the device pixel
// ratio through matchMedia when it loads; jsdom has none.
if (!window.matchMedia) {
  window.matchMedia = ((query: string) => ({ matches: false, media: query, onchange: null, addEventListener() {}, removeEventListener() {}, addListener() {}, removeListener() {}, dispatchEvent: () => false })) as unknown as typeof window.matchMedia;
}
