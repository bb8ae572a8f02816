import { afterEach, describe, expect, it } from 'vitest';
import { cleanup, fireEvent, render, screen } from '@testing-library/react';
import { axisScale, axisTicks, buildAxis, hparamSummary, varyingHParams } from '../src/lib/chartData';
import { LABEL_LINE_PX, estimateWidth, layoutHorizontalLabels, layoutParallelLabels, overlappingPairs, thinTicks, truncateToWidth } from '../src/lib/chartLabels';
import { HParamScatter, ParallelCoordinates } from '../src/components/HParamCharts';
import { normTrial } from '../src/api/client';

afterEach(cleanup);

// A sweep with a long string hyperparameter (a data path), a categorical one with many values, a
// log-scaled learning rate, a boolean and two constants.
const PATHS = ['/data/multi30k/train.de', '/data/wmt14/train.tokenized.bpe32k.de', '/data/iwslt17/train.de'];
const trials = Array.from({ length: 24 }, (_, i) =>
  normTrial({
    id: String(i + 1),
    experimentId: '3',
    state: 'TRIAL_STATE_COMPLETED',
    hparams: { data_path: PATHS[i % 3], activation: `activation_function_${i % 20}`, lr: 10 ** (-5 + (i % 4)), tied: i % 2 === 0, d_model: 256, optimizer: { type: 'radam' } },
    bestValidationMetric: 20 + i,
  }),
);
const flat = (k: string) => trials.map((t) => (k === 'optimizer.type' ? 'radam' : (t.hparams as Record<string, unknown>)[k]));

describe('hyperparameter axis kinds', () => {
  it('chooses linear, log and categorical axes and orders categories stably', () => {
    expect(axisScale(buildAxis('d', [1, 2, 3]))).toBe('linear');
    expect(axisScale(buildAxis('lr', flat('lr')))).toBe('log');
    expect(axisScale(buildAxis('lr', [0.01, 0.02]))).toBe('linear');
    expect(axisScale(buildAxis('p', flat('data_path')))).toBe('categorical');
    const tied = buildAxis('tied', flat('tied'));
    expect(axisScale(tied)).toBe('categorical');
    expect(tied.categories).toEqual(['false', 'true']);
    // natural order, whatever order the trials came in
    expect(buildAxis('a', ['layer10', 'layer2', 'layer1']).categories).toEqual(['layer1', 'layer2', 'layer10']);
    expect(buildAxis('a', ['layer2', 'layer10', 'layer1']).categories).toEqual(['layer1', 'layer2', 'layer10']);
    expect(buildAxis('m', ['auto', 16, 4]).categories).toEqual(['4', '16', 'auto']);
  });
  it('puts log ticks on the decades', () => {
    expect(axisTicks(buildAxis('lr', flat('lr'))).map((t) => t.text)).toEqual(['1e-5', '1e-4', '0.001', '0.01']);
  });
  it('tells constant hyperparameters apart', () => {
    const s = hparamSummary(trials);
    expect([...s.constant].sort()).toEqual(['d_model', 'optimizer.type']);
    expect(varyingHParams(trials)).toEqual(['activation', 'data_path', 'lr', 'tied']);
  });
});

