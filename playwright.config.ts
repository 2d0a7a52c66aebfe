import { defineConfig } from '@playwright/test';

export const E2E_PORT = Number(process.env.E2E_PORT ?? 18_080);
/** The same server over HTTPS (self-signed), for pages opened from the machine's LAN address. */
export const E2E_HTTPS_PORT = E2E_PORT + 1;
/**
 * The pages under test read fault flags, and only the test build does (vite.config.ts).
 * Specs that start servers of their own (cluster, restart, TURN) pass them process.env:
 * set here, it reaches them too, so none of them rebuilds the client in production mode
 * underneath the specs that follow.
 */
export const E2E_CLIENT_BUILD_MODE = 'test';
process.env.CLIENT_BUILD_MODE = E2E_CLIENT_BUILD_MODE;
export const E2E_TOKEN = 'e2e-teacher-token';
/** The e2e server's JOIN_SECRET: the tests derive each room's join code from it (test/e2e/helpers.ts). */
export const E2E_JOIN_SECRET = 'e2e-join-secret-0123456789';

/**
 * Debian's Chromium, never a downloaded browser. Flags:
 * - WebGPU through SwiftShader, so a machine without a GPU still runs the WebGPU path;
 * - plain IP host candidates instead of mDNS names, so loopback WebRTC always connects;
 * - no background networking: this machine has no internet, and the probes only add noise.
 * Chromium keeps only the last --disable-features flag, so all names go in one.
 */
export const CHROMIUM_ARGS = [
  '--enable-unsafe-webgpu',
  '--use-webgpu-adapter=swiftshader',
  '--enable-unsafe-swiftshader',
  '--disable-features=WebRtcHideLocalIpsWithMdns',
  '--no-sandbox',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];

export default defineConfig({
  testDir: 'test/e2e',
  timeout: 240_000,
  expect: { timeout: 30_000 },
  fullyParallel: false,
  workers: 1,
  retries: 0,
  reporter: [['list']],
  use: {
    baseURL: `http://127.0.0.1:${E2E_PORT}`,
    launchOptions: { executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium', args: CHROMIUM_ARGS },
  },
  webServer: {
    command: `node --import tsx signaling-server/main.ts`,
    url: `http://127.0.0.1:${E2E_PORT}/healthz`,
    reuseExistingServer: false,
    timeout: 120_000,
    stdout: 'pipe',
    stderr: 'pipe',
    env: {
      PORT: String(E2E_PORT),
      HTTPS_PORT: String(E2E_HTTPS_PORT),
      // All interfaces: https.spec.ts opens the pages from the LAN address too.
      HOST: '0.0.0.0',
      TEACHER_TOKEN: E2E_TOKEN,
      JOIN_SECRET: E2E_JOIN_SECRET,
      DATA_DIR: 'test-results/e2e-data',
      LOG_LEVEL: 'warn',
      CLIENT_BUILD_MODE: E2E_CLIENT_BUILD_MODE,
    },
  },
});
