#!/usr/bin/env node
// Browser test that needs no cluster: serves dist/ with no API behind it and checks, in Debian's
// Chromium at 1280 px and 375 px, that every page shows the "master cannot be reached" banner with a
// Retry button instead of crashing, that deep links (/experiments/3) land on the right page, and
// that the navigation works from the keyboard. Screenshots go to $SF_ARTIFACTS_DIR (default
// e2e-artifacts/offline). Run after `npm run build`: `npm run test:browser`.
import { existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { launch } from './browser.mjs';
import { serveDist } from './static-server.mjs';

const dist = join(import.meta.dirname, '..', 'dist');
if (!existsSync(join(dist, 'index.html'))) {
  console.error('dist/ is missing: run `npm run build` first');
  process.exit(2);
}
const ART = resolve(process.env.SF_ARTIFACTS_DIR ?? join('e2e-artifacts', 'offline'));
mkdirSync(ART, { recursive: true });
let passed = 0;
let failed = 0;
const check = (ok, what, detail = '') => {
  ok ? passed++ : failed++;
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}${!ok && detail ? `: ${detail}` : ''}`);
};

const { server, url } = await serveDist(dist);
const browser = await launch();
try {
  for (const [w, h] of [[1280, 900], [375, 800]]) {
    const page = await browser.newPage({ viewport: { width: w, height: h } });
    const errors = [];
    page.on('pageerror', (e) => errors.push(e.message));
    for (const [name, path, heading] of [
      ['experiments', '/#/experiments', 'Experiments'],
      ['experiment', '/#/experiments/3', null],
      ['trial', '/#/trials/7', null],
      ['cluster', '/#/cluster', 'Cluster'],
      ['deep-link', '/experiments/3', null],
    ]) {
      await page.goto(url + path);
      const banner = page.locator('[data-testid="error-banner"]').first();
      const shown = await banner.waitFor({ timeout: 20000 }).then(() => true, () => false);
      check(shown, `${w}px ${path}: error banner shown`);
      if (shown) {
        check(/cannot be reached/.test(await banner.innerText()), `${w}px ${path}: banner says the master cannot be reached`, await banner.innerText());
        check((await banner.getByRole('button', { name: 'Retry' }).count()) === 1, `${w}px ${path}: banner has Retry`);
      }
      if (heading) check((await page.getByRole('heading', { level: 1, name: heading }).count()) === 1, `${w}px ${path}: page heading "${heading}" still rendered`);
      if (name === 'deep-link') check(page.url().endsWith('/#/experiments/3'), `deep link rewritten to the hash route`, page.url());
      await page.screenshot({ path: join(ART, `${name}-${w}.png`), fullPage: true });
    }
    // Retry re-asks the API and keeps the page alive
    await page.goto(url + '/#/experiments');
    await page.locator('[data-testid="error-banner"] button').click();
    await page.waitForTimeout(500);
    check((await page.locator('[data-testid="error-banner"]').count()) === 1, `${w}px Retry keeps one banner`);
    if (w === 1280) {
      // keyboard: skip link (moves focus to main without changing the route), then the navigation
      await page.goto('about:blank');
      await page.goto(url + '/#/experiments');
      await page.waitForSelector('[data-testid="error-banner"]');
      await page.keyboard.press('Tab');
      check((await page.evaluate(() => document.activeElement?.textContent)) === 'Skip to content', 'first Tab reaches the skip link');
      await page.keyboard.press('Enter');
      check((await page.evaluate(() => document.activeElement?.id)) === 'main' && page.url().endsWith('#/experiments'), 'skip link focuses main and keeps the route', page.url());
      await page.goto('about:blank');
      await page.goto(url + '/#/experiments');
      await page.waitForSelector('[data-testid="error-banner"]');
      for (let i = 0; i < 4; i++) await page.keyboard.press('Tab'); // skip link, brand, Experiments, Cluster
      check((await page.evaluate(() => document.activeElement?.textContent)) === 'Cluster', 'Tab reaches the Cluster link', await page.evaluate(() => document.activeElement?.outerHTML));
      await page.keyboard.press('Enter');
      await page.waitForURL(/#\/cluster/);
      check(true, 'Enter on the Cluster link navigates');
      // every form control has an accessible name
      await page.goto(url + '/#/experiments');
      const unlabelled = await page.evaluate(() => [...document.querySelectorAll('input, select, button')].filter((el) => !(el.labels?.length || el.getAttribute('aria-label') || el.textContent?.trim())).map((el) => el.outerHTML));
      check(unlabelled.length === 0, 'every control on the list page is labelled', unlabelled.join(' '));
    }
    check(errors.length === 0, `${w}px no uncaught page errors`, errors.join(' | '));
    await page.close();
  }
} finally {
  await browser.close();
  server.close();
}
console.log(`\n${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
