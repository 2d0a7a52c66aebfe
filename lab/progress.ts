/** One line on stderr per thing the lab starts, so a long run says what it is doing. */
export function progress(message: string): void {
  if (process.env.LAB_QUIET) return;
  process.stderr.write(`[lab] ${message}\n`);
}
