// How the browser tests read issue 49's views off a page: one definition for the offline flows
// (stub answers: offline.e2e.mjs, what-ran.flow.mjs, slurm-arch.flow.mjs, speech.flow.mjs) and the
// live test against a real master (views.e2e.mjs). Each reader returns plain data that a check
// compares with what it expects: fixed values offline, the master's own answers live.

/** The boxes of the elements `sel` matches (client pixels), with their axis, role, text and title:
 *  the hyperparameter charts' labels (`pc-label`, `scatter-label`). */
export function labelBoxes(page, sel) {
  return page.locator(sel).evaluateAll((els) =>
    els.map((e) => {
      const r = e.getBoundingClientRect();
      return { axis: e.getAttribute('data-axis'), role: e.getAttribute('data-role'), text: e.textContent, title: e.getAttribute('title'), x: r.left, y: r.top, w: r.width, h: r.height };
    }),
  );
}

/** Every pair of boxes that intersect (by more than half a pixel), as "axis:text × axis:text". */
export function overlaps(bs) {
  const out = [];
  for (let i = 0; i < bs.length; i++) {
    for (let j = i + 1; j < bs.length; j++) {
      const [a, b] = [bs[i], bs[j]];
      if (a.x + a.w - 0.5 > b.x && b.x + b.w - 0.5 > a.x && a.y + a.h - 0.5 > b.y && b.y + b.h - 0.5 > a.y) out.push(`${a.axis}:${a.text} × ${b.axis}:${b.text}`);
    }
  }
  return out;
}

/** Whether the first element `sel` matches lies within a viewport `w` pixels wide. */
export async function fitsWidth(page, sel, w) {
  const box = await page.locator(sel).first().boundingBox();
  return !!box && box.x >= 0 && box.x + box.width <= w + 1;
}

/** The panels only the native trainer's trials have on a trial page (throughput, loss scale, arch,
 *  precision, parameters), counted, and whether the page's main text mentions loss_scale at all. */
export async function nativePanels(page) {
  const count = await page.locator('[data-testid="chart-throughput"], [data-testid="chart-loss-scale"], [data-testid="trial-arch"], [data-testid="trial-precision"], [data-testid="trial-parameters"]').count();
  return { count, lossScaleText: (await page.locator('main').innerText()).includes('loss_scale') };
}

/** The experiment list's unmanaged badges as "rowId:cellClass:text". */
export function listBadges(page) {
  return page.locator('[data-testid="unmanaged-badge"]').evaluateAll((bs) => bs.map((b) => `${b.closest('tr').getAttribute('data-id')}:${b.closest('td').className}:${b.textContent}`));
}

/** The What ran card's context files: path (data-path), the cells' text joined by spaces, and
 *  the size cell's tooltip ("1,234 bytes", or "a symbolic link"). */
export function contextFiles(page) {
  return page.locator('[data-testid="context-file"]').evaluateAll((rs) =>
    rs.map((r) => {
      const cells = [...r.querySelectorAll('td')];
      return { path: r.getAttribute('data-path'), text: cells.map((td) => td.textContent).join(' '), sizeTitle: cells.at(-1)?.getAttribute('title') ?? '' };
    }),
  );
}

/** The Architectures card's rows, best first: arch and each cell's text, and the parameters
 *  cell's exact count (`parametersExact`, from data-parameters; null for a range or none) and
 *  tooltip. */
export function archRows(page) {
  return page.locator('[data-testid="arch-row"]').evaluateAll((rs) =>
    rs.map((r) => {
      const cell = (id) => r.querySelector(`[data-testid="${id}"]`)?.textContent ?? null;
      const size = r.querySelector('[data-testid="arch-parameters"]');
      const exact = size?.getAttribute('data-parameters');
      return { arch: r.getAttribute('data-arch'), trials: cell('arch-trials'), best: cell('arch-best'), bestTrial: cell('arch-best-trial'), time: cell('arch-time'), tps: cell('arch-tps'), parameters: cell('arch-parameters'), parametersExact: exact ? Number(exact) : null, parametersTitle: size?.getAttribute('title') ?? null };
    }),
  );
}

/** Whether `text` ("1.2 M", "804 K", "950") states `count` to its shown precision (within 5 %). */
export function statesCount(text, count) {
  const m = /^(\d+(?:\.\d)?)(?: ([KMB]))?$/.exec(text ?? '');
  if (!m || !(count > 0)) return false;
  const value = Number(m[1]) * ({ K: 1e3, M: 1e6, B: 1e9 }[m[2]] ?? 1);
  return Math.abs(value - count) <= 0.05 * count;
}

/** The trial page's parameter count in its Summary: the text, the exact count (data-parameters)
 *  and the tooltip; null when the page shows none. */
export async function trialParametersShown(page) {
  const el = page.locator('[data-testid="trial-parameters"]');
  if ((await el.count()) === 0) return null;
  const exact = await el.getAttribute('data-parameters');
  return { text: await el.textContent(), exact: exact ? Number(exact) : null, title: await el.getAttribute('title') };
}

/** The Validation transcripts card's utterances in page order: id, the reference as shown and as
 *  its tooltip (the manifest's text), the hypothesis, the error count's text and the marked words
 *  ("substituted:word"). */
export function transcriptRows(card) {
  return card.locator('[data-testid="transcript"]').evaluateAll((els) =>
    els.map((el) => {
      const ref = el.querySelector('[data-testid="transcript-reference"]');
      return {
        id: el.getAttribute('data-id'),
        ref: ref.textContent,
        refTitle: ref.getAttribute('title'),
        hyp: el.querySelector('[data-testid="transcript-hypothesis"]').textContent,
        errors: el.querySelector('[data-testid="transcript-errors"]').textContent,
        marks: [...el.querySelectorAll('mark')].map((m) => `${m.dataset.mark}:${m.textContent}`),
      };
    }),
  );
}

/** Reference and hypothesis of the first utterance: side by side (a wide screen) or stacked. */
export async function transcriptLayout(card) {
  const [refBox, hypBox] = await Promise.all(['transcript-reference', 'transcript-hypothesis'].map((id) => card.locator(`[data-testid="${id}"]`).first().boundingBox()));
  return {
    sideBySide: !!refBox && !!hypBox && Math.abs(refBox.y - hypBox.y) < 2 && hypBox.x >= refBox.x + refBox.width,
    stacked: !!refBox && !!hypBox && hypBox.y >= refBox.y + refBox.height,
    boxes: { refBox, hypBox },
  };
}
