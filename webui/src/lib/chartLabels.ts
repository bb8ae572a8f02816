// Layout of the text of the hyperparameter charts: where each axis name and tick label goes, how
// much of it fits, and which ticks to leave out, so that no two labels ever intersect. Pure
// functions of the axes and the chart size; the components draw the boxes as absolutely positioned
// elements over their canvas, with exactly these sizes, so what a browser measures is what is
// computed here.
//
// The parallel-coordinates chart is cut into one equal column per axis, the axis in its middle. An
// axis name sits centred at the top of its column; its tick labels sit right of the axis line, in
// the right half of the column. Nothing of an axis leaves its column, so neighbours cannot collide,
// and within a column the name row lies above every tick label and tick labels are thinned until
// they are a line height apart.

/** A label as drawn: `text` is what shows (maybe truncated with "…"), `full` the whole value, for
 *  the tooltip. Coordinates are CSS pixels from the top left of the chart's drawing area. */
export interface LabelBox {
  axis: string;
  role: 'name' | 'tick';
  text: string;
  full: string;
  left: number;
  top: number;
  width: number;
  height: number;
}

/** A tick at position t in [0, 1] along its axis (0 = bottom, or left on a horizontal axis). */
export interface Tick {
  t: number;
  text: string;
}

export interface AxisLabels {
  name: string;
  ticks: Tick[];
}

export type Measure = (text: string) => number;

export const LABEL_FONT_PX = 11;
export const LABEL_LINE_PX = 14; // height of every label box
const GAP = 4; // the least space between two label boxes

/** Width estimate for text in the label font when nothing better is at hand (no canvas, in tests):
 *  generous, so that the estimate rarely falls short of what a browser draws. */
export const estimateWidth: Measure = (text) => Math.ceil(text.length * LABEL_FONT_PX * 0.62);

/** `text` cut to fit `maxWidth`, with "…" in its middle when cut; '' when not even "…" fits. */
export function truncateToWidth(text: string, maxWidth: number, measure: Measure = estimateWidth): string {
  if (measure(text) <= maxWidth) return text;
  if (measure('…') > maxWidth) return '';
  // The ellipsis goes in the middle: the head says what kind of value it is, the tail (a file name,
  // a counter: "activation_function_12", "/data/…/train.de") is what tells values apart. Keep the
  // most characters that fit, two fifths before the ellipsis and three fifths after it.
  const chars = [...text];
  const cut = (kept: number) => {
    const head = Math.floor((kept * 2) / 5);
    return chars.slice(0, head).join('').trimEnd() + '…' + chars.slice(chars.length - (kept - head)).join('').trimStart();
  };
  let lo = 0;
  let hi = chars.length - 1;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (measure(cut(mid)) <= maxWidth) lo = mid;
    else hi = mid - 1;
  }
  return cut(lo);
}

/** Indices of the ticks to keep so that kept neighbours are at least `minGap` px apart, given each
 *  tick's position in px (sorted either way). Keeps every k-th tick from the first, k the smallest
 *  stride that makes the closest pair far enough apart, so thinned ticks stay evenly spaced. */
export function thinTicks(positions: readonly number[], minGap: number): number[] {
  const n = positions.length;
  if (n <= 1) return positions.map((_, i) => i);
  let closest = Infinity;
  for (let i = 1; i < n; i++) closest = Math.min(closest, Math.abs(positions[i] - positions[i - 1]));
  const stride = closest <= 0 ? n : Math.max(1, Math.ceil(minGap / closest));
  const keep: number[] = [];
  for (let i = 0; i < n; i += stride) keep.push(i);
  return keep;
}

/** Whether two boxes share any area (touching edges do not count). */
export function boxesOverlap(a: LabelBox, b: LabelBox, tolerance = 0.5): boolean {
  return a.left + a.width - tolerance > b.left && b.left + b.width - tolerance > a.left && a.top + a.height - tolerance > b.top && b.top + b.height - tolerance > a.top;
}

