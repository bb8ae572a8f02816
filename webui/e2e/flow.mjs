// The frame every stub-backed browser flow of the offline test shares (slurm-arch, what-ran,
// speech): the built dashboard served with `api` as its master (static-server.mjs), then for each
// width a fresh page in which `body({ page, base, w, what })` runs its checks. A step that throws
// is a failed check ("the <flow> flow ran to the end") with a full-page screenshot
// (<shot>-failure-<w>.png); an uncaught page error fails the width ("no uncaught page errors").
import { join } from 'node:path';
import { serveDist } from './static-server.mjs';

export const WIDTHS = [[1280, 900], [375, 800]];

export async function atEveryWidth(browser, { dist, check, ART }, { label, flow, shot, api, pageOptions = {} }, body) {
  const { server, url: base } = await serveDist(dist, 0, api);
  try {
    for (const [w, h] of WIDTHS) {
      const page = await browser.newPage({ viewport: { width: w, height: h }, ...pageOptions });
      const errors = [];
      page.on('pageerror', (e) => errors.push(e.message));
      const what = (s) => `${label} ${w}px: ${s}`;
      try {
        await body({ page, base, w, what });
      } catch (e) {
        check(false, what(`${flow} ran to the end`), e.message);
        await page.screenshot({ path: join(ART, `${shot}-failure-${w}.png`), fullPage: true }).catch(() => {});
      }
      check(errors.length === 0, what('no uncaught page errors'), errors.join(' | '));
      await page.close();
    }
  } finally {
    server.close();
  }
}
