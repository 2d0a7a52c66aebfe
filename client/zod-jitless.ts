/**
 * Imported first by every page's entry, before anything builds a schema: zod compiles fast
 * object parsers with `new Function` when it may, and probes whether it may when the first
 * schema is built. The pages' Content-Security-Policy allows no eval (page-headers.ts on the
 * server), so the probe would only fail and be reported as a violation; jitless skips it.
 */
import { config } from 'zod';

config({ jitless: true });
