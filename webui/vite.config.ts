/// <reference types="vitest/config" />
import { defineConfig } from 'vite';
import react from '@vitejs/plugin-react';
import { resolve } from 'node:path';

// The master serves dist/ at "/". Assets are referenced from the root (base "/"), so index.html
// works when served for any client route. `npm run dev` proxies /api, and /proxy (tasks' services,
// WebSockets too: a notebook's kernels), to SF_MASTER_URL.
export default defineConfig({
  base: '/',
  plugins: [react()],
  build: {
    outDir: 'dist',
    rollupOptions: {
      input: {
        index: resolve(import.meta.dirname, 'index.html'),
        bench: resolve(import.meta.dirname, 'bench.html'),
      },
    },
  },
  server: {
    proxy: {
      '/api': process.env.SF_MASTER_URL ?? 'http://127.0.0.1:8080',
      '/proxy': { target: process.env.SF_MASTER_URL ?? 'http://127.0.0.1:8080', ws: true },
    },
  },
  test: {
    environment: 'jsdom',
    include: ['test/**/*.test.{ts,tsx}'],
    setupFiles: ['test/setup.ts'],
  },
});
