#!/usr/bin/env node
// Render bench: time to first paint of the experiments table with 1,000 rows and of a metric chart
// with 100,000 points (raw, and LTTB-downsampled to 5,000 as the trial page does), in Debian's
// Chromium. Data is generated inside the page by dist/bench.html (a fixture built with the app),
// so no network and no API mock is involved. Needs `npm run build` first.
// Usage: node bench/render.mjs [repeats=7]   → a JSON line per case and a Markdown table.
import { createServer } from 'node:http';
import { readFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { extname, join, normalize } from 'node:path';
import { launch } from '../e2e/browser.mjs';

const repeats = Number(process.argv[2] ?? 7);
const dist = join(import.meta.dirname, '..', 'dist');
if (!existsSync(join(dist, 'bench.html'))) {
  console.error('dist/bench.html is missing: run `npm run build` first');
  process.exit(2);
}
const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css' };
const server = createServer(async (req, res) => {
  const rel = normalize(decodeURIComponent(new URL(req.url, 'http://x').pathname)).replace(/^(\.\.[/\\])+/, '');
  try {
    const body = await readFile(join(dist, rel));
    res.writeHead(200, { 'Content-Type': TYPES[extname(rel)] ?? 'application/octet-stream' });
    res.end(body);
  } catch {
    res.writeHead(404);
    res.end();
  }
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const base = `http://127.0.0.1:${server.address().port}`;

const cases = [
  { name: 'experiments list, 1,000 rows (virtualised, as shipped)', q: 'case=list&n=1000' },
  { name: 'experiments list, 1,000 rows, all in the DOM', q: 'case=list&n=1000&virtual=0' },
  { name: 'metric chart, 100,000 points (raw)', q: 'case=chart&n=100000' },
  { name: 'metric chart, 100,000 points → LTTB 5,000', q: 'case=chart&n=100000&downsample=5000' },
];
const browser = await launch();
const results = [];
for (const c of cases) {
  const times = [];
  const parts = [];
  let last;
  for (let i = 0; i < repeats + 1; i++) {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    await page.goto(`${base}/bench.html?${c.q}`);
    await page.waitForFunction(() => window.__bench, null, { timeout: 60000 });
    last = await page.evaluate(() => window.__bench);
    if (i > 0) {
      times.push(last.ms); // first run warms the cache
      parts.push(last);
    }
    await page.close();
  }
  times.sort((a, b) => a - b);
  const med = (k) => { const v = parts.map((p) => p[k]).filter((x) => x !== undefined).sort((a, b) => a - b); return v.length ? +v[Math.floor(v.length / 2)].toFixed(1) : undefined; };
  const r = { case: c.name, n: last.n, points: last.points, rows: last.rows, dom_rows: last.domRows, react_ms: med('reactMs'), layout_ms: med('layoutMs'), scroll_to_end_ms: med('scrollMs'), zoom_redraw_ms: med('zoomMs'), shape_ms: med('shapeMs'), median_ms: +times[Math.floor(times.length / 2)].toFixed(1), min_ms: +times[0].toFixed(1), max_ms: +times[times.length - 1].toFixed(1), repeats };
  results.push(r);
  console.log(JSON.stringify(r));
}
await browser.close();
server.close();
console.log(`\n| case | first paint, median ms | min | max | detail (medians) |\n| --- | ---: | ---: | ---: | --- |`);
for (const r of results) {
  const d = r.dom_rows !== undefined ? `${r.dom_rows} rows in the DOM; React ${r.react_ms} ms, layout ${r.layout_ms} ms; scroll to the end ${r.scroll_to_end_ms} ms` : `${r.points} points drawn; downsampling ${r.shape_ms} ms; zoom redraw ${r.zoom_redraw_ms} ms`;
  console.log(`| ${r.case} | ${r.median_ms} | ${r.min_ms} | ${r.max_ms} | ${d} |`);
}
