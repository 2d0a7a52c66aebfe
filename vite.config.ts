import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, resolve } from 'node:path';
import { defineConfig, type Plugin } from 'vite';

/** The mode whose build reads the pages' fault flags: `vite build --mode test`, for the e2e tests. */
export const TEST_MODE = 'test';
/** Written next to the pages: which mode built them, so the server can tell a test build from its own. */
export const BUILD_MODE_FILE = 'build-mode.json';

/** Emits BUILD_MODE_FILE with the build's mode. */
function recordMode(mode: string): Plugin {
  return {
    name: 'webring-build-mode',
    generateBundle() {
      this.emitFile({ type: 'asset', fileName: BUILD_MODE_FILE, source: JSON.stringify({ mode }) });
    },
  };
}

/** The WASM backend's binaries, copied where the tabs fetch them (client/backend.ts's WASM_BINARIES_PATH). */
const WASM_BINARIES = ['tfjs-backend-wasm.wasm', 'tfjs-backend-wasm-simd.wasm', 'tfjs-backend-wasm-threaded-simd.wasm'];

/** Emits the WASM backend's binaries under tfjs-wasm/, served as the built client is. */
function copyWasmBinaries(): Plugin {
  const from = dirname(createRequire(import.meta.url).resolve('@tensorflow/tfjs-backend-wasm/package.json'));
  return {
    name: 'webring-wasm-binaries',
    generateBundle() {
      for (const name of WASM_BINARIES) this.emitFile({ type: 'asset', fileName: `tfjs-wasm/${name}`, source: readFileSync(resolve(from, 'dist', name)) });
    },
  };
}

// Multi-page build: the student page, the teacher page and the all-reduce benchmark page; the test build adds the round check's page.
export default defineConfig(({ mode }) => ({
  root: resolve(import.meta.dirname, 'client'),
  define: {
    // Only the test build keeps the fault-flag parsing; everywhere else it is dead code.
    __WEBRING_FAULT_FLAGS__: JSON.stringify(mode === TEST_MODE),
  },
  plugins: [recordMode(mode), copyWasmBinaries()],
  // The tab's compute thread (client/compute-thread.ts) is a module worker, like the pages' own scripts.
  worker: { format: 'es' as const },
  build: {
    outDir: resolve(import.meta.dirname, 'dist/client'),
    emptyOutDir: true,
    chunkSizeWarningLimit: 4096,
    rollupOptions: {
      input: {
        index: resolve(import.meta.dirname, 'client/index.html'),
        teacher: resolve(import.meta.dirname, 'client/teacher.html'),
        bench: resolve(import.meta.dirname, 'client/bench.html'),
        ...(mode === TEST_MODE ? { 'round-check': resolve(import.meta.dirname, 'client/round-check.html') } : {}),
      },
    },
  },
}));
