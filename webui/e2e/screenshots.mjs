#!/usr/bin/env node
// Screenshots of every page at 1280 px and 375 px, for looking at the dashboard.
// Usage: node e2e/screenshots.mjs BASE_URL OUT_DIR [experimentId] [trialId]
// With SF_E2E_USERNAME and SF_E2E_PASSWORD set it logs in first (and adds the tokens page).
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { launch } from './browser.mjs';

const [base = 'http://127.0.0.1:8080', out = 'screenshots', expId = '1', trialId = '1'] = process.argv.slice(2);
mkdirSync(out, { recursive: true });
const pages = [
  ['experiments', '/#/experiments'],
  ['experiment', `/#/experiments/${expId}`],
  ['trial', `/#/trials/${trialId}`],
  ['cluster', '/#/cluster'],
];
const [user, password] = [process.env.SF_E2E_USERNAME ?? '', process.env.SF_E2E_PASSWORD ?? ''];
if (user && password) pages.push(['tokens', '/#/tokens']);
const browser = await launch();
const errors = [];
for (const [w, h] of [[1280, 900], [375, 800]]) {
  const ctx = await browser.newContext({ viewport: { width: w, height: h } });
  const page = await ctx.newPage();
  page.on('pageerror', (e) => errors.push(`${w}px ${page.url()}: ${e.message}`));
  if (user && password) {
    await page.goto(base.replace(/\/$/, '') + '/#/experiments');
    await page.fill('[data-testid="login-username"]', user);
    await page.fill('[data-testid="login-password"]', password);
    await page.click('[data-testid="login-submit"]');
    await page.waitForSelector('[data-testid="user-menu"]', { timeout: 15000 });
  }
  for (const [name, path] of pages) {
    await page.goto(base.replace(/\/$/, '') + path);
    await page.waitForTimeout(2500);
    const file = join(out, `${name}-${w}.png`);
    await page.screenshot({ path: file, fullPage: true });
    console.log(file);
  }
  await ctx.close();
}
await browser.close();
if (errors.length) {
  console.error('page errors:\n' + errors.join('\n'));
  process.exit(1);
}
