// The hostile seat of issue 57, as a preload for a real Node worker
// (`node --import tsx --import ./test/support/hostile-seat.mjs node-worker/main.ts …`): the
// worker trains like any other, so it is a ring member and a partner of two classmates, and
// once it has reported HOSTILE_START_STEP steps this preload runs every attack of the issue
// in turn, each for HOSTILE_PHASE_MS, on the worker's own connection and member token:
//   reform-storm a bare ring:reform every 2 s;
//   progress-lies reports of step 10^9 (and, not being the chief, the other reports a member
//                can send: a false weights hash, a finish it has no say in);
//   http         held request bodies, and /api floods with its token and without one, from
//                the same address as the class;
//   relay-flood  the relay signal to its right neighbour, then 64 KiB link:data messages as
//                fast as its relay budget allows, never waiting for an acknowledgement.
// It patches socket.io-client in this process only, so nothing in the product can do this.
// Each phase prints `hostile-seat: <phase> {totals}` (messages sent, answers by code), and
// `hostile-seat: done` at the end, for the test's log. Plain JavaScript for the reason
// reform-storm.mjs gives: the compute thread inherits the preload and has no tsx hooks.
import http from 'node:http';
import { Socket } from 'socket.io-client';

const PHASE_MS = Number(process.env.HOSTILE_PHASE_MS ?? 8_000);
/** The attacks start once the seat trains: its own report of this step. */
const START_STEP = Number(process.env.HOSTILE_START_STEP ?? 3);
/** The review's relay flood: 64 KiB messages, three every 10 ms (about 19 MB/s, the relay budget's 20). */
const RELAY_MESSAGE_BYTES = 64 * 1024;
const RELAY_BURST = 3;
const RELAY_TICK_MS = 10;
const RING_PHASE_REDUCE_SCATTER = 1;
/** How long the partner's page has to agree to the relayed link before the flood starts. */
const RELAY_AGREE_MS = 500;
const REFORM_EVERY_MS = 2_000;
const LIE_EVERY_MS = 250;
const LIE_STEP = 1_000_000_000;
/** A lie inside the run's steps: this far past the seat's own step. */
const LIE_STEPS_AHEAD = 40;
/** Request bodies held open at once: past the server's 64 per address. */
const HELD_BODIES = 80;
const HELD_DECLARED_BYTES = 2 * 1024 * 1024;
const HELD_SENT_BYTES = 64 * 1024;
/** Requests in flight at once in each /api flood. */
const FLOOD_CONCURRENCY = 16;

const argv = process.argv;
const arg = (name) => argv[argv.indexOf(name) + 1];
const URL_ARG = arg('--url');
const ROOM = arg('--room');

const emit = Socket.prototype.emit;
const emitEvent = Socket.prototype.emitEvent;
let hooked = false;
/**
 * The flood's link ids: the partner's answering relay signal is kept from this worker's own
 * ring, which would otherwise move its real link onto the flooded one, have its own ring
 * messages refused behind the flood, and withhold them from the class until the 120 s
 * collective timeout (a stall docs/security.md already lists, not this attack's).
 */
const floodLinks = new Set();