/** Every pair of boxes that overlap (for tests and assertions): [i, j] with i < j. */
export function overlappingPairs(boxes: readonly LabelBox[]): [number, number][] {
  const out: [number, number][] = [];
  for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) if (boxesOverlap(boxes[i], boxes[j])) out.push([i, j]);
  return out;
}

export interface ParallelLayout {
  /** Width of the drawing area: the chart's width, or more (then it scrolls) so that every column
   *  gets at least `minColumn` px. */
  width: number;
  height: number;
  /** x of each axis line. */
  xs: number[];
  /** y of t = 1 and t = 0 on every axis. */
  plotTop: number;
  plotBottom: number;
  labels: LabelBox[];
}

/** Where the names and tick labels of a parallel-coordinates chart go (see the file comment). */
export function layoutParallelLabels(axes: readonly AxisLabels[], opts: { width: number; height: number; minColumn?: number; measure?: Measure }): ParallelLayout {
  const measure = opts.measure ?? estimateWidth;
  const n = Math.max(1, axes.length);
  const width = Math.max(opts.width, n * (opts.minColumn ?? 100));
  const column = width / n;
  const h = LABEL_LINE_PX;
  const plotTop = 2 + h + GAP + h / 2; // the name row, then half a tick label above t = 1
  const plotBottom = opts.height - h / 2 - 2;
  const xs = axes.map((_, i) => column * (i + 0.5));
  const labels: LabelBox[] = [];
  const box = (axis: string, role: LabelBox['role'], full: string, maxWidth: number, left: (w: number) => number, top: number) => {
    const text = truncateToWidth(full, maxWidth, measure);
    if (!text) return;
    const w = Math.min(maxWidth, Math.ceil(measure(text)) + 2);
    labels.push({ axis, role, text, full, left: left(w), top, width: w, height: h });
  };
  axes.forEach((a, i) => {
    const x = xs[i];
    box(a.name, 'name', a.name, column - GAP, (w) => x - w / 2, 2);
    const ys = a.ticks.map((tk) => plotTop + (1 - tk.t) * (plotBottom - plotTop));
    const tickLeft = x + GAP;
    const tickMax = column / 2 - 2 * GAP; // right half of the column, clear of its right edge
    for (const k of thinTicks(ys, h + GAP)) box(a.name, 'tick', a.ticks[k].text, tickMax, () => tickLeft, ys[k] - h / 2);
  });
  return { width, height: opts.height, xs, plotTop, plotBottom, labels };
}

/** Labels along a horizontal axis spanning [left, right] px, tick centres at `left + t·(right -
 *  left)`, on the row starting at `top`. Ticks are thinned to stay a readable width apart; each
 *  kept tick owns the stretch between the midpoints to its kept neighbours (the first reaching
 *  `left`, the last `right`) and its label, truncated to that stretch, stays inside it — centred on
 *  the tick where it can be, pushed inwards at the ends. */
export function layoutHorizontalLabels(axis: string, ticks: readonly Tick[], opts: { left: number; right: number; top: number; minLabel?: number; measure?: Measure }): LabelBox[] {
  const measure = opts.measure ?? estimateWidth;
  const span = opts.right - opts.left;
  const xs = ticks.map((tk) => opts.left + tk.t * span);
  const kept = thinTicks(xs, opts.minLabel ?? 40);
  const out: LabelBox[] = [];
  kept.forEach((k, j) => {
    const x = xs[k];
    const cellL = j === 0 ? opts.left : (xs[kept[j - 1]] + x) / 2;
    const cellR = j === kept.length - 1 ? opts.right : (x + xs[kept[j + 1]]) / 2;
    const room = cellR - cellL - GAP;
    const text = truncateToWidth(ticks[k].text, room, measure);
    if (!text) return;
    const w = Math.min(room, Math.ceil(measure(text)) + 2);
    const left = Math.max(cellL + GAP / 2, Math.min(x - w / 2, cellR - GAP / 2 - w));
    out.push({ axis, role: 'tick', text, full: ticks[k].text, left, top: opts.top, width: w, height: LABEL_LINE_PX });
  });
  return out;
}
