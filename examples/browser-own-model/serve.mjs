// examples/browser-own-model: `npm run example:browser` builds the page and serves it from the
// signaling server (PORT, default 8090). Open the printed links, one per tab or device: the
// first carries the teacher token and starts the run once three tabs have joined.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer } from 'webring/server';

const here = path.dirname(fileURLToPath(import.meta.url));
const room = 'bars';
const server = await startServer({ port: Number(process.env.PORT ?? 8090), clientDir: path.resolve(here, '../../dist/examples/browser-own-model'), logLevel: 'warn' });
const link = (name, extra = '') => `${server.url}/?room=${room}&code=${server.joinCode(room)}&name=${name}${extra}`;
console.log(`Open these three in separate tabs (or on three devices on this network):`);
console.log(`  ${link('tab-1', `&token=${server.teacherToken}`)}`);
console.log(`  ${link('tab-2')}`);
console.log(`  ${link('tab-3')}`);
process.on('SIGINT', () => void server.close().then(() => process.exit(0)));
