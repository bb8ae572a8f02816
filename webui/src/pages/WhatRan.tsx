// What an experiment ran, from its config and (for user code) its context: the "What ran" card of
// the experiment page and the matching Summary rows of a trial page.
// - Native trainer (no `entrypoint`): the arch (`hyperparameters.arch`: a constant or each value of
//   a sweep; the trainer's default, transformer, when absent), `precision` (fp32 when absent) and
//   the `data` splits' files (docs/config.md).
// - User code: the entrypoint as a command line, and the context it runs from (GET
//   /experiments/{id}/context, asked once, only for user code): its files with sizes, link targets,
//   the archive's size and SHA-256, and a download of the archive. A 404 there means the experiment
//   has no context ("No context uploaded"); any other failure is the card's own banner.
import { useState } from 'react';
import { api, ApiError } from '../api/client';
import type { Experiment, ExperimentContext, Trial } from '../api/types';
import { Empty, ErrorBanner, Skeleton } from '../components/common';
import { archValues, experimentArch, trialArch } from '../lib/arch';
import { experimentConfig, type ExperimentConfig } from '../lib/experimentConfig';
import { CONTEXT_FILES_SHOWN, contextArchiveBlob, contextArchiveName, contextFileLabel, saveBlob, shortDigest, shownFiles } from '../lib/experimentContext';
import { formatBytes, formatInt, formatParameters } from '../lib/format';
import { usePolling } from '../lib/hooks';

/** The native trainer's arch when the config names none (docs/config.md: "no `arch` is
 *  `transformer`"). */
export const NATIVE_DEFAULT_ARCH = 'transformer';
const DEFAULT_ARCH_LABEL = `${NATIVE_DEFAULT_ARCH} (default)`;

/** The experiment page's "What ran" card; nothing for a config that does not parse. */
export function WhatRanCard({ experiment: e }: { experiment: Experiment }) {
  const config = experimentConfig(e.configYaml);
  if (!config) return null;
  return (
    <div className="card" data-testid="what-ran" data-kind={config.entrypoint ? 'user-code' : 'native'}>
      <h2>What ran</h2>
      {config.entrypoint ? <UserCode experimentId={e.id} config={config} /> : <Native config={config} />}
    </div>
  );
}

function Native({ config }: { config: ExperimentConfig }) {
  const archs = archValues(config.arch);
  return (
    <dl className="kv">
      <dt>Trainer</dt>
      <dd>native (sf-trainer)</dd>
      <dt>{archs.length > 1 ? `Archs (a sweep over ${archs.length})` : 'Arch'}</dt>
      <dd className="mono" data-testid="what-ran-arch">{archs.length ? archs.join(', ') : DEFAULT_ARCH_LABEL}</dd>
      <dt>Precision</dt>
      <dd className="mono" data-testid="what-ran-precision">{config.precisionSet ? config.precision : `${config.precision} (default)`}</dd>
      <dt>Data</dt>
      <dd data-testid="what-ran-data">
        {config.data.length === 0 ? (
          <span className="muted">none named</span>
        ) : (
          <ul className="plain">
            {config.data.map((d) => (
              <li key={d.split} data-testid="data-split" data-split={d.split}>
                <strong>{d.split}</strong>:{' '}
                {d.files.map((f, i) => (
                  <span key={f.role}>
                    {i > 0 && ', '}
                    {f.role} <span className="mono break">{f.path}</span>
                  </span>
                ))}
              </li>
            ))}
          </ul>
        )}
      </dd>
    </dl>
  );
}

function UserCode({ experimentId, config }: { experimentId: number; config: ExperimentConfig }) {
  const ctx = usePolling((s) => api.getExperimentContext(experimentId, false, s), [experimentId], 0);
  // The master's own 404 (something else answering 404 is the usual unreachable banner).
  const noContext = ctx.error instanceof ApiError && ctx.error.status === 404 && ctx.error.fromMaster;
  return (
    <>
      <dl className="kv">
        <dt>Entrypoint</dt>
        <dd>
          <code className="break" data-testid="what-ran-entrypoint">{config.entrypoint}</code>
        </dd>
      </dl>
      <h3 className="section-h">Context</h3>
      {ctx.loading && !ctx.data ? (
        <Skeleton rows={3} />
      ) : noContext ? (
        <p className="muted" data-testid="context-none" title={ctx.error?.message}>
          No context uploaded.
        </p>
      ) : ctx.data ? (
        <>
          {ctx.error && <ErrorBanner error={ctx.error} onRetry={ctx.reload} what={`The context of experiment ${experimentId}`} />}
          <ContextView experimentId={experimentId} ctx={ctx.data} />
        </>
      ) : (
        <ErrorBanner error={ctx.error} onRetry={ctx.reload} what={`The context of experiment ${experimentId}`} />
      )}
    </>
  );
}

