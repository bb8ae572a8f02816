// A speech trial's validation transcripts: the metric group `validation_transcripts` that the
// native trainer reports with each validation (trainer/run/validation_transcripts.h declares its
// shape: {utterances: [{id, reference, hypothesis, word_errors, words}]}, the validation split's
// first utterances in manifest order, each text at most 500 bytes). Here: a row read into typed
// utterances, and the word alignment that marks where a hypothesis and its reference differ, on
// the words as WER scores them (trainer/eval/error_rate.h's normalisation).
import type { MetricReport } from '../api/types';

/** The metric group's name, as the trainer reports it. */
export const TRANSCRIPTS_GROUP = 'validation_transcripts';

export interface TranscriptUtterance {
  id: string;
  /** The manifest's transcript, as written. */
  reference: string;
  /** What the model transcribed at that validation. */
  hypothesis: string;
  /** Word edits against the reference and the reference's words, as the trainer counted them;
   *  undefined when the row does not say. */
  wordErrors?: number;
  words?: number;
}

export interface ValidationTranscripts {
  /** The step (batches) of the validation. */
  batches: number;
  time?: string;
  utterances: TranscriptUtterance[];
}

const isRecord = (v: unknown): v is Record<string, unknown> => !!v && typeof v === 'object' && !Array.isArray(v);
const optNumber = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);

/** One row's transcripts; undefined when it carries no `utterances` list. An entry without a
 *  text reference and hypothesis is left out (the master stores what it is given). */
export function parseTranscripts(report: MetricReport): ValidationTranscripts | undefined {
  const list: unknown = report.values.utterances;
  if (!Array.isArray(list)) return undefined;
  const utterances: TranscriptUtterance[] = [];
  for (const u of list) {
    if (!isRecord(u) || typeof u.reference !== 'string' || typeof u.hypothesis !== 'string') continue;
    utterances.push({ id: typeof u.id === 'string' ? u.id : '', reference: u.reference, hypothesis: u.hypothesis, wordErrors: optNumber(u.word_errors), words: optNumber(u.words) });
  }
  return { batches: report.batches, time: report.time, utterances };
}

/** The transcripts of the latest validation among `reports`: the row with the most batches (of
 *  equal ones, the last: a restart's report); undefined when none carries transcripts. */
export function latestTranscripts(reports: readonly MetricReport[]): ValidationTranscripts | undefined {
  let best: ValidationTranscripts | undefined;
  for (const r of reports) {
    const t = parseTranscripts(r);
    if (t && (!best || t.batches >= best.batches)) best = t;
  }
  return best;
}

/** `text` as WER scores it: ASCII lowercased; every character but a letter, a digit or an
 *  apostrophe is a space (non-ASCII characters count as letters); split into words. */
export function scoredWords(text: string): string[] {
  let out = '';
  for (const ch of text) {
    const c = ch.codePointAt(0)!;
    const kept = (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || (c >= 48 && c <= 57) || c === 39 || c >= 0x80;
    out += !kept ? ' ' : c >= 65 && c <= 90 ? ch.toLowerCase() : ch;
  }
  return out.split(' ').filter((w) => w !== '');
}

/** How a word fares in the alignment: the same on both sides, substituted by (or for) another,
 *  a reference word the hypothesis missed (deleted), a hypothesis word the reference lacks
 *  (inserted). */
export type WordMark = 'same' | 'substituted' | 'deleted' | 'inserted';
export interface MarkedWord {
  word: string;
  mark: WordMark;
}
export interface WordAlignment {
  reference: MarkedWord[];
  hypothesis: MarkedWord[];
  /** Substitutions + deletions + insertions: the utterance's word errors. */
  edits: number;
}

/** A minimum-edit (Levenshtein) alignment of the hypothesis's scored words with the
 *  reference's, each word marked: the edit count is the one WER sums. O(reference × hypothesis)
 *  words, at most about 250 × 250 for the trainer's 500-byte texts. */
export function alignWords(reference: string, hypothesis: string): WordAlignment {
  const r = scoredWords(reference);
  const h = scoredWords(hypothesis);
  const cols = h.length + 1;
  // d[i * cols + j]: edits between r[0, i) and h[0, j).
  const d = new Uint32Array((r.length + 1) * cols);
  for (let i = 0; i <= r.length; i++) d[i * cols] = i;
  for (let j = 0; j <= h.length; j++) d[j] = j;
  for (let i = 1; i <= r.length; i++) {
    for (let j = 1; j <= h.length; j++) {
      const diag = d[(i - 1) * cols + j - 1] + (r[i - 1] === h[j - 1] ? 0 : 1);
      d[i * cols + j] = Math.min(diag, d[(i - 1) * cols + j] + 1, d[i * cols + j - 1] + 1);
    }
  }
  const ref: MarkedWord[] = [];
  const hyp: MarkedWord[] = [];
  let i = r.length;
  let j = h.length;
  // Back from the end along a cheapest path. Of equally cheap steps a match goes first, then a
  // missed or inserted word, a substitution last: "a horse" against "horse fast" reads as "a"
  // missed and "fast" inserted around the matching "horse", not as two substitutions.
  while (i > 0 || j > 0) {
    const here = d[i * cols + j];
    if (i > 0 && j > 0 && r[i - 1] === h[j - 1] && here === d[(i - 1) * cols + j - 1]) {
      ref.push({ word: r[--i], mark: 'same' });
      hyp.push({ word: h[--j], mark: 'same' });
    } else if (i > 0 && here === d[(i - 1) * cols + j] + 1) {
      ref.push({ word: r[--i], mark: 'deleted' });
    } else if (j > 0 && here === d[i * cols + j - 1] + 1) {
      hyp.push({ word: h[--j], mark: 'inserted' });
    } else {
      ref.push({ word: r[--i], mark: 'substituted' });
      hyp.push({ word: h[--j], mark: 'substituted' });
    }
  }
  return { reference: ref.reverse(), hypothesis: hyp.reverse(), edits: d[r.length * cols + h.length] };
}
