// Launches Debian's Chromium through playwright-core (no browser download, ever). playwright-core
// gives each launch a fresh temporary profile.
import { chromium } from 'playwright-core';

export const CHROMIUM = process.env.SF_CHROMIUM ?? '/usr/bin/chromium';
export const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic'];

export function launch() {
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
}