function ContextView({ experimentId, ctx }: { experimentId: number; ctx: ExperimentContext }) {
  const [showAll, setShowAll] = useState(false);
  const files = shownFiles(ctx.files, showAll);
  const n = ctx.files.length;
  return (
    <>
      <dl className="kv">
        <dt>Files</dt>
        <dd data-testid="context-file-bytes">
          {formatInt(n)} file{n === 1 ? '' : 's'}, {formatBytes(ctx.fileBytes)}
        </dd>
        <dt>Archive</dt>
        <dd data-testid="context-archive-bytes">{formatBytes(ctx.archiveBytes)} (.tar.gz)</dd>
        <dt>SHA-256</dt>
        <dd>
          <code data-testid="context-sha256" title={ctx.sha256}>{shortDigest(ctx.sha256) || '–'}</code>
        </dd>
      </dl>
      <DownloadContext experimentId={experimentId} />
      {n === 0 ? (
        <Empty>The context has no files.</Empty>
      ) : (
        <div className="table-wrap">
          <table className="table" data-testid="context-files">
            <thead>
              <tr>
                <th scope="col">Path</th>
                <th scope="col">Size</th>
              </tr>
            </thead>
            <tbody>
              {files.map((f) => (
                <tr key={f.path} data-testid="context-file" data-path={f.path}>
                  <td className="mono small break">{contextFileLabel(f)}</td>
                  <td className="num" title={f.linkTarget ? 'a symbolic link' : `${formatInt(f.size)} bytes`}>{f.linkTarget ? 'link' : formatBytes(f.size)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {n > CONTEXT_FILES_SHOWN && (
        <button type="button" className="btn btn-small" data-testid="context-show-all" aria-expanded={showAll} onClick={() => setShowAll(!showAll)}>
          {showAll ? `Show the first ${CONTEXT_FILES_SHOWN}` : `Show all ${formatInt(n)}`}
        </button>
      )}
    </>
  );
}

/** Asks for the archive (includeArchive=true) and saves it as experiment-ID-context.tar.gz. */
function DownloadContext({ experimentId }: { experimentId: number }) {
  const [busy, setBusy] = useState(false);
  const [status, setStatus] = useState('');
  const download = async () => {
    setBusy(true);
    setStatus('');
    try {
      const c = await api.getExperimentContext(experimentId, true);
      if (!c.archiveBase64) throw new Error('The master sent no archive');
      const blob = contextArchiveBlob(c.archiveBase64);
      const name = contextArchiveName(experimentId);
      saveBlob(blob, name);
      setStatus(`Saved ${name} (${formatBytes(blob.size)})`);
    } catch (err) {
      setStatus(`Download failed: ${err instanceof Error ? err.message : String(err)}`);
    } finally {
      setBusy(false);
    }
  };
  return (
    <p>
      <button type="button" className="btn btn-small" data-testid="context-download" disabled={busy} onClick={() => void download()}>
        {busy ? 'Downloading…' : 'Download context'}
      </button>{' '}
      <span className="muted small" role="status" aria-live="polite" data-testid="context-download-status">
        {status}
      </span>
    </p>
  );
}

/** The trial page's Summary rows for what the trial ran: its arch, the experiment's precision and
 *  the model's parameter count once its training metrics report one (native), or the entrypoint
 *  (user code); nothing until the experiment's config is read. */
export function TrialWhatRanRows({ trial, configYaml, parameters }: { trial: Trial; configYaml: string | undefined; parameters?: number }) {
  const config = configYaml ? experimentConfig(configYaml) : undefined;
  if (!config) return null;
  if (config.entrypoint) {
    return (
      <>
        <dt>Runs</dt>
        <dd>
          <code className="break" data-testid="trial-entrypoint">{config.entrypoint}</code>
        </dd>
      </>
    );
  }
  return (
    <>
      <dt>Arch</dt>
      <dd className="mono" data-testid="trial-arch">{trialArch(trial, experimentArch(configYaml!)) ?? DEFAULT_ARCH_LABEL}</dd>
      <dt>Precision</dt>
      <dd className="mono" data-testid="trial-precision">{config.precision}</dd>
      {parameters !== undefined && (
        <>
          <dt>Parameters</dt>
          <dd className="mono" data-testid="trial-parameters" data-parameters={parameters} title={`${formatInt(parameters)} parameters`}>
            {formatParameters(parameters)}
          </dd>
        </>
      )}
    </>
  );
}

/** Marks an experiment a hand-started script reports into (Experiment.unmanaged). */
export function UnmanagedBadge() {
  return (
    <span className="badge badge-unmanaged" data-testid="unmanaged-badge" title="unmanaged: a script started by hand, not by the master, reports into this experiment">
      unmanaged
    </span>
  );
}
