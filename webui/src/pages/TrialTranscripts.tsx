// A speech trial's "Validation transcripts" card: the latest validation's sample of utterances
// (the metric group validation_transcripts, lib/transcripts.ts), each reference beside the
// hypothesis with the words that differ marked as WER counts them, and the step it came from. The
// trial page shows it only for a trial that reported the group (GET /trials/{id} metricGroups).
import { api } from '../api/client';
import { ErrorBanner, Skeleton } from '../components/common';
import { formatDateTime, formatInt } from '../lib/format';
import { usePolling } from '../lib/hooks';
import { alignWords, latestTranscripts, TRANSCRIPTS_GROUP, type MarkedWord, type TranscriptUtterance } from '../lib/transcripts';

/** Rows asked for: the master keeps the first and the last when it downsamples (max_points=1),
 *  so the latest validation comes without every earlier one's texts. */
const TRANSCRIPT_POINTS = 1;
/** How often a live trial's transcripts are asked again (one validation is minutes apart). */
export const TRANSCRIPTS_POLL_MS = 15000;

export function TrialTranscripts({ trialId, live }: { trialId: number; live: boolean }) {
  const rows = usePolling((s) => api.getTrialMetrics(trialId, TRANSCRIPTS_GROUP, TRANSCRIPT_POINTS, s), [trialId], live ? TRANSCRIPTS_POLL_MS : 0);
  const latest = latestTranscripts(rows.data ?? []);
  return (
    <div className="card" data-testid="transcripts">
      <div className="card-head">
        <h2>Validation transcripts</h2>
        {latest && (
          <span className="muted small" data-testid="transcripts-step">
            step {formatInt(latest.batches)}
            {latest.time ? ` · ${formatDateTime(latest.time)}` : ''} · the first {latest.utterances.length} utterances of the validation split, as WER scores them
          </span>
        )}
      </div>
      <ErrorBanner error={rows.error} onRetry={rows.reload} what="Validation transcripts" />
      {rows.loading && !rows.data ? (
        <Skeleton rows={3} height={30} />
      ) : !latest || latest.utterances.length === 0 ? (
        !rows.error && <p className="muted">No transcripts reported yet.</p>
      ) : (
        <>
          <p className="muted small transcript-legend">
            <span className="word-substituted">substituted</span> <span className="word-deleted">missed</span> <span className="word-inserted">inserted</span>
          </p>
          <ol className="transcripts">
            {latest.utterances.map((u, i) => (
              <Utterance key={`${i}-${u.id}`} u={u} />
            ))}
          </ol>
        </>
      )}
    </div>
  );
}

function Utterance({ u }: { u: TranscriptUtterance }) {
  const a = alignWords(u.reference, u.hypothesis);
  const errors = u.wordErrors ?? a.edits;
  const words = u.words ?? a.reference.length;
  return (
    <li className="transcript" data-testid="transcript" data-id={u.id}>
      <div className="transcript-head small">
        <span className="mono">{u.id || '–'}</span>{' '}
        <span className="muted" data-testid="transcript-errors">
          {errors === 0 ? 'no word errors' : `${formatInt(errors)} of ${formatInt(words)} words wrong`}
        </span>
      </div>
      <div className="transcript-sides">
        <div>
          <div className="muted small">Reference</div>
          <p className="transcript-text" data-testid="transcript-reference" title={u.reference}>
            <Words words={a.reference} />
          </p>
        </div>
        <div>
          <div className="muted small">Hypothesis</div>
          <p className="transcript-text" data-testid="transcript-hypothesis">
            {a.hypothesis.length ? <Words words={a.hypothesis} /> : <span className="muted">(nothing)</span>}
          </p>
        </div>
      </div>
    </li>
  );
}

function Words({ words }: { words: MarkedWord[] }) {
  return (
    <>
      {words.map((w, i) => (
        <span key={i}>
          {i > 0 && ' '}
          {w.mark === 'same' ? w.word : <mark className={`word-${w.mark}`} data-mark={w.mark}>{w.word}</mark>}
        </span>
      ))}
    </>
  );
}
