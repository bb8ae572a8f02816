// lib/transcripts.ts: a validation_transcripts row read into typed utterances (the latest of
// several, malformed entries left out), words normalised as the trainer's WER normalises them
// (trainer/eval/error_rate.h), and a minimum-edit word alignment whose marks and edit count
// match what WER counts.
import { describe, expect, it } from 'vitest';
import type { MetricReport } from '../src/api/types';
import { alignWords, latestTranscripts, parseTranscripts, scoredWords } from '../src/lib/transcripts';

const row = (batches: number, values: MetricReport['values'], restart = 0): MetricReport => ({ trialId: 7, batches, kind: 'validation_transcripts', values, restart });

describe('scoredWords', () => {
  it('lowercases ASCII, keeps apostrophes, digits and non-ASCII letters, splits on everything else', () => {
    expect(scoredWords('A T-shirt, 2 dogs!')).toEqual(['a', 't', 'shirt', '2', 'dogs']);
    expect(scoredWords("Don't  stop")).toEqual(["don't", 'stop']);
    // non-ASCII counts as a letter and keeps its case (only ASCII is lowercased)
    expect(scoredWords('Zwei Hünde – ÄRGER')).toEqual(['zwei', 'hünde', '–', 'Ärger']);
    expect(scoredWords('  ...  ')).toEqual([]);
  });
});

describe('alignWords', () => {
  it('marks nothing for an exact transcript, whatever the case and punctuation', () => {
    const a = alignWords('A man rides a horse.', 'a man rides a horse');
    expect(a.edits).toBe(0);
    expect(a.reference.every((w) => w.mark === 'same')).toBe(true);
    expect(a.hypothesis.map((w) => w.word)).toEqual(['a', 'man', 'rides', 'a', 'horse']);
  });

  it('marks substitutions, missed and inserted words, and counts the edits WER counts', () => {
    // reference "a man rides a horse", hypothesis "a men rides horse fast": men for man, the
    // second "a" missed, "fast" inserted — 3 edits
    const a = alignWords('A man rides a horse', 'a men rides horse fast');
    expect(a.edits).toBe(3);
    expect(a.reference.map((w) => `${w.word}:${w.mark}`)).toEqual(['a:same', 'man:substituted', 'rides:same', 'a:deleted', 'horse:same']);
    expect(a.hypothesis.map((w) => `${w.word}:${w.mark}`)).toEqual(['a:same', 'men:substituted', 'rides:same', 'horse:same', 'fast:inserted']);
  });

  it('has every reference word missed for an empty hypothesis, and every word inserted for an empty reference', () => {
    const empty = alignWords('Two dogs play', '');
    expect(empty.edits).toBe(3);
    expect(empty.reference.map((w) => w.mark)).toEqual(['deleted', 'deleted', 'deleted']);
    expect(empty.hypothesis).toEqual([]);
    const extra = alignWords('', 'uh huh');
    expect(extra.edits).toBe(2);
    expect(extra.hypothesis.map((w) => w.mark)).toEqual(['inserted', 'inserted']);
  });

  it('counts the minimum edits on longer texts (each side every word once, in order)', () => {
    const ref = 'the quick brown fox jumps over the lazy dog near the river bank today';
    const hyp = 'a quick brown fox jumped over lazy dogs near the the river bank';
    const a = alignWords(ref, hyp);
    // the: a (sub), jumps: jumped (sub), the missed, dog: dogs (sub), the inserted, today missed
    expect(a.edits).toBe(6);
    expect(a.reference.map((w) => w.word).join(' ')).toBe(ref);
    expect(a.hypothesis.map((w) => w.word).join(' ')).toBe(hyp);
    const count = (ws: { mark: string }[], m: string) => ws.filter((w) => w.mark === m).length;
    expect(count(a.reference, 'substituted') + count(a.reference, 'deleted') + count(a.hypothesis, 'inserted')).toBe(a.edits);
  });
});

describe('parseTranscripts and latestTranscripts', () => {
  const utterance = (id: string, hypothesis: string) => ({ id, reference: 'Two dogs play.', hypothesis, word_errors: 1, words: 3 });

  it('read the utterances with their counts, leaving out malformed entries', () => {
    const t = parseTranscripts(row(8, { utterances: [utterance('u1', 'two dogs'), { id: 'u2', reference: 'x' }, 'junk', { reference: 'r', hypothesis: 'h' }] }));
    expect(t).toEqual({
      batches: 8,
      time: undefined,
      utterances: [
        { id: 'u1', reference: 'Two dogs play.', hypothesis: 'two dogs', wordErrors: 1, words: 3 },
        { id: '', reference: 'r', hypothesis: 'h', wordErrors: undefined, words: undefined },
      ],
    });
    expect(parseTranscripts(row(8, { wer: 12 }))).toBeUndefined();
    expect(parseTranscripts(row(8, { utterances: 'none' }))).toBeUndefined();
  });

  it("pick the latest validation's row: the most batches, a restart's report over an earlier one", () => {
    const rows = [row(16, { utterances: [utterance('u1', 'b')] }), row(8, { utterances: [utterance('u1', 'a')] }), row(16, { utterances: [utterance('u1', 'c')] }, 1)];
    expect(latestTranscripts(rows)?.utterances[0].hypothesis).toBe('c');
    expect(latestTranscripts(rows)?.batches).toBe(16);
    expect(latestTranscripts([row(4, { loss: 1 })])).toBeUndefined();
    expect(latestTranscripts([])).toBeUndefined();
  });
});
