/**
 * Builds the dashboard (`npm run build:dashboard`): the browser app under dashboard/ bundled
 * into dist/dashboard/, which the HTTP server serves at `/` (any non-/v1 GET falls back to
 * index.html, so the client routes work on reload). Everything is bundled (no CDN): the
 * dashboard must work offline. base '/' because the server mounts it at the root.
 * dashboard/public/ (the favicon) is copied as is to the build's top level.
 */
import { fileURLToPath } from 'node:url';
import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

const root = fileURLToPath(new URL('.', import.meta.url));

export default defineConfig({
  root,
  base: '/',
  plugins: [react()],
  build: {
    outDir: fileURLToPath(new URL('../dist/dashboard', import.meta.url)),
    emptyOutDir: true,
    sourcemap: false,
  },
});
