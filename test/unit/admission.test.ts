import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Admission, PeerMisbehavedError } from '../../shared/collectives/admission';
import { TAG_SPACE, createCollectiveStats } from '../../shared/collectives/collective';
import { PayloadReader } from '../../shared/collectives/payload';
import { floatToHalf } from '../../shared/collectives/fp16';
import { FLOAT_BYTES, HEADER_BYTES, PHASE_ALL_GATHER, PHASE_EXCHANGE, PHASE_REDUCE_SCATTER, WIRE_FP16, WIRE_FP32, writeHeader, type ChunkHeader } from '../../shared/collectives/wire';
import type { ChunkPlace } from '../../shared/collectives/chunk-layout';
import type { Misbehaviour } from '../../shared/protocol';

const GENERATION = 5;
const LEFT = 3;
const PARTNER = 1;
const STRANGER = 2;

function setup() {
  const stats = createCollectiveStats();
  const rejected: Array<{ from: number; misbehaviour: Misbehaviour }> = [];
  const admission = new Admission({
    generation: GENERATION,
    left: LEFT,
    senders: new Set([LEFT, PARTNER]),
    stats,
    payload: new PayloadReader(),
    reject: (from, misbehaviour) => rejected.push({ from, misbehaviour }),
  });
  const h: ChunkHeader = { phase: 0, ringStep: 0, tag: 0, wire: 0, flags: 0, generation: 0, run: 0, step: 0, chunk: 0 };
  return { stats, rejected, admission, h };
}

function message(fields: Partial<ChunkHeader>, floats = 4): Uint8Array {
  const bytes = new Uint8Array(HEADER_BYTES + floats * FLOAT_BYTES);
  writeHeader(new DataView(bytes.buffer), { phase: PHASE_REDUCE_SCATTER, ringStep: 0, tag: 10, wire: WIRE_FP32, flags: 0, generation: GENERATION, run: 0, step: 0, chunk: 0, ...fields });
  return bytes;
}

test('the header: what honest peers send around a change is dropped, what none sends names its sender', () => {
  const { stats, rejected, admission, h } = setup();
  assert.equal(admission.header(message({}), h, LEFT), true);
  assert.equal(admission.header(message({ generation: GENERATION - 1 }), h, LEFT), false);
  assert.equal(stats.droppedStaleGeneration, 1);
  assert.equal(admission.header(message({}), h, STRANGER), false);
  assert.equal(stats.droppedWrongSender, 1);
  assert.equal(rejected.length, 0, 'nothing so far is misbehaviour');

  assert.equal(admission.header(new Uint8Array(HEADER_BYTES - 1), h, LEFT), false);
  assert.equal(admission.header(message({ phase: 9 }), h, LEFT), false);
  assert.equal(admission.header(message({ generation: GENERATION + 1 }), h, LEFT), false);
  assert.equal(admission.header(message({ phase: PHASE_ALL_GATHER }), h, PARTNER), false, 'ring messages come from the left neighbour only');
  assert.equal(admission.header(message({ tag: TAG_SPACE }), h, LEFT), false);
  assert.equal(admission.header(message({ wire: 7 }), h, LEFT), false);
  assert.deepEqual(
    rejected.map((r) => r.misbehaviour),
    ['malformed', 'malformed', 'generation', 'malformed', 'malformed', 'malformed'],
  );
  assert.ok(rejected.every((r) => r.from === LEFT || r.from === PARTNER));
  assert.equal(stats.droppedMalformed, 4);
});

test('phase and step: one check for both algorithms', () => {
  const { rejected, admission, h } = setup();
  admission.header(message({ phase: PHASE_EXCHANGE, ringStep: 2 }), h, PARTNER);
  assert.equal(admission.phase(h, PARTNER, PHASE_EXCHANGE, PHASE_EXCHANGE, 3), true);
  assert.equal(admission.phase(h, PARTNER, PHASE_EXCHANGE, PHASE_EXCHANGE, 2), false, 'stage beyond the plan');
  assert.equal(admission.phase(h, PARTNER, PHASE_REDUCE_SCATTER, PHASE_ALL_GATHER, 3), false, 'an exchange in a ring collective');
  assert.equal(admission.partner(h, PARTNER, LEFT), false);
  assert.equal(admission.wire(h, PARTNER, WIRE_FP16), false);
  assert.deepEqual(rejected.map((r) => r.misbehaviour), ['malformed', 'malformed', 'malformed', 'malformed']);
});

test('the chunk: exact length, first arrival, finite values, in that order', () => {
  const { rejected, admission, h } = setup();
  admission.resetSeen(4);
  const at: ChunkPlace = { start: 0, length: 4, wire: WIRE_FP32 };
  const ok = message({});
  admission.header(ok, h, LEFT);
  assert.equal(admission.chunk(h, ok, LEFT, at, 2), true);
  assert.equal(admission.chunk(h, ok, LEFT, at, 2), false, 'a replay');
  assert.equal(admission.chunk(h, message({}, 3), LEFT, at, 1), false, 'a short payload');
  const nan = message({});
  new Float32Array(nan.buffer, HEADER_BYTES, 4)[3] = Number.NaN;
  assert.equal(admission.chunk(h, nan, LEFT, at, 1), false);
  const infHalf = new Uint8Array(HEADER_BYTES + 2 * 4);
  new Uint16Array(infHalf.buffer, HEADER_BYTES, 4).set([0, floatToHalf(1), floatToHalf(Infinity), 0]);
  assert.equal(admission.chunk(h, infHalf, LEFT, { start: 0, length: 4, wire: WIRE_FP16 }, 1), false);
  assert.deepEqual(rejected.map((r) => r.misbehaviour), ['duplicate', 'length', 'non-finite', 'non-finite']);
  admission.resetSeen(4);
  assert.equal(admission.chunk(h, ok, LEFT, at, 2), true, 'a new collective clears the marks');
});

test('PeerMisbehavedError carries a code, the rank and the misbehaviour', () => {
  const e = new PeerMisbehavedError(4, 'duplicate', 'rank 4 sent chunk 0 twice');
  assert.equal(e.code, 'ERR_PEER_MISBEHAVED');
  assert.equal(e.rank, 4);
  assert.equal(e.misbehaviour, 'duplicate');
});
