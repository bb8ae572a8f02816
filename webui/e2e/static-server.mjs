// A tiny static server for dist/ with the same headers and SPA fallback the master must give
// (docs/webui.md). With no `api` handler /api/* answers 404 text/plain like any other static server
// would; with one, `api(req, res, url)` answers every /api/ request.
import { createServer } from 'node:http';
import { readFile, stat } from 'node:fs/promises';
import { extname, join, normalize } from 'node:path';

const TYPES = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.css': 'text/css', '.svg': 'image/svg+xml', '.png': 'image/png' };

export async function serveDist(dist, port = 0, api = undefined) {
  const server = createServer(async (req, res) => {
    if (api && req.url.startsWith('/api/')) {
      try {
        return await api(req, res, new URL(req.url, 'http://x'));
      } catch (e) {
        res.writeHead(500, { 'Content-Type': 'application/json' });
        return res.end(JSON.stringify({ code: 13, message: String(e) }));
      }
    }
    const rel = normalize(decodeURIComponent(new URL(req.url, 'http://x').pathname)).replace(/^(\.\.[/\\])+/, '');
    let file = join(dist, rel);
    let st = await stat(file).catch(() => null);
    if ((!st || st.isDirectory()) && !rel.startsWith('/api/') && (st?.isDirectory() || !extname(rel))) {
      file = join(dist, 'index.html');
      st = await stat(file).catch(() => null);
    }
    if (!st) {
      res.writeHead(404, { 'Content-Type': 'text/plain' });
      return res.end('not found');
    }
    res.writeHead(200, { 'Content-Type': TYPES[extname(file)] ?? 'application/octet-stream', 'Cache-Control': rel.startsWith('/assets/') ? 'public, max-age=31536000, immutable' : 'no-cache' });
    res.end(await readFile(file));
  });
  await new Promise((r) => server.listen(port, '127.0.0.1', r));
  return { server, url: `http://127.0.0.1:${server.address().port}` };
}
