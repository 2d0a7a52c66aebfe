import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SendQueue, type SendTarget } from '../../shared/collectives/send-queue';
import type { RingLink } from '../../shared/collectives/collective';

/** A link whose buffered amount and writability the test sets. */
class FakeLink implements RingLink {
  buffered = 0;
  open = true;
  private waiter: { resolve: () => void; reject: (e: unknown) => void } | null = null;
  send(): void {}
  isOpen(): boolean {
    return this.open;
  }
  bufferedAmount(): number {
    return this.buffered;
  }
  whenWritable(): Promise<void> {
    return new Promise((resolve, reject) => (this.waiter = { resolve, reject }));
  }
  drain(): void {
    this.buffered = 0;
    this.waiter?.resolve();
  }
  failWith(error: unknown): void {
    this.waiter?.reject(error);
  }
}

const HIGH_WATER_BYTES = 100;

function setup(link: RingLink | null) {
  const sent: number[][] = [];
  const events: string[] = [];
  const target: SendTarget = {
    linkFor: () => link,
    send: (phase, step, chunk) => sent.push([phase, step, chunk]),
    missingLink: () => events.push('missing'),
    writable: () => events.push('writable'),
    linkFailed: () => events.push('failed'),
  };
  return { queue: new SendQueue(target, HIGH_WATER_BYTES), sent, events };
}

test('sends in order and grows past its reserved size', () => {
  const { queue, sent } = setup(new FakeLink());
  queue.reset(2);
  for (let c = 0; c < 10; c++) queue.push(1, c % 3, c);
  assert.equal(queue.drain(), true);
  assert.deepEqual(sent, Array.from({ length: 10 }, (_, c) => [1, c % 3, c]));
  assert.equal(queue.drain(), true, 'an empty queue is drained');
});

test('a full link pauses sending until it is writable; a failing one is reported', async () => {
  const link = new FakeLink();
  const { queue, sent, events } = setup(link);
  queue.reset(4);
  queue.push(1, 0, 0);
  queue.push(1, 0, 1);
  link.buffered = HIGH_WATER_BYTES + 1;
  assert.equal(queue.drain(), false);
  assert.equal(queue.waiting, true);
  assert.equal(queue.drain(), false, 'no second wait while one is pending');
  link.drain();
  await Promise.resolve();
  assert.deepEqual(events, ['writable']);
  assert.equal(queue.waiting, false);
  assert.equal(queue.drain(), true);
  assert.deepEqual(sent, [[1, 0, 0], [1, 0, 1]]);

  queue.push(3, 1, 0);
  link.open = false;
  assert.equal(queue.drain(), false);
  link.failWith(new Error('closed'));
  await Promise.resolve();
  assert.deepEqual(events, ['writable', 'failed']);
});

test('no link for a message stops the queue', () => {
  const { queue, sent, events } = setup(null);
  queue.reset(1);
  queue.push(3, 0, 0);
  assert.equal(queue.drain(), false);
  assert.deepEqual(sent, []);
  assert.deepEqual(events, ['missing']);
});
