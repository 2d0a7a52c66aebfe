/**
 * The command line the Node worker (main.ts) and the hub (hub.ts) share: --url, --room, the
 * join code (--code, or JOIN_CODE so it stays out of the process list) and --name. Each
 * program names its own further flags and checks them with `failUsage`, so that every bad
 * argument is reported the same way: one line, the usage, exit 2.
 */
import { parseArgs } from 'node:util';
import { memberNameSchema, roomNameSchema } from '../shared/protocol';
import { normalizeJoinCode } from '../shared/protocol/join-code';

/** Exit code for bad arguments, as for the server's bad configuration. */
export const EXIT_USAGE = 2;
export const EXIT_FAILURE = 1;

/** What one program's command line looks like. */
export interface CommandLine<Flag extends string> {
  /** Prefix of each message, such as `webring worker`. */
  program: string;
  usage: string;
  /** String flags beyond --url, --room, --code and --name. */
  flags: readonly Flag[];
  /** --name when none is given. */
  defaultName: string;
  /** Where to find the join code, added to the message when it is missing. */
  codeHint: string;
}

/** Who joins which room, and how: what both programs need. */
export interface MemberArgs {
  url: URL;
  room: string;
  code: string;
  name: string;
}

export interface ParsedArgs<Flag extends string> {
  member: MemberArgs;
  /** The program's own flags, as given; absent when not given. */
  flags: Partial<Record<Flag, string>>;
}

/** Reports a bad argument with the program's usage and exits with EXIT_USAGE. */
export function failUsage(line: Pick<CommandLine<string>, 'program' | 'usage'>, message: string): never {
  console.error(`${line.program}: ${message}\n${line.usage}`);
  process.exit(EXIT_USAGE);
}

/** Parses `process.argv` and `JOIN_CODE`; exits with EXIT_USAGE on the first bad argument. */
export function parseMemberArgs<Flag extends string>(line: CommandLine<Flag>): ParsedArgs<Flag> {
  const fail: (message: string) => never = (message) => failUsage(line, message);
  const names = ['url', 'room', 'code', 'name', ...line.flags];
  let values: Partial<Record<string, string>>;
  try {
    ({ values } = parseArgs({ options: Object.fromEntries(names.map((n) => [n, { type: 'string' as const }])), strict: true }) as { values: Partial<Record<string, string>> });
  } catch (err) {
    fail((err as Error).message);
  }
  if (!values.url || !values.room) fail('--url and --room are required');
  let url: URL;
  try {
    url = new URL(values.url);
  } catch {
    fail(`--url ${values.url} is not a URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') fail('--url must be http:// or https://');
  const room = roomNameSchema.safeParse(values.room);
  if (!room.success) fail(`--room ${values.room}: letters, digits, "-" and "_" only, at most 64`);
  const typedCode = values.code ?? process.env.JOIN_CODE;
  if (!typedCode) fail(`--code (or JOIN_CODE) is required: the room's join code${line.codeHint}`);
  const code = normalizeJoinCode(typedCode);
  if (code === null) fail(`--code ${typedCode}: a join code is 6 letters and digits, like K7M-Q2P`);
  const name = memberNameSchema.safeParse(values.name ?? line.defaultName);
  if (!name.success) fail('--name must be 1 to 40 characters');
  const flags = Object.fromEntries(line.flags.filter((f) => values[f] !== undefined).map((f) => [f, values[f]])) as Partial<Record<Flag, string>>;
  return { member: { url, room: room.data, code, name: name.data }, flags };
}