/** Answers by code for each phase, and messages sent; printed as the test's log. */
const totals = {};
let phase = 'none';
const count = (key) => {
  const t = (totals[phase] ??= { sent: 0 });
  t[key] = (t[key] ?? 0) + 1;
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function hostile(socket) {
  const self = { id: null, token: null, generation: null, ring: [], lastReport: null, started: false };
  socket.on('ring:generation', (g) => {
    self.generation = g.generation;
    self.ring = [...g.members].filter((m) => m.rank !== null).sort((a, b) => a.rank - b.rank).map((m) => m.id);
  });
  // Refusals of events sent without an acknowledgement come back as server:error.
  socket.on('server:error', (e) => count(e?.code ?? 'unknown'));
  const own = (event, args) => {
    if (event === 'room:join' && typeof args[1] === 'function') {
      const ack = args[1];
      args[1] = (result) => {
        if (result?.ok) {
          self.id = result.memberId;
          self.token = result.memberToken;
        }
        ack(result);
      };
    }
    if (event === 'worker:progress' && args[0]) {
      self.lastReport = args[0];
      if (!self.started && args[0].step >= START_STEP) {
        self.started = true;
        attack(socket, self).catch((err) => console.log(`hostile-seat: attacks failed: ${err?.stack ?? err}`));
      }
    }
  };
  return own;
}

async function attack(socket, self) {
  // The flood last: it is the attack most likely to cost the seat its membership (its partner
  // may name it, or the ring shed it), and the others need a member's connection and token.
  for (const [name, run] of [['reform-storm', reformStorm], ['progress-lies', progressLies], ['http', httpAbuse], ['relay-flood', relayFlood]]) {
    phase = name;
    totals[name] = { sent: 0 };
    console.log(`hostile-seat: ${name} starts`);
    await run(socket, self);
    console.log(`hostile-seat: ${name} ${JSON.stringify(totals[name])}`);
  }
  phase = 'after';
  console.log(`hostile-seat: done ${JSON.stringify(totals)}`);
}

/** Runs `tick` every `everyMs` for PHASE_MS. */
async function every(everyMs, tick) {
  const timer = setInterval(tick, everyMs);
  await sleep(PHASE_MS);
  clearInterval(timer);
}

async function relayFlood(socket, self) {
  const mine = self.ring.indexOf(self.id);
  const to = mine < 0 || self.ring.length < 2 ? null : self.ring[(mine + 1) % self.ring.length];
  if (!to) {
    count('no-partner');
    await sleep(PHASE_MS);
    return;
  }
  const linkId = `hostile-${Date.now()}`;
  floodLinks.add(linkId);
  // The partner's page agrees as soon as it hears this (relay-link.ts FallbackPeer.signal).
  emit.call(socket, 'signal:relay', { to, linkId, data: { type: 'relay' } }, (r) => count(r?.ok ? 'signal-ok' : `signal-${r?.error?.code}`));
  await sleep(RELAY_AGREE_MS);
  // Ring messages of generation 0 (shared/collectives/wire.ts: phase 1, generation 0), which
  // every page drops unread as sent before a change: the partner keeps taking them, so the
  // flood meets the server's flow control rather than the partner's accusation.
  const bytes = new Uint8Array(RELAY_MESSAGE_BYTES);
  bytes[0] = RING_PHASE_REDUCE_SCATTER;
  const payload = { to, linkId, bytes };
  await every(RELAY_TICK_MS, () => {
    for (let i = 0; i < RELAY_BURST; i++) {
      totals['relay-flood'].sent++;
      emit.call(socket, 'link:data', payload, (r) => count(r?.ok ? 'ok' : r?.error?.code ?? 'unknown'));
    }
  });
}

async function reformStorm(socket, self) {
  await every(REFORM_EVERY_MS, () => {
    if (self.generation === null) return;
    totals['reform-storm'].sent++;
    emit.call(socket, 'ring:reform', { generation: self.generation, reason: 'ERR_TIMEOUT: a storm (issue 57)' });
  });
}

async function progressLies(socket, self) {
  const chief = self.ring[0] === self.id;
  count(chief ? 'as-chief' : 'as-member');
  await every(LIE_EVERY_MS, () => {
    const last = self.lastReport;
    if (!last) return;
    // Past the run's end, past the room's own step within the run, and a run that never ends.
    const lies = [{ ...last, step: LIE_STEP }, { ...last, step: last.step + LIE_STEPS_AHEAD }, { ...last, totalSteps: LIE_STEP }];
    // A member's hash vouches for checkpoints and may claim drift; a non-chief's finish should change nothing.
    if (!chief) lies.push({ ...last, weightsHash: 'ffffffffffffffff', hashChecked: true, hashMismatch: true });
    for (const lie of lies) {
      totals['progress-lies'].sent++;
      emit.call(socket, 'worker:progress', lie);
    }
    if (!chief) {
      totals['progress-lies'].sent++;
      emit.call(socket, 'worker:finished', { run: last.run, generation: last.generation, step: LIE_STEP, reason: 'completed' });
    }
  });
}

/** One request; its answer's code (an ErrorBody's, else the status) counted, or the socket error's. */
function request(path, { method = 'GET', token = null, declared = 0, sent = 0, agent } = {}) {
  return new Promise((resolve) => {
    const headers = token ? { authorization: `Bearer ${token}` } : {};
    if (declared > 0) headers['content-length'] = String(declared);
    const req = http.request(`${URL_ARG}${path}`, { method, headers, agent }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        let code = String(res.statusCode);
        try {
          code = JSON.parse(Buffer.concat(chunks).toString('utf8'))?.error?.code ?? code;
        } catch (err) {
          // A body that is no JSON (a 200's room, a plain 404): the status says enough.
          if (!(err instanceof SyntaxError)) throw err;
        }
        resolve(code);
      });
      res.on('error', (err) => resolve(err.code ?? 'res-error'));
    });
    req.on('error', (err) => resolve(err.code ?? 'req-error'));
    if (sent > 0) req.write(Buffer.alloc(sent)); // and the rest never comes
    else req.end();
  });
}

async function httpAbuse(socket, self) {
  const t = totals.http;
  const until = Date.now() + PHASE_MS;
  const room = encodeURIComponent(ROOM);
  const keepAlive = new http.Agent({ keepAlive: true, maxSockets: FLOOD_CONCURRENCY * 2 });
  const tally = (kind) => (code) => {
    const k = (t[kind] ??= {});
    k[code] = (k[code] ?? 0) + 1;
  };
  // Each loop keeps one request in flight until the phase ends.
  const loop = async (kind, next) => {
    while (Date.now() < until) {
      t.sent++;
      tally(kind)(await next());
    }
  };
  const held = [
    () => request(`/api/rooms/${room}/network-probe?check=hostile`, { method: 'POST', token: self.token, declared: HELD_DECLARED_BYTES, sent: HELD_SENT_BYTES, agent: false }),
    () => request(`/api/rooms/${room}/checkpoints`, { method: 'POST', token: self.token, declared: HELD_DECLARED_BYTES, sent: HELD_SENT_BYTES, agent: false }),
    () => request(`/api/rooms/${room}/start`, { method: 'POST', declared: HELD_DECLARED_BYTES, sent: HELD_SENT_BYTES, agent: false }),
  ];
  await Promise.all([
    ...Array.from({ length: HELD_BODIES }, (_, i) => loop('held', held[i % held.length])),
    ...Array.from({ length: FLOOD_CONCURRENCY }, () => loop('member-flood', () => request(`/api/rooms/${room}`, { token: self.token, agent: keepAlive }))),
    ...Array.from({ length: FLOOD_CONCURRENCY }, () => loop('anonymous-flood', () => request(`/api/rooms/${room}`, { agent: keepAlive }))),
  ]);
  keepAlive.destroy();
}

Socket.prototype.emitEvent = function (args) {
  if (args[0] === 'signal:relay' && floodLinks.has(args[1]?.linkId)) return;
  return emitEvent.call(this, args);
};

// The worker's own connection is the first socket that sends anything (its room:join).
Socket.prototype.emit = function (event, ...args) {
  if (!hooked && URL_ARG && ROOM) {
    hooked = true;
    this.hostileHook = hostile(this);
  }
  this.hostileHook?.(event, args);
  return emit.call(this, event, ...args);
};
