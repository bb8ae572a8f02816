// A user-code experiment's context (GET /api/v1/experiments/{id}/context; proto/steadfast/v1/api.proto,
// GetExperimentContext) as fixtures and a handler for the in-memory stand-ins of the master: the dev
// stub (dev/stub-master.mjs) and the offline browser test (e2e/what-ran.flow.mjs). The route is
// spelled as the API description spells it, so createRouter refuses it if the description drops it.
// The wire JSON is the master's: int64 sizes as strings, `archive` (bytes) as base64 and only with
// includeArchive=true, a link's size left out; an experiment without a context answers 404
// "experiment N has no context".
import { createHash } from 'node:crypto';
import { gzipSync } from 'node:zlib';

/** A context of three entries, one a symbolic link, with a gzip archive (its bytes are not a real
 *  tar: the dashboard only saves them) and the archive's real size and SHA-256. `extraFiles` more
 *  files `extra/fNNN.txt` of 10 bytes each make a long list. */
export function fixedContext(extraFiles = 0) {
  const files = [
    { path: 'train.py', size: '1234' },
    { path: 'model/net.py', size: '20480' },
    { path: 'data', linkTarget: '/mnt/shared/data' },
    ...Array.from({ length: extraFiles }, (_, i) => ({ path: `extra/f${String(i).padStart(3, '0')}.txt`, size: '10' })),
  ];
  const fileBytes = files.reduce((n, f) => n + Number(f.size ?? 0), 0);
  const archive = gzipSync(Buffer.from(files.map((f) => `${f.path}\n`).join('').repeat(20)));
  return { files, fileBytes: String(fileBytes), archive, archiveBytes: String(archive.length), sha256: createHash('sha256').update(archive).digest('hex') };
}

/** The context route over `contexts` (experiment id as a string → fixedContext()); `send` and
 *  `err` as the stub writes answers; `exists(id)` false → 404 "experiment N not found". */
export function contextHandlers(contexts, { send, err, exists = () => true }) {
  return {
    'GET /api/v1/experiments/{id}/context': (req, res, url, params) => {
      const id = String(params.id);
      if (!exists(id)) return err(res, 404, 5, `experiment ${id} not found`);
      const c = contexts.get(id);
      if (!c) return err(res, 404, 5, `experiment ${id} has no context`);
      const q = url.searchParams;
      const withArchive = (q.get('includeArchive') ?? q.get('include_archive')) === 'true';
      const { archive, ...rest } = c;
      return send(res, 200, withArchive ? { ...rest, archive: archive.toString('base64') } : rest);
    },
  };
}
