// Launches Debian's Chromium through playwright-core (no browser download, ever). playwright-core
// gives each launch a fresh temporary profile.
import { createHash, X509Certificate } from 'node:crypto';
import { isIP } from 'node:net';
import { connect } from 'node:tls';
import { chromium } from 'playwright-core';

export const CHROMIUM = process.env.SF_CHROMIUM ?? '/usr/bin/chromium';
export const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic'];

/** `extraArgs`: more Chromium switches (trustMaster's). */
export function launch(extraArgs = []) {
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: [...CHROMIUM_ARGS, ...extraArgs] });
}

/**
 * The Chromium switches that make an https:// master's certificate trusted, as a person who
 * imported the cluster's CA has it (docs/security.md); none for http://. The certificate is the
 * one the master presents, verified by Node against NODE_EXTRA_CA_CERTS (the cluster's CA), and
 * pinned by its public key. Not `ignoreHTTPSErrors`: with it, every new connection fails its
 * verification and Chromium restarts a request past that error, at most 32 times per request,
 * and its socket pool hands a failed connection to whichever request waits first, so on a busy
 * host one request (a notebook's font, its stylesheet) can take 32 of them and fail with
 * net::ERR_TOO_MANY_RETRIES (seen in Notebooks.InChromiumThroughTheMastersProxy, Chromium 156).
 */
export async function trustMaster(masterUrl) {
  const url = new URL(masterUrl);
  if (url.protocol !== 'https:') return [];
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const der = await new Promise((resolve, reject) => {
    const socket = connect({ host, port: Number(url.port || 443), ...(isIP(host) ? {} : { servername: host }) }, () => {
      const { raw } = socket.getPeerCertificate();
      socket.end();
      resolve(raw);
    });
    socket.on('error', reject);
  });
  const spki = new X509Certificate(der).publicKey.export({ type: 'spki', format: 'der' });
  return [`--ignore-certificate-errors-spki-list=${createHash('sha256').update(spki).digest('base64')}`];
}
