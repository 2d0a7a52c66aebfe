/**
 * Headless Chromium inside a lab namespace, driven by Playwright: the browser then sees
 * only that namespace's veth (and lo), as a student's laptop sees only its Wi-Fi.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser } from '@playwright/test';
import { CHROMIUM_ARGS } from '../playwright.config';

export const CHROMIUM_IN_NETNS = path.join(path.dirname(fileURLToPath(import.meta.url)), 'chromium-in-netns.sh');

/**
 * Launches Chromium in `ns` with the project's flags (playwright.config.ts: SwiftShader
 * WebGPU, plain IP host candidates instead of mDNS names, no background networking).
 * CPU caps: put the returned browser's process tree in a cgroup with its pid if needed.
 */
export function launchChromiumIn(ns: string, extraArgs: string[] = []): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM_IN_NETNS, args: [...CHROMIUM_ARGS, ...extraArgs], env: { ...process.env, WEBRING_LAB_NS: ns } as Record<string, string> });
}
