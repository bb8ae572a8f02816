import { describe, expect, it } from 'vitest';
import { render, screen, fireEvent, cleanup } from '@testing-library/react';
import { afterEach } from 'vitest';
import { ErrorBanner, ConfirmDialog } from '../src/components/common';
import { ApiError, normExperiment } from '../src/api/client';
import { allowedActions } from '../src/components/actions';
import { ExperimentsTable } from '../src/pages/ExperimentsTable';
import { topLevelBlock } from '../src/lib/yamlBlock';

afterEach(cleanup);

describe('ErrorBanner', () => {
  it('says the master is unreachable and retries', () => {
    let n = 0;
    render(<ErrorBanner error={new ApiError('network', 'Cannot reach the master (Failed to fetch)')} onRetry={() => n++} />);
    expect(screen.getByRole('alert').textContent).toMatch(/cannot be reached/);
    fireEvent.click(screen.getByRole('button', { name: 'Retry' }));
    expect(n).toBe(1);
  });
  it('renders nothing without an error', () => {
    const { container } = render(<ErrorBanner error={undefined} />);
    expect(container.textContent).toBe('');
  });
});

describe('ConfirmDialog', () => {
  it('confirms, and cancels on Escape', () => {
    const log: string[] = [];
    render(<ConfirmDialog open title="Kill?" body="sure" confirmLabel="Kill" onConfirm={() => log.push('ok')} onCancel={() => log.push('cancel')} />);
    expect(screen.getByRole('dialog', { name: 'Kill?' })).toBeTruthy();
    expect(document.activeElement?.textContent).toBe('Cancel');
    fireEvent.click(screen.getByRole('button', { name: 'Kill' }));
    fireEvent.keyDown(document, { key: 'Escape' });
    expect(log).toEqual(['ok', 'cancel']);
  });
});

describe('ExperimentsTable', () => {
  it('renders a row per experiment with badges and sortable headers', () => {
    const rows = [normExperiment({ id: '2', name: 'b', state: 'EXPERIMENT_STATE_ACTIVE', numTrials: 4, numCompletedTrials: 1 }), normExperiment({ id: '1', name: 'a', state: 'EXPERIMENT_STATE_COMPLETED' })];
    const sorted: string[] = [];
    render(<ExperimentsTable rows={rows} sort={{ key: 'id', dir: 'desc' }} onSort={(c) => sorted.push(c)} onChanged={() => {}} now={Date.now()} />);
    expect(screen.getAllByTestId('experiment-row').length).toBe(2);
    expect(screen.getByText('Active')).toBeTruthy();
    fireEvent.click(screen.getByRole('button', { name: /Name/ }));
    expect(sorted).toEqual(['name']);
    expect(screen.getByRole('button', { name: 'Pause experiment 2' })).toBeTruthy();
    expect(screen.getByRole('button', { name: 'Archive experiment 1' })).toBeTruthy();
  });
  it('offers actions by state', () => {
    expect(allowedActions({ state: 'EXPERIMENT_STATE_ACTIVE', archived: false })).toEqual(['pause', 'kill']);
    expect(allowedActions({ state: 'EXPERIMENT_STATE_PAUSED', archived: false })).toEqual(['activate', 'kill']);
    expect(allowedActions({ state: 'EXPERIMENT_STATE_COMPLETED', archived: true })).toEqual([]);
  });
});

describe('topLevelBlock', () => {
  it('reads block and flow styles of the searcher section', () => {
    const y = 'name: x\nsearcher:\n  name: grid   # comment\n  metric: bleu\n  max_length: {batches: 20}\n  nested:\n    deep: 1\nresources: {slots_per_trial: 1}\n';
    expect(topLevelBlock(y, 'searcher')).toEqual([['name', 'grid'], ['metric', 'bleu'], ['max_length', '{batches: 20}'], ['nested', '']]);
    expect(topLevelBlock(y, 'resources')).toEqual([['slots_per_trial', '1']]);
    expect(topLevelBlock(y, 'missing')).toEqual([]);
  });
});

describe('ExperimentsTable virtualisation', () => {
  it('renders only the rows near the viewport for long lists', async () => {
    const { visibleRange, VIRTUAL_MIN_ROWS } = await import('../src/pages/ExperimentsTable');
    expect(visibleRange(1000, 0, 480, 48, 0)).toEqual([0, 10]);
    expect(visibleRange(1000, -4800, 480, 48, 2)).toEqual([98, 112]);
    expect(visibleRange(5, -10000, 480, 48, 2)).toEqual([5, 5]);
    const rows = Array.from({ length: VIRTUAL_MIN_ROWS + 50 }, (_, i) => normExperiment({ id: String(i + 1), state: 'EXPERIMENT_STATE_COMPLETED' }));
    render(<ExperimentsTable rows={rows} sort={{ key: 'id', dir: 'asc' }} onSort={() => {}} onChanged={() => {}} now={Date.now()} />);
    const shown = screen.getAllByTestId('experiment-row').length;
    expect(shown).toBeGreaterThan(0);
    expect(shown).toBeLessThan(rows.length);
    expect(screen.getByTestId('spacer-bottom')).toBeTruthy();
    expect(screen.getByTestId('experiments-table').getAttribute('data-rows')).toBe(String(rows.length));
  });
});