describe('label layout', () => {
  const axes = ['data_path', 'activation', 'lr'].map((name) => {
    const a = buildAxis(name, flat(name));
    return { name, ticks: axisTicks(a) };
  });
  axes.push({ name: 'validation_bleu_score_on_newstest2014', ticks: axisTicks(buildAxis('m', trials.map((t) => t.bestValidationMetric))) });

  for (const width of [320, 600, 1200]) {
    it(`gives no two labels a common point at ${width} px`, () => {
      const l = layoutParallelLabels(axes, { width, height: 280 });
      expect(l.labels.length).toBeGreaterThan(axes.length);
      expect(overlappingPairs(l.labels)).toEqual([]);
      // every label stays inside its own axis's column
      const column = l.width / axes.length;
      for (const b of l.labels) {
        const i = axes.findIndex((a) => a.name === b.axis);
        expect(b.left).toBeGreaterThanOrEqual(i * column);
        expect(b.left + b.width).toBeLessThanOrEqual((i + 1) * column);
        expect(b.top).toBeGreaterThanOrEqual(0);
        expect(b.top + b.height).toBeLessThanOrEqual(280);
      }
    });
  }
  it('truncates long labels with an ellipsis and keeps the full text', () => {
    const l = layoutParallelLabels(axes, { width: 600, height: 280 });
    const path = l.labels.find((b) => b.full === '/data/wmt14/train.tokenized.bpe32k.de')!;
    expect(path.text.includes('…')).toBe(true);
    expect(path.text.length).toBeLessThan(path.full.length);
    const [head, tail] = path.text.split('…');
    expect(path.full.startsWith(head) && path.full.endsWith(tail)).toBe(true);
    expect(estimateWidth(path.text)).toBeLessThanOrEqual(path.width);
    const name = l.labels.find((b) => b.role === 'name' && b.axis.startsWith('validation_'))!;
    expect(name.text.includes('…')).toBe(true);
    expect(name.full).toBe('validation_bleu_score_on_newstest2014');
    expect(truncateToWidth('lr', 100)).toBe('lr');
    // Cut in the middle: what tells values apart (a counter, a file name) stays at the end.
    const cut = truncateToWidth('activation_function_12', estimateWidth('activ…_12') + 1);
    expect(cut).toBe('act…on_12'); // two fifths of what is kept before the ellipsis, three after
    expect(cut.endsWith('_12')).toBe(true);
    expect(estimateWidth(cut)).toBeLessThanOrEqual(estimateWidth('activ…_12') + 1);
    expect(truncateToWidth('abcdefghij', 1)).toBe('');
  });
  it('thins category ticks that do not fit the axis height', () => {
    const l = layoutParallelLabels(axes, { width: 600, height: 280 });
    const ticks = l.labels.filter((b) => b.axis === 'activation' && b.role === 'tick');
    expect(ticks.length).toBeLessThan(20);
    expect(ticks.length).toBeGreaterThan(3);
    expect(ticks[0].full).toBe('activation_function_0'); // thinned evenly from the first
    // all three paths fit
    expect(l.labels.filter((b) => b.axis === 'data_path' && b.role === 'tick')).toHaveLength(3);
    expect(thinTicks([0, 10, 20, 30, 40, 50], 18)).toEqual([0, 2, 4]);
    expect(thinTicks([0, 30, 60], 18)).toEqual([0, 1, 2]);
  });
  it('lays out a horizontal axis of many long categories without overlaps', () => {
    const ticks = Array.from({ length: 30 }, (_, k) => ({ t: (k + 0.5) / 30, text: `/very/long/category/value/${k}` }));
    const boxes = layoutHorizontalLabels('p', ticks, { left: 60, right: 560, top: 0 });
    expect(boxes.length).toBeLessThan(30);
    expect(overlappingPairs(boxes)).toEqual([]);
    for (const b of boxes) {
      expect(b.left).toBeGreaterThanOrEqual(60);
      expect(b.left + b.width).toBeLessThanOrEqual(560);
      expect(b.height).toBe(LABEL_LINE_PX);
      expect(b.text.includes('…')).toBe(true);
    }
  });
});

describe('ParallelCoordinates', () => {
  const names = hparamSummary(trials).names;
  const axesOf = () => screen.getByTestId('chart-parallel-coordinates').getAttribute('data-axes')!.split(',');
  it('hides constant hyperparameters until asked, labels as elements with their full text', () => {
    render(<ParallelCoordinates trials={trials} hparams={names} metric="bleu" smallerIsBetter={false} />);
    expect(screen.getByTestId('chart-parallel-coordinates').getAttribute('data-points')).toBe('24');
    expect(axesOf()).toEqual(['activation', 'data_path', 'lr', 'tied', 'bleu']);
    const axisNames = () => screen.getAllByTestId('pc-label').filter((e) => e.getAttribute('data-role') === 'name').map((e) => e.getAttribute('data-axis'));
    expect(axisNames()).not.toContain('d_model');
    const toggle = screen.getByTestId('pc-show-constant') as HTMLInputElement;
    expect(toggle.checked).toBe(false);
    expect(toggle.closest('label')!.textContent).toMatch(/show constant hyperparameters/);
    fireEvent.click(toggle);
    expect(axesOf()).toEqual(['activation', 'd_model', 'data_path', 'lr', 'optimizer.type', 'tied', 'bleu']);
    expect(axisNames()).toContain('d_model');
    fireEvent.click(toggle);
    expect(axesOf()).not.toContain('d_model');
    const long = screen.getAllByTestId('pc-label').find((e) => e.getAttribute('title') === '/data/wmt14/train.tokenized.bpe32k.de')!;
    expect(long.textContent!.includes('…')).toBe(true);
  });
  it('offers no toggle when nothing is constant', () => {
    render(<ParallelCoordinates trials={trials} hparams={['lr', 'data_path']} metric="bleu" smallerIsBetter={false} />);
    expect(screen.queryByTestId('pc-show-constant')).toBeNull();
  });
});

describe('HParamScatter', () => {
  it('spaces string categories evenly with labels that do not overlap', () => {
    render(<HParamScatter trials={trials} hparams={['activation', 'data_path']} metric="bleu" />);
    const boxes = screen.getAllByTestId('scatter-label').map((e) => ({ axis: '', role: 'tick' as const, text: e.textContent!, full: e.title, left: parseFloat(e.style.left), top: parseFloat(e.style.top), width: parseFloat(e.style.width), height: parseFloat(e.style.height) }));
    expect(boxes.filter((b) => b.full.startsWith('activation_function_')).length).toBeGreaterThan(1);
    expect(overlappingPairs(boxes)).toEqual([]);
  });
});
