import { sveltekit } from '@sveltejs/kit/vite';
import { defineConfig } from 'vite';

export default defineConfig({
  plugins: [sveltekit()],
  build: { reportCompressedSize: false, chunkSizeWarningLimit: 10_000 },
  // date-fns-tz's CommonJS entry points need pre-bundling in dev only; a build resolves them.
});
