import { resolve } from 'node:path';
import { defineConfig } from 'vite';

// Multi-page build: the student page, the teacher page and the all-reduce benchmark page.
export default defineConfig({
  root: resolve(import.meta.dirname, 'client'),
  build: {
    outDir: resolve(import.meta.dirname, 'dist/client'),
    emptyOutDir: true,
    chunkSizeWarningLimit: 4096,
    rollupOptions: {
      input: {
        index: resolve(import.meta.dirname, 'client/index.html'),
        teacher: resolve(import.meta.dirname, 'client/teacher.html'),
        bench: resolve(import.meta.dirname, 'client/bench.html'),
      },
    },
  },
});
